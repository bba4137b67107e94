//! Groups: the group table ([`Groups`], ids below `DENSE_GROUPS` in a
//! vector) and running a group on a packet.
//!
//! Contract: reads the group table, the ports' liveness (fast-failover
//! buckets) and the packet's fields (a select group's hash); writes the
//! group and bucket counters and the walk being recorded (the buckets
//! run; a select group makes the walk one the cache does not keep). Each
//! bucket chosen runs its actions (`actions.rs`) on its own copy of the
//! packet, and the packet leaves by those actions' outputs. Groups chain
//! at most `MAX_GROUP_DEPTH` deep.

use std::collections::BTreeMap;

use sluice_openflow::{port, Bucket};

use super::counters::count_group;
use super::pipeline::Pkt;
use super::OfSwitch;
use crate::cache::{Count, Op};

/// How deep groups may chain (a group's bucket naming a group).
const MAX_GROUP_DEPTH: usize = 8;

/// A group entry. While a packet runs its buckets they are taken out of
/// it and put back after (no copy, no reference count per packet).
#[derive(Debug, Clone)]
pub struct Group {
    pub typ: u8,
    pub buckets: Vec<Bucket>,
    /// What its one bucket amounts to when that is a forwarding step
    /// (an indirect group or an all group of one bucket that sets MACs,
    /// decrements the TTL and outputs: a next hop), run without the
    /// bucket's action list at the end of a walk.
    pub forward: Option<crate::cache::Forward>,
    /// Packets and bytes `forward` ran for (this replica's; folded into
    /// the group's counters and its one bucket's by `DataPlane::counters`):
    /// counted here, the entry the walk already reads, rather than in
    /// `Counters::groups`.
    pub forwarded: (u64, u64),
}

impl Group {
    /// A group of type `typ` with these buckets.
    pub fn new(typ: u8, buckets: Vec<Bucket>) -> Group {
        let one = matches!(typ, sluice_openflow::group_type::INDIRECT | sluice_openflow::group_type::ALL)
            && buckets.len() == 1;
        let forward = buckets.first().filter(|_| one).and_then(|b| crate::cache::Forward::of_actions(&b.actions));
        Group { typ, buckets, forward, forwarded: (0, 0) }
    }
}

/// Group ids below this are kept in a vector indexed by id (what
/// controllers pick: small numbers), read with one load per packet;
/// others in a map.
const DENSE_GROUPS: u32 = 4096;

/// The group table, iterated in id order.
#[derive(Debug, Clone, Default)]
pub struct Groups {
    dense: Vec<Option<Group>>,
    sparse: BTreeMap<u32, Group>,
}

impl Groups {
    #[inline]
    pub fn get(&self, id: &u32) -> Option<&Group> {
        match self.dense.get(*id as usize) {
            Some(g) => g.as_ref(),
            None if *id < DENSE_GROUPS => None,
            None => self.sparse.get(id),
        }
    }

    #[inline]
    pub fn get_mut(&mut self, id: &u32) -> Option<&mut Group> {
        match self.dense.get_mut(*id as usize) {
            Some(g) => g.as_mut(),
            None if *id < DENSE_GROUPS => None,
            None => self.sparse.get_mut(id),
        }
    }

    pub fn contains_key(&self, id: &u32) -> bool {
        self.get(id).is_some()
    }

    /// How many groups there are.
    pub fn len(&self) -> usize {
        self.dense.iter().filter(|g| g.is_some()).count() + self.sparse.len()
    }

    /// Adds or replaces group `id`, giving back the one it replaces.
    pub fn insert(&mut self, id: u32, g: Group) -> Option<Group> {
        if id < DENSE_GROUPS {
            let at = id as usize;
            if self.dense.len() <= at {
                self.dense.resize_with(at + 1, || None);
            }
            self.dense[at].replace(g)
        } else {
            self.sparse.insert(id, g)
        }
    }

    pub fn remove(&mut self, id: &u32) -> Option<Group> {
        match self.dense.get_mut(*id as usize) {
            Some(g) => g.take(),
            None => self.sparse.remove(id),
        }
    }

    /// The groups in id order.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &Group)> + '_ {
        let dense = self.dense.iter().enumerate().filter_map(|(i, g)| Some((i as u32, g.as_ref()?)));
        dense.chain(self.sparse.iter().map(|(id, g)| (*id, g)))
    }

    /// The group ids in order.
    pub fn keys(&self) -> impl Iterator<Item = u32> + '_ {
        self.iter().map(|(id, _)| id)
    }

    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut Group> + '_ {
        self.dense.iter_mut().flatten().chain(self.sparse.values_mut())
    }

    pub fn is_empty(&self) -> bool {
        self.iter().next().is_none()
    }
}

impl OfSwitch {
    /// Runs group `id` on `pkt`; `(table_id, cookie)` are the flow entry's
    /// that sent the packet there (for packet-ins from its buckets).
    pub(super) fn group<E: FnMut(usize, u32, &[u8]) + ?Sized>(
        &mut self,
        idx: usize,
        pkt: &mut Pkt,
        id: u32,
        (table_id, cookie): (u8, u64),
        depth: usize,
        emit: &mut E,
    ) {
        if depth >= MAX_GROUP_DEPTH {
            return;
        }
        let Some(g) = self.groups.get_mut(&id) else { return };
        // Taken out while they run (groups change only between batches;
        // a group's buckets never lead back to it: refused as a loop).
        let (typ, buckets) = (g.typ, std::mem::take(&mut g.buckets));
        let n = buckets.len();
        // The buckets that run: always a range of them.
        let chosen = match typ {
            sluice_openflow::group_type::ALL => 0..n,
            sluice_openflow::group_type::INDIRECT => 0..n.min(1),
            sluice_openflow::group_type::FF => match buckets.iter().position(|b| self.bucket_live(b, depth)) {
                Some(i) => i..i + 1,
                None => 0..0,
            },
            _ => {
                // The bucket depends on fields outside the cache's key.
                self.uncacheable();
                pkt.refresh();
                let live = |i: usize| buckets[i].weight > 0 && self.bucket_live(&buckets[i], depth);
                let total: u64 = (0..n).filter(|&i| live(i)).map(|i| u64::from(buckets[i].weight)).sum();
                if total == 0 {
                    0..0
                } else {
                    // The flow's addresses and ports pick the bucket (one flow,
                    // one bucket): MACs, ethertype, VLAN; IP protocol, IPv4
                    // addresses, ports, ICMP type; IPv6 addresses. Not DSCP
                    // and ECN, which may change within a flow.
                    let f = &pkt.full;
                    let mut k = [0u8; 64];
                    k[..17].copy_from_slice(&f[16..33]);
                    k[17..32].copy_from_slice(&f[35..50]);
                    k[32..].copy_from_slice(&f[64..96]);
                    let h = sluice_hash::xxh64(&k, 0) % total;
                    let mut acc = 0;
                    match (0..n).filter(|&i| live(i)).find(|&i| {
                        acc += u64::from(buckets[i].weight);
                        h < acc
                    }) {
                        Some(i) => i..i + 1,
                        None => 0..0,
                    }
                }
            }
        };
        let len = pkt.buf.len() as u64;
        count_group(&mut self.counters, id, n, 1, len, chosen.clone());
        if let Some(r) = &mut self.rec {
            r.counts.push(Count::Group { id, n, buckets: chosen.clone().collect() });
        }
        let mut runs = Vec::new();
        for i in chosen {
            let saved = self.rec.as_mut().map(|r| {
                r.stack.push(Vec::new());
                std::mem::replace(&mut r.apply, false)
            });
            // Each bucket runs on its own copy of the packet.
            let mut copy = self.copy_of(pkt);
            let ran = self.run_actions(
                idx,
                &mut copy,
                &buckets[i].actions,
                sluice_openflow::packet_in_reason::GROUP,
                table_id,
                cookie,
                depth + 1,
                emit,
            );
            self.spare.push(copy.buf);
            if let (Some(r), Some(apply)) = (&mut self.rec, saved) {
                let body = r.stack.pop().unwrap_or_default();
                r.apply = apply;
                r.cacheable &= ran.is_ok();
                runs.push(body);
            }
        }
        if let Some(g) = self.groups.get_mut(&id) {
            g.buckets = buckets;
        }
        if self.rec.is_some() {
            self.rec(|| Op::Group { runs });
        }
    }

    fn bucket_live(&self, b: &Bucket, depth: usize) -> bool {
        let port_ok = b.watch_port == port::ANY || self.port_live(b.watch_port);
        let group_ok = b.watch_group == sluice_openflow::group::ANY
            || (depth < MAX_GROUP_DEPTH
                && self
                    .groups
                    .get(&b.watch_group)
                    .is_some_and(|g| g.buckets.iter().any(|x| self.bucket_live(x, depth + 1))));
        port_ok && group_ok
    }
}
