//! State that every worker's replica of a switch shares: register arrays and
//! meter arrays (a direct meter's cells are indexed by the entry index of its table).
//!
//! Why: with several workers each runs its own replica of the switch (tables,
//! counters and direct meters are per replica; see `sluice_dataplane::workers`). bmv2
//! keeps one copy of each register and meter however many threads touch it,
//! and programs rely on that (a register written by one packet is read by
//! the next, whatever core it lands on; a meter limits the total rate).
//!
//! Concurrency invariant: register cells are two relaxed 64-bit atomics
//! (values up to 64 bits are exact; a wider value written concurrently with
//! a read may be seen half-updated, as bmv2 without `@atomic` allows). Meter
//! cells sit behind one mutex each: a meter update reads and writes several
//! fields. Workers of a pool colour green from tokens they leased from an
//! indirect meter's cell (`tables::MeterLease`), so they take its lock once
//! per lease; traffic above the rates, and direct meters, still take it on
//! every packet, by spinning on `try_lock` first (see [`Meters::cell`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, TryLockError};

use crate::tables::MeterState;

/// One register cell: a 128-bit value as two relaxed atomic words (bmv2
/// registers are shared by all packets; tearing between the words of a
/// value wider than 64 bits is accepted, as between bmv2's threads).
/// `#[repr(C)]`: generated code reads and writes `lo` at a fixed offset.
#[repr(C)]
pub struct RegCell {
    pub(crate) lo: AtomicU64,
    pub(crate) hi: AtomicU64,
}

/// Register arrays, shared by clones (`Clone` shares, it does not copy).
#[derive(Clone)]
pub struct Registers(Arc<Vec<Box<[RegCell]>>>);

impl Registers {
    /// Zeroed arrays of the given sizes.
    pub fn new(sizes: impl IntoIterator<Item = usize>) -> Registers {
        Registers(Arc::new(
            sizes
                .into_iter()
                .map(|n| (0..n).map(|_| RegCell { lo: AtomicU64::new(0), hi: AtomicU64::new(0) }).collect())
                .collect(),
        ))
    }

    /// Cell `i` of array `arr`, `None` when out of range.
    #[inline]
    pub fn get(&self, arr: usize, i: usize) -> Option<u128> {
        let c = self.0.get(arr)?.get(i)?;
        Some(u128::from(c.lo.load(Ordering::Relaxed)) | (u128::from(c.hi.load(Ordering::Relaxed)) << 64))
    }

    /// Writes cell `i` of array `arr`; false when out of range.
    #[inline]
    pub fn set(&self, arr: usize, i: usize, v: u128) -> bool {
        match self.0.get(arr).and_then(|a| a.get(i)) {
            Some(c) => {
                c.lo.store(v as u64, Ordering::Relaxed);
                c.hi.store((v >> 64) as u64, Ordering::Relaxed);
                true
            }
            None => false,
        }
    }

    /// Cells of array `arr`.
    pub fn len(&self, arr: usize) -> usize {
        self.0.get(arr).map_or(0, |a| a.len())
    }

    /// Whether there are no register arrays.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Number of register arrays.
    pub fn arrays(&self) -> usize {
        self.0.len()
    }

    /// The cells of array `arr`, for generated code (which writes `lo`
    /// only for registers of at most 64 bits, so `hi` stays 0 there).
    pub fn cells(&self, arr: usize) -> &[RegCell] {
        &self.0[arr]
    }

    /// Every value of array `arr`.
    pub fn values(&self, arr: usize) -> Vec<u128> {
        (0..self.len(arr)).filter_map(|i| self.get(arr, i)).collect()
    }

    /// Zeroes array `arr`.
    pub fn reset(&self, arr: usize) {
        for i in 0..self.len(arr) {
            self.set(arr, i, 0);
        }
    }

    /// A new, unshared copy (for a switch that must not see this one's writes).
    pub fn deep_copy(&self) -> Registers {
        let r = Registers::new(self.0.iter().map(|a| a.len()));
        for (k, a) in self.0.iter().enumerate() {
            for i in 0..a.len() {
                r.set(k, i, self.get(k, i).unwrap_or(0));
            }
        }
        r
    }
}

impl std::fmt::Debug for Registers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries((0..self.0.len()).map(|a| self.values(a))).finish()
    }
}

/// Tries of [`Meters::cell`] before it blocks: a few microseconds, far
/// longer than any holder keeps a cell.
const METER_SPINS: u32 = 4096;

/// Indirect meter arrays, shared by clones.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_registers_and_deep_copies_do_not() {
        let a = Registers::new([4, 2]);
        let b = a.clone();
        assert!(b.set(0, 3, (7u128 << 64) | 9));
        assert_eq!(a.get(0, 3), Some((7u128 << 64) | 9));
        assert!(!a.set(1, 2, 1), "out of range");
        assert_eq!(a.get(1, 2), None);
        let c = a.deep_copy();
        c.set(0, 3, 1);
        assert_eq!(a.get(0, 3), Some((7u128 << 64) | 9));
        a.reset(0);
        assert_eq!(a.values(0), vec![0, 0, 0, 0]);
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
}
