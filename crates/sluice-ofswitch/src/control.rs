//! Changes to the switch's state from the control plane: flow-mods,
//! group-mods and meter-mods, validated as OpenFlow 1.3.5 section 6.4 and
//! 7.3.4 say and then applied (port-mods, with the other changes of a
//! port, are `OfSwitch::port_mod` in the switch).
//!
//! Contract: reads a decoded modification; writes the tables, groups or
//! meters of one [`OfSwitch`] copy, its flow cache emptied and the walk's
//! native code dropped first. The agent first applies a change to the
//! master copy (where validation errors come back as the OpenFlow error to
//! reply with), then the same change, with the same flow uids, to every
//! worker's replica between two batches. A change is deterministic given
//! the copy's state and its arguments, so every copy ends up the same.

use std::sync::Arc;

use sluice_openflow::errors::{bad_action, bad_instruction, bad_match, error_type, flow_mod_failed, group_mod_failed};
use sluice_openflow::{
    flow_mod_command as fmc, flow_mod_flags, group_mod_command as gmc, group_type, port, Action, FlowMod, FlowRemoved,
    GroupMod, Instruction, Match, MeterMod, OfError,
};

use crate::switch::{Group, OfSwitch, N_TABLES};
use crate::table::{Flow, Pattern};

/// A flow entry that a change removed, for a FLOW_REMOVED message when its
/// flags ask for one.
#[derive(Debug, Clone)]
pub struct Removed {
    pub table_id: u8,
    pub flow: Flow,
    pub reason: u8,
}

impl Removed {
    /// The FLOW_REMOVED body, with the entry's counters and age.
    pub fn message(&self, packets: u64, bytes: u64, now_ns: u64) -> FlowRemoved {
        let age = now_ns.saturating_sub(self.flow.added_ns);
        FlowRemoved {
            cookie: self.flow.cookie,
            priority: self.flow.priority,
            reason: self.reason,
            table_id: self.table_id,
            duration_sec: (age / 1_000_000_000) as u32,
            duration_nsec: (age % 1_000_000_000) as u32,
            idle_timeout: self.flow.idle_timeout,
            hard_timeout: self.flow.hard_timeout,
            packet_count: packets,
            byte_count: bytes,
            matched: (*self.flow.matched).clone(),
        }
    }
}

/// A flow-mod with what every replica reads of it built once: its match
/// as a pattern, and the shared match and instructions a new entry keeps.
#[derive(Debug)]
pub struct PreparedFlowMod {
    pub fm: FlowMod,
    pattern: Arc<Pattern>,
    matched: Arc<Match>,
    instructions: Arc<[Instruction]>,
}

impl PreparedFlowMod {
    /// Prepares `fm`.
    pub fn new(fm: FlowMod) -> PreparedFlowMod {
        PreparedFlowMod {
            pattern: Arc::new(Pattern::of(&fm.matched)),
            matched: Arc::new(fm.matched.clone()),
            instructions: fm.instructions.clone().into(),
            fm,
        }
    }
}

fn err(typ: u16, code: u16, reason: impl Into<String>) -> OfError {
    OfError::new(typ, code, reason)
}

/// Whether `a` may appear in a flow's actions here (ports in range, known
/// groups, supported types). TABLE is for packet-outs only (OpenFlow
/// 1.3.5 section 7.2.1): in a flow or a bucket it would send the packet
/// through the tables again and again.
fn check_action(sw: &OfSwitch, a: &Action) -> Result<(), OfError> {
    match a {
        Action::Output { port: p, .. } => {
            let ok =
                matches!(*p, port::IN_PORT | port::ALL | port::FLOOD | port::CONTROLLER | port::NORMAL | port::LOCAL)
                    || (*p <= port::MAX && *p != 0);
            if !ok {
                return Err(err(error_type::BAD_ACTION, bad_action::BAD_OUT_PORT, format!("output to port {p:#x}")));
            }
        }
        Action::Group(g) if !sw.groups.contains_key(g) => {
            return Err(err(error_type::BAD_ACTION, bad_action::BAD_OUT_GROUP, format!("group {g} does not exist")));
        }
        Action::PushVlan(t) if *t != 0x8100 && *t != 0x88a8 => {
            return Err(err(error_type::BAD_ACTION, bad_action::BAD_ARGUMENT, format!("push_vlan ethertype {t:#06x}")));
        }
        Action::PushMpls(t) if *t != 0x8847 && *t != 0x8848 => {
            return Err(err(error_type::BAD_ACTION, bad_action::BAD_ARGUMENT, format!("push_mpls ethertype {t:#06x}")));
        }
        Action::SetField(o) => {
            if o.mask.is_some() || !crate::features::settable(o.field) {
                return Err(err(error_type::BAD_ACTION, bad_action::BAD_SET_TYPE, format!("set_field {:?}", o.field)));
            }
            if o.field.value_len() != Some(o.value.len()) {
                return Err(err(error_type::BAD_ACTION, bad_action::BAD_SET_LEN, format!("set_field {:?}", o.field)));
            }
        }
        Action::PushPbb(t) if *t != 0x88e7 => {
            return Err(err(error_type::BAD_ACTION, bad_action::BAD_ARGUMENT, format!("push_pbb ethertype {t:#06x}")));
        }
        Action::Experimenter { .. } => {
            return Err(err(error_type::BAD_ACTION, bad_action::BAD_EXPERIMENTER, "no experimenter actions"));
        }
        _ if !crate::features::runs_action(a) => {
            return Err(err(error_type::BAD_ACTION, bad_action::BAD_TYPE, format!("action type {}", a.type_code())));
        }
        _ => {}
    }
    Ok(())
}

/// Validates a flow's instructions in table `table`.
fn check_instructions(sw: &OfSwitch, table: u8, ins: &[Instruction]) -> Result<(), OfError> {
    let mut seen = std::collections::BTreeSet::new();
    for i in ins {
        let t = match i {
            Instruction::GotoTable(t) => {
                if usize::from(*t) >= N_TABLES || *t <= table {
                    return Err(err(
                        error_type::BAD_INSTRUCTION,
                        bad_instruction::BAD_TABLE_ID,
                        format!("goto_table {t} from table {table}"),
                    ));
                }
                1
            }
            Instruction::WriteMetadata { .. } => 2,
            Instruction::WriteActions(a) | Instruction::ApplyActions(a) => {
                for x in a {
                    check_action(sw, x)?;
                }
                if matches!(i, Instruction::WriteActions(_)) {
                    3
                } else {
                    4
                }
            }
            Instruction::ClearActions => 5,
            Instruction::Meter(m) => {
                if !sw.meters.meters.contains_key(m) {
                    return Err(err(
                        error_type::METER_MOD_FAILED,
                        sluice_openflow::errors::meter_mod_failed::UNKNOWN_METER,
                        format!("meter {m} does not exist"),
                    ));
                }
                6
            }
            Instruction::Experimenter { .. } => {
                return Err(err(
                    error_type::BAD_INSTRUCTION,
                    bad_instruction::UNSUP_INST,
                    "no experimenter instructions",
                ));
            }
        };
        debug_assert!(crate::features::INSTRUCTION_TYPES.contains(&t));
        if !seen.insert(t) {
            return Err(err(error_type::BAD_INSTRUCTION, bad_instruction::UNSUP_INST, "an instruction type twice"));
        }
    }
    Ok(())
}

/// Validates a match (fields of the basic class, prerequisites).
fn check_match(m: &Match) -> Result<(), OfError> {
    for o in &m.fields {
        if crate::fields::slot(o.field).is_none() {
            return Err(err(error_type::BAD_MATCH, bad_match::BAD_FIELD, format!("field {:?}", o.field)));
        }
    }
    sluice_openflow::prerequisite_ok(m)
}

/// Whether flow `f` sends to `out_port` / `out_group` (the filters of
/// delete and stats requests; ANY matches every flow).
pub fn flow_outputs_to(f: &Flow, out_port: u32, out_group: u32) -> bool {
    let acts = || {
        f.instructions.iter().flat_map(|i| match i {
            Instruction::WriteActions(a) | Instruction::ApplyActions(a) => a.as_slice(),
            _ => &[],
        })
    };
    let port_ok =
        out_port == port::ANY || acts().any(|a| matches!(a, Action::Output { port: p, .. } if *p == out_port));
    let group_ok =
        out_group == sluice_openflow::group::ANY || acts().any(|a| matches!(a, Action::Group(g) if *g == out_group));
    port_ok && group_ok
}

impl OfSwitch {
    /// Applies a flow-mod; `uid` is the new entry's uid for an add (the
    /// agent's counter, the same on every copy), `now_ns` the agent's
    /// clock. Returns the entries it removed (deletes, replaced entries are
    /// not reported).
    pub fn flow_mod(&mut self, fm: &FlowMod, uid: u64, now_ns: u64) -> Result<Vec<Removed>, OfError> {
        self.prepared_flow_mod(&PreparedFlowMod::new(fm.clone()), uid, now_ns)
    }

    /// [`OfSwitch::flow_mod`] of a flow-mod prepared once for every
    /// replica (what each would otherwise build again).
    pub fn prepared_flow_mod(
        &mut self,
        prepared: &PreparedFlowMod,
        uid: u64,
        now_ns: u64,
    ) -> Result<Vec<Removed>, OfError> {
        let fm = &prepared.fm;
        self.tables_will_change();
        let all_tables = fm.table_id == sluice_openflow::table::ALL;
        if !all_tables && usize::from(fm.table_id) >= N_TABLES {
            return Err(err(
                error_type::FLOW_MOD_FAILED,
                flow_mod_failed::BAD_TABLE_ID,
                format!("table {}", fm.table_id),
            ));
        }
        let pattern = &*prepared.pattern;
        match fm.command {
            fmc::ADD | fmc::MODIFY | fmc::MODIFY_STRICT => {
                if all_tables {
                    return Err(err(error_type::FLOW_MOD_FAILED, flow_mod_failed::BAD_TABLE_ID, "table 255 in an add"));
                }
                check_match(&fm.matched)?;
                check_instructions(self, fm.table_id, &fm.instructions)?;
                let t = &mut self.tables[usize::from(fm.table_id)];
                if fm.command == fmc::ADD {
                    // An identical entry overlaps too (a packet may match
                    // both): with CHECK_OVERLAP it is refused, not replaced.
                    if fm.flags & flow_mod_flags::CHECK_OVERLAP != 0
                        && t.flows.values().any(|f| f.priority == fm.priority && f.pattern.overlaps(pattern))
                    {
                        return Err(err(error_type::FLOW_MOD_FAILED, flow_mod_failed::OVERLAP, "overlapping entry"));
                    }
                    let mut keep_counts = None;
                    if let Some(old) = t.find_strict(pattern, fm.priority) {
                        let matched = t.remove(old).map_or((0, 0), |r| r.1);
                        // The old uid's counters move to the new entry, or
                        // go with RESET_COUNTS.
                        let settled = self.counters.flows.remove(&old).unwrap_or((0, 0));
                        if fm.flags & flow_mod_flags::RESET_COUNTS == 0 {
                            keep_counts = Some((settled.0 + matched.0, settled.1 + matched.1));
                        }
                    }
                    let t = &mut self.tables[usize::from(fm.table_id)];
                    t.insert(Flow {
                        uid,
                        priority: fm.priority,
                        pattern: Arc::clone(&prepared.pattern),
                        matched: Arc::clone(&prepared.matched),
                        cookie: fm.cookie,
                        flags: fm.flags,
                        idle_timeout: fm.idle_timeout,
                        hard_timeout: fm.hard_timeout,
                        instructions: Arc::clone(&prepared.instructions),
                        added_ns: now_ns,
                    });
                    if let Some(c) = keep_counts {
                        self.counters.flows.insert(uid, c);
                    }
                    return Ok(vec![]);
                }
                let strict = fm.command == fmc::MODIFY_STRICT;
                let cookie_ok = |f: &Flow| (f.cookie & fm.cookie_mask) == (fm.cookie & fm.cookie_mask);
                let targets = t.select(pattern, fm.priority, strict, cookie_ok);
                for u in targets {
                    self.tables[usize::from(fm.table_id)].set_instructions(u, Arc::clone(&prepared.instructions));
                    if fm.flags & flow_mod_flags::RESET_COUNTS != 0 {
                        self.counters.flows.remove(&u);
                        self.tables[usize::from(fm.table_id)].take_counts(u);
                    }
                }
                Ok(vec![])
            }
            fmc::DELETE | fmc::DELETE_STRICT => {
                let strict = fm.command == fmc::DELETE_STRICT;
                let mut removed = Vec::new();
                for tid in 0..N_TABLES {
                    if !all_tables && tid != usize::from(fm.table_id) {
                        continue;
                    }
                    let t = &self.tables[tid];
                    let selected = |f: &Flow| {
                        (f.cookie & fm.cookie_mask) == (fm.cookie & fm.cookie_mask)
                            && flow_outputs_to(f, fm.out_port, fm.out_group)
                    };
                    let targets = t.select(pattern, fm.priority, strict, selected);
                    self.remove_entries(tid, &targets, sluice_openflow::flow_removed_reason::DELETE, &mut removed);
                }
                Ok(removed)
            }
            c => Err(err(error_type::FLOW_MOD_FAILED, flow_mod_failed::BAD_COMMAND, format!("command {c}"))),
        }
    }

    /// Removes the entries `uids` (expired), with `reason`.
    pub fn expire(&mut self, uids: &[(u8, u64)], reason: u8) -> Vec<Removed> {
        self.tables_will_change();
        let mut out = Vec::new();
        for &(t, u) in uids {
            if usize::from(t) < N_TABLES {
                self.remove_entries(usize::from(t), &[u], reason, &mut out);
            }
        }
        out
    }

    /// Removes entries `uids` of table `tid` (those still there) into
    /// `out`, with `reason`.
    fn remove_entries(&mut self, tid: usize, uids: &[u64], reason: u8, out: &mut Vec<Removed>) {
        for &u in uids {
            if let Some((flow, matched)) = self.tables[tid].remove(u) {
                // Settled, so that the removal's report still finds them.
                if matched != (0, 0) {
                    let c = self.counters.flows.entry(u).or_insert((0, 0));
                    c.0 += matched.0;
                    c.1 += matched.1;
                }
                out.push(Removed { table_id: tid as u8, flow, reason });
            }
        }
    }

    /// Removes, from every table, the entries `uses` picks (those of a
    /// deleted group or meter) into `out`, with `reason`.
    fn remove_users(&mut self, uses: impl Fn(&Flow) -> bool, reason: u8, out: &mut Vec<Removed>) {
        for tid in 0..N_TABLES {
            let users: Vec<u64> = self.tables[tid].flows.values().filter(|f| uses(f)).map(|f| f.uid).collect();
            self.remove_entries(tid, &users, reason, out);
        }
    }

    /// Applies a meter-mod. Deleting a meter deletes the flows that use it.
    pub fn meter_mod(&mut self, mm: &MeterMod, now_ns: u64) -> Result<Vec<Removed>, OfError> {
        self.tables_will_change();
        self.meters.check(mm)?;
        let deleted = self.meters.apply(mm, now_ns);
        let mut removed = Vec::new();
        for id in deleted {
            let uses = |f: &Flow| f.instructions.iter().any(|i| matches!(i, Instruction::Meter(m) if *m == id));
            self.remove_users(uses, sluice_openflow::flow_removed_reason::METER_DELETE, &mut removed);
        }
        Ok(removed)
    }

    /// Applies a group-mod. Deleting a group deletes the flows that use it.
    pub fn group_mod(&mut self, gm: &GroupMod) -> Result<Vec<Removed>, OfError> {
        self.tables_will_change();
        let id = gm.group_id;
        match gm.command {
            gmc::ADD | gmc::MODIFY => {
                if id > sluice_openflow::group::MAX {
                    return Err(err(
                        error_type::GROUP_MOD_FAILED,
                        group_mod_failed::INVALID_GROUP,
                        format!("group {id}"),
                    ));
                }
                if !crate::features::GROUP_TYPES.contains(&gm.typ) {
                    return Err(err(
                        error_type::GROUP_MOD_FAILED,
                        group_mod_failed::BAD_TYPE,
                        format!("type {}", gm.typ),
                    ));
                }
                if (gm.typ == group_type::INDIRECT && gm.buckets.len() != 1)
                    || (gm.typ == group_type::FF
                        && gm
                            .buckets
                            .iter()
                            .any(|b| b.watch_port == port::ANY && b.watch_group == sluice_openflow::group::ANY))
                {
                    return Err(err(
                        error_type::GROUP_MOD_FAILED,
                        group_mod_failed::INVALID_GROUP,
                        "bad buckets for the type",
                    ));
                }
                for b in &gm.buckets {
                    for a in &b.actions {
                        if let Action::Group(g) = a {
                            if *g == id {
                                return Err(err(
                                    error_type::GROUP_MOD_FAILED,
                                    group_mod_failed::LOOP,
                                    "a group naming itself",
                                ));
                            }
                        }
                        check_action(self, a).map_err(|e| match e.typ {
                            error_type::BAD_ACTION if e.code == bad_action::BAD_OUT_GROUP => err(
                                error_type::GROUP_MOD_FAILED,
                                group_mod_failed::CHAINING_UNSUPPORTED,
                                e.reason.clone(),
                            ),
                            _ => e,
                        })?;
                    }
                }
                let exists = self.groups.contains_key(&id);
                if gm.command == gmc::ADD && exists {
                    return Err(err(
                        error_type::GROUP_MOD_FAILED,
                        group_mod_failed::GROUP_EXISTS,
                        format!("group {id}"),
                    ));
                }
                if gm.command == gmc::MODIFY && !exists {
                    return Err(err(
                        error_type::GROUP_MOD_FAILED,
                        group_mod_failed::UNKNOWN_GROUP,
                        format!("group {id}"),
                    ));
                }
                self.groups.insert(id, Group::new(gm.typ, gm.buckets.clone()));
                if gm.command == gmc::MODIFY {
                    self.counters.groups.remove(&id);
                }
                Ok(vec![])
            }
            gmc::DELETE => {
                let ids: Vec<u32> =
                    if id == sluice_openflow::group::ALL { self.groups.keys().collect() } else { vec![id] };
                let mut removed = Vec::new();
                for g in ids {
                    if self.groups.remove(&g).is_some() {
                        self.counters.groups.remove(&g);
                        let uses = |f: &Flow| flow_outputs_to(f, port::ANY, g);
                        self.remove_users(uses, sluice_openflow::flow_removed_reason::GROUP_DELETE, &mut removed);
                    }
                }
                Ok(removed)
            }
            c => Err(err(error_type::GROUP_MOD_FAILED, group_mod_failed::BAD_COMMAND, format!("command {c}"))),
        }
    }
}
