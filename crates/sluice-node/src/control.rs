//! [`Control`]: the one way a control server reads and changes a running
//! data plane.
//!
//! Every request takes the node's lock for its duration ([`Control::lock`]
//! gives a [`Session`]); inside it, reads and changes are the worker
//! pool's (`sluice_dataplane::workers::Pool`), whose invariants hold:
//! a change is made on the master copy first and reaches every worker
//! between two of its batches, in order; a read of counters waits for
//! every change made before it and sums every worker's counts.
//!
//! Concurrency invariants (this file owns them):
//! - requests of every server (Thrift, P4Runtime, the OpenFlow agent, the
//!   control socket, the metrics scraper) are serialized by one mutex;
//!   the packet path never takes it;
//! - a request that panicked leaves the lock poisoned; the next one takes
//!   it over: the pool's state stays whole because changes apply whole;
//! - there is no way around the session to the data plane's copies: the
//!   master is lent for reads ([`Session::view`], [`Session::read`]) and
//!   changed only through the pool's change calls, which count every
//!   change for telemetry.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use sluice_dataplane::workers::Pool;
use sluice_dataplane::{DataPlane, Metrics, Profile};

/// A running data plane as its control servers see it (cheap to clone:
/// every clone is the same data plane).
pub struct Control<D: DataPlane> {
    shared: Arc<Shared<D>>,
}

impl<D: DataPlane> Clone for Control<D> {
    fn clone(&self) -> Self {
        Control { shared: Arc::clone(&self.shared) }
    }
}

struct Shared<D: DataPlane> {
    pool: Mutex<Pool<D>>,
    /// Changes made so far (each change call, each replacement).
    changes: AtomicU64,
    /// Whether the workers time their stages.
    profiling: AtomicBool,
    /// The data plane's kind, as metrics and `sluice top` name it.
    kind: &'static str,
    /// The instance's name (`--name`), if it has one.
    name: Option<String>,
    started: Instant,
    started_unix: f64,
}

impl<D: DataPlane> Control<D> {
    /// Control over `pool`, a data plane of kind `kind` ("p4", "lwaftr",
    /// "openflow"), named `name` when the user gave one.
    pub fn new(pool: Pool<D>, kind: &'static str, name: Option<String>) -> Control<D> {
        let started_unix = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
        Control {
            shared: Arc::new(Shared {
                pool: Mutex::new(pool),
                changes: AtomicU64::new(0),
                profiling: AtomicBool::new(false),
                kind,
                name,
                started: Instant::now(),
                started_unix,
            }),
        }
    }

    /// A data plane with no workers: the master is the only copy (tests,
    /// fuzzing, benchmarks of the control path).
    pub fn standalone(dp: D, kind: &'static str) -> Control<D> {
        let pool = Pool::start(dp, Vec::new()).expect("a pool without workers always starts");
        Control::new(pool, kind, None)
    }

    /// The data plane for one request (see the module documentation).
    pub fn lock(&self) -> Session<'_, D> {
        Session { pool: self.shared.pool.lock().unwrap_or_else(|e| e.into_inner()), shared: &self.shared }
    }

    /// Answers `f` from the master once every change has landed, with
    /// every worker's counters summed in.
    pub fn read<R>(&self, f: impl FnOnce(&D) -> R) -> R {
        self.lock().read(f)
    }

    /// Answers `f` from the master as it is (it has every change; its
    /// counters are its own): for the program's shape, entries, names.
    pub fn view<R>(&self, f: impl FnOnce(&D) -> R) -> R {
        f(self.lock().view())
    }

    /// Makes a change that must hold everywhere when this returns: on the
    /// master first, then, when it succeeded there, on every worker (waited for).
    pub fn apply<T, E>(&self, f: impl Fn(&mut D, bool) -> Result<T, E> + Send + Sync + 'static) -> Result<T, E> {
        self.lock().apply(f)
    }

    /// The data plane's kind ("p4", "lwaftr", "openflow").
    pub fn kind(&self) -> &'static str {
        self.shared.kind
    }

    /// The instance's name, when it was given one.
    pub fn name(&self) -> Option<&str> {
        self.shared.name.as_deref()
    }

    /// When the node started.
    pub fn started(&self) -> Instant {
        self.shared.started
    }

    /// Changes made so far.
    pub fn changes(&self) -> u64 {
        self.shared.changes.load(Ordering::Relaxed)
    }

    /// What the workers' I/O counts (ports, batches, drops), without the
    /// data plane's own counters: the cheap part of [`Control::metrics`],
    /// read as often as telemetry streams need.
    pub fn io_metrics(&self) -> Metrics {
        self.lock().pool.io_metrics()
    }

    /// Everything the node counts, as one set of metric families: the
    /// node's own, every worker's I/O, the stage times when profiling, the
    /// data plane's counters (see `sluice_dataplane::telemetry`).
    pub fn metrics(&self) -> Metrics {
        let mut s = self.lock();
        s.pool.flush();
        s.pool.merge_counters();
        let sh = &self.shared;
        let mut m = Metrics::new();
        let mut info = vec![("data_plane", sh.kind), ("version", env!("CARGO_PKG_VERSION"))];
        if let Some(n) = &sh.name {
            info.push(("name", n.as_str()));
        }
        m.gauge(
            "sluice_info",
            "The running data plane: its kind, Sluice's version and the instance's name.",
            &info,
            1.0,
        );
        m.gauge(
            "sluice_start_time_seconds",
            "When the node started, in seconds since the Unix epoch.",
            &[],
            sh.started_unix,
        );
        m.gauge("sluice_workers", "Worker threads forwarding packets.", &[], s.pool.len() as f64);
        m.merge(&s.pool.io_metrics());
        if sh.profiling.load(Ordering::Relaxed) {
            let p = s.pool.profile();
            profile_metrics(&p, &mut m);
        }
        s.pool.master().metrics(&mut m);
        m.counter(
            "sluice_control_changes_total",
            "Changes the control servers made to the data plane (entries, flows, softwires...), each reaching every worker.",
            &[],
            sh.changes.load(Ordering::Relaxed),
        );
        m
    }
}

/// Stage times as counters: cycles, packets and calls per stage.
fn profile_metrics(p: &Profile, m: &mut Metrics) {
    m.gauge(
        "sluice_stage_cycles_per_second",
        "Time-stamp-counter ticks per second (divide stage cycles by it for seconds).",
        &[],
        sluice_dataplane::profile::stamps_per_second(),
    );
    for (name, t) in p.stages() {
        let l = [("stage", name.as_str())];
        m.counter("sluice_stage_cycles_total", "Cycles spent in a stage (with --profile).", &l, t.cycles);
        m.counter("sluice_stage_packets_total", "Packets a stage handled (with --profile).", &l, t.packets);
        m.counter("sluice_stage_calls_total", "Calls of a stage that did work (with --profile).", &l, t.calls);
    }
}

/// The data plane, locked for one request (see the module documentation).
pub struct Session<'a, D: DataPlane> {
    pool: MutexGuard<'a, Pool<D>>,
    shared: &'a Shared<D>,
}

impl<D: DataPlane> Session<'_, D> {
    fn count(&self) {
        self.shared.changes.fetch_add(1, Ordering::Relaxed);
    }

    /// The master copy, for reads that need no counters: it has every
    /// change as soon as it is made.
    pub fn view(&self) -> &D {
        self.pool.master()
    }

    /// Answers `f` from the master once every change has landed, with
    /// every worker's counters summed in.
    pub fn read<R>(&mut self, f: impl FnOnce(&D) -> R) -> R {
        self.pool.read(f)
    }

    /// Makes a change on the master (its answer is returned) and queues
    /// it for the workers (see `Pool::change`).
    pub fn change<R>(&mut self, f: impl Fn(&mut D, bool) -> R + Send + Sync + 'static) -> R {
        self.count();
        self.pool.change(f)
    }

    /// Like [`Session::change`]; only a change that succeeded on the
    /// master is queued for the workers.
    pub fn try_change<T, E>(
        &mut self,
        f: impl Fn(&mut D, bool) -> Result<T, E> + Send + Sync + 'static,
    ) -> Result<T, E> {
        let out = self.pool.try_change(f);
        if out.is_ok() {
            self.count();
        }
        out
    }

    /// A change that holds on every worker when this returns: on the
    /// master first, then, when it succeeded there, on every worker
    /// ([`Session::try_change`], then [`Session::flush`]).
    pub fn apply<T, E>(&mut self, f: impl Fn(&mut D, bool) -> Result<T, E> + Send + Sync + 'static) -> Result<T, E> {
        let out = self.try_change(f)?;
        self.flush();
        Ok(out)
    }

    /// An infallible change that holds on every worker when this returns
    /// ([`Session::change`], then [`Session::flush`]).
    pub fn commit<R>(&mut self, f: impl Fn(&mut D, bool) -> R + Send + Sync + 'static) -> R {
        let out = self.change(f);
        self.flush();
        out
    }

    /// Changes state the replicas share, once, through the master.
    pub fn change_shared<R>(&mut self, f: impl FnOnce(&mut D) -> R) -> R {
        self.count();
        self.pool.change_shared(f)
    }

    /// Sends queued changes to the workers without waiting (bounded).
    pub fn send_pending(&mut self) {
        self.pool.send_pending();
    }

    /// Changes queued and not sent yet.
    pub fn pending(&self) -> usize {
        self.pool.pending()
    }

    /// Waits until every worker has every change made so far.
    pub fn flush(&mut self) {
        self.pool.flush();
    }

    /// Sums every worker's counters into the master.
    pub fn merge_counters(&mut self) {
        self.pool.merge_counters();
    }

    /// Every worker's counters, unsummed.
    pub fn counter_snapshots(&self) -> Vec<D::Counters> {
        self.pool.counter_snapshots()
    }

    /// Replaces the data plane everywhere (a new program).
    pub fn replace(&mut self, dp: D) -> Result<(), String> {
        self.count();
        self.pool.replace(dp)
    }

    /// Runs a frame through one worker's data plane as if received on `port`.
    pub fn inject(&mut self, port: u32, frame: Vec<u8>) -> bool {
        self.pool.inject(port, frame)
    }

    /// Attaches `iface` as port `number` on every worker (`None`: detaches it).
    pub fn set_port(&mut self, number: u32, iface: Option<&str>) -> Result<(), String> {
        self.pool.set_port(number, iface)
    }

    /// Turns stage timing on or off everywhere.
    pub fn set_profiling(&mut self, on: bool) {
        self.shared.profiling.store(on, Ordering::Relaxed);
        self.pool.set_profiling(on);
    }

    /// The stage times of every worker, summed.
    pub fn profile(&self) -> Profile {
        self.pool.profile()
    }

    /// Number of workers (0: the master is the data plane).
    pub fn workers(&self) -> usize {
        self.pool.len()
    }

    /// The data plane itself when there are no workers (tests, replays).
    pub fn alone(&mut self) -> Option<&mut D> {
        self.pool.alone()
    }

    /// Stops every worker and sums their counters into the master; later
    /// changes apply to the master only.
    pub fn stop_workers(&mut self) {
        self.pool.stop_workers();
    }
}
