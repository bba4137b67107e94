//! Meters: two-rate three-colour meters (RFC 2698, colour-blind), as
//! bmv2's v1model runs them.
//!
//! What it stores: a [`MeterState`] per cell (rates in units per
//! microsecond, the two buckets' tokens, the time of the last update) in
//! [`Meters`], which holds every meter array of the program: indirect
//! meters, and direct meters, whose cells are indexed by the entry index of
//! their table. Per worker, [`Leases`] holds the tokens it leased from
//! indirect meters' cells.
//!
//! Who writes it and when:
//! - packets, from whichever worker runs them: every `execute_meter`
//!   primitive (interpreted, or generated code calling the `h_meter`
//!   helper) and every hit of a table with a direct meter updates its cell;
//! - the control plane: a cell's rates ([`Meters::configure`], checked
//!   first by [`check_rates`] unless set as given) are a shared write, made
//!   once through the master replica; they take effect with full buckets.
//!   A new table entry's direct meter cell is unconfigured ([`Meters::reset`]).
//!
//! Concurrency invariant: clones of [`Meters`] share their cells (an `Arc`),
//! so every worker's replica of a switch meters the same cells
//! ([`Meters::deep_copy`] is for a switch that must not). Each cell sits
//! behind a mutex of its own, since an update reads and writes several
//! fields; [`Meters::cell`] takes it by spinning on `try_lock` before
//! blocking. A worker of a pool of several (`Leases::on`) colours green from
//! the tokens it leased from an indirect meter's cell ([`MeterLease`]), so
//! it takes the cell's lock once per lease; traffic above the rates, direct
//! meters (never leased) and a lone worker take it on every packet. Leases
//! belong to one replica and are never shared.
//!
//! How packets use it: a packet meter counts one unit a packet, a byte
//! meter the packet's ingress length ([`units`]); the colour, [`GREEN`],
//! [`YELLOW`] or [`RED`], is written by the caller to the primitive's
//! destination (or the direct meter's result target). An unconfigured
//! cell, and an index outside the array, give green.

use std::sync::{Arc, Mutex, MutexGuard, TryLockError};

/// Colour of a packet within the committed rate.
pub const GREEN: u32 = 0;
/// Colour of a packet above the committed rate, within the peak rate.
pub const YELLOW: u32 = 1;
/// Colour of a packet above the peak rate.
pub const RED: u32 = 2;

/// The units a packet counts for in a meter of `width`
/// (`plan::ArrayPlan::width`: 1 for a packet meter, 0 for a byte meter):
/// one packet, or its `ingress_len` bytes.
#[inline]
pub fn units(width: u32, ingress_len: u64) -> u64 {
    if width == 1 {
        1
    } else {
        ingress_len
    }
}

/// Two-rate three-colour meter state (RFC 2698), rates in units per microsecond.
#[derive(Debug, Clone, Default)]
pub struct MeterState {
    /// `[(rate, burst)]`: committed then peak; empty when not configured (all green).
    pub rates: Vec<(f64, u32)>,
    pub tokens: [f64; 2],
    pub last_us: u64,
    /// `rates` as the packet path reads them, inside the cell (no pointer
    /// to follow under the cell's lock); `None` when not configured.
    buckets: Option<[(f64, f64); 2]>,
}

/// Most of a bucket's burst one worker leases from a shared meter cell:
/// the colours several workers give can differ from one shared bucket's by
/// at most this share of the burst per worker.
pub const LEASE_SHARE: f64 = 16.0;

/// Tokens of both buckets (committed, peak) a worker took from a meter cell
/// it shares with other workers, to colour its packets green without the
/// cell's lock until they run out. Why: two workers metering one cell hand
/// its cache line over on every packet, and when the host runs their
/// vCPUs far apart that costs about 220 ns a packet (the edge example
/// fell from 17 to 4.5 Mpps on two workers). Tokens leased are tokens the
/// buckets no longer hold, so the workers together never colour more green
/// than the buckets allow; a lease is given back at the worker's next visit
/// to the cell. One worker alone never leases, so it colours exactly as
/// bmv2 does.
#[derive(Debug, Clone, Copy, Default)]
pub struct MeterLease {
    tokens: [f64; 2],
}

impl MeterLease {
    /// Takes `size` units from both buckets' shares when both cover them:
    /// the packet is then green.
    #[inline]
    pub fn take(&mut self, size: u64) -> bool {
        let s = as_f64(size);
        if self.tokens[0] >= s && self.tokens[1] >= s {
            self.tokens[0] -= s;
            self.tokens[1] -= s;
            true
        } else {
            false
        }
    }
}

/// `n` as a float through the signed conversion (one instruction on
/// x86-64, where the unsigned one is several): sizes and microseconds are
/// far below 2^63, and anything above is taken as 2^63 - 1.
#[inline]
fn as_f64(n: u64) -> f64 {
    n.min(i64::MAX as u64) as i64 as f64
}

impl MeterState {
    /// Colours a packet of `size` units at time `now_us`: [`GREEN`],
    /// [`YELLOW`] or [`RED`].
    #[inline]
    pub fn execute(&mut self, size: u64, now_us: u64) -> u32 {
        let Some(buckets) = self.buckets else {
            return GREEN;
        };
        let dt = now_us.saturating_sub(self.last_us);
        self.last_us = now_us;
        // Packets of one batch share its time stamp, so most see no time
        // pass: then the buckets (never above their bursts) are left as
        // they are, which is what adding `rate * 0` and capping gives.
        if dt > 0 {
            let dt = as_f64(dt);
            for (i, (rate, burst)) in buckets.into_iter().enumerate() {
                self.tokens[i] = (self.tokens[i] + rate * dt).min(burst);
            }
        }
        let s = as_f64(size);
        // Peak bucket first, then committed (colour-blind mode).
        if self.tokens[1] < s {
            return RED;
        }
        if self.tokens[0] < s {
            self.tokens[1] -= s;
            return YELLOW;
        }
        self.tokens[1] -= s;
        self.tokens[0] -= s;
        GREEN
    }

    /// [`MeterState::execute`] for a worker that shares this cell with
    /// others and colours green from `lease` while it lasts (see
    /// [`MeterLease`]): the lease's tokens go back into the buckets (never
    /// above a burst), the packet is coloured exactly, and the worker then
    /// leases a share of each bucket (at most a [`LEASE_SHARE`]th of its
    /// burst) for its next packets.
    pub fn execute_leasing(&mut self, size: u64, now_us: u64, lease: &mut MeterLease) -> u32 {
        let Some(buckets) = self.buckets else {
            *lease = MeterLease::default();
            return GREEN;
        };
        for (k, (_, burst)) in buckets.iter().enumerate() {
            self.tokens[k] = (self.tokens[k] + lease.tokens[k]).min(*burst);
        }
        let colour = self.execute(size, now_us);
        for (k, (_, burst)) in buckets.iter().enumerate() {
            let share = (burst / LEASE_SHARE).min(self.tokens[k]).max(0.0);
            lease.tokens[k] = share;
            self.tokens[k] -= share;
        }
        colour
    }

    /// Configures rates as given and fills the buckets: the first two
    /// `(rate per microsecond, burst)` pairs are the committed and peak
    /// buckets; fewer than two leave the meter unconfigured (all green),
    /// an empty list exactly as a new cell.
    pub fn set_rates(&mut self, rates: Vec<(f64, u32)>, now_us: u64) {
        self.tokens = [0.0; 2];
        for (i, (_, b)) in rates.iter().enumerate().take(2) {
            self.tokens[i] = *b as f64;
        }
        self.buckets = match rates[..] {
            [(c, cb), (p, pb), ..] => Some([(c, f64::from(cb)), (p, f64::from(pb))]),
            _ => None,
        };
        self.rates = rates;
        self.last_us = now_us;
    }
}

/// Why a control plane's rate list is refused (see [`check_rates`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RateError {
    /// Neither two pairs nor none: how many there were.
    Count(usize),
    /// The committed rate is above the peak rate.
    CommittedAbovePeak,
}

impl std::fmt::Display for RateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RateError::Count(n) => write!(f, "a meter takes 2 rates, got {n}"),
            RateError::CommittedAbovePeak => write!(f, "the committed rate is above the peak rate"),
        }
    }
}

/// Checks a rate list as bmv2's runtime does: two `(rate, burst)` pairs,
/// committed then peak, the committed rate not above the peak rate; or
/// none (unconfigures the cell).
pub fn check_rates(rates: &[(f64, u32)]) -> Result<(), RateError> {
    if !rates.is_empty() && rates.len() != 2 {
        return Err(RateError::Count(rates.len()));
    }
    if rates.len() == 2 && rates[0].0 > rates[1].0 {
        return Err(RateError::CommittedAbovePeak);
    }
    Ok(())
}

/// Tries of [`Meters::cell`] before it blocks: a few microseconds, far
/// longer than any holder keeps a cell.
const METER_SPINS: u32 = 4096;

/// Meter arrays (indirect and direct), shared by clones (`Clone` shares,
/// it does not copy).
#[derive(Clone)]
pub struct Meters(Arc<Vec<Box<[Mutex<MeterState>]>>>);

impl Meters {
    /// Unconfigured meters of the given sizes.
    pub fn new(sizes: impl IntoIterator<Item = usize>) -> Meters {
        Meters(Arc::new(
            sizes.into_iter().map(|n| (0..n).map(|_| Mutex::new(MeterState::default())).collect()).collect(),
        ))
    }

    /// Cell `i` of array `arr`, locked; `None` when out of range.
    ///
    /// Taken by spinning on `try_lock` for a while before blocking. Why:
    /// a meter update holds the lock for tens of nanoseconds, and a
    /// blocking `lock` that finds it taken marks the mutex contended, so
    /// that every later unlock makes a wake-up system call, and a thread
    /// woken so marks it contended again. Two workers metering one cell at
    /// millions of packets a second can then stay in that mode, each
    /// hand-over a system call. `try_lock` never marks the mutex
    /// contended; `lock` remains for a holder that is not running (the
    /// VM's other vCPU descheduled), which spinning would only wait for.
    #[inline]
    pub fn cell(&self, arr: usize, i: usize) -> Option<MutexGuard<'_, MeterState>> {
        let m = self.0.get(arr)?.get(i)?;
        for _ in 0..METER_SPINS {
            match m.try_lock() {
                Ok(g) => return Some(g),
                // A poisoned cell only means a panic elsewhere; its state is still usable.
                Err(TryLockError::Poisoned(p)) => return Some(p.into_inner()),
                Err(TryLockError::WouldBlock) => std::hint::spin_loop(),
            }
        }
        Some(m.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Colours a packet of `size` units at `now_us` by cell `i` of array
    /// `arr`, under the cell's lock; [`GREEN`] out of range. What direct
    /// meters do on a hit.
    #[inline]
    pub fn execute(&self, arr: usize, i: usize, size: u64, now_us: u64) -> u32 {
        self.cell(arr, i).map_or(GREEN, |mut m| m.execute(size, now_us))
    }

    /// [`Meters::execute`] for an `execute_meter` primitive of a worker
    /// holding `leases`: when they are on, green from the worker's lease of
    /// the cell while it lasts, else under the cell's lock with the lease
    /// given back and renewed ([`MeterState::execute_leasing`]).
    #[inline]
    pub fn execute_leased(&self, leases: &mut Leases, arr: usize, i: usize, size: u64, now_us: u64) -> u32 {
        if !leases.on || i >= self.len(arr) {
            return self.execute(arr, i, size, now_us);
        }
        let lease = leases.of(arr, i);
        if lease.take(size) {
            return GREEN;
        }
        self.cell(arr, i).map_or(GREEN, |mut m| m.execute_leasing(size, now_us, lease))
    }

    /// Sets the rates of cell `i` of array `arr` as given (see
    /// [`MeterState::set_rates`]); false when out of range.
    pub fn configure(&self, arr: usize, i: usize, rates: Vec<(f64, u32)>) -> bool {
        match self.cell(arr, i) {
            Some(mut c) => {
                c.set_rates(rates, 0);
                true
            }
            None => false,
        }
    }

    /// Unconfigures cell `i` of array `arr` (all green), when in range.
    pub fn reset(&self, arr: usize, i: usize) {
        if let Some(mut c) = self.cell(arr, i) {
            *c = MeterState::default();
        }
    }

    /// The configured `(rate per microsecond, burst)` pairs of cell `i` of
    /// array `arr` (empty when unconfigured); `None` when out of range.
    pub fn rates(&self, arr: usize, i: usize) -> Option<Vec<(f64, u32)>> {
        self.cell(arr, i).map(|c| c.rates.clone())
    }

    /// Cells of array `arr`.
    pub fn len(&self, arr: usize) -> usize {
        self.0.get(arr).map_or(0, |a| a.len())
    }

    /// Whether there are no meter arrays.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// A new, unshared copy.
    pub fn deep_copy(&self) -> Meters {
        Meters(Arc::new(
            self.0
                .iter()
                .map(|a| a.iter().map(|m| Mutex::new(m.lock().unwrap_or_else(|p| p.into_inner()).clone())).collect())
                .collect(),
        ))
    }
}

impl std::fmt::Debug for Meters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Meters({} arrays)", self.0.len())
    }
}

/// One worker's leases of the shared meter cells it meters.
#[derive(Debug, Clone, Default)]
pub struct Leases {
    /// Whether other workers meter the same cells, so that this one colours
    /// green from leased tokens; set by the worker pool when it runs more
    /// than one worker.
    pub on: bool,
    /// Per array and cell, grown to the highest cell used, not to the
    /// array's size.
    cells: Vec<Vec<MeterLease>>,
}

impl Leases {
    /// The lease of cell `i` of array `arr`.
    #[inline]
    fn of(&mut self, arr: usize, i: usize) -> &mut MeterLease {
        if self.cells.len() <= arr {
            self.cells.resize(arr + 1, Vec::new());
        }
        let leases = &mut self.cells[arr];
        if leases.len() <= i {
            leases.resize(i + 1, MeterLease::default());
        }
        &mut leases[i]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two workers' leases of one cell never colour more green than the
    /// cell's buckets allow alone, and fall short of it by at most what the
    /// two leases hold (a sixteenth of the burst each), whatever the load.
    #[test]
    fn leases_of_a_meter_cell_colour_no_more_green_than_its_buckets() {
        let mut exact = MeterState::default();
        exact.set_rates(vec![(1.0, 64), (2.0, 128)], 0);
        let mut shared = exact.clone();
        let mut leases = [MeterLease::default(); 2];
        let (mut green_exact, mut green_leased) = (0u64, 0u64);
        for t in 0..20_000u64 {
            // Six packets of one unit a microsecond, above both rates.
            for w in 0..6 {
                if exact.execute(1, t) == 0 {
                    green_exact += 1;
                }
                let lease = &mut leases[w % 2];
                if lease.take(1) || shared.execute_leasing(1, t, lease) == 0 {
                    green_leased += 1;
                }
            }
        }
        assert!(green_leased <= green_exact, "{green_leased} green with leases, {green_exact} exactly");
        assert!(green_leased + 2 * 4 >= green_exact, "{green_leased} green with leases, {green_exact} exactly");
        // An unconfigured cell is green and leases nothing.
        let mut open = MeterState::default();
        let mut lease = MeterLease::default();
        assert_eq!(open.execute_leasing(1000, 5, &mut lease), 0);
        assert!(!lease.take(1));
    }

    #[test]
    fn meter_colours() {
        let mut m = MeterState::default();
        assert_eq!(m.execute(100, 0), 0);
        m.set_rates(vec![(0.0, 100), (0.0, 200)], 0);
        assert_eq!(m.execute(100, 1), 0);
        assert_eq!(m.execute(50, 2), 1);
        assert_eq!(m.execute(100, 3), 2);
    }

    #[test]
    fn a_meter_cell_is_held_by_one_worker_at_a_time() {
        // Two threads read, modify and write the same cell's field through
        // `cell`, as two workers' meter updates do: no update may be lost.
        let m = Meters::new([1]);
        const EACH: u64 = 200_000;
        std::thread::scope(|s| {
            for _ in 0..2 {
                let m = m.clone();
                s.spawn(move || {
                    for _ in 0..EACH {
                        let mut c = m.cell(0, 0).expect("in range");
                        let v = c.last_us;
                        std::hint::black_box(&mut *c);
                        c.last_us = v + 1;
                    }
                });
            }
        });
        assert_eq!(m.cell(0, 0).expect("in range").last_us, 2 * EACH);
        assert!(m.cell(0, 1).is_none() && m.cell(1, 0).is_none(), "out of range");
    }

    #[test]
    fn rate_lists_are_checked_and_an_empty_one_unconfigures() {
        assert_eq!(check_rates(&[]), Ok(()));
        assert_eq!(check_rates(&[(1.0, 10), (2.0, 10)]), Ok(()));
        assert_eq!(check_rates(&[(1.0, 10)]), Err(RateError::Count(1)));
        assert_eq!(check_rates(&[(2.0, 10), (1.0, 10)]), Err(RateError::CommittedAbovePeak));
        assert_eq!(RateError::Count(3).to_string(), "a meter takes 2 rates, got 3");
        let m = Meters::new([2]);
        assert!(m.configure(0, 1, vec![(0.0, 1), (0.0, 1)]));
        assert!(!m.configure(0, 2, Vec::new()), "out of range");
        assert_eq!(m.rates(0, 1), Some(vec![(0.0, 1), (0.0, 1)]));
        assert_eq!(m.execute(0, 1, 5, 1), RED);
        // No rates: the cell is as new.
        assert!(m.configure(0, 1, Vec::new()));
        let fresh = format!("{:?}", MeterState::default());
        assert_eq!(format!("{:?}", *m.cell(0, 1).unwrap()), fresh);
        m.configure(0, 1, vec![(0.0, 1), (0.0, 1)]);
        m.reset(0, 1);
        assert_eq!(format!("{:?}", *m.cell(0, 1).unwrap()), fresh);
    }

    #[test]
    fn leased_execution_is_exact_when_off_and_green_out_of_range() {
        let m = Meters::new([1]);
        m.configure(0, 0, vec![(0.0, 64), (0.0, 64)]);
        let mut off = Leases::default();
        let mut on = Leases { on: true, ..Leases::default() };
        // Off: the cell's own buckets, nothing leased.
        assert_eq!(m.execute_leased(&mut off, 0, 0, 60, 1), GREEN);
        assert_eq!(m.execute_leased(&mut off, 0, 0, 60, 2), RED);
        assert!(off.cells.is_empty());
        // Out of range: green, no lease grown.
        assert_eq!(m.execute_leased(&mut on, 0, 1, 1, 3), GREEN);
        assert_eq!(m.execute_leased(&mut on, 1, 0, 1, 3), GREEN);
        assert!(on.cells.is_empty());
        // On: the lease takes a sixteenth of each bucket and colours from it.
        m.configure(0, 0, vec![(0.0, 64), (0.0, 64)]);
        assert_eq!(m.execute_leased(&mut on, 0, 0, 1, 4), GREEN);
        assert_eq!(m.cell(0, 0).unwrap().tokens, [59.0, 59.0]);
        for _ in 0..4 {
            assert_eq!(m.execute_leased(&mut on, 0, 0, 1, 5), GREEN);
        }
        assert_eq!(m.cell(0, 0).unwrap().tokens, [59.0, 59.0], "coloured from the lease");
    }

    #[test]
    fn a_packet_meter_counts_packets_and_a_byte_meter_bytes() {
        assert_eq!(units(1, 1500), 1);
        assert_eq!(units(0, 1500), 1500);
    }
}
