//! The seam between Sluice's data planes and everything that drives them.
//!
//! A data plane (the P4 switch, the lwAFTR, the OpenFlow switch) is a
//! [`DataPlane`]: it takes a batch of frames that arrived on one
//! port, runs each to completion and emits what leaves, port by port. The
//! machinery around it is written once and shared by every data plane:
//! - [`workers::Pool`]: N worker threads, each with its own replica of the
//!   data plane and its own I/O, and control-plane changes applied between
//!   two batches with no lock on the packet path;
//! - [`profile`]: where the time goes, per stage, in cycles per packet;
//! - [`telemetry`]: what everything counts, as Prometheus metric families;
//! - [`stop`]: the one stop signal of a running data plane;
//! - the live port loop (`sluice-live`), the pcap replay and the in-memory
//!   bench (`sluice-bench`) all call [`DataPlane::process_batch_to`] with
//!   at most [`BATCH`] frames: one loop, one batch size.
//!
//! Contract of [`DataPlane::process_batch`]: reads the frames (borrowed for
//! the call only); writes the data plane's own state (tables it updates,
//! counters, registers); frames leave through the `emit` callback, each
//! tagged with the index of the input frame that caused it (a clone or a
//! multicast copy carries its original's index), in the order the data
//! plane sends them. A frame the data plane drops leaves nothing and is
//! counted in [`Stats::dropped`]. [`DataPlane::process_batch_to`] is the
//! same call with an [`Emit`] receiver, which also takes a frame in two
//! parts (new headers, then the received packet they carry), so that a
//! data plane that adds or removes headers need not copy the packet: the
//! driver joins the parts as it copies the frame out.

pub mod egress_queues;
pub mod emit;
pub mod profile;
pub mod stop;
pub mod telemetry;
pub mod trace;
pub mod workers;

pub use emit::Emit;
pub use profile::{Profile, StageClock};
pub use stop::Stop;
pub use telemetry::Metrics;
pub use trace::{Level, TraceOut};

/// Frames one call of [`DataPlane::process_batch`] takes at most, and what
/// every driver hands it when that many are waiting: live ports receive up
/// to this many per call, the replay and the bench replay this many at a
/// time. Why 128: the v1model engine parses a batch ahead to prefetch its
/// table lookups, and a batch must be long enough for a memory access to
/// arrive before its packet runs; calls of 256 or 512 packets measured no
/// faster (`sluice bench --example router --entries 1000000`), and ports
/// return fewer when fewer are waiting, so nothing waits for a batch to fill.
pub const BATCH: usize = 128;

/// Counters a data plane keeps about its own work.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Frames handed to the data plane.
    pub received: u64,
    /// Frames it emitted (copies included).
    pub transmitted: u64,
    /// Frames (and copies) it dropped.
    pub dropped: u64,
}

const _: () = assert!(BATCH <= 128, "DataPlane::partial_checksums has one bit per frame of a batch");

/// A data plane: what the packet loop, the workers, the replay and the bench drive.
pub trait DataPlane: Send + Sized + 'static {
    /// What it reports to the control plane besides frames (digests, learned addresses...).
    type Notification: Send + 'static;
    /// A copy of the counters a replica keeps for itself, for summing over workers.
    type Counters: Send + 'static;

    /// Runs `frames` (at most [`BATCH`]), which arrived on `port`, to
    /// completion; `emit(input, port, frame)` receives every frame sent,
    /// `input` being the index in `frames` of the frame it came from.
    fn process_batch<E: FnMut(usize, u32, &[u8]) + ?Sized>(&mut self, port: u32, frames: &[&[u8]], emit: &mut E);

    /// [`DataPlane::process_batch`] into an [`Emit`], which may get frames
    /// in two parts ([`Emit::emit_parts`]); what the live ports and the
    /// bench call. The default sends whole frames through `process_batch`.
    fn process_batch_to<E: Emit + ?Sized>(&mut self, port: u32, frames: &[&[u8]], emit: &mut E) {
        self.process_batch(port, frames, &mut |i, p, f: &[u8]| emit.emit(i, p, f));
    }

    /// Told before the next [`DataPlane::process_batch`] by a driver whose
    /// port carries offload headers: bit `i` of `mask` is set when frame
    /// `i` of that batch has a partial transport checksum (an offload
    /// header asks for it to be completed on the way out: the TCP/UDP
    /// checksum field holds only the pseudo-header's sum; the output port
    /// or the kernel's segmentation completes it). A data plane that
    /// rewrites fields under that checksum keeps it partial; one that
    /// never does ignores it (the default). Applies to the next batch
    /// only.
    fn partial_checksums(&mut self, _mask: u128) {}

    /// A copy for another worker, one of `workers`: same program and
    /// state, sharing what the data plane shares between workers.
    fn replica(&self, workers: usize) -> Result<Self, String>;

    /// Counters so far.
    fn stats(&self) -> Stats;

    /// Hands over (and forgets) the notifications produced since the last call.
    fn drain_notifications(&mut self, _to: &mut dyn FnMut(Self::Notification)) {}

    /// Turns the per-packet trace on or off (see [`trace`]); a data plane
    /// without one ignores it.
    fn set_tracing(&mut self, _on: bool) {}

    /// Hands the per-packet trace kept since the last call to `out` (the
    /// log lines at its level and above, the event messages if it wants
    /// them) and forgets it.
    fn drain_trace(&mut self, _out: &mut dyn TraceOut) {}

    /// This replica's counters (see [`DataPlane::merge_counters`]).
    fn counters(&self) -> Self::Counters;

    /// Replaces this copy's counters with the sum of `replicas`' (the
    /// master copy answers reads with every worker's counts).
    fn merge_counters(&mut self, replicas: &[Self::Counters]);

    /// Work that is due without any input: a data plane that sends on its
    /// own (ARP or NDP requests, retransmissions, frames released from a
    /// hold queue when another replica learned an address) does it here.
    /// `now_ns` is the driver's monotonic clock in nanoseconds (a test
    /// harness may pass a frozen value, e.g. 0 once before any input);
    /// `emit(port, frame)` receives what it sends (no input caused it).
    /// Drivers call it once at start, then whenever the interval
    /// [`DataPlane::tick_interval`] asks for has passed (busy or idle).
    /// The default does nothing.
    fn tick<E: FnMut(u32, &[u8]) + ?Sized>(&mut self, _now_ns: u64, _emit: &mut E) {}

    /// How soon, with no input, the data plane needs its next
    /// [`DataPlane::tick`] (`None`: not until input comes, the default).
    /// An idle driver sleeps that long at most, so a data plane with
    /// nothing due lets its worker sleep until a frame or a control
    /// message arrives.
    fn tick_interval(&self) -> Option<std::time::Duration> {
        None
    }

    /// Gives back the memory its batch buffers grew to (large frames, a
    /// burst of packets): a driver whose worker found nothing to do for a
    /// whole idle wait calls it, so an idle switch stays small; the next
    /// batch grows them again as needed. The default does nothing.
    fn release_memory(&mut self) {}

    /// Turns per-stage timing on or off (off by default: then it costs nothing).
    fn set_profiling(&mut self, _on: bool) {}

    /// Adds the time spent in each of its stages since profiling started.
    fn add_profile(&self, _to: &mut Profile) {}

    /// Adds the data plane's own counters (tables, flows, its protocol's
    /// counters) to `to`, as families named `sluice_<data plane>_...`
    /// (see `telemetry`). Called on the master copy once every worker's
    /// counters are merged into it. The default adds nothing.
    fn metrics(&self, _to: &mut Metrics) {}

    /// The control plane changed this copy's state (the worker pool calls
    /// it after each batch of changes it applies): a data plane that keeps
    /// state derived from its tables (a cache) drops it here. The default
    /// does nothing.
    fn changed(&mut self) {}
}

/// A data plane with no pipeline: every frame arriving on one of two ports
/// leaves through the other. The I/O ceiling that live benchmarks compare
/// a real data plane with (`--null-forward`).
#[derive(Debug, Clone)]
pub struct NullForward {
    ports: [u32; 2],
    stats: Stats,
}

impl NullForward {
    /// Forwards between ports `a` and `b`.
    pub fn new(a: u32, b: u32) -> NullForward {
        NullForward { ports: [a, b], stats: Stats::default() }
    }
}

impl DataPlane for NullForward {
    type Notification = ();
    type Counters = Stats;

    fn process_batch<E: FnMut(usize, u32, &[u8]) + ?Sized>(&mut self, port: u32, frames: &[&[u8]], emit: &mut E) {
        self.stats.received += frames.len() as u64;
        let to = if port == self.ports[0] {
            self.ports[1]
        } else if port == self.ports[1] {
            self.ports[0]
        } else {
            self.stats.dropped += frames.len() as u64;
            return;
        };
        for (i, f) in frames.iter().enumerate() {
            emit(i, to, f);
        }
        self.stats.transmitted += frames.len() as u64;
    }

    fn replica(&self, _workers: usize) -> Result<NullForward, String> {
        Ok(NullForward { ports: self.ports, stats: Stats::default() })
    }

    fn stats(&self) -> Stats {
        self.stats
    }

    fn counters(&self) -> Stats {
        self.stats
    }

    fn merge_counters(&mut self, replicas: &[Stats]) {
        self.stats = replicas.iter().fold(Stats::default(), |a, s| Stats {
            received: a.received + s.received,
            transmitted: a.transmitted + s.transmitted,
            dropped: a.dropped + s.dropped,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn null_forward_swaps_its_two_ports_and_drops_the_rest() {
        let mut nf = NullForward::new(1, 2);
        let (a, b) = ([1u8, 2, 3], [4u8]);
        let mut out = Vec::new();
        nf.process_batch(1, &[&a, &b], &mut |i, p, f: &[u8]| out.push((i, p, f.to_vec())));
        nf.process_batch(2, &[&b], &mut |i, p, f: &[u8]| out.push((i, p, f.to_vec())));
        nf.process_batch(7, &[&a], &mut |i, p, f: &[u8]| out.push((i, p, f.to_vec())));
        assert_eq!(out, vec![(0, 2, a.to_vec()), (1, 2, b.to_vec()), (0, 1, b.to_vec())]);
        assert_eq!(nf.stats(), Stats { received: 4, transmitted: 3, dropped: 1 });
    }
}
