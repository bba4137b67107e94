//! Counters: what a replica counts ([`Counters`]), folding the counts of
//! recorded walks, a replica's whole counts for the control plane,
//! merging the replicas' counts, and the metrics.
//!
//! Contract: reads the counts kept elsewhere to be cheap on the packet
//! path (per entry in the tables, pending in the flow cache, dense ports,
//! groups' forwarding steps, meters); writes [`Counters`] (which the
//! packet path also counts into directly: tables, groups, packet-ins
//! dropped, cache hits and misses). No packet passes through here.

use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};

use sluice_dataplane::Metrics;

use super::{OfSwitch, QueueCounts, N_TABLES};
use crate::cache::Count;
use crate::table::FlowTable;

/// Hashes the integer keys of the per-packet counters: one multiply
/// (flow uids and group ids are not chosen by an adversary who could
/// flood a bucket: the switch picks uids, the controller group ids).
#[derive(Debug, Clone, Copy, Default)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29);
    }

    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }
}

/// A map keyed by flow uid or group id (see [`IdHasher`]).
pub type IdMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;

/// A group's (packets, bytes, per bucket (packets, bytes)).
pub type GroupCounts = (u64, u64, Vec<(u64, u64)>);

/// Adds one replica's counts of a group or meter (totals, and per bucket
/// or band) to `into`.
fn add_counts(into: &mut GroupCounts, from: &GroupCounts) {
    into.0 += from.0;
    into.1 += from.1;
    if into.2.len() < from.2.len() {
        into.2.resize(from.2.len(), (0, 0));
    }
    for (i, b) in from.2.iter().enumerate() {
        into.2[i].0 += b.0;
        into.2[i].1 += b.1;
    }
}

/// Per-replica counters (summed over replicas for the agent).
#[derive(Debug, Clone, Default)]
pub struct Counters {
    /// Flow uid → (packets, bytes).
    pub flows: IdMap<u64, (u64, u64)>,
    /// Per table: (lookups, matches).
    pub tables: Vec<(u64, u64)>,
    /// Port → (rx packets, rx bytes, tx packets, tx bytes, tx dropped).
    pub ports: IdMap<u32, [u64; 5]>,
    /// Group → its counts.
    pub groups: IdMap<u32, GroupCounts>,
    /// Packet-ins dropped because the agent's queue was full.
    pub packet_ins_dropped: u64,
    /// Frames sent to a port the switch does not have (LOCAL without a
    /// local interface).
    pub unsupported_output: u64,
    /// Meter → (packets, bytes, per band (packets, bytes)).
    pub meters: BTreeMap<u32, GroupCounts>,
    /// Packets the flow cache served, and those that walked the tables.
    pub cache_hits: u64,
    pub cache_misses: u64,
    /// Packets forwarded by the NORMAL port while the switch stood alone
    /// (fail mode standalone without a controller): neither cached nor walked.
    pub standalone: u64,
    /// (port, queue id) → the queue's counts.
    pub queues: BTreeMap<(u32, u32), QueueCounts>,
}

/// Adds `p` packets and `b` bytes of what a recorded walk counts to the
/// table and group counters in `to` (not the flow entries').
fn add_counts_of(to: &mut Counters, counts: &[Count], p: u64, b: u64) {
    for c in counts {
        match c {
            Count::Hit { table, .. } => {
                let t = &mut to.tables[usize::from(*table)];
                t.0 += p;
                t.1 += p;
            }
            Count::Miss { table } => to.tables[usize::from(*table)].0 += p,
            Count::Group { id, n, buckets } => count_group(to, *id, *n, p, b, buckets.iter().copied()),
        }
    }
}

/// Counts `p` packets of `b` bytes through group `id` (of `n` buckets) and
/// its `buckets`.
pub(super) fn count_group(to: &mut Counters, id: u32, n: usize, p: u64, b: u64, buckets: impl Iterator<Item = usize>) {
    let c = to.groups.entry(id).or_insert_with(|| (0, 0, Vec::new()));
    c.0 += p;
    c.1 += b;
    if c.2.len() < n {
        c.2.resize(n, (0, 0));
    }
    for i in buckets {
        c.2[i].0 += p;
        c.2[i].1 += b;
    }
}

/// Folds `p` packets and `b` bytes of what a recorded walk counts into the
/// counters and the flow entries it hit.
pub(super) fn fold_counts(tables: &mut [FlowTable], to: &mut Counters, counts: &[Count], p: u64, b: u64) {
    add_counts_of(to, counts, p, b);
    for c in counts {
        if let Count::Hit { table, id } = c {
            tables[usize::from(*table)].count(*id, p, b);
        }
    }
}

impl OfSwitch {
    /// Every flow entry's packets and bytes (settled counts of replaced
    /// entries, what this copy's tables matched, and what its flow cache
    /// replayed).
    pub fn flow_counts(&self) -> IdMap<u64, (u64, u64)> {
        let mut all = self.counters.flows.clone();
        for t in &self.tables {
            for (uid, (p, b)) in t.counts() {
                if p != 0 || b != 0 {
                    let c = all.entry(uid).or_insert((0, 0));
                    c.0 += p;
                    c.1 += b;
                }
            }
        }
        self.cache.pending(|counts, p, b| {
            for c in counts {
                if let Count::Hit { table, id } = c {
                    let e = all.entry(self.tables[usize::from(*table)].hot_ref(*id).uid).or_insert((0, 0));
                    e.0 += p;
                    e.1 += b;
                }
            }
        });
        all
    }

    /// This replica's counters as `DataPlane::counters` gives them: with
    /// what its tables, flow cache, ports, groups and meters hold and
    /// have not settled into `counters` yet.
    pub(super) fn replica_counts(&self) -> Counters {
        let mut c = self.counters.clone();
        c.flows = self.flow_counts();
        // What the flow cache replayed and has not folded yet (flows above).
        self.cache.pending(|counts, p, b| add_counts_of(&mut c, counts, p, b));
        for (n, pc) in self.port_counts.iter().enumerate().filter(|(_, pc)| **pc != [0; 5]) {
            let e = c.ports.entry(n as u32).or_default();
            for i in 0..5 {
                e[i] += pc[i];
            }
        }
        for (id, g) in self.groups.iter().filter(|(_, g)| g.forwarded != (0, 0)) {
            let (p, b) = g.forwarded;
            count_group(&mut c, id, 1, p, b, 0..1);
        }
        c.meters =
            self.meters.meters.iter().map(|(id, m)| (*id, (m.packets, m.bytes, m.band_counts.clone()))).collect();
        if let Some(q) = self.queues() {
            c.queues = q.configs().iter().map(|c| (c.port, c.queue_id)).zip(q.counts()).collect();
        }
        c
    }

    /// Sets the counters to the sum of the replicas' (`DataPlane::merge_counters`).
    pub(super) fn merge_counts(&mut self, replicas: &[Counters]) {
        let mut sum = Counters { tables: vec![(0, 0); N_TABLES], ..Counters::default() };
        for r in replicas {
            for (k, v) in &r.flows {
                let e = sum.flows.entry(*k).or_insert((0, 0));
                e.0 += v.0;
                e.1 += v.1;
            }
            for (i, v) in r.tables.iter().enumerate() {
                sum.tables[i].0 += v.0;
                sum.tables[i].1 += v.1;
            }
            for (k, v) in &r.ports {
                let e = sum.ports.entry(*k).or_default();
                for i in 0..5 {
                    e[i] += v[i];
                }
            }
            for (k, v) in &r.groups {
                add_counts(sum.groups.entry(*k).or_default(), v);
            }
            sum.packet_ins_dropped += r.packet_ins_dropped;
            sum.cache_hits += r.cache_hits;
            sum.cache_misses += r.cache_misses;
            sum.standalone += r.standalone;
            sum.unsupported_output += r.unsupported_output;
            for (k, v) in &r.meters {
                add_counts(sum.meters.entry(*k).or_default(), v);
            }
            for (k, v) in &r.queues {
                let e = sum.queues.entry(*k).or_default();
                e.tx_packets += v.tx_packets;
                e.tx_bytes += v.tx_bytes;
                e.tx_errors += v.tx_errors;
            }
        }
        self.counters = sum;
    }

    /// The metrics (`DataPlane::metrics`, see there).
    pub(super) fn write_metrics(&self, to: &mut Metrics) {
        for (i, t) in self.tables.iter().enumerate() {
            let (lookups, matches) = self.counters.tables.get(i).copied().unwrap_or_default();
            if t.is_empty() && lookups == 0 {
                continue;
            }
            let id = i.to_string();
            let l = [("table", id.as_str())];
            to.gauge("sluice_openflow_table_flows", "Flow entries in an OpenFlow table.", &l, t.len() as f64);
            to.counter("sluice_openflow_table_lookups_total", "Packets looked up in an OpenFlow table.", &l, lookups);
            to.counter(
                "sluice_openflow_table_matches_total",
                "Packets that matched a flow entry of an OpenFlow table.",
                &l,
                matches,
            );
        }
        to.gauge("sluice_openflow_groups", "Groups in the group table.", &[], self.groups.len() as f64);
        to.gauge("sluice_openflow_meters", "Meters in the meter table.", &[], self.meters.meters.len() as f64);
        let cache = "Packets the flow cache served (hit) or that walked the tables (miss).";
        to.counter("sluice_openflow_flow_cache_total", cache, &[("result", "hit")], self.counters.cache_hits);
        to.counter("sluice_openflow_flow_cache_total", cache, &[("result", "miss")], self.counters.cache_misses);
        for ((port, queue), c) in &self.counters.queues {
            let (port, queue) = (port.to_string(), queue.to_string());
            let l = [("port", port.as_str()), ("queue", queue.as_str())];
            to.counter("sluice_openflow_queue_tx_packets_total", "Packets sent by a port queue.", &l, c.tx_packets);
            to.counter("sluice_openflow_queue_tx_bytes_total", "Bytes sent by a port queue.", &l, c.tx_bytes);
            to.counter(
                "sluice_openflow_queue_dropped_packets_total",
                "Packets a full port queue dropped.",
                &l,
                c.tx_errors,
            );
        }
        to.counter(
            "sluice_openflow_packet_ins_dropped_total",
            "Packet-ins dropped because the agent's queue was full.",
            &[],
            self.counters.packet_ins_dropped,
        );
    }
}
