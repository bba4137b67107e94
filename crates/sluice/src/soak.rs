//! `sluice soak`: the built-in router forwarding its generated traffic on
//! every worker, from memory, as fast as they go, while a control thread
//! rewrites its next-hop entries at a fixed rate through the same pool
//! changes the control planes use; then checks that no packet was lost or
//! mis-forwarded and that memory did not grow.
//!
//! Each next hop `n` (1-16) has two versions its entry alternates between:
//! version `v` sends to port `n % 4 + 4v` with source MAC
//! `02:00:00:00:v:n` and destination MAC `00:5e:00:00:v:n`. Every packet
//! carries, at the end of its UDP payload, the next hop its route must
//! hit and a sequence number (per worker, rewritten each time the packet
//! is sent again). A packet is mis-forwarded when it leaves other than as
//! one whole version of that next hop (a port of one version with a MAC
//! of the other is a torn update), or out of sequence, or when two packets
//! of one batch to the same next hop leave with different versions (an
//! update must land between batches, never inside one). Every packet
//! handed to a worker must leave (the router drops nothing of this
//! traffic).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice_control::{cli, run_command};
use sluice_dataplane::workers::{flow_hash, Pool, WorkerIo};
use sluice_engine::Switch;

use crate::bench::{router_commands, router_traffic, RouteLayout, ROUTER_JSON};

/// What `sluice soak` runs.
#[derive(Debug, Clone)]
pub struct SoakArgs {
    pub duration: f64,
    pub workers: usize,
    pub updates_per_second: u32,
    pub routes: u32,
}

/// What a soak run saw.
#[derive(Debug, Clone, Default)]
pub struct SoakReport {
    pub seconds: f64,
    pub packets_in: u64,
    pub packets_out: u64,
    pub misforwarded: u64,
    pub updates: u64,
    /// Resident memory after the first tenth of the run, and at the end (KiB).
    pub rss_kib: (u64, u64),
}

impl SoakReport {
    /// Packets handed to the workers that did not leave.
    pub fn lost(&self) -> u64 {
        self.packets_in.saturating_sub(self.packets_out)
    }
}

/// Counters the workers share: packets in, out, mis-forwarded.
type Counts = Arc<[AtomicU64; 3]>;

/// Bytes at the end of each frame: the next hop its route must hit, then
/// the sequence number (8 bytes, big-endian).
const TRAILER: usize = 9;

struct SoakIo {
    traffic: Vec<Vec<u8>>,
    next: usize,
    /// The next sequence number this worker gives a packet.
    seq: u64,
    stop: Arc<AtomicBool>,
    counts: Counts,
}

/// The version (0 or 1) of next hop `want` that `(port, frame)` left as
/// whole, or `None`.
fn whole_version(port: u32, frame: &[u8], want: u8) -> Option<u8> {
    if frame.len() < 12 {
        return None;
    }
    let (v, n) = (frame[4], frame[5]);
    let whole = v < 2
        && n == want
        && (1..=16).contains(&n)
        && frame[..4] == [0, 0x5e, 0, 0]
        && frame[6..12] == [2, 0, 0, 0, v, n]
        && port == u32::from(n) % 4 + 4 * u32::from(v);
    whole.then_some(v)
}

/// The next hop and sequence number a frame carries.
fn trailer(frame: &[u8]) -> Option<(u8, u64)> {
    let t = frame.len().checked_sub(TRAILER).map(|at| &frame[at..])?;
    Some((t[0], u64::from_be_bytes(t[1..].try_into().ok()?)))
}

impl WorkerIo<Switch> for SoakIo {
    fn run_batch(&mut self, sw: &mut Switch) -> bool {
        if self.stop.load(Ordering::Relaxed) {
            return false;
        }
        let end = (self.next + 32).min(self.traffic.len());
        let first = self.seq;
        for p in &mut self.traffic[self.next..end] {
            let at = p.len() - 8;
            p[at..].copy_from_slice(&self.seq.to_be_bytes());
            self.seq += 1;
        }
        let frames: Vec<&[u8]> = self.traffic[self.next..end].iter().map(|p| p.as_slice()).collect();
        self.next = if end == self.traffic.len() { 0 } else { end };
        let (mut out, mut bad) = (0u64, 0u64);
        // The version each next hop had for this batch, from its first packet.
        let mut seen = [None::<u8>; 17];
        sw.process_batch(0, &frames, &mut |_, port, bytes: &[u8]| {
            let ok = match trailer(bytes) {
                Some((n, seq)) if seq == first + out => match whole_version(port, bytes, n) {
                    Some(v) => *seen[usize::from(n)].get_or_insert(v) == v,
                    None => false,
                },
                _ => false,
            };
            out += 1;
            bad += u64::from(!ok);
        });
        self.counts[0].fetch_add(frames.len() as u64, Ordering::Relaxed);
        self.counts[1].fetch_add(out, Ordering::Relaxed);
        self.counts[2].fetch_add(bad, Ordering::Relaxed);
        true
    }
}

/// The `table_modify` that gives next hop `n` (its entry handle `n - 1`) version `v`.
fn version_command(n: u32, v: u32) -> String {
    format!(
        "table_modify RouterIngress.nexthop RouterIngress.forward {} {} 02:00:00:00:{v:02x}:{n:02x} 00:5e:00:00:{v:02x}:{n:02x}",
        n - 1,
        n % 4 + 4 * v
    )
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| l.strip_prefix("VmRSS:").and_then(|v| v.split_whitespace().next()?.parse().ok()))
        })
        .unwrap_or(0)
}

/// Runs a soak (see the module's comment).
pub fn soak(a: &SoakArgs) -> Result<SoakReport, String> {
    let mut master = sluice_engine::load_switch(ROUTER_JSON).map_err(|e| e.to_string())?;
    master.set_mode(crate::default_mode()).map_err(|e| e.to_string())?;
    let layout = RouteLayout::Consecutive;
    if crate::apply_command_text(&mut master, &router_commands(a.routes, layout), "built-in routes", false) > 0 {
        return Err("the built-in routes failed to load".into());
    }
    for n in 1..=16 {
        cli::run(&mut master, &version_command(n, 0)).map_err(|e| format!("next hop {n}: {e}"))?;
    }
    let workers = a.workers.max(1);
    // Each frame's route (its /24) and so its next hop (route r % 16 + 1).
    let next_hop: std::collections::HashMap<u32, u8> =
        (0..a.routes.max(1)).map(|r| (layout.network(r) & 0xffff_ff00, (r % 16 + 1) as u8)).collect();
    let mut shares = vec![Vec::new(); workers];
    for mut p in router_traffic(8192, a.routes, layout) {
        let dst = u32::from_be_bytes(p[30..34].try_into().expect("4 bytes"));
        let n = *next_hop.get(&(dst & 0xffff_ff00)).ok_or("a frame outside the built-in routes")?;
        let at = p.len() - TRAILER;
        p[at] = n;
        shares[flow_hash(&p) as usize % workers].push(p);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let counts: Counts = Arc::new(Default::default());
    let ios: Vec<Box<dyn WorkerIo<Switch>>> = shares
        .into_iter()
        .map(|t| Box::new(SoakIo { traffic: t, next: 0, seq: 0, stop: stop.clone(), counts: counts.clone() }) as Box<_>)
        .collect();
    let mut pool = Pool::start(master, ios)?;
    let started = Instant::now();
    let run = Duration::from_secs_f64(a.duration.max(0.1));
    let (mut updates, mut versions) = (0u64, [0u32; 17]);
    let mut rss_start = None;
    // Updates are paced by the clock: by time t, t x rate of them (as far as the pool keeps up).
    let rate = f64::from(a.updates_per_second);
    while started.elapsed() < run {
        let due = (started.elapsed().as_secs_f64() * rate) as u64;
        while updates < due {
            let n = (updates % 16) as u32 + 1;
            versions[n as usize] ^= 1;
            run_command(&mut pool, &version_command(n, versions[n as usize]))
                .map_err(|e| format!("update {updates}: {e}"))?;
            updates += 1;
        }
        if rss_start.is_none() && started.elapsed() >= run / 10 {
            rss_start = Some(rss_kib());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    pool.flush();
    stop.store(true, Ordering::Relaxed);
    let seconds = started.elapsed().as_secs_f64();
    pool.finish();
    let c: Vec<u64> = counts.iter().map(|x| x.load(Ordering::Relaxed)).collect();
    Ok(SoakReport {
        seconds,
        packets_in: c[0],
        packets_out: c[1],
        misforwarded: c[2],
        updates,
        rss_kib: (rss_start.unwrap_or_else(rss_kib), rss_kib()),
    })
}

/// `sluice soak`: runs, prints the report and fails on a lost or mis-forwarded packet.
pub fn run(a: &SoakArgs) -> Result<(), String> {
    eprintln!(
        "sluice soak: the router example with {} routes, {} worker(s), {} updates/s for {} s",
        a.routes, a.workers, a.updates_per_second, a.duration
    );
    let r = soak(a)?;
    println!(
        "soak: {:.1} s, {} worker(s): {} packets in, {} out, {} lost, {} mis-forwarded; {} updates ({:.0}/s); \
         RSS {} -> {} KiB",
        r.seconds,
        a.workers,
        r.packets_in,
        r.packets_out,
        r.lost(),
        r.misforwarded,
        r.updates,
        r.updates as f64 / r.seconds,
        r.rss_kib.0,
        r.rss_kib.1
    );
    if r.lost() > 0 || r.misforwarded > 0 {
        return Err(format!("{} packets lost, {} mis-forwarded", r.lost(), r.misforwarded));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{trailer, whole_version};

    #[test]
    fn a_packet_must_leave_as_one_whole_version_of_its_next_hop() {
        let frame = |dst_v: u8, src_v: u8, n: u8| [0, 0x5e, 0, 0, dst_v, n, 2, 0, 0, 0, src_v, n, 8, 0];
        assert_eq!(whole_version(3, &frame(0, 0, 3), 3), Some(0));
        assert_eq!(whole_version(3 + 4, &frame(1, 1, 3), 3), Some(1));
        assert_eq!(whole_version(3, &frame(0, 0, 3), 4), None, "another next hop than its route's");
        assert_eq!(whole_version(3, &frame(1, 1, 3), 3), None, "the port of version 0, the MACs of version 1");
        assert_eq!(whole_version(3, &frame(0, 1, 3), 3), None, "the MACs of two versions");
        assert_eq!(whole_version(0, &frame(0, 0, 17), 17), None, "no such next hop");
        assert_eq!(whole_version(3, &frame(0, 0, 3)[..8], 3), None, "too short");
    }

    #[test]
    fn the_trailer_holds_the_next_hop_and_the_sequence_number() {
        let mut f = vec![0u8; 60];
        f[51] = 7;
        f[52..].copy_from_slice(&0x0102_0304_0506_0708u64.to_be_bytes());
        assert_eq!(trailer(&f), Some((7, 0x0102_0304_0506_0708)));
        assert_eq!(trailer(&f[..5]), None);
    }
}
