//! Multi-core workers: N threads, each running whole packets through its own
//! replica of the switch (run to completion), fed by flow-hashed distribution
//! so that the packets of one flow stay on one worker and in order.
//!
//! Control plane: a [`Pool`] keeps a master switch that answers every
//! command. A command that changes state is applied to the master first (so
//! errors and handles come from there) and then sent to every worker, which
//! applies it between two batches and acknowledges; the command returns once
//! every worker has it. No lock on the packet path, and no packet ever sees
//! half an update (each worker moves from the old to the new state between
//! packets). A worker's I/O must return from `run_batch` within about a
//! millisecond when idle, which bounds how long a command waits. Replicas apply the same commands in the same order from
//! the same state, so entry handles agree everywhere.
//!
//! Counters are per worker (plain integers, no atomics): reads gather every
//! worker's counters, sum them into the master and answer from there.
//! Registers and meters (direct ones included: their cells are indexed by
//! entry) are shared by all replicas (see `sluice_engine::shared`), so they
//! keep bmv2's single-copy semantics.

use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;

use crate::commands::CmdError;
use crate::Switch;

/// What a worker does with its switch between control messages: process one
/// batch (or wait briefly for one). Returns false when the worker should end.
pub trait WorkerIo: Send {
    fn run_batch(&mut self, sw: &mut Switch) -> bool;

    /// Runs one frame from the control plane (a P4Runtime PacketOut) as if it
    /// had arrived on `port`, sending what the switch emits. I/O without
    /// ports ignores it.
    fn inject(&mut self, _sw: &mut Switch, _port: u32, _frame: &[u8]) {}

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
}

/// Wakes one worker out of its wait for packets.
pub type Waker = Arc<dyn Fn() + Send + Sync>;

/// Every counter of one replica, for merging.
#[derive(Debug, Clone, Default)]
pub struct CounterSnapshot {
    /// Indirect counter arrays: `(packets, bytes)` per cell.
    pub counters: Vec<Vec<(u64, u64)>>,
    /// Per table: `(entry handle, packets, bytes)` of entries that counted something.
    pub direct: Vec<Vec<(u32, u64, u64)>>,
    /// Tables with idle timeouts: `(table, entry handle, last hit)` of entries hit since added.
    pub hits: Vec<(usize, u32, std::time::Instant)>,
}

impl CounterSnapshot {
    fn of(sw: &Switch) -> CounterSnapshot {
        CounterSnapshot {
            counters: sw.state.counters.clone(),
            direct: sw
                .state
                .tables
                .iter()
                .map(|t| {
                    t.entries()
                        .filter(|(_, e)| e.packets != 0 || e.bytes != 0)
                        .map(|(h, e)| (h, e.packets, e.bytes))
                        .collect()
                })
                .collect(),
            hits: last_hits(sw),
        }
    }
}

/// When each entry of a table with idle timeouts was last hit (entries not hit since added are left out).
fn last_hits(sw: &Switch) -> Vec<(usize, u32, std::time::Instant)> {
    let mut out = Vec::new();
    for (t, tp) in sw.plan.tables.iter().enumerate() {
        if !tp.support_timeout {
            continue;
        }
        let ts = &sw.state.tables[t];
        for (h, _) in ts.entries() {
            let us = ts.last_hit(h & 0x00ff_ffff);
            if us != 0 {
                out.push((t, h, sw.instant_at(us)));
            }
        }
    }
    out
}

/// One state change as every replica replays it. The flag says whether this
/// copy is the one that keeps values split across workers (counter writes):
/// true on the master and on worker 0, false on the other workers.
pub type Change = Arc<dyn Fn(&mut Switch, bool) + Send + Sync>;

enum Msg {
    /// Apply changes in order, then acknowledge.
    Apply(Vec<Change>, mpsc::Sender<()>),
    /// Start over with another switch (a new program), then acknowledge.
    Replace(Box<Switch>, mpsc::Sender<()>),
    /// Run one frame as if received on a port.
    Inject(u32, Vec<u8>),
    /// Attach (`Some(iface)`) or detach a port, then report.
    Port(u32, Option<String>, mpsc::Sender<Result<(), String>>),
    Snapshot(mpsc::Sender<CounterSnapshot>),
}

struct Worker {
    tx: mpsc::Sender<Msg>,
    handle: Option<JoinHandle<Switch>>,
    waker: Option<Waker>,
}

impl Worker {
    /// Sends a message and wakes the worker; false when it has ended.
    fn send(&self, m: Msg) -> bool {
        let ok = self.tx.send(m).is_ok();
        if let Some(w) = &self.waker {
            w();
        }
        ok
    }
}

/// N workers and the master switch that answers control-plane requests.
pub struct Pool {
    master: Switch,
    workers: Vec<Worker>,
    /// Changes the master has but the workers have not been sent yet.
    pending: Vec<Change>,
    /// Acknowledgements of changes sent early ([`Pool::send_pending`]) that
    /// [`Pool::flush`] still has to wait for.
    in_flight: Vec<mpsc::Receiver<()>>,
}

/// Commands that only read state: answered by the master after merging counters.
fn is_read(cmd: &str) -> bool {
    cmd.contains("dump")
        || cmd.ends_with("_read")
        || cmd.ends_with("_get")
        || cmd.ends_with("_get_rates")
        || cmd.starts_with("show_")
        || matches!(cmd, "table_num_entries" | "table_info" | "table_show_actions" | "switch_info" | "help")
}

/// A replica of `master` for one of `workers` workers. Workers that share
/// meter cells with others colour green from leases (`State::lease_meters`).
fn worker_replica(master: &Switch, workers: usize) -> Result<Switch, String> {
    let mut sw = master.replica().map_err(|e| e.to_string())?;
    sw.state.lease_meters = workers > 1;
    Ok(sw)
}

/// Commands on state the replicas share: applied once, through the master.
fn is_shared(cmd: &str) -> bool {
    cmd.starts_with("register_") || cmd.starts_with("meter_") && !cmd.contains("get")
}

impl Pool {
    /// Starts `io.len()` workers, each with a replica of `master` and its I/O.
    pub fn start(master: Switch, io: Vec<Box<dyn WorkerIo>>) -> Result<Pool, String> {
        let mut workers = Vec::new();
        let count = io.len();
        for (k, mut io) in io.into_iter().enumerate() {
            let mut sw = worker_replica(&master, count)?;
            let first = k == 0;
            let waker = io.waker();
            let (tx, rx) = mpsc::channel::<Msg>();
            let handle = std::thread::Builder::new()
                .name(format!("sluice-worker-{k}"))
                .spawn(move || {
                    loop {
                        // Control messages between batches: the packet path takes no lock.
                        loop {
                            match rx.try_recv() {
                                Ok(Msg::Apply(changes, ack)) => {
                                    for c in &changes {
                                        c(&mut sw, first);
                                    }
                                    let _ = ack.send(());
                                }
                                Ok(Msg::Replace(new, ack)) => {
                                    sw = *new;
                                    let _ = ack.send(());
                                }
                                Ok(Msg::Inject(port, frame)) => io.inject(&mut sw, port, &frame),
                                Ok(Msg::Port(number, iface, reply)) => {
                                    let r = match iface {
                                        Some(i) => io.add_port(number, &i),
                                        None => io.remove_port(number),
                                    };
                                    let _ = reply.send(r);
                                }
                                Ok(Msg::Snapshot(reply)) => {
                                    let _ = reply.send(CounterSnapshot::of(&sw));
                                }
                                Err(mpsc::TryRecvError::Empty) => break,
                                Err(mpsc::TryRecvError::Disconnected) => return sw,
                            }
                        }
                        if !io.run_batch(&mut sw) {
                            return sw;
                        }
                    }
                })
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
    pub fn snapshots(&self) -> Vec<CounterSnapshot> {
        let mut replies = Vec::new();
        for w in &self.workers {
            let (tx, rx) = mpsc::channel();
            if w.send(Msg::Snapshot(tx)) {
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
        let snaps = self.snapshots();
        merge_into(&mut self.master, &snaps);
    }

    /// When entries of tables with idle timeouts were last hit, over all
    /// workers (the latest hit wins): `(table, handle) -> instant`.
    pub fn last_hits(&mut self) -> std::collections::HashMap<(usize, u32), std::time::Instant> {
        self.flush();
        let hits: Vec<(usize, u32, std::time::Instant)> = if self.workers.is_empty() {
            last_hits(&self.master)
        } else {
            self.snapshots().into_iter().flat_map(|s| s.hits).collect()
        };
        let mut out = std::collections::HashMap::new();
        for (t, h, at) in hits {
            let e = out.entry((t, h)).or_insert(at);
            if at > *e {
                *e = at;
            }
        }
        out
    }

    /// Applies a change to the master now and queues it for the workers; it
    /// reaches them at the next [`Pool::flush`] (or read). The master's
    /// answer (an entry handle, an error) is returned. A change that fails on
    /// the master should not be queued: use [`Pool::try_change`].
    pub fn change<R>(&mut self, f: impl Fn(&mut Switch, bool) -> R + Send + Sync + 'static) -> R {
        let out = f(&mut self.master, true);
        if !self.workers.is_empty() {
            self.pending.push(Arc::new(move |sw: &mut Switch, first: bool| {
                f(sw, first);
            }));
        }
        out
    }

    /// Like [`Pool::change`], but only a change that succeeded on the master
    /// goes to the workers.
    pub fn try_change<T, E>(
        &mut self,
        f: impl Fn(&mut Switch, bool) -> Result<T, E> + Send + Sync + 'static,
    ) -> Result<T, E> {
        let out = f(&mut self.master, true)?;
        if !self.workers.is_empty() {
            self.pending.push(Arc::new(move |sw: &mut Switch, first: bool| {
                let _ = f(sw, first);
            }));
        }
        Ok(out)
    }

    /// Changes state the replicas share (registers, meters): applied once,
    /// through the master, after every queued change has landed (a queued
    /// `table_add` resets its entry's direct meter and must come first).
    pub fn change_shared<R>(&mut self, f: impl FnOnce(&mut Switch) -> R) -> R {
        self.flush();
        f(&mut self.master)
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
    pub fn read<R>(&mut self, f: impl FnOnce(&Switch) -> R) -> R {
        self.flush();
        self.merge_counters();
        f(&self.master)
    }

    /// The master switch, for reads that need no counters (program shape,
    /// names). Changes made through it would not reach the workers.
    pub fn master(&self) -> &Switch {
        &self.master
    }

    /// The master switch, mutable: for a pool without workers (tests,
    /// benchmarks), where the master is the data plane. With workers, a
    /// change made here would reach none of them.
    pub fn master_mut(&mut self) -> &mut Switch {
        &mut self.master
    }

    /// Replaces the program everywhere: the master becomes `sw` and every
    /// worker gets a replica, between two of its batches.
    pub fn replace(&mut self, sw: Switch) -> Result<(), String> {
        self.pending.clear();
        for rx in std::mem::take(&mut self.in_flight) {
            let _ = rx.recv();
        }
        let mut acks = Vec::new();
        for w in &self.workers {
            let r = worker_replica(&sw, self.workers.len())?;
            let (tx, rx) = mpsc::channel();
            if w.send(Msg::Replace(Box::new(r), tx)) {
                acks.push(rx);
            }
        }
        for rx in acks {
            let _ = rx.recv();
        }
        self.master = sw;
        Ok(())
    }

    /// Runs a frame through the pipeline of one worker (chosen by flow hash)
    /// as if it had arrived on `port`; what it emits leaves through that
    /// worker's ports. Returns false when no worker could take it.
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

    /// Runs a `simple_switch_CLI` command: reads see the merged counters; a
    /// change is in effect on every worker when this returns (each applies it
    /// between two batches and acknowledges).
    pub fn command(&mut self, line: &str) -> Result<String, CmdError> {
        self.commands(&[line]).pop().expect("one answer per command")
    }

    /// Runs several commands; the workers apply all the changes at once (one
    /// message and one acknowledgement per worker), in order.
    pub fn commands(&mut self, lines: &[&str]) -> Vec<Result<String, CmdError>> {
        let mut answers = Vec::with_capacity(lines.len());
        for line in lines {
            let cmd = line.split_whitespace().next().unwrap_or("");
            if is_read(cmd) {
                // Reads see every change made before them (the CLI's read commands take `&mut`).
                self.flush();
                self.merge_counters();
                answers.push(self.master.command(line));
                continue;
            }
            if is_shared(cmd) {
                answers.push(self.change_shared(|sw| sw.command(line)));
                continue;
            }
            let line = line.to_string();
            let split = if cmd == "counter_write" { Some(zero_counter_write(&line)) } else { None };
            answers.push(self.try_change(move |sw, first| match (&split, first) {
                // A written counter value lives in one worker's shard; the others start from zero.
                (Some(zero), false) => sw.command(zero),
                _ => sw.command(&line),
            }));
        }
        self.flush();
        answers
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
                if let Ok(sw) = h.join() {
                    snaps.push(CounterSnapshot::of(&sw));
                }
            }
        }
        if !self.workers.is_empty() {
            merge_into(&mut self.master, &snaps);
        }
        self.workers.clear();
    }

    /// Stops every worker and returns the master with the merged counters.
    pub fn finish(mut self) -> Switch {
        self.stop_workers();
        self.master
    }
}

/// `counter_write NAME INDEX PKTS BYTES` with both values zero.
fn zero_counter_write(line: &str) -> String {
    let t: Vec<&str> = line.split_whitespace().collect();
    if t.len() >= 5 {
        format!("{} {} {} 0 0", t[0], t[1], t[2])
    } else {
        line.to_string()
    }
}

fn merge_into(master: &mut Switch, snaps: &[CounterSnapshot]) {
    for (a, arr) in master.state.counters.iter_mut().enumerate() {
        for (i, c) in arr.iter_mut().enumerate() {
            *c = snaps.iter().fold((0, 0), |(p, b), s| {
                let (sp, sb) = s.counters.get(a).and_then(|x| x.get(i)).copied().unwrap_or((0, 0));
                (p + sp, b + sb)
            });
        }
    }
    for (t, table) in master.state.tables.iter_mut().enumerate() {
        let handles: Vec<u32> = table.entries().map(|(h, _)| h).collect();
        for h in handles {
            let (mut p, mut b) = (0, 0);
            for s in snaps {
                if let Some((_, sp, sb)) = s.direct.get(t).and_then(|d| d.iter().find(|(x, _, _)| *x == h)) {
                    p += sp;
                    b += sb;
                }
            }
            if let Some(e) = table.entry_by_handle_mut(h) {
                e.packets = p;
                e.bytes = b;
            }
        }
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
        assert_eq!(zero_counter_write("counter_write c 3 10 20"), "counter_write c 3 0 0");
        assert!(is_read("counter_read") && is_read("table_dump") && !is_read("table_add"));
        assert!(is_shared("register_write") && !is_shared("meter_get_rates") && !is_shared("counter_reset"));
    }
}
