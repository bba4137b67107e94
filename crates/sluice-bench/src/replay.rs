//! One turn: the data plane's replay on a worker pool, and the reference's
//! on threads of its own (see the crate doc for what is measured).

use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use sluice_dataplane::workers::{Pool, WorkerIo};
use sluice_dataplane::{DataPlane, BATCH};

use crate::{os, say, share_out, Options, ReferenceRun, ReplicaReport, Turn};

/// Frames borrowed from traffic that lives as long as they do.
struct Frames {
    /// The frames' storage: never changed while `frames` lives.
    _traffic: Vec<Vec<u8>>,
    frames: Vec<&'static [u8]>,
}

impl Frames {
    fn new(traffic: Vec<Vec<u8>>) -> Frames {
        // SAFETY: each slice points into the heap buffer of one of the
        // vectors of `traffic`, which `Frames` owns and never changes, so
        // the buffers stay where they are for as long as the slices live
        // (moving `Frames` moves the outer vector, not the buffers).
        let frames = traffic.iter().map(|p| unsafe { std::mem::transmute::<&[u8], &'static [u8]>(p) }).collect();
        Frames { _traffic: traffic, frames }
    }
}

/// What the workers report when they stop: how many have, and their lines.
#[derive(Default)]
struct Ended {
    workers: usize,
    lines: Vec<String>,
}

/// One worker's share of the traffic, replayed in batches of [`BATCH`]
/// frames (what a port whose receive ring is full hands the loop).
struct BenchIo<D> {
    traffic: Frames,
    /// Wire bytes of `traffic[..i]` at `i`: a batch's bytes are one
    /// subtraction, not a sum over its packets.
    wire_before: Vec<u64>,
    next: usize,
    port: u32,
    stop: Arc<AtomicBool>,
    /// Packets, wire bytes and packets sent by this worker (written by it
    /// alone, so with plain stores rather than locked additions).
    counts: Arc<[AtomicU64; 3]>,
    /// The CPU this worker pins itself to on its first batch (one worker per core).
    cpu: Option<usize>,
    /// Packets after which this worker stops by itself (`--packets`), so that
    /// instruction counts cover exactly that many packets.
    limit: Option<u64>,
    /// Lines about the replica, asked for once when the worker stops.
    report: Option<ReplicaReport<D>>,
    ended: Arc<Mutex<Ended>>,
    recorded: bool,
}

impl<D> BenchIo<D> {
    /// Reports the worker's end, with the replica's lines (once).
    fn record_end(&mut self, dp: &D) {
        if self.recorded {
            return;
        }
        self.recorded = true;
        let lines = self.report.as_ref().map(|r| r(dp)).unwrap_or_default();
        let mut e = self.ended.lock().unwrap_or_else(|e| e.into_inner());
        e.workers += 1;
        e.lines.extend(lines);
    }
}

impl<D: DataPlane> WorkerIo<D> for BenchIo<D> {
    fn run_batch(&mut self, dp: &mut D) -> bool {
        if self.stop.load(Ordering::Relaxed) {
            self.record_end(dp);
            return false;
        }
        if let Some(cpu) = self.cpu.take() {
            os::pin_to_cpu(cpu);
        }
        let total = self.traffic.frames.len();
        let mut end = (self.next + BATCH).min(total);
        if let Some(limit) = self.limit {
            let left = limit.saturating_sub(self.counts[0].load(Ordering::Relaxed));
            if left == 0 {
                self.record_end(dp);
                return false;
            }
            end = end.min(self.next + left as usize);
        }
        let batch = &self.traffic.frames[self.next..end];
        self.next = if end == total { 0 } else { end };
        // Frames sent are counted by the data plane (every emit is counted
        // in its statistics), so the output callback has nothing to do: a
        // count kept through it is a read-modify-write in memory per packet.
        let before = dp.stats().transmitted;
        dp.process_batch(self.port, batch, &mut |_, _, _| {});
        let sent = dp.stats().transmitted - before;
        let bytes = self.wire_before[end] - self.wire_before[end - batch.len()];
        for (c, n) in self.counts.iter().zip([batch.len() as u64, bytes, sent]) {
            c.store(c.load(Ordering::Relaxed) + n, Ordering::Relaxed);
        }
        true
    }
}

/// One turn of the data plane.
pub(crate) struct Replay<'a, D> {
    pub port: u32,
    pub workers: usize,
    pub options: &'a Options,
    pub report: Option<&'a ReplicaReport<D>>,
    /// Redraw a progress bar between the per-second lines.
    pub progress: bool,
}

impl<D: DataPlane> Replay<'_, D> {
    /// Replays `traffic` through `dp` on the workers (flow-hashed shares,
    /// as live ports do) and prints per-second and summary lines, the
    /// replicas' lines and (profiling) the stage table; returns the turn
    /// (without a reference) and the data plane (for the next turn).
    pub fn run(&self, dp: D, traffic: Vec<Vec<u8>>, out: &mut dyn Write) -> Result<(Turn, D), String> {
        let (workers, duration, max_packets) = (self.workers, self.options.duration, self.options.max_packets);
        let shares = share_out(traffic, workers);
        if let Some(k) = shares.iter().position(|s| s.is_empty()) {
            return Err(format!("worker {k} gets no traffic: the traffic has too few flows for {workers} workers"));
        }
        let stop = Arc::new(AtomicBool::new(false));
        let counts: Vec<Arc<[AtomicU64; 3]>> = (0..workers).map(|_| Arc::new(Default::default())).collect();
        let ended = Arc::new(Mutex::new(Ended::default()));
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let io: Vec<Box<dyn WorkerIo<D>>> = shares
            .into_iter()
            .zip(&counts)
            .enumerate()
            .map(|(k, (t, c))| {
                let cpu = (workers <= cpus).then_some(k);
                // The workers share `--packets` out: each stops after its part.
                let limit = max_packets.map(|m| m / workers as u64 + u64::from((k as u64) < m % workers as u64));
                // Wire size: frame + FCS + preamble/IFG (20 bytes) as network benchmarks count it.
                let wire_before = std::iter::once(0)
                    .chain(t.iter().scan(0u64, |sum, p| {
                        *sum += p.len() as u64 + 4 + 20;
                        Some(*sum)
                    }))
                    .collect();
                Box::new(BenchIo {
                    traffic: Frames::new(t),
                    wire_before,
                    next: 0,
                    port: self.port,
                    stop: stop.clone(),
                    counts: c.clone(),
                    cpu,
                    limit,
                    report: self.report.cloned(),
                    ended: ended.clone(),
                    recorded: false,
                }) as Box<_>
            })
            .collect();
        let total = |i: usize| counts.iter().map(|c| c[i].load(Ordering::Relaxed)).sum::<u64>();
        let mut pool = Pool::start(dp, io)?;
        if self.options.profile {
            pool.set_profiling(true);
        }
        let start = Instant::now();
        let mut tick = start;
        let (mut last_p, mut last_b, mut last_sent) = (0u64, 0u64, 0u64);
        let end = Duration::from_secs_f64(duration);
        let tty = self.progress;
        loop {
            std::thread::sleep(Duration::from_millis(if max_packets.is_some() { 1 } else { 50 }));
            let now = Instant::now();
            let (pkts, bytes, sent) = (total(0), total(1), total(2));
            if tty {
                let frac = (now.duration_since(start).as_secs_f64() / duration).min(1.0);
                let filled = (frac * 30.0) as usize;
                write!(
                    out,
                    "\r[{}{}] {:5.1}% {} packets",
                    "#".repeat(filled),
                    ".".repeat(30 - filled),
                    frac * 100.0,
                    pkts
                )
                .and_then(|_| out.flush())
                .ok();
            }
            if now.duration_since(tick) >= Duration::from_secs(1) {
                let dt = now.duration_since(tick).as_secs_f64();
                if tty {
                    write!(out, "\r{:60}\r", "").ok();
                }
                say!(
                    out,
                    "{:6.1} s  {:7.3} Mpps  {:7.3} Gbps  sent {}  dropped {}",
                    now.duration_since(start).as_secs_f64(),
                    (pkts - last_p) as f64 / dt / 1e6,
                    (bytes - last_b) as f64 * 8.0 / dt / 1e9,
                    sent - last_sent,
                    (pkts - last_p) - (sent - last_sent)
                );
                tick = now;
                last_p = pkts;
                last_b = bytes;
                last_sent = sent;
            }
            if now.duration_since(start) >= end || max_packets.is_some_and(|m| pkts >= m) {
                break;
            }
        }
        // Asked while the workers still run (they answer between batches).
        let times = self.options.profile.then(|| pool.profile());
        stop.store(true, Ordering::Relaxed);
        let dt = start.elapsed().as_secs_f64();
        // Each worker reports its end on its next batch; wait for that (briefly).
        let waited = Instant::now();
        while ended.lock().unwrap_or_else(|e| e.into_inner()).workers < workers
            && waited.elapsed() < Duration::from_secs(2)
        {
            std::thread::sleep(Duration::from_millis(1));
        }
        let dp = pool.finish();
        let (pkts, bytes, sent) = (total(0), total(1), total(2));
        if tty {
            write!(out, "\r{:60}\r", "").ok();
        }
        say!(
            out,
            "summary: {pkts} packets in {dt:.2} s = {:.3} Mpps, {:.3} Gbps, {} sent, {} dropped",
            pkts as f64 / dt / 1e6,
            bytes as f64 * 8.0 / dt / 1e9,
            sent,
            pkts - sent
        );
        for line in &ended.lock().unwrap_or_else(|e| e.into_inner()).lines {
            say!(out, "{line}");
        }
        if let Some(p) = times {
            say!(out, "where the time went, per stage (timing on: the rates above include its cost):\n{}", p.report());
        }
        let turn = Turn { packets: pkts, sent, mpps: pkts as f64 / dt / 1e6, reference_mpps: None };
        Ok((turn, dp))
    }
}

/// Replays `traffic` through instances of the reference (one per worker,
/// each pinned like the data plane's workers, `batch` packets per call)
/// for `duration` seconds; returns Mpps.
pub(crate) fn reference(
    r: &ReferenceRun,
    traffic: Vec<Vec<u8>>,
    workers: usize,
    duration: f64,
    batch: usize,
) -> Result<f64, String> {
    let shares = share_out(traffic, workers);
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let stop = Arc::new(AtomicBool::new(false));
    let ready = Arc::new(Barrier::new(workers + 1));
    let port = r.port;
    let handles: Vec<_> = shares
        .into_iter()
        .enumerate()
        .map(|(k, share)| {
            let (stop, make, ready) = (stop.clone(), r.make.clone(), ready.clone());
            std::thread::spawn(move || {
                if workers <= cpus {
                    os::pin_to_cpu(k);
                }
                let mut r = make();
                ready.wait();
                r.replay(port, &share, batch, &stop)
            })
        })
        .collect();
    ready.wait();
    let start = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(duration));
    stop.store(true, Ordering::Relaxed);
    let mut total = 0;
    for h in handles {
        total += h.join().map_err(|_| "reference worker panicked".to_string())?;
    }
    Ok(total as f64 / start.elapsed().as_secs_f64() / 1e6)
}
