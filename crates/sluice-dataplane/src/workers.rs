//! Multi-core workers: N threads, each running whole packets through its
//! own replica of a data plane (run to completion) with its own I/O.
//!
//! Concurrency invariants (this file owns them):
//! - A replica belongs to its worker thread; nothing else touches it while
//!   the worker runs. The packet path takes no lock.
//! - The control plane talks to the pool through one [`Pool`] (its owner
//!   serializes requests). A change is applied to the master copy first, so
//!   that its answer (an entry handle, an error) comes from there, then sent
//!   to every worker, which applies it between two batches and
//!   acknowledges; [`Pool::flush`] returns once every worker has it. No
//!   packet sees half a change: a worker moves from the old state to the
//!   new one between batches. Replicas apply the same changes in the same
//!   order from the same state, so they agree (entry handles included).
//!   After a batch of changes the worker calls [`DataPlane::changed`]
//!   before its next packet, so state derived from the tables (a cache)
//!   never outlives the tables it came from.
//! - Changes sent without waiting ([`Pool::send_pending`]) are bounded: at
//!   most [`MAX_IN_FLIGHT`] batches per worker travel unacknowledged; the
//!   next one first waits for the oldest, so a worker that falls behind
//!   slows the control plane instead of growing its queue.
//! - A worker's I/O returns from [`WorkerIo::run_batch`] within about a
//!   millisecond when idle (or is woken by its [`Waker`]), which bounds how
//!   long a change waits.
//! - Counters are per replica (plain integers, no atomics); reads gather
//!   every worker's counters ([`DataPlane::counters`]) and sum them into the
//!   master ([`DataPlane::merge_counters`]) before answering. State the
//!   replicas share (the P4 switch's registers and meters) is changed
//!   once, through the master ([`Pool::change_shared`]).

use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;

use crate::telemetry::Metrics;
use crate::{DataPlane, Profile};

/// What a worker does with its replica between control messages: process
/// one batch (or wait briefly for one). `run_batch` returns false when the
/// worker should end.
pub trait WorkerIo<D>: Send {
    /// Processes what is waiting (at most a few batches) or waits about a
    /// millisecond for it.
    fn run_batch(&mut self, dp: &mut D) -> bool;

    /// Runs one frame from the control plane (a P4Runtime PacketOut) as if it
    /// had arrived on `port`, sending what the data plane emits. I/O
    /// without ports ignores it.
    fn inject(&mut self, _dp: &mut D, _port: u32, _frame: &[u8]) {}

    /// Attaches interface `iface` as port `number` (Thrift's `port_add`).
    fn add_port(&mut self, _number: u32, _iface: &str) -> Result<(), String> {
        Err("this worker has no ports to add to".into())
    }

    /// Detaches port `number` (Thrift's `port_remove`).
    fn remove_port(&mut self, _number: u32) -> Result<(), String> {
        Err("this worker has no ports to remove".into())
    }

    /// A way to interrupt the worker's wait for packets, so that a control
    /// message is handled at once instead of at the end of the wait.
    fn waker(&self) -> Option<Waker> {
        None
    }

    /// Turns timing of the I/O's own stages (receive, send) on or off.
    fn set_profiling(&mut self, _on: bool) {}

    /// Adds the time spent in the I/O's own stages.
    fn add_profile(&self, _to: &mut Profile) {}

    /// Adds what the I/O counts (its ports, its batches) as worker
    /// `worker` to `to` (see `crate::telemetry`).
    fn metrics(&self, _worker: usize, _to: &mut Metrics) {}
}

/// Wakes one worker out of its wait for packets.
pub type Waker = Arc<dyn Fn() + Send + Sync>;

/// One state change as every replica replays it. The flag says whether this
/// copy is the one that keeps values split across workers (counter writes):
/// true on the master and on worker 0, false on the other workers.
pub type Change<D> = Arc<dyn Fn(&mut D, bool) + Send + Sync>;

enum Msg<D: DataPlane> {
    /// Apply changes in order, then acknowledge.
    Apply(Vec<Change<D>>, mpsc::Sender<()>),
    /// Start over with another replica (a new program), then acknowledge.
    Replace(Box<D>, mpsc::Sender<()>),
    /// Run one frame as if received on a port.
    Inject(u32, Vec<u8>),
    /// Attach (`Some(iface)`) or detach a port, then report.
    Port(u32, Option<String>, mpsc::Sender<Result<(), String>>),
    /// Send a copy of the replica's counters.
    Counters(mpsc::Sender<D::Counters>),
    /// Turn stage timing on or off.
    Profiling(bool),
    /// Send the stage times of the I/O and the replica.
    Profile(mpsc::Sender<Profile>),
    /// Send what the I/O counts.
    Metrics(mpsc::Sender<Metrics>),
}

struct Worker<D: DataPlane> {
    tx: mpsc::Sender<Msg<D>>,
    handle: Option<JoinHandle<D>>,
    waker: Option<Waker>,
}

impl<D: DataPlane> Worker<D> {
    /// Sends a message and wakes the worker; false when it has ended.
    fn send(&self, m: Msg<D>) -> bool {
        let ok = self.tx.send(m).is_ok();
        if let Some(w) = &self.waker {
            w();
        }
        ok
    }
}

/// Batches of changes per worker sent and not yet acknowledged, at most
/// (see [`Pool::send_pending`]).
pub const MAX_IN_FLIGHT: usize = 16;

/// N workers and the master copy that answers control-plane requests.
pub struct Pool<D: DataPlane> {
    master: D,
    workers: Vec<Worker<D>>,
    /// Changes the master has but the workers have not been sent yet.
    pending: Vec<Change<D>>,
    /// Acknowledgements of changes sent early ([`Pool::send_pending`]) that
    /// [`Pool::flush`] still has to wait for.
    in_flight: Vec<mpsc::Receiver<()>>,
}

/// The body of one worker thread: control messages between batches.
fn worker_loop<D: DataPlane>(mut dp: D, mut io: Box<dyn WorkerIo<D>>, rx: mpsc::Receiver<Msg<D>>, k: usize) -> D {
    let first = k == 0;
    loop {
        // Control messages between batches: the packet path takes no lock.
        loop {
            match rx.try_recv() {
                Ok(Msg::Apply(changes, ack)) => {
                    for c in &changes {
                        c(&mut dp, first);
                    }
                    dp.changed();
                    let _ = ack.send(());
                }
                Ok(Msg::Replace(new, ack)) => {
                    dp = *new;
                    let _ = ack.send(());
                }
                Ok(Msg::Inject(port, frame)) => io.inject(&mut dp, port, &frame),
                Ok(Msg::Port(number, iface, reply)) => {
                    let r = match iface {
                        Some(i) => io.add_port(number, &i),
                        None => io.remove_port(number),
                    };
                    let _ = reply.send(r);
                }
                Ok(Msg::Counters(reply)) => {
                    let _ = reply.send(dp.counters());
                }
                Ok(Msg::Profiling(on)) => {
                    io.set_profiling(on);
                    dp.set_profiling(on);
                }
                Ok(Msg::Profile(reply)) => {
                    let mut p = Profile::default();
                    io.add_profile(&mut p);
                    dp.add_profile(&mut p);
                    let _ = reply.send(p);
                }
                Ok(Msg::Metrics(reply)) => {
                    let mut m = Metrics::new();
                    io.metrics(k, &mut m);
                    let _ = reply.send(m);
                }
                Err(mpsc::TryRecvError::Empty) => break,
                Err(mpsc::TryRecvError::Disconnected) => return dp,
            }
        }
        if !io.run_batch(&mut dp) {
            return dp;
        }
    }
}

impl<D: DataPlane> Pool<D> {
    /// Starts `io.len()` workers, each with a replica of `master` and its I/O.
    pub fn start(master: D, io: Vec<Box<dyn WorkerIo<D>>>) -> Result<Pool<D>, String> {
        let mut workers = Vec::new();
        let count = io.len();
        for (k, io) in io.into_iter().enumerate() {
            let dp = master.replica(count)?;
            let waker = io.waker();
            let (tx, rx) = mpsc::channel::<Msg<D>>();
            let handle = std::thread::Builder::new()
                .name(format!("sluice-worker-{k}"))
                .spawn(move || worker_loop(dp, io, rx, k))
                .map_err(|e| format!("cannot start worker {k}: {e}"))?;
            workers.push(Worker { tx, handle: Some(handle), waker });
        }
        Ok(Pool { master, workers, pending: Vec::new(), in_flight: Vec::new() })
    }

    /// Number of workers.
    pub fn len(&self) -> usize {
        self.workers.len()
    }

    /// Whether the pool has no workers.
    pub fn is_empty(&self) -> bool {
        self.workers.is_empty()
    }

    /// Every worker's counters (workers that ended answer no more and are skipped).
    pub fn counter_snapshots(&self) -> Vec<D::Counters> {
        let mut replies = Vec::new();
        for w in &self.workers {
            let (tx, rx) = mpsc::channel();
            if w.send(Msg::Counters(tx)) {
                replies.push(rx);
            }
        }
        replies.into_iter().filter_map(|rx| rx.recv().ok()).collect()
    }

    /// Sums every worker's counters into the master (a pool without workers
    /// keeps the master's own counts).
    pub fn merge_counters(&mut self) {
        if self.workers.is_empty() {
            return;
        }
        let snaps = self.counter_snapshots();
        self.master.merge_counters(&snaps);
    }

    /// Turns stage timing on or off on every worker (and the master, which
    /// is the data plane when there are no workers).
    pub fn set_profiling(&mut self, on: bool) {
        self.master.set_profiling(on);
        for w in &self.workers {
            w.send(Msg::Profiling(on));
        }
    }

    /// The stage times of every worker, summed (the master's when there are none).
    pub fn profile(&self) -> Profile {
        let mut total = Profile::default();
        if self.workers.is_empty() {
            self.master.add_profile(&mut total);
            return total;
        }
        let mut replies = Vec::new();
        for w in &self.workers {
            let (tx, rx) = mpsc::channel();
            if w.send(Msg::Profile(tx)) {
                replies.push(rx);
            }
        }
        for p in replies.into_iter().filter_map(|rx| rx.recv().ok()) {
            total.merge(&p);
        }
        total
    }

    /// What every worker's I/O counts (its ports, its batches), summed
    /// where workers share a series (see `crate::telemetry`).
    pub fn io_metrics(&self) -> Metrics {
        let mut replies = Vec::new();
        for w in &self.workers {
            let (tx, rx) = mpsc::channel();
            if w.send(Msg::Metrics(tx)) {
                replies.push(rx);
            }
        }
        let mut total = Metrics::new();
        for m in replies.into_iter().filter_map(|rx| rx.recv().ok()) {
            total.merge(&m);
        }
        total
    }

    /// Applies a change to the master now and queues it for the workers; it
    /// reaches them at the next [`Pool::flush`] (or read). The master's
    /// answer (an entry handle, an error) is returned. A change that fails on
    /// the master should not be queued: use [`Pool::try_change`].
    pub fn change<R>(&mut self, f: impl Fn(&mut D, bool) -> R + Send + Sync + 'static) -> R {
        let out = f(&mut self.master, true);
        self.master.changed();
        if !self.workers.is_empty() {
            self.pending.push(Arc::new(move |dp: &mut D, first: bool| {
                f(dp, first);
            }));
        }
        out
    }

    /// Like [`Pool::change`], but only a change that succeeded on the master
    /// goes to the workers.
    pub fn try_change<T, E>(
        &mut self,
        f: impl Fn(&mut D, bool) -> Result<T, E> + Send + Sync + 'static,
    ) -> Result<T, E> {
        let out = f(&mut self.master, true);
        self.master.changed();
        let out = out?;
        if !self.workers.is_empty() {
            self.pending.push(Arc::new(move |dp: &mut D, first: bool| {
                let _ = f(dp, first);
            }));
        }
        Ok(out)
    }

    /// Changes state the replicas share: applied once, through the master,
    /// after every queued change has landed (a queued change may reset what
    /// this one sets, and must come first).
    pub fn change_shared<R>(&mut self, f: impl FnOnce(&mut D) -> R) -> R {
        self.flush();
        let out = f(&mut self.master);
        self.master.changed();
        out
    }

    /// Sends the queued changes to every worker without waiting: they apply
    /// them while the caller goes on (a long batch of writes then costs the
    /// master's time, not the master's plus the workers'). The data plane may
    /// see part of a batch sent this way; callers that promise atomicity
    /// only [`Pool::flush`]. [`Pool::flush`] waits for these too.
    pub fn send_pending(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let changes = std::mem::take(&mut self.pending);
        // Bounded: the oldest batches are waited for first.
        let bound = MAX_IN_FLIGHT * self.workers.len();
        if self.in_flight.len() + self.workers.len() > bound {
            let over = self.in_flight.len() + self.workers.len() - bound;
            for rx in self.in_flight.drain(..over.min(self.in_flight.len())) {
                let _ = rx.recv();
            }
        }
        for w in &self.workers {
            let (tx, rx) = mpsc::channel();
            if w.send(Msg::Apply(changes.clone(), tx)) {
                self.in_flight.push(rx);
            }
        }
    }

    /// How many changes wait to be sent to the workers.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Sends queued changes to every worker and waits until each has applied
    /// them (and everything sent before): from then on no packet sees the old state.
    pub fn flush(&mut self) {
        self.send_pending();
        for rx in std::mem::take(&mut self.in_flight) {
            let _ = rx.recv();
        }
    }

    /// Answers a read from the master, after every change has landed and
    /// with every worker's counters summed in.
    pub fn read<R>(&mut self, f: impl FnOnce(&D) -> R) -> R {
        self.flush();
        self.merge_counters();
        f(&self.master)
    }

    /// The master copy, for reads that need no counters (program shape,
    /// names). Changes made through it would not reach the workers.
    pub fn master(&self) -> &D {
        &self.master
    }

    /// The data plane itself, for a pool without workers (tests,
    /// benchmarks, replays), where the master is the only copy; `None`
    /// with workers, whose copies a change made here would never reach.
    pub fn alone(&mut self) -> Option<&mut D> {
        self.workers.is_empty().then_some(&mut self.master)
    }

    /// Replaces the data plane everywhere (a new program): the master
    /// becomes `dp` and every worker gets a replica, between two of its batches.
    pub fn replace(&mut self, dp: D) -> Result<(), String> {
        self.pending.clear();
        for rx in std::mem::take(&mut self.in_flight) {
            let _ = rx.recv();
        }
        let mut acks = Vec::new();
        for w in &self.workers {
            let r = dp.replica(self.workers.len())?;
            let (tx, rx) = mpsc::channel();
            if w.send(Msg::Replace(Box::new(r), tx)) {
                acks.push(rx);
            }
        }
        for rx in acks {
            let _ = rx.recv();
        }
        self.master = dp;
        Ok(())
    }

    /// Runs a frame through the data plane of one worker (chosen by flow
    /// hash) as if it had arrived on `port`; what it emits leaves through
    /// that worker's ports. Returns false when no worker could take it.
    pub fn inject(&mut self, port: u32, frame: Vec<u8>) -> bool {
        self.flush();
        if self.workers.is_empty() {
            return false;
        }
        let k = flow_hash(&frame) as usize % self.workers.len();
        self.workers[k].send(Msg::Inject(port, frame))
    }

    /// Attaches `iface` as port `number` on every worker (`None`: detaches
    /// port `number`). When a worker fails, the others are put back.
    pub fn set_port(&mut self, number: u32, iface: Option<&str>) -> Result<(), String> {
        if self.workers.is_empty() {
            return Err("the switch runs without workers: no ports".into());
        }
        let mut done = Vec::new();
        let mut error = None;
        for (k, w) in self.workers.iter().enumerate() {
            let (tx, rx) = mpsc::channel();
            if !w.send(Msg::Port(number, iface.map(str::to_string), tx)) {
                error = Some(format!("worker {k} has ended"));
                break;
            }
            match rx.recv() {
                Ok(Ok(())) => done.push(k),
                Ok(Err(e)) => {
                    error = Some(e);
                    break;
                }
                Err(_) => {
                    error = Some(format!("worker {k} has ended"));
                    break;
                }
            }
        }
        let Some(e) = error else { return Ok(()) };
        // Undo an attach on the workers that made it (a failed detach leaves nothing to undo).
        if iface.is_some() {
            for k in done {
                let (tx, rx) = mpsc::channel();
                if self.workers[k].send(Msg::Port(number, None, tx)) {
                    let _ = rx.recv();
                }
            }
        }
        Err(e)
    }

    /// Stops every worker (their I/O must return false soon, e.g. on a stop
    /// flag), then merges their counters into the master. Later changes
    /// apply to the master only.
    pub fn stop_workers(&mut self) {
        self.flush();
        let mut snaps = Vec::new();
        for w in self.workers.iter_mut() {
            let (tx, _) = mpsc::channel();
            drop(std::mem::replace(&mut w.tx, tx));
            if let Some(wake) = &w.waker {
                wake();
            }
            if let Some(h) = w.handle.take() {
                if let Ok(dp) = h.join() {
                    snaps.push(dp.counters());
                }
            }
        }
        if !self.workers.is_empty() {
            self.master.merge_counters(&snaps);
        }
        self.workers.clear();
    }

    /// Stops every worker and returns the master with the merged counters.
    pub fn finish(mut self) -> D {
        self.stop_workers();
        self.master
    }
}

/// A flow hash over the fields that name a flow (IPv4/IPv6 addresses,
/// protocol and TCP/UDP ports; the MAC addresses for anything else), so
/// that every packet of one flow goes to the same worker.
pub fn flow_hash(f: &[u8]) -> u32 {
    fn mix(h: u64, bytes: &[u8]) -> u64 {
        bytes.iter().fold(h, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3))
    }
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let et = if f.len() >= 14 { u16::from_be_bytes([f[12], f[13]]) } else { 0 };
    let l4 = |h: u64, proto: u8, off: usize| {
        if matches!(proto, 6 | 17) && f.len() >= off + 4 {
            mix(h, &f[off..off + 4])
        } else {
            h
        }
    };
    match et {
        0x0800 if f.len() >= 34 => {
            let ihl = usize::from(f[14] & 0x0f) * 4;
            h = mix(h, &f[26..34]);
            h = mix(h, &[f[23]]);
            h = l4(h, f[23], 14 + ihl.max(20));
        }
        0x86dd if f.len() >= 54 => {
            h = mix(h, &f[22..54]);
            h = mix(h, &[f[20]]);
            h = l4(h, f[20], 54);
        }
        _ => h = mix(h, &f[..f.len().min(12)]),
    }
    (h ^ (h >> 32)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{NullForward, Stats};
    use std::sync::atomic::{AtomicBool, Ordering};

    #[test]
    fn flow_hash_ignores_everything_but_the_flow() {
        let mut a = vec![0u8; 60];
        a[12] = 0x08;
        a[14] = 0x45;
        a[22] = 64;
        a[23] = 17;
        a[26..34].copy_from_slice(&[10, 0, 0, 1, 10, 0, 0, 2]);
        a[34..38].copy_from_slice(&[0x30, 0x39, 0, 80]);
        let mut b = a.clone();
        b[22] = 63; // TTL
        b[50] = 9; // payload
        b[0] = 0xff; // MAC
        assert_eq!(flow_hash(&a), flow_hash(&b));
        let mut c = a.clone();
        c[35] = 0x3a; // source port
        assert_ne!(flow_hash(&a), flow_hash(&c));
    }

    /// Sends one frame per batch until stopped.
    struct Ticker(Arc<AtomicBool>);

    impl WorkerIo<NullForward> for Ticker {
        fn run_batch(&mut self, dp: &mut NullForward) -> bool {
            dp.process_batch(1, &[&[0u8; 60]], &mut |_, _, _| {});
            std::thread::sleep(std::time::Duration::from_millis(1));
            !self.0.load(Ordering::Relaxed)
        }
    }

    #[test]
    fn reads_sum_the_workers_counters_and_changes_reach_every_worker() {
        let stop = Arc::new(AtomicBool::new(false));
        let ios: Vec<Box<dyn WorkerIo<NullForward>>> =
            (0..2).map(|_| Box::new(Ticker(stop.clone())) as Box<_>).collect();
        let mut pool = Pool::start(NullForward::new(1, 2), ios).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(30));
        let seen = pool.read(|m| m.stats());
        assert!(seen.received >= 2 && seen.received == seen.transmitted, "{seen:?}");
        // A change that makes port 1 unknown: every worker drops from then on.
        pool.change(|dp, _| *dp = NullForward::new(5, 2));
        pool.flush();
        let before = pool.read(|m| m.stats());
        std::thread::sleep(std::time::Duration::from_millis(30));
        let after = pool.read(|m| m.stats());
        assert_eq!(after.transmitted, 0, "the replaced replicas count afresh and forward nothing: {after:?}");
        assert!(after.dropped > 0 && before.dropped <= after.dropped);
        stop.store(true, Ordering::Relaxed);
        let m = pool.finish();
        assert_eq!(m.stats().transmitted, 0);
        let _ = Stats::default();
    }

    /// Changes sent without waiting never pile up past the bound, however
    /// slow the worker; a flush then finds them all applied.
    #[test]
    fn changes_sent_early_stay_bounded() {
        let stop = Arc::new(AtomicBool::new(false));
        let ios: Vec<Box<dyn WorkerIo<NullForward>>> = vec![Box::new(Ticker(stop.clone()))];
        let mut pool = Pool::start(NullForward::new(1, 2), ios).unwrap();
        for i in 0..200u32 {
            pool.change(move |dp, _| *dp = NullForward::new(i, 2));
            pool.send_pending();
            assert!(pool.in_flight.len() <= MAX_IN_FLIGHT, "{} batches in flight", pool.in_flight.len());
        }
        pool.flush();
        assert!(pool.in_flight.is_empty());
        stop.store(true, Ordering::Relaxed);
        pool.finish();
    }
}
