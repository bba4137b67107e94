//! The in-memory bench harness of Sluice's data planes (`sluice bench`),
//! written once for every [`DataPlane`] (the P4 switch, the lwAFTR and the
//! OpenFlow switch run on it), in the spirit of Snabb's `lwaftr bench`.
//!
//! What it measures: how many packets per second a data plane runs to
//! completion when nothing but the data plane costs anything, on `N`
//! worker threads. The path measured is [`DataPlane::process_batch_to`],
//! the call the live ports make: each worker's replica gets batches of
//! [`BATCH`](sluice_dataplane::BATCH) frames, as from a port whose receive
//! ring is full. Nothing is received or sent: the frames come from memory,
//! what the data plane emits is dropped by an empty callback.
//!
//! How:
//! - The traffic ([`Workload::traffic`], arriving on [`Workload::port`],
//!   and any more ports' traffic in [`Workload::more_traffic`]) is shared
//!   out over the workers by [`flow_hash`], port by port, as live ports
//!   spread flows over queues; a worker that gets no flow is an error (too
//!   few flows for the workers asked for). With
//!   [`Options::whole_traffic`] every worker replays all of it instead
//!   (what Snabb's bench does per process; a one-flow capture cannot be
//!   shared out). A worker with traffic on several ports takes one batch
//!   of each port in turn. With [`Options::receive_ring`] each port's
//!   frames reach the data plane through a ring of buffers, as from a NIC
//!   (the `ring` module says how and why).
//! - A [`Pool`](sluice_dataplane::workers::Pool) starts one worker per
//!   share, each with its own replica of the data plane
//!   ([`DataPlane::replica`]), pinned to CPU `k` when there are no more
//!   workers than CPUs. A worker cycles through its share in
//!   batches until told to stop, or (`--packets`, [`Options::max_packets`])
//!   until it has run its part of the packet limit.
//! - Every second the main thread prints the packets, wire bits (frame,
//!   FCS, preamble and gap: 24 bytes over the frame buffer), frames sent
//!   and dropped of the last second; at the end, a summary line. Frames
//!   sent are what the replicas' [`DataPlane::stats`] count as transmitted.
//! - With a reference ([`Workload::reference`]: a hand-written data plane
//!   doing the same work, such as [`ReferenceRouter`]), the reference first
//!   runs 0.2 s on each of [`REFERENCE_BATCHES`] and keeps the fastest
//!   batch size, then the data plane and the reference take
//!   [`Options::rounds`] turns of [`Options::duration`] seconds each. The
//!   result line gives the medians of the turns' figures and the ratio data
//!   plane / reference; alternating exposes both to the same drift of a
//!   shared machine.
//! - With [`Workload::outputs`] the workers also count the frames and
//!   bytes the data plane emits, per output class (by default the output
//!   port), and the per-second and summary lines are the classes' own
//!   ([`Outputs`]: the lwAFTR prints its encapsulation and decapsulation
//!   rates), printed before the usual summary and result lines.
//! - With [`Options::profile`], the workers time their data plane's stages
//!   ([`DataPlane::set_profiling`]) and a table of where the time went is
//!   printed after each turn (read while the workers still run).
//!
//! Concurrency: each worker owns its replica, its share of the traffic and
//! three counters (packets, wire bytes, frames sent). It alone writes them,
//! with a plain load and store (no locked read-modify-write on the packet
//! path); the main thread only reads them, so a reading may be a batch
//! behind. A stop flag ends the turn: each worker sees it before its next
//! batch, then hands its replica to [`Workload::replica_report`] (on its own
//! thread) and stops; the main thread waits (at most 2 s) for every worker
//! to have reported before it prints. A rate divides the packets counted
//! once the workers have stopped (a worker finishes the batch it is on) by
//! the time from the start of the workers to the stop flag.
//! The reference runs on threads of its own, one instance per worker built
//! on that thread once pinned; a barrier starts them together.
//!
//! The output lines (scripts parse them: `bench/perf-lab.sh`,
//! `bench/perf_lab_report.py`, `bench/ab.sh`):
//! ```text
//! sluice bench: LABEL (N packets in memory, E entries, S B average frame), D s, W worker(s), MODE pipelines
//! reference batch: B packets (0.2 s each, Mpps: 32: x, 64: x, 128: x, 256: x)
//! round K of R                                       (with more than one round)
//!    1.0 s   12.345 Mpps    8.296 Gbps  sent N  dropped N
//! summary: N packets in T s = X Mpps, Y Gbps, N sent, N dropped
//! reference: DESCRIPTION: X Mpps
//! turns: engine Mpps x x x                           (with more than one round)
//! result: program=LABEL size=S workers=W entries=E mode=MODE mpps=X reference_mpps=X ratio=X [rounds=R]
//! ```

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use sluice_dataplane::workers::flow_hash;
use sluice_dataplane::DataPlane;

mod os;
pub mod reference;
mod replay;
mod ring;

pub use reference::ReferenceRouter;

/// Batch sizes the reference is tried with before its turns; it runs on
/// the fastest. Why: the hand-written router's two passes (prefetch every
/// slot, then process) want batches as long as the memory latency they
/// hide: 32 when a million slots stay in L3 (consecutive routes), 128 or
/// more when they come from memory (spread routes); a fixed size would hand
/// it a handicap in one of the two.
pub const REFERENCE_BATCHES: [usize; 4] = [32, 64, 128, 256];

/// A comparison baseline: a data plane written by hand for one program,
/// with no engine underneath.
pub trait Reference: Send {
    /// Processes `frames`, which arrived on `port`; returns how many frames it sent.
    fn run_batch(&mut self, port: u32, frames: &[Vec<u8>]) -> u64;

    /// Runs `frames` through [`Reference::run_batch`] in batches of `batch`,
    /// over and over until `stop` is set; returns the frames run. The
    /// harness calls this once per turn and worker, so the loop is compiled
    /// for each implementation and the batch calls in it are direct; an
    /// implementation may write its own loop (see [`ReferenceRouter`]'s).
    fn replay(&mut self, port: u32, frames: &[Vec<u8>], batch: usize, stop: &AtomicBool) -> u64 {
        let (mut n, mut sent) = (0u64, 0u64);
        while !stop.load(Ordering::Relaxed) {
            for b in frames.chunks(batch) {
                sent += self.run_batch(port, b);
                n += b.len() as u64;
            }
        }
        std::hint::black_box(sent);
        n
    }
}

impl Reference for ReferenceRouter {
    fn run_batch(&mut self, port: u32, frames: &[Vec<u8>]) -> u64 {
        let mut sent = 0;
        self.process_batch(port, frames, &mut |_, _| sent += 1);
        sent
    }

    /// The loop `sluice bench` has always measured the router with: the
    /// router's batch call inlined in it, its sent count kept across
    /// batches. (Going through `run_batch` per batch measured about 5%
    /// slower on the bench machine: code generation, not dispatch.)
    fn replay(&mut self, port: u32, frames: &[Vec<u8>], batch: usize, stop: &AtomicBool) -> u64 {
        let (mut n, mut sent) = (0u64, 0u64);
        while !stop.load(Ordering::Relaxed) {
            for b in frames.chunks(batch) {
                self.process_batch(port, b, &mut |_, _| sent += 1);
                n += b.len() as u64;
            }
        }
        std::hint::black_box(sent);
        n
    }
}

/// Builds one reference instance (called on each reference worker's thread).
pub type MakeReference = Arc<dyn Fn() -> Box<dyn Reference> + Send + Sync>;

/// The reference a workload is compared with: how to build it, and its own
/// traffic (the same frame size and table size as the data plane's).
pub struct ReferenceRun {
    /// Builds one instance; each reference worker builds its own.
    pub make: MakeReference,
    /// Traffic replayed through the reference, shared out by flow hash.
    pub traffic: Vec<Vec<u8>>,
    /// The port its traffic arrives on.
    pub port: u32,
    /// What it is, for its line (`reference: DESCRIPTION: X Mpps`).
    pub description: String,
}

impl ReferenceRun {
    /// A reference built by `make`, replaying `traffic` as arrived on `port`.
    pub fn new<R: Reference + 'static>(
        description: impl Into<String>,
        traffic: Vec<Vec<u8>>,
        port: u32,
        make: impl Fn() -> R + Send + Sync + 'static,
    ) -> ReferenceRun {
        ReferenceRun {
            make: Arc::new(move || Box::new(make()) as Box<dyn Reference>),
            traffic,
            port,
            description: description.into(),
        }
    }
}

/// Checks a data plane before it is measured (for instance that it emits
/// what the reference emits); an error ends the bench.
pub type Check<D> = Box<dyn FnOnce(&mut D) -> Result<(), String>>;

/// Lines about one worker's replica at the end of a turn (for instance the
/// v1model switch's lookup caches), printed after the summary. Called once
/// per worker per turn, on the worker's thread.
pub type ReplicaReport<D> = Arc<dyn Fn(&D) -> Vec<String> + Send + Sync>;

/// Frames and bytes the data plane emitted in one output class over an interval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OutputCount {
    /// Frames emitted.
    pub packets: u64,
    /// Their bytes (frames as emitted, without FCS).
    pub bytes: u64,
}

/// One interval (a second, or the whole turn for the summary) as
/// [`Outputs`]' lines see it.
#[derive(Debug, Clone, Copy)]
pub struct Interval<'a> {
    /// Seconds from the start of the turn to the end of the interval.
    pub at: f64,
    /// Length of the interval in seconds.
    pub seconds: f64,
    /// Frames handed to the data plane in the interval.
    pub received: u64,
    /// What it emitted in the interval, per output class.
    pub out: &'a [OutputCount],
}

/// The output class of a frame emitted on a port (see [`Outputs::classify`]):
/// given the port and the frame, or, for a frame sent in two parts, its
/// first part (at least its Ethernet header, and its VLAN tag when it has
/// one).
pub type Classify = fn(u32, &[u8]) -> usize;

/// Makes one line from an interval's counts.
pub type LineFormat = Arc<dyn Fn(&Interval<'_>) -> String + Send + Sync>;

/// Counting what a data plane emits, per output class, and the lines that
/// report it.
///
/// Contract: `classify(port, frame)` names the class (index below
/// `classes`) of every emitted frame, or a value not below `classes` for a
/// frame not counted; it runs on the workers for every frame, so it must
/// be cheap (a plain function: [`Outputs::by_port`] counts per output port).
/// `header` is printed after the bench's first line, `line` once per
/// second, `summary` once for the whole turn (before the usual summary).
#[derive(Clone)]
pub struct Outputs {
    /// Number of classes.
    pub classes: usize,
    /// The class of an emitted frame.
    pub classify: Classify,
    /// Printed once, before the first per-second line.
    pub header: String,
    /// The per-second line.
    pub line: LineFormat,
    /// The summary line of a turn.
    pub summary: LineFormat,
}

impl Outputs {
    /// The class of a frame emitted on `port` is the port number.
    pub fn by_port(port: u32, _frame: &[u8]) -> usize {
        port as usize
    }
}

/// What one bench replays: a data plane, its traffic, and what it is
/// compared with.
pub struct Workload<D: DataPlane> {
    /// The data plane, configured; each worker runs a replica of it.
    pub data_plane: D,
    /// Frames (without FCS) replayed in a loop, shared out by flow hash.
    pub traffic: Vec<Vec<u8>>,
    /// The port the traffic arrives on.
    pub port: u32,
    /// Traffic arriving on more ports at the same time, `(port, frames)`
    /// (empty for one port); replayed as [`Workload::traffic`] is.
    pub more_traffic: Vec<(u32, Vec<Vec<u8>>)>,
    /// Count emitted frames per output class and print these lines.
    pub outputs: Option<Outputs>,
    /// What runs, for the lines (`program=` on the result line).
    pub label: String,
    /// Table entries the data plane holds (`entries=`; `-` when `None`).
    pub entries: Option<u64>,
    /// How the data plane runs its pipelines (`mode=`; the v1model switch:
    /// `compiled` or `interpreted`).
    pub mode: String,
    /// The reference to compare with, if any.
    pub reference: Option<ReferenceRun>,
    /// Run once after the first line, before anything is measured.
    pub check: Option<Check<D>>,
    /// Extra lines about each worker's replica after each turn.
    pub replica_report: Option<ReplicaReport<D>>,
}

impl<D: DataPlane> Workload<D> {
    /// `traffic` replayed through `data_plane` as arrived on `port`, with
    /// no entry count, mode `-`, no reference, no check and no report.
    pub fn new(data_plane: D, traffic: Vec<Vec<u8>>, port: u32, label: impl Into<String>) -> Workload<D> {
        Workload {
            data_plane,
            traffic,
            port,
            more_traffic: Vec::new(),
            outputs: None,
            label: label.into(),
            entries: None,
            mode: "-".into(),
            reference: None,
            check: None,
            replica_report: None,
        }
    }
}

/// How long and on how many workers a bench runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// Seconds each turn of the data plane (and of the reference) lasts.
    pub duration: f64,
    /// Packets after which the data plane's turn ends (the workers share
    /// them out and stop by themselves, so that instruction counts cover
    /// exactly that many); the reference still runs `duration`.
    pub max_packets: Option<u64>,
    /// Worker threads (at least one).
    pub workers: usize,
    /// Turns the data plane and the reference take (at least one).
    pub rounds: usize,
    /// Time the data plane's stages and print where the time went.
    pub profile: bool,
    /// Every worker replays the whole traffic (rather than a flow-hashed
    /// share of it): for traffic of fewer flows than workers, such as
    /// Snabb's one-flow bench captures.
    pub whole_traffic: bool,
    /// Hand the data plane the frames through a receive ring of
    /// [`BATCH`](sluice_dataplane::BATCH) buffers, each frame written into
    /// its buffer just before its batch runs (only the bytes where it
    /// differs from the buffer's previous frame), as a NIC writes into its
    /// ring; otherwise the frames are handed where they are stored. For
    /// traffic too large for the caches: without a ring, the bench measures
    /// how fast stored frames come from DRAM.
    pub receive_ring: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            duration: 5.0,
            max_packets: None,
            workers: 1,
            rounds: 1,
            profile: false,
            whole_traffic: false,
            receive_ring: false,
        }
    }
}

/// What one turn measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Turn {
    /// Packets the data plane ran.
    pub packets: u64,
    /// Frames it sent (its replicas' transmitted counts).
    pub sent: u64,
    /// Its rate, in millions of packets per second.
    pub mpps: f64,
    /// The reference's rate, when there is one.
    pub reference_mpps: Option<f64>,
}

/// What a bench found: every turn, the medians and the result line.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// The turns, in order.
    pub turns: Vec<Turn>,
    /// Median of the turns' data-plane rates.
    pub mpps: f64,
    /// Median of the turns' reference rates.
    pub reference_mpps: Option<f64>,
    /// Median of the turns' ratios data plane / reference.
    pub ratio: Option<f64>,
    /// The `result:` line (without its newline).
    pub result_line: String,
}

/// The median (with an even count, the mean of the middle two); `None` for no values.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let k = v.len() / 2;
    match v.len() {
        0 => None,
        n if n % 2 == 0 => Some((v[k - 1] + v[k]) / 2.0),
        _ => Some(v[k]),
    }
}

/// Writes one line to the bench's output.
macro_rules! say {
    ($out:expr, $($arg:tt)*) => {
        writeln!($out, $($arg)*).map_err(|e| format!("cannot write the bench output: {e}"))?
    };
}
pub(crate) use say;

/// Runs a bench and prints its lines on standard output (with a progress
/// bar redrawn between the per-second lines when that is a terminal).
pub fn run<D: DataPlane>(w: Workload<D>, o: &Options) -> Result<Outcome, String> {
    let tty = std::io::IsTerminal::is_terminal(&std::io::stdout());
    run_to(w, o, &mut std::io::stdout(), tty)
}

/// [`run`] printing to `out`, with a progress bar when `progress` is set.
pub fn run_to<D: DataPlane>(
    w: Workload<D>,
    o: &Options,
    out: &mut dyn Write,
    progress: bool,
) -> Result<Outcome, String> {
    let Workload {
        data_plane,
        traffic,
        port,
        more_traffic,
        outputs,
        label,
        entries,
        mode,
        reference,
        check,
        replica_report,
    } = w;
    let mut traffic: Vec<(u32, Vec<Vec<u8>>)> =
        std::iter::once((port, traffic)).chain(more_traffic).filter(|(_, t)| !t.is_empty()).collect();
    let frames = traffic.iter().map(|(_, t)| t.len()).sum::<usize>();
    if frames == 0 {
        return Err(format!("{label}: no traffic to replay"));
    }
    let workers = o.workers.max(1);
    let rounds = o.rounds.max(1);
    let size = traffic.iter().flat_map(|(_, t)| t).map(|p| p.len() + 4).sum::<usize>() / frames;
    let entries = entries.map_or_else(|| "-".to_string(), |e| e.to_string());
    say!(
        out,
        "sluice bench: {label} ({frames} packets in memory, {entries} entries, {size} B average frame), {} s, {workers} worker(s), {mode} pipelines",
        o.duration,
    );
    if let Some(h) = &outputs {
        say!(out, "{}", h.header);
    }
    let mut dp = data_plane;
    if let Some(check) = check {
        check(&mut dp)?;
    }
    let mut reference = reference;
    // The reference runs on the batch size it is fastest with here.
    let ref_batch = match &reference {
        Some(r) => {
            let tries = REFERENCE_BATCHES
                .iter()
                .map(|&b| Ok((b, replay::reference(r, r.traffic.clone(), workers, 0.2, b)?)))
                .collect::<Result<Vec<_>, String>>()?;
            let best = tries.iter().copied().max_by(|x, y| x.1.total_cmp(&y.1)).expect("batch sizes listed").0;
            let list: Vec<String> = tries.iter().map(|(b, m)| format!("{b}: {m:.1}")).collect();
            say!(out, "reference batch: {best} packets (0.2 s each, Mpps: {})", list.join(", "));
            best
        }
        None => REFERENCE_BATCHES[0],
    };
    let mut turns: Vec<Turn> = Vec::with_capacity(rounds);
    let mut dp = Some(dp);
    for round in 0..rounds {
        if rounds > 1 {
            say!(out, "round {} of {rounds}", round + 1);
        }
        let last = round + 1 == rounds;
        // The last turn takes the traffic itself; earlier ones a copy.
        let t = if last { std::mem::take(&mut traffic) } else { traffic.clone() };
        let replay = replay::Replay {
            workers,
            options: o,
            report: replica_report.as_ref(),
            outputs: outputs.as_ref(),
            progress,
        };
        let (turn, back) = replay.run(dp.take().expect("put back by each turn"), t, out)?;
        dp = Some(back);
        let reference_mpps = match reference.as_mut() {
            Some(r) => {
                let rt = if last { std::mem::take(&mut r.traffic) } else { r.traffic.clone() };
                let m = replay::reference(r, rt, workers, o.duration, ref_batch)?;
                say!(out, "reference: {}: {m:.3} Mpps", r.description);
                Some(m)
            }
            None => None,
        };
        turns.push(Turn { reference_mpps, ..turn });
    }
    let engine: Vec<f64> = turns.iter().map(|t| t.mpps).collect();
    let refs: Vec<f64> = turns.iter().filter_map(|t| t.reference_mpps).collect();
    let ratios: Vec<f64> = turns.iter().filter_map(|t| Some(t.mpps / t.reference_mpps?)).collect();
    let mpps = median(&engine).expect("at least one turn");
    let (reference_mpps, ratio) = match reference {
        Some(_) => (median(&refs), median(&ratios)),
        None => (None, None),
    };
    if rounds > 1 {
        let list = |v: &[f64]| v.iter().map(|x| format!("{x:.3}")).collect::<Vec<_>>().join(" ");
        say!(out, "turns: engine Mpps {}", list(&engine));
        if reference_mpps.is_some() {
            say!(out, "turns: reference Mpps {}", list(&refs));
            say!(out, "turns: ratio {}", list(&ratios));
        }
    }
    let or_dash = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |x| format!("{x:.3}"));
    let result_line = format!(
        "result: program={label} size={size} workers={workers} entries={entries} mode={mode} mpps={mpps:.3} reference_mpps={} ratio={}{}",
        or_dash(reference_mpps),
        or_dash(ratio),
        if rounds > 1 { format!(" rounds={rounds}") } else { String::new() },
    );
    say!(out, "{result_line}");
    Ok(Outcome { turns, mpps, reference_mpps, ratio, result_line })
}

/// Shares `traffic` out over `workers` by flow hash.
fn share_out(traffic: Vec<Vec<u8>>, workers: usize) -> Vec<Vec<Vec<u8>>> {
    let mut shares: Vec<Vec<Vec<u8>>> = vec![Vec::new(); workers];
    for p in traffic {
        shares[flow_hash(&p) as usize % workers].push(p);
    }
    shares
}

#[cfg(test)]
mod tests;
