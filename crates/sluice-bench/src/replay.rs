//! One turn: the data plane's replay on a worker pool, and the reference's
//! on threads of its own (see the crate doc for what is measured).

use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use sluice_dataplane::workers::{Pool, WorkerIo};
use sluice_dataplane::{DataPlane, Emit, BATCH};

use crate::ring::Ring;
use crate::{os, say, share_out, Classify, Interval, Options, OutputCount, Outputs, ReferenceRun, ReplicaReport, Turn};

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

/// Traffic of one port in a worker's share, with where the replay is.
struct Stream {
    port: u32,
    traffic: Frames,
    /// Wire bytes of `traffic[..i]` at `i`: a batch's bytes are one
    /// subtraction, not a sum over its packets.
    wire_before: Vec<u64>,
    next: usize,
    /// With [`Options::receive_ring`]: the ring the frames go through.
    ring: Option<Ring>,
}

impl Stream {
    fn new(port: u32, t: Vec<Vec<u8>>, ring: bool) -> Stream {
        // Wire size: frame + FCS + preamble/IFG (20 bytes) as network benchmarks count it.
        let wire_before = std::iter::once(0)
            .chain(t.iter().scan(0u64, |sum, p| {
                *sum += p.len() as u64 + 4 + 20;
                Some(*sum)
            }))
            .collect();
        // Traffic that fits the ring would sit in it unchanged: no ring.
        let ring = (ring && t.len() > BATCH).then(|| Ring::new(&t));
        Stream { port, traffic: Frames::new(t), wire_before, next: 0, ring }
    }
}

/// The counters a worker keeps: packets, wire bytes, packets sent, then
/// frames and bytes per output class.
const FIXED_COUNTS: usize = 3;

/// One worker's share of the traffic, replayed in batches of [`BATCH`]
/// frames (what a port whose receive ring is full hands the loop), one
/// batch of each port's traffic in turn.
struct BenchIo<D> {
    streams: Vec<Stream>,
    turn: usize,
    stop: Arc<AtomicBool>,
    /// Packets, wire bytes and packets sent by this worker, then frames and
    /// bytes per output class (written by it alone, so with plain stores
    /// rather than locked additions).
    counts: Arc<[AtomicU64]>,
    /// How emitted frames are classed, and how many classes there are.
    classify: Option<(Classify, usize)>,
    /// One batch's frames and bytes per class, before they are stored.
    out: Vec<u64>,
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
        let k = self.turn;
        self.turn = if k + 1 == self.streams.len() { 0 } else { k + 1 };
        let s = &mut self.streams[k];
        let total = s.traffic.frames.len();
        let mut end = (s.next + BATCH).min(total);
        if let Some(limit) = self.limit {
            let left = limit.saturating_sub(self.counts[0].load(Ordering::Relaxed));
            if left == 0 {
                self.record_end(dp);
                return false;
            }
            end = end.min(s.next + left as usize);
        }
        let start = s.next;
        s.next = if end == total { 0 } else { end };
        let n = end - start;
        // Frames sent are counted by the data plane (every emit is counted
        // in its statistics), so without output classes the callback has
        // nothing to do: a count kept through it is a read-modify-write in
        // memory per packet.
        let before = dp.stats().transmitted;
        match &mut s.ring {
            Some(ring) => ring.batch(start, end, |b| process(dp, s.port, b, self.classify, &mut self.out)),
            None => process(dp, s.port, &s.traffic.frames[start..end], self.classify, &mut self.out),
        }
        for (k, v) in self.out.iter_mut().enumerate() {
            let c = &self.counts[FIXED_COUNTS + k];
            c.store(c.load(Ordering::Relaxed) + *v, Ordering::Relaxed);
            *v = 0;
        }
        let sent = dp.stats().transmitted - before;
        let bytes = s.wire_before[end] - s.wire_before[start];
        for (c, n) in self.counts.iter().zip([n as u64, bytes, sent]) {
            c.store(c.load(Ordering::Relaxed) + n, Ordering::Relaxed);
        }
        true
    }
}

/// Runs one batch through `dp`, counting what it emits per output class
/// into `out` when there are classes.
fn process<D: DataPlane>(dp: &mut D, port: u32, batch: &[&[u8]], classify: Option<(Classify, usize)>, out: &mut [u64]) {
    match classify {
        None => dp.process_batch_to(port, batch, &mut Discard),
        Some((classify, classes)) => dp.process_batch_to(port, batch, &mut Count { classify, classes, out }),
    }
}

/// The sink of a bench without output classes: frames emitted are dropped
/// (the data plane counts them itself).
struct Discard;

impl Emit for Discard {
    #[inline]
    fn emit(&mut self, _: usize, _: u32, _: &[u8]) {}

    #[inline]
    fn emit_parts(&mut self, _: usize, _: u32, _: &[u8], _: &[u8]) {}
}

/// The sink of a bench with output classes: frames and bytes per class.
struct Count<'a> {
    classify: Classify,
    classes: usize,
    out: &'a mut [u64],
}

impl Count<'_> {
    #[inline]
    fn count(&mut self, c: usize, len: usize) {
        if c < self.classes {
            self.out[2 * c] += 1;
            self.out[2 * c + 1] += len as u64;
        }
    }
}

impl Emit for Count<'_> {
    #[inline]
    fn emit(&mut self, _: usize, p: u32, f: &[u8]) {
        let c = (self.classify)(p, f);
        self.count(c, f.len());
    }

    /// Classed by the head (the frame's new headers), counted whole.
    #[inline]
    fn emit_parts(&mut self, _: usize, p: u32, head: &[u8], tail: &[u8]) {
        let c = (self.classify)(p, head);
        self.count(c, head.len() + tail.len());
    }
}

/// One turn of the data plane.
pub(crate) struct Replay<'a, D> {
    pub workers: usize,
    pub options: &'a Options,
    pub report: Option<&'a ReplicaReport<D>>,
    pub outputs: Option<&'a Outputs>,
    /// Redraw a progress bar between the per-second lines.
    pub progress: bool,
}

impl<D: DataPlane> Replay<'_, D> {
    /// Replays `traffic` (per port) through `dp` on the workers
    /// (flow-hashed shares, as live ports do, or all of it on each with
    /// [`Options::whole_traffic`]) and prints per-second and summary lines,
    /// the replicas' lines and (profiling) the stage table; returns the turn
    /// (without a reference) and the data plane (for the next turn).
    pub fn run(&self, dp: D, traffic: Vec<(u32, Vec<Vec<u8>>)>, out: &mut dyn Write) -> Result<(Turn, D), String> {
        let (workers, duration, max_packets) = (self.workers, self.options.duration, self.options.max_packets);
        let mut shares: Vec<Vec<(u32, Vec<Vec<u8>>)>> = vec![Vec::new(); workers];
        for (port, t) in traffic {
            let split = if self.options.whole_traffic { vec![t; workers] } else { share_out(t, workers) };
            for (share, t) in shares.iter_mut().zip(split) {
                if !t.is_empty() {
                    share.push((port, t));
                }
            }
        }
        if let Some(k) = shares.iter().position(|s| s.is_empty()) {
            return Err(format!("worker {k} gets no traffic: the traffic has too few flows for {workers} workers"));
        }
        let classes = self.outputs.map_or(0, |o| o.classes);
        let stop = Arc::new(AtomicBool::new(false));
        let counts: Vec<Arc<[AtomicU64]>> = (0..workers)
            .map(|_| (0..FIXED_COUNTS + 2 * classes).map(|_| AtomicU64::new(0)).collect::<Vec<_>>().into())
            .collect();
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
                Box::new(BenchIo {
                    streams: t.into_iter().map(|(port, t)| Stream::new(port, t, self.options.receive_ring)).collect(),
                    turn: 0,
                    stop: stop.clone(),
                    counts: c.clone(),
                    classify: self.outputs.map(|o| (o.classify, o.classes)),
                    out: vec![0; 2 * classes],
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
        let class_totals = || -> Vec<OutputCount> {
            (0..classes)
                .map(|c| OutputCount { packets: total(FIXED_COUNTS + 2 * c), bytes: total(FIXED_COUNTS + 2 * c + 1) })
                .collect()
        };
        let mut last_out = vec![OutputCount::default(); classes];
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
                let at = now.duration_since(start).as_secs_f64();
                match self.outputs {
                    Some(o) => {
                        let now_out = class_totals();
                        let diff: Vec<OutputCount> = now_out
                            .iter()
                            .zip(&last_out)
                            .map(|(a, b)| OutputCount { packets: a.packets - b.packets, bytes: a.bytes - b.bytes })
                            .collect();
                        let iv = Interval { at, seconds: dt, received: pkts - last_p, out: &diff };
                        say!(out, "{}", (o.line)(&iv));
                        last_out = now_out;
                    }
                    None => say!(
                        out,
                        "{:6.1} s  {:7.3} Mpps  {:7.3} Gbps  sent {}  dropped {}",
                        at,
                        (pkts - last_p) as f64 / dt / 1e6,
                        (bytes - last_b) as f64 * 8.0 / dt / 1e9,
                        sent - last_sent,
                        // Negative when the data plane sends more than it gets (fragments).
                        (pkts - last_p) as i64 - (sent - last_sent) as i64
                    ),
                }
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
        if let Some(o) = self.outputs {
            let all = class_totals();
            say!(out, "{}", (o.summary)(&Interval { at: dt, seconds: dt, received: pkts, out: &all }));
        }
        say!(
            out,
            "summary: {pkts} packets in {dt:.2} s = {:.3} Mpps, {:.3} Gbps, {} sent, {} dropped",
            pkts as f64 / dt / 1e6,
            bytes as f64 * 8.0 / dt / 1e9,
            sent,
            pkts as i64 - sent as i64
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
