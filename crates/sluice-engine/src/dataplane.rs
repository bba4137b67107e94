//! The P4 switch (v1model and PSA) as a [`DataPlane`]: what the packet loop, the workers,
//! the replay and the bench drive (see `sluice_dataplane`).
//!
//! Replicas: a worker's replica has its own tables, counters and pools and
//! shares registers and meters with the other replicas (`crate::registers`,
//! `crate::meters`); with several workers its meters colour green from
//! leased tokens (`meters::Leases::on`). Counters merge by summing; idle-timeout hits by
//! taking the latest.

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use sluice_dataplane::egress_queues::QueueStats;
use sluice_dataplane::{DataPlane, Metrics, Profile, Stats, TraceOut};

use crate::state::Digest;
use crate::switch::Switch;

/// Cells of a counter array listed one by one in the metrics; a longer
/// array is given as its sum.
pub const METRIC_CELLS: usize = 256;

/// Every counter of one replica, for merging.
#[derive(Debug, Clone, Default)]
pub struct CounterSnapshot {
    /// Indirect counter arrays: `(packets, bytes)` per cell.
    pub counters: Vec<Vec<(u64, u64)>>,
    /// Per table: `(entry handle, packets, bytes)` of entries that counted something.
    pub direct: Vec<Vec<(u32, u64, u64)>>,
    /// Tables with idle timeouts: `(table, entry handle, last hit)` of entries hit since added.
    pub hits: Vec<(usize, u32, Instant)>,
    /// Per table, `[hits, misses]` of its lookups.
    pub lookups: Vec<[u64; 2]>,
    /// The switch's own counters.
    pub stats: Stats,
    /// Egress queues: `(port, queue, counters, packets waiting)`.
    pub queues: Vec<(u32, usize, QueueStats, usize)>,
}

impl CounterSnapshot {
    /// The counters of `sw`.
    pub fn of(sw: &Switch) -> CounterSnapshot {
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
            lookups: sw.state.lookups.clone(),
            stats: sw.stats,
            queues: sw.queue_stats(),
        }
    }
}

/// When each entry of a table with idle timeouts was last hit (entries not hit since added are left out).
pub fn last_hits(sw: &Switch) -> Vec<(usize, u32, Instant)> {
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

/// The latest hit of every entry over several replicas: `(table, handle) -> instant`.
pub fn latest_hits(snaps: &[CounterSnapshot]) -> HashMap<(usize, u32), Instant> {
    let mut out = HashMap::new();
    for &(t, h, at) in snaps.iter().flat_map(|s| &s.hits) {
        let e = out.entry((t, h)).or_insert(at);
        if at > *e {
            *e = at;
        }
    }
    out
}

impl DataPlane for Switch {
    type Notification = Digest;
    type Counters = CounterSnapshot;

    fn process_batch<E: FnMut(usize, u32, &[u8]) + ?Sized>(&mut self, port: u32, frames: &[&[u8]], emit: &mut E) {
        Switch::process_batch(self, port, frames, emit);
    }

    fn replica(&self, workers: usize) -> Result<Switch, String> {
        let mut sw = Switch::replica(self).map_err(|e| e.to_string())?;
        // A replica counts its own lookups from zero.
        sw.state.lookups.iter_mut().for_each(|c| *c = [0; 2]);
        // Workers that share meter cells with others colour green from leases.
        sw.state.meter_leases.on = workers > 1;
        sw.clock.set(self.clock.on());
        sw.set_queue_share(workers);
        Ok(sw)
    }

    fn stats(&self) -> Stats {
        self.stats
    }

    /// Queued packets whose time has come leave (egress queues with rates).
    fn tick<E: FnMut(u32, &[u8]) + ?Sized>(&mut self, _now_ns: u64, emit: &mut E) {
        let now = self.clock_us();
        self.release_queued_at(now, &mut |p, d| emit(p, d));
    }

    /// Until the next queued packet may leave, when queues with rates hold some.
    fn tick_interval(&self) -> Option<std::time::Duration> {
        let at = self.next_queue_departure_us()?;
        Some(std::time::Duration::from_micros(at.saturating_sub(self.clock_us())))
    }

    fn drain_notifications(&mut self, to: &mut dyn FnMut(Digest)) {
        self.drain_digests(to);
    }

    fn release_memory(&mut self) {
        Switch::release_memory(self);
    }

    fn set_tracing(&mut self, on: bool) {
        if on != self.tracing() {
            self.set_trace(on);
        }
    }

    fn drain_trace(&mut self, out: &mut dyn TraceOut) {
        let Some(t) = self.trace.as_mut() else { return };
        if t.is_empty() {
            return;
        }
        if let Some(min) = out.log_level() {
            t.render_log(&self.plan, min, &mut |l, s| out.log(l, s));
        }
        if let Some(device) = out.events() {
            t.encode_events(&self.plan, device, &mut |m| out.event(m));
        }
        t.clear();
    }

    fn counters(&self) -> CounterSnapshot {
        CounterSnapshot::of(self)
    }

    fn merge_counters(&mut self, snaps: &[CounterSnapshot]) {
        for (a, arr) in self.state.counters.iter_mut().enumerate() {
            for (i, c) in arr.iter_mut().enumerate() {
                *c = snaps.iter().fold((0, 0), |(p, b), s| {
                    let (sp, sb) = s.counters.get(a).and_then(|x| x.get(i)).copied().unwrap_or((0, 0));
                    (p + sp, b + sb)
                });
            }
        }
        for (t, table) in self.state.tables.iter_mut().enumerate() {
            // Every worker's counts of each entry, summed (entries no
            // worker counted read zero).
            let mut sums: HashMap<u32, (u64, u64)> = HashMap::new();
            for (h, p, b) in snaps.iter().filter_map(|s| s.direct.get(t)).flatten() {
                let e = sums.entry(*h).or_default();
                e.0 += p;
                e.1 += b;
            }
            let handles: Vec<u32> = table.entries().map(|(h, _)| h).collect();
            for h in handles {
                let (p, b) = sums.get(&h).copied().unwrap_or_default();
                if let Some(e) = table.entry_by_handle_mut(h) {
                    e.packets = p;
                    e.bytes = b;
                }
            }
        }
        for (t, c) in self.state.lookups.iter_mut().enumerate() {
            *c = snaps.iter().filter_map(|s| s.lookups.get(t)).fold([0; 2], |a, l| [a[0] + l[0], a[1] + l[1]]);
        }
        self.stats = snaps.iter().fold(Stats::default(), |a, s| Stats {
            received: a.received + s.stats.received,
            transmitted: a.transmitted + s.stats.transmitted,
            dropped: a.dropped + s.stats.dropped,
        });
        let mut queues: BTreeMap<(u32, usize), (QueueStats, usize)> = BTreeMap::new();
        for &(port, queue, st, depth) in snaps.iter().flat_map(|s| &s.queues) {
            let e = queues.entry((port, queue)).or_default();
            e.0.enqueued += st.enqueued;
            e.0.dequeued += st.dequeued;
            e.0.dequeued_bytes += st.dequeued_bytes;
            e.0.dropped += st.dropped;
            e.1 += depth;
        }
        self.tm_state.totals = queues.into_iter().map(|((p, q), (st, d))| (p, q, st, d)).collect();
    }

    /// Per table its entries, its lookups by result (and, for a table with
    /// direct counters, what they counted); per counter array what each cell counted (arrays of
    /// more than [`METRIC_CELLS`] cells: their sum, as cell `all`); the
    /// packets the program dropped.
    fn metrics(&self, to: &mut Metrics) {
        for &(port, queue, st, depth) in &self.tm_state.totals {
            let (port, queue) = (port.to_string(), queue.to_string());
            let l = [("port", port.as_str()), ("queue", queue.as_str())];
            to.gauge("sluice_egress_queue_depth_packets", "Packets waiting in an egress queue.", &l, depth as f64);
            to.counter("sluice_egress_queue_sent_packets_total", "Packets that left an egress queue.", &l, st.dequeued);
            to.counter(
                "sluice_egress_queue_sent_bytes_total",
                "Bytes that left an egress queue.",
                &l,
                st.dequeued_bytes,
            );
            to.counter(
                "sluice_egress_queue_dropped_packets_total",
                "Packets dropped at a full egress queue.",
                &l,
                st.dropped,
            );
        }
        let plan = &self.plan;
        for (t, tp) in plan.tables.iter().enumerate() {
            // Tables p4c made of straight-line code (no key, one action) are no one's tables.
            if tp.key.is_empty() && tp.inline_default.is_some() {
                continue;
            }
            let l = [("table", tp.name.as_str())];
            let ts = &self.state.tables[t];
            to.gauge("sluice_p4_table_entries", "Entries in a P4 table.", &l, ts.entries().count() as f64);
            let [hits, misses] = self.state.lookups[t];
            let help = "Lookups in a P4 table, by result: a hit of an entry, or a miss (the default action).";
            to.counter("sluice_p4_table_lookups_total", help, &[("table", tp.name.as_str()), ("result", "hit")], hits);
            to.counter(
                "sluice_p4_table_lookups_total",
                help,
                &[("table", tp.name.as_str()), ("result", "miss")],
                misses,
            );
            if tp.with_counters {
                let (p, b) = ts.entries().fold((0, 0), |(p, b), (_, e)| (p + e.packets, b + e.bytes));
                to.counter(
                    "sluice_p4_table_counter_packets_total",
                    "What a table's direct counters counted, summed over its entries.",
                    &l,
                    p,
                );
                to.counter(
                    "sluice_p4_table_counter_bytes_total",
                    "What a table's direct counters counted, summed over its entries.",
                    &l,
                    b,
                );
            }
        }
        for (c, cp) in plan.counters.iter().enumerate().filter(|(_, cp)| !cp.is_direct) {
            let cells = self.state.counters.get(c).map_or(&[][..], Vec::as_slice);
            let help = "What a P4 counter array's cell counted (cell all: the sum of an array too long to list).";
            if cells.len() <= METRIC_CELLS {
                for (i, (p, b)) in cells.iter().enumerate() {
                    let i = i.to_string();
                    let l = [("counter", cp.name.as_str()), ("index", i.as_str())];
                    to.counter("sluice_p4_counter_packets_total", help, &l, *p);
                    to.counter("sluice_p4_counter_bytes_total", help, &l, *b);
                }
            } else {
                let (p, b) = cells.iter().fold((0, 0), |(p, b), c| (p + c.0, b + c.1));
                let l = [("counter", cp.name.as_str()), ("index", "all")];
                to.counter("sluice_p4_counter_packets_total", help, &l, p);
                to.counter("sluice_p4_counter_bytes_total", help, &l, b);
            }
        }
        to.counter(
            "sluice_p4_dropped_packets_total",
            "Packets (and copies) the P4 program dropped.",
            &[],
            self.stats.dropped,
        );
    }

    fn set_profiling(&mut self, on: bool) {
        self.clock.set(on);
    }

    fn add_profile(&self, to: &mut Profile) {
        self.clock.add_to(to);
    }
}
