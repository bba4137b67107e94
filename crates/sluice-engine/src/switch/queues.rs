//! The traffic manager between ingress and egress: bmv2 `simple_switch`'s
//! egress queues (`--priority-queues`, `set_queue_depth`, `set_queue_rate`).
//!
//! Contract. Reads: packets the replication stage sends toward egress, with
//! their egress port and `standard_metadata.priority` (PSA:
//! `class_of_service`, a class beyond the queues taken as class 0); the queue settings
//! (priorities per port, depths in packets, rates in packets per second).
//! Writes: the shared egress queues ([`EgressQueues`]), the queueing
//! metadata of each packet that leaves (v1model: `enq_timestamp` and
//! `deq_timedelta` in microseconds, `enq_qdepth` and `deq_qdepth` in packets
//! of the packet's own queue, as bmv2 reads `size(port, priority)`, and
//! `queueing_metadata.qid`, the queue's priority, where a program has it), the
//! drop count. Leaves: a packet whose priority is out of range, or whose
//! queue is full, is dropped and counted (bmv2 drops both); the others
//! leave in strict priority, paced by the rates. Without any rate, what a
//! batch queues leaves in that batch; with rates, a packet whose port's
//! queues are empty and whose rates allow it leaves at once, with its own
//! frame, and queued packets leave only from [`Switch::release_queued_at`]
//! (the data plane's `tick`, which the packet loop calls when
//! [`Switch::next_queue_departure_us`] comes), so a departure is never
//! credited to an unrelated input frame.
//! No queue exists until a setting asks for one: the fast paths (the fused
//! batch function, egress on the borrowed payload) run only without one.

use std::collections::VecDeque;

use sluice_dataplane::egress_queues::{EgressQueues, Enqueue, Rate};

use super::replication::EgressItem;
use super::Switch;

/// What the traffic manager keeps besides its queues.
pub(crate) struct TmState {
    /// Priority queues per port (`--priority-queues`; 1 by default).
    pub(crate) priority_queues: usize,
    /// Workers whose queues feed the same links: each replica's queue
    /// rates are its share (see `EgressQueues::set_share`).
    pub(crate) share: usize,
    /// Every worker's egress queues summed (`merge_counters`, for the
    /// metrics): `(port, queue, counters, packets waiting)`.
    pub(crate) totals: Vec<(u32, usize, sluice_dataplane::egress_queues::QueueStats, usize)>,
    /// Packets that passed an idle shaped port at once (reused from round to round).
    pub(super) passed: Vec<EgressItem>,
}

impl Default for TmState {
    fn default() -> TmState {
        TmState { priority_queues: 1, share: 1, totals: Vec::new(), passed: Vec::new() }
    }
}

impl Switch {
    fn queues_mut(&mut self) -> &mut EgressQueues<EgressItem> {
        let (n, share, now) = (self.tm_state.priority_queues, self.tm_state.share, self.now * 1000);
        self.tm.get_or_insert_with(|| {
            let mut tm = EgressQueues::new(n);
            tm.set_share(share, now);
            Box::new(tm)
        })
    }

    /// This copy is one of `workers` whose packets leave through the same
    /// ports: its queues run at 1 / `workers` of every rate, so the rates
    /// hold for the switch as a whole when traffic spreads evenly.
    pub fn set_queue_share(&mut self, workers: usize) {
        self.tm_state.share = workers.max(1);
        let now = self.now * 1000;
        if let Some(tm) = self.tm.as_mut() {
            tm.set_share(workers, now);
        }
    }

    /// Sets the number of priority queues per port (bmv2's
    /// `--priority-queues`; at least 1). More than one makes the traffic
    /// manager; packets already queued are dropped (a start-up setting).
    pub fn set_priority_queues(&mut self, n: usize) {
        self.tm_state.priority_queues = n.max(1);
        if let Some(old) = self.tm.take() {
            self.stats.dropped += old.len() as u64;
        }
        if self.tm_state.priority_queues > 1 {
            self.queues_mut();
        }
    }

    /// Takes `from`'s queue settings (queues per port, depths, rates): they
    /// belong to the switch, not to its program, and stay when another
    /// program replaces it, as bmv2 keeps them. Its queued packets are not
    /// taken.
    pub fn keep_queue_settings(&mut self, from: &Switch) {
        self.tm_state.priority_queues = from.tm_state.priority_queues;
        self.tm_state.share = from.tm_state.share;
        self.tm = from.tm.as_ref().map(|t| Box::new(t.settings_copy(self.now * 1000)));
    }

    /// Priority queues per port.
    pub fn priority_queues(&self) -> usize {
        self.tm_state.priority_queues
    }

    /// Sets the depth in packets of `port`'s queue of `priority` (`None`:
    /// all of the port's; `port` `None`: every port). False when the port
    /// (above 511) or the priority is out of range.
    pub fn set_queue_depth(&mut self, port: Option<u32>, priority: Option<usize>, depth: usize) -> bool {
        self.queues_mut().set_depth(port, priority, depth)
    }

    /// Sets the rate in packets per second of `port`'s queue of `priority`
    /// (as [`Switch::set_queue_depth`]); 0 removes the limit.
    pub fn set_queue_rate(&mut self, port: Option<u32>, priority: Option<usize>, pps: u64) -> bool {
        // The switch's time of its last batch: the clock its queues run on.
        let now = self.now * 1000;
        let rate = (pps > 0).then_some(Rate::PacketsPerSecond(pps as f64));
        self.queues_mut().set_queue_rate(port, priority, rate, now)
    }

    /// This copy's egress queues: `(port, queue, counters, packets waiting)`.
    pub fn queue_stats(&self) -> Vec<(u32, usize, sluice_dataplane::egress_queues::QueueStats, usize)> {
        self.tm.as_ref().map(|t| t.all_stats()).unwrap_or_default()
    }

    /// Packets waiting in the egress queues.
    pub fn queued_packets(&self) -> usize {
        self.tm.as_ref().map_or(0, |t| t.len())
    }

    /// Packets dropped so far at `port`'s full queue of `priority`.
    pub fn queue_drops(&self, port: u32, priority: usize) -> u64 {
        self.tm.as_ref().map_or(0, |t| t.stats(port, priority).dropped)
    }

    /// Moves what waits in `egress` into the queues, then (without rates,
    /// or from `release_queued_at`) back what may leave now, with its
    /// queueing metadata set.
    pub(super) fn through_queues(&mut self, egress: &mut VecDeque<EgressItem>) {
        let Some(mut tm) = self.tm.take() else { return };
        let now_ns = self.now * 1000;
        // Packets that pass an idle port at once (its rates allow them).
        let mut passed = std::mem::take(&mut self.tm_state.passed);
        while let Some(mut e) = egress.pop_front() {
            let (mut priority, psa) = match &self.plan.psa {
                Some(f) => (self.get_std(&e.phv, f.eg_cos) as usize, true),
                None => (self.get_std(&e.phv, self.plan.std.priority) as usize, false),
            };
            if psa && priority >= tm.priorities() {
                self.trace_note(|| format!("Class of service {priority} has no queue, using class 0"));
                priority = 0;
            }
            let dropped = if priority >= tm.priorities() {
                self.trace_note(|| format!("Priority {priority} out of range, dropping packet"));
                Some(e)
            } else if tm.shaping() && !self.tm_release && tm.try_pass(e.port, priority, e.meta.len_reg, now_ns) {
                // Leaves with the frame it came from, as if queued and sent at once.
                self.set_queue_metadata(&mut e, now_ns, now_ns, 0, 0, priority);
                passed.push(e);
                None
            } else {
                let (port, bytes) = (e.port, e.meta.len_reg);
                match tm.enqueue(port, priority, bytes, e, now_ns) {
                    Enqueue::Queued { .. } => None,
                    Enqueue::Dropped(e) => {
                        self.trace_note(|| format!("Egress queue {priority} of port {port} full, dropping packet"));
                        Some(e)
                    }
                }
            };
            if let Some(e) = dropped {
                self.stats.dropped += 1;
                self.phv_pool.push(e.phv);
                self.buf_pool.push(e.payload);
            }
        }
        egress.extend(passed.drain(..));
        self.tm_state.passed = passed;
        if !tm.shaping() || self.tm_release {
            tm.dequeue(now_ns, usize::MAX, |d| {
                let mut e = d.item;
                self.set_queue_metadata(&mut e, d.enq_ns, d.deq_ns, d.enq_depth, d.deq_depth, d.queue);
                egress.push_back(e);
            });
        }
        self.tm = Some(tm);
    }

    /// Egress's queueing metadata (bmv2's units: µs and packets).
    fn set_queue_metadata(&self, e: &mut EgressItem, enq_ns: u64, deq_ns: u64, enq: u32, deq: u32, queue: usize) {
        let std = &self.plan.std;
        self.set_std(&mut e.phv, std.enq_timestamp, u128::from(enq_ns / 1000));
        self.set_std(&mut e.phv, std.enq_qdepth, u128::from(enq));
        self.set_std(&mut e.phv, std.deq_timedelta, u128::from((deq_ns - enq_ns) / 1000));
        self.set_std(&mut e.phv, std.deq_qdepth, u128::from(deq));
        self.set_std(&mut e.phv, std.qid, queue as u128);
    }

    /// Lets every queued packet whose time has come (at `now_us` of this
    /// switch's clock) leave and run egress; `emit(port, bytes)` gets what
    /// is sent.
    pub fn release_queued_at(&mut self, now_us: u64, emit: &mut dyn FnMut(u32, &[u8])) {
        if self.tm.as_ref().is_none_or(|t| t.is_empty()) {
            return;
        }
        self.now = now_us;
        self.refresh_views();
        self.tm_release = true;
        self.with_queues(emit, |_, _, _, _| {});
        self.tm_release = false;
    }

    /// When (µs of this switch's clock) the next queued packet may leave:
    /// `None` when none waits, or when packets leave with the batch that
    /// queued them (no rates).
    pub fn next_queue_departure_us(&self) -> Option<u64> {
        let tm = self.tm.as_ref()?;
        if !tm.shaping() {
            return None;
        }
        tm.next_departure(self.now_us() * 1000).map(|ns| ns.div_ceil(1000))
    }
}
