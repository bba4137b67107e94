//! Run-time state of a loaded program: table entries, action profiles,
//! counters, meters, registers, the packet replication engine and mirroring.
//!
//! Concurrency invariant: one `Switch` owns its `State` and mutates it from
//! one thread; control-plane commands and packets are serialized by the
//! caller. With several workers each worker owns a replica of the switch
//! (see `sluice_dataplane::workers`): everything here is per replica except registers
//! and meters, which the replicas share (`crate::registers`, `crate::meters`).
//! A replica's meter leases are its own. Switches restored from one
//! `SavedState` share its registers and meters the same way (Thrift's
//! `bm_reset_state` gives every worker a copy of one state as loaded).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::plan::Plan;
use crate::tables::{Entry, EntryAction, FieldMatch, KeyFieldSpec, TableState};
use crate::value::nbytes;

/// A selector group's member handles, in handle order (the packet path
/// picks member number `hash % len`, as bmv2 does).
pub use sluice_lookup::selector::MemberSet;

/// An action profile's members and groups.
#[derive(Debug, Clone, Default)]
pub struct ProfileState {
    /// Member handle -> `(action index, action data)`.
    pub members: Vec<Option<(u32, Box<[u8]>)>>,
    /// Group handle -> member handles, sorted.
    pub groups: Vec<Option<MemberSet>>,
    free_members: BTreeSet<u32>,
    free_groups: BTreeSet<u32>,
}

fn alloc<T>(v: &mut Vec<Option<T>>, free: &mut BTreeSet<u32>, x: T) -> u32 {
    match free.pop_first() {
        Some(h) => {
            v[h as usize] = Some(x);
            h
        }
        None => {
            v.push(Some(x));
            (v.len() - 1) as u32
        }
    }
}

impl ProfileState {
    /// Adds a member; returns its handle.
    pub fn add_member(&mut self, action: u32, data: Box<[u8]>) -> u32 {
        alloc(&mut self.members, &mut self.free_members, (action, data))
    }
    /// Deletes a member.
    pub fn delete_member(&mut self, h: u32) -> bool {
        match self.members.get_mut(h as usize) {
            Some(m @ Some(_)) => {
                *m = None;
                self.free_members.insert(h);
                for g in self.groups.iter_mut().flatten() {
                    g.remove(&h);
                }
                true
            }
            _ => false,
        }
    }
    /// Creates an empty group; returns its handle.
    pub fn create_group(&mut self) -> u32 {
        alloc(&mut self.groups, &mut self.free_groups, MemberSet::default())
    }
    /// Deletes a group.
    pub fn delete_group(&mut self, h: u32) -> bool {
        match self.groups.get_mut(h as usize) {
            Some(g @ Some(_)) => {
                *g = None;
                self.free_groups.insert(h);
                true
            }
            _ => false,
        }
    }
}

/// A multicast node: replication id and ports.
#[derive(Debug, Clone)]
pub struct McNode {
    pub rid: u16,
    pub ports: BTreeSet<u32>,
    pub lags: BTreeSet<u32>,
}

/// The packet replication engine, with bmv2's `SimplePreLAG` link
/// aggregation: a node lists ports and LAGs; each LAG a node lists gives
/// one copy, on one of its member ports.
#[derive(Debug, Clone, Default)]
pub struct Pre {
    /// Group id -> node handles, in association order.
    pub groups: BTreeMap<u32, Vec<u32>>,
    pub nodes: Vec<Option<McNode>>,
    free_nodes: BTreeSet<u32>,
    /// LAG index -> member ports (set by `mc_set_lag_membership`).
    pub lags: BTreeMap<u32, BTreeSet<u32>>,
}

/// The member a LAG's copy leaves on: bmv2's replication engine has no
/// per-packet LAG hash and selects as if it were this value (member
/// `hash % members`, in port order), so every copy of a LAG leaves on the
/// same port; Sluice selects the same one.
const LAG_HASH: usize = 0xff;

/// The largest LAG index bmv2's replication engine takes (its table holds
/// 256 LAGs, and it refuses only indices above that).
pub const MAX_LAG_INDEX: u32 = 256;

impl Pre {
    /// Creates a node; returns its handle.
    pub fn create_node(&mut self, rid: u16, ports: BTreeSet<u32>, lags: BTreeSet<u32>) -> u32 {
        alloc(&mut self.nodes, &mut self.free_nodes, McNode { rid, ports, lags })
    }
    /// Destroys a node (also removes it from groups).
    pub fn destroy_node(&mut self, h: u32) -> bool {
        match self.nodes.get_mut(h as usize) {
            Some(n @ Some(_)) => {
                *n = None;
                self.free_nodes.insert(h);
                for g in self.groups.values_mut() {
                    g.retain(|x| *x != h);
                }
                true
            }
            _ => false,
        }
    }
    /// The `(rid, port)` copies a group produces, in replication order.
    pub fn replicate(&self, mgid: u32, out: &mut Vec<(u16, u32)>) {
        out.clear();
        if let Some(nodes) = self.groups.get(&mgid) {
            for h in nodes {
                if let Some(Some(n)) = self.nodes.get(*h as usize) {
                    for p in &n.ports {
                        out.push((n.rid, *p));
                    }
                    // A LAG with no membership set, or none left, gives no copy.
                    for lag in &n.lags {
                        if let Some(members) = self.lags.get(lag).filter(|m| !m.is_empty()) {
                            if let Some(p) = members.iter().nth(LAG_HASH % members.len()) {
                                out.push((n.rid, *p));
                            }
                        }
                    }
                }
            }
        }
    }
}

/// A mirroring (clone) session.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MirrorSession {
    pub port: Option<u32>,
    pub mgid: Option<u32>,
    /// At most this many bytes of each clone (P4Runtime's `packet_length_bytes`):
    /// a PSA clone is cut before its egress parser; a v1model clone leaves
    /// cut, as v1model's `truncate` cuts.
    pub truncate: Option<u32>,
    /// The clones' class of service (PSA's `class_of_service`; v1model has none).
    pub cos: u8,
}

/// A digest message produced by the data plane.
#[derive(Debug, Clone)]
pub struct Digest {
    pub list: String,
    /// The learn list's id in the program (bmv2's `list_id`).
    pub list_id: u64,
    pub receiver: u64,
    /// Field values, big-endian.
    pub values: Vec<Vec<u8>>,
}

/// All mutable state of a running program.
#[derive(Debug, Clone)]
pub struct State {
    pub tables: Vec<TableState>,
    pub profiles: Vec<ProfileState>,
    /// `(packets, bytes)` per counter cell.
    pub counters: Vec<Vec<(u64, u64)>>,
    /// Meters (indirect and direct) and registers: shared with the other workers' replicas.
    pub meters: crate::meters::Meters,
    /// This worker's leases of shared meter cells, used when other workers
    /// meter the same cells (see [`crate::meters::Leases`]).
    pub meter_leases: crate::meters::Leases,
    pub registers: crate::registers::Registers,
    pub pre: Pre,
    pub mirror: HashMap<u32, MirrorSession>,
    /// Values of each parser value set: `(value, mask)`.
    pub vsets: Vec<Vec<(Vec<u8>, Vec<u8>)>>,
    /// One algorithm object per calculation (custom CRC parameters are per calculation).
    pub calc_algos: Vec<sluice_hash::Algorithm>,
    pub digests: Vec<Digest>,
    /// Drop statistics by reason.
    pub dropped: u64,
    /// Per table, the lookups this replica made: `[hits, misses]` (the
    /// interpreter counts in `Exec::apply_table`, the helpers of generated
    /// code when they hand a result back; the hits generated code resolves
    /// inline are counted by it, or, for the batch function, added after
    /// each call from its edge counts, see `jit::flow`).
    pub lookups: Vec<[u64; 2]>,
    /// Per table, its lookups (hits and misses) when the current call of
    /// the batch function began: the helpers' lookups during the call are
    /// the difference, and its inline hits its applies less those.
    pub lookup_marks: Vec<u64>,
    /// Per table, lookups the interpreter made during the current call of
    /// the batch function on a path outside its graph (`h_run_from`; zero
    /// between calls).
    pub outside_flow: Vec<u64>,
}

impl State {
    /// Fresh state for a plan, with const entries and default actions installed.
    pub fn new(plan: &Plan) -> Result<State, crate::CompileError> {
        let mut tables = Vec::new();
        for t in &plan.tables {
            let mut off = 0;
            let mut key = Vec::new();
            for k in &t.key {
                let len = nbytes(k.width);
                key.push(KeyFieldSpec { kind: k.kind, width: k.width, off, len });
                off += len;
            }
            let mut ts = TableState::new(key, t.max_size.max(t.const_entries.len()));
            ts.default = t.default_action.as_ref().map(|(a, d)| (*a, d.clone().into_boxed_slice()));
            tables.push(ts);
        }
        let mut st = State {
            tables,
            profiles: vec![ProfileState::default(); plan.profiles.len()],
            counters: plan.counters.iter().map(|c| vec![(0, 0); c.size]).collect(),
            meters: crate::meters::Meters::new(plan.meters.iter().map(|c| c.size)),
            meter_leases: crate::meters::Leases::default(),
            registers: crate::registers::Registers::new(plan.registers.iter().map(|c| (c.size, c.width))),
            pre: Pre::default(),
            mirror: HashMap::new(),
            vsets: vec![Vec::new(); plan.vsets.len()],
            calc_algos: plan
                .calcs
                .iter()
                .map(|c| sluice_hash::Algorithm::from_name(&c.algo).expect("checked at compile time"))
                .collect(),
            digests: Vec::new(),
            dropped: 0,
            lookups: vec![[0; 2]; plan.tables.len()],
            lookup_marks: vec![0; plan.tables.len()],
            outside_flow: vec![0; plan.tables.len()],
        };
        for (ti, t) in plan.tables.iter().enumerate() {
            for (ei, ce) in t.const_entries.iter().enumerate() {
                install_const_entry(plan, &mut st, ti, ce)
                    .map_err(|m| crate::CompileError::at(&ce.path, format!("const entry {ei}: {m}")))?;
            }
        }
        Ok(st)
    }
}

/// Installs one const entry from the JSON into a table.
fn install_const_entry(plan: &Plan, st: &mut State, ti: usize, ce: &sluice_json::ConstEntry) -> Result<u32, String> {
    let tp = &plan.tables[ti];
    if ce.match_key.len() != tp.key.len() {
        return Err(format!("expected {} key fields, got {}", tp.key.len(), ce.match_key.len()));
    }
    let matches = ce
        .match_key
        .iter()
        .map(|m| match m {
            sluice_json::EntryMatch::Exact(v) => FieldMatch::Exact(v.clone()),
            sluice_json::EntryMatch::Lpm(v, p) => FieldMatch::Lpm(v.clone(), *p),
            sluice_json::EntryMatch::Ternary(v, m) => FieldMatch::Ternary(v.clone(), m.clone()),
            sluice_json::EntryMatch::Range(a, b) => FieldMatch::Range(a.clone(), b.clone()),
            sluice_json::EntryMatch::Valid(b) => FieldMatch::Valid(*b),
            sluice_json::EntryMatch::Optional(v) => FieldMatch::Optional(v.clone()),
        })
        .collect();
    let a = plan
        .actions
        .iter()
        .position(|a| a.id == ce.action.action_id)
        .ok_or_else(|| format!("unknown action id {}", ce.action.action_id))? as u32;
    let data = crate::plan::pack_action_data(&plan.actions[a as usize], &ce.action.action_data)?;
    st.tables[ti]
        .add(Entry {
            matches,
            priority: ce.priority.unwrap_or(0) as i32,
            action: EntryAction::Direct { action: a, data: data.into_boxed_slice() },
            packets: 0,
            bytes: 0,
            timeout_ms: None,
            added_key: None,
        })
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_lag_of_a_node_gives_one_copy_on_the_member_bmv2_selects() {
        let mut pre = Pre::default();
        let set = |v: &[u32]| v.iter().copied().collect::<BTreeSet<u32>>();
        let h = pre.create_node(7, set(&[1]), set(&[2, 3, 4]));
        pre.groups.insert(9, vec![h]);
        // LAG 2: four members, 255 % 4 = 3: the fourth (port 13).
        pre.lags.insert(2, set(&[10, 11, 12, 13]));
        // LAG 3: two members, 255 % 2 = 1: the second (port 21).
        pre.lags.insert(3, set(&[20, 21]));
        // LAG 4: no member left: no copy.
        pre.lags.insert(4, set(&[]));
        let mut out = Vec::new();
        pre.replicate(9, &mut out);
        assert_eq!(out, vec![(7, 1), (7, 13), (7, 21)]);
        // A LAG whose membership was never set gives no copy either.
        pre.lags.remove(&2);
        pre.replicate(9, &mut out);
        assert_eq!(out, vec![(7, 1), (7, 21)]);
    }
}
