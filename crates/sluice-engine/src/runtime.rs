//! The typed runtime API: everything outside the engine does with a loaded
//! switch, on plan indices and byte values, with errors as codes. Every
//! control plane goes through it (the Thrift and P4Runtime servers, the
//! `simple_switch_CLI` language and the device in `sluice-control`, STF
//! files), and so do the front end, the bench and the tests: the switch's
//! program and state are private to the engine, and this file is their door.
//!
//! # Reads and writes
//!
//! A method that takes `&self` only reads; a method that takes `&mut self`
//! writes (the compiler holds every caller to it). Writes are of two kinds,
//! which a pool of worker replicas routes differently (see `sluice-control`):
//!
//! - **replica writes** (entries, default actions, members and groups,
//!   counters, multicast, mirroring, value sets, hash parameters, the trace):
//!   every replica keeps its own copy, so every replica makes the change;
//! - **shared writes** (register cells and meter rates, each marked *Shared
//!   write* below): the replicas share one copy, so the change is made once.
//!
//! # Indices, handles and errors
//!
//! Objects of the program (tables, actions, profiles, counters, meters,
//! registers, value sets, calculations) are named by their index in the
//! [`Plan`], found with [`Switch::index_of`] or read from
//! [`Switch::program`]; an index outside the plan is a caller's bug and
//! panics. What a control plane sends at run time (entry, member, group and
//! node handles, cell indices, multicast groups, mirroring sessions, key and
//! parameter values) is checked, and refused with an [`RtError`] whose code
//! is bmv2's runtime error name, the vocabulary both protocols translate from.
//!
//! # Checked and as-given writes
//!
//! Writes refuse what bmv2's runtime refuses; the Thrift and P4Runtime
//! servers rely on it. [`Switch::install_entry`] and the few `*_as_given`
//! writes skip the protocol checks that the `simple_switch_CLI` language and
//! STF files have never made (an action outside the tables a profile serves,
//! deleting a member or group still in use, replacing a const default
//! action, a committed rate above the peak rate), so that those front ends
//! behave as they always have; they still refuse unknown handles and cells
//! outside an array.
//!
//! The types the API speaks ([`Entry`], [`FieldMatch`], [`MirrorSession`],
//! [`Digest`]...) are re-exported here: a caller needs no other engine module.
//!
//! Why typed and not command text: the servers receive typed messages (keys
//! as bytes, ids, handles) and must answer with protocol error codes; going
//! through command text would cost a print and a parse per entry and lose
//! the codes.

use std::collections::BTreeSet;
use std::time::Instant;

use crate::meters::{check_rates, RateError};
use crate::plan::Plan;
use crate::switch::Switch;
use crate::tables::TableError;
use crate::value::nbytes;

pub use crate::state::{Digest, McNode, MemberSet, MirrorSession};
pub use crate::tables::{Entry, EntryAction, FieldMatch, MatchKind};
pub use sluice_hash::{ConfigError, CrcParams};

/// Why a runtime operation failed (bmv2's runtime error names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RtCode {
    TableFull,
    InvalidHandle,
    ExpiredHandle,
    InvalidTableName,
    InvalidActionName,
    WrongTableType,
    InvalidMbrHandle,
    MbrStillUsed,
    MbrAlreadyInGrp,
    MbrNotInGrp,
    InvalidGrpHandle,
    GrpStillUsed,
    EmptyGrp,
    DuplicateEntry,
    BadMatchKey,
    DefaultActionIsConst,
    /// The whole default entry is const (action and data).
    DefaultEntryIsConst,
    ImmutableTableEntries,
    BadActionData,
    AgeingDisabled,
    /// A counter, meter, register or value set name that does not exist.
    InvalidName,
    /// An index outside an array.
    InvalidIndex,
    /// A meter rate list that is not two `(rate, burst)` pairs.
    BadRatesList,
    /// A meter's committed rate above its peak rate.
    InvalidInfoRateValue,
    /// A multicast group that does not exist.
    InvalidMgid,
    InvalidL1Handle,
    /// A replication-engine request that contradicts its state (node already in the group...).
    PreError,
    /// A mirroring session that does not exist.
    SessionNotFound,
}

/// A failed runtime operation: the code and a sentence for humans.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RtError {
    pub code: RtCode,
    pub message: String,
}

impl std::fmt::Display for RtError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}: {}", self.code, self.message)
    }
}

impl std::error::Error for RtError {}

fn fail<T>(code: RtCode, message: impl Into<String>) -> Result<T, RtError> {
    Err(RtError { code, message: message.into() })
}

impl From<TableError> for RtError {
    fn from(e: TableError) -> RtError {
        let code = match e {
            TableError::DuplicateEntry(_) => RtCode::DuplicateEntry,
            TableError::InvalidHandle => RtCode::InvalidHandle,
            TableError::ExpiredHandle => RtCode::ExpiredHandle,
            TableError::TableFull => RtCode::TableFull,
            TableError::BadMatchKey(_) => RtCode::BadMatchKey,
        };
        RtError { code, message: e.to_string() }
    }
}

impl From<RateError> for RtError {
    fn from(e: RateError) -> RtError {
        let code = match e {
            RateError::Count(_) => RtCode::BadRatesList,
            RateError::CommittedAbovePeak => RtCode::InvalidInfoRateValue,
        };
        RtError { code, message: e.to_string() }
    }
}

/// The error for cell `i` outside meter `m`.
fn outside_meter(m: usize, i: usize) -> RtError {
    RtError { code: RtCode::InvalidIndex, message: format!("index {i} is outside meter {m}") }
}

/// The error for cell `i` outside register array `r`.
fn outside_register(r: usize, i: usize) -> RtError {
    RtError { code: RtCode::InvalidIndex, message: format!("index {i} is outside register {r}") }
}

/// Strips leading zero bytes and checks that a value fits `width` bits;
/// returns it right-aligned in `nbytes(width)` bytes.
pub fn fit_value(v: &[u8], width: u32) -> Option<Vec<u8>> {
    let n = nbytes(width.max(1));
    let first = v.iter().position(|b| *b != 0).unwrap_or(v.len());
    let v = &v[first..];
    if v.len() > n {
        return None;
    }
    let mut out = vec![0u8; n];
    out[n - v.len()..].copy_from_slice(v);
    let spare = (n * 8) as u32 - width.max(1);
    if spare > 0 && out[0] >> (8 - spare) != 0 {
        return None;
    }
    Some(out)
}

/// Which state a name lookup searches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resource {
    Table,
    Action,
    Profile,
    Counter,
    Meter,
    Register,
    ValueSet,
}

/// The program: names, ids, widths and shapes, fixed once loaded. Every
/// method here reads.
impl Switch {
    /// Reads the compiled program: tables with their keys and actions,
    /// actions with their parameters, profiles, counter, meter and register
    /// arrays, value sets, calculations, learn lists. It never changes
    /// after loading, so holding it tells nothing stale.
    pub fn program(&self) -> &Plan {
        &self.plan
    }

    /// Reads the plan index of an object by its exact JSON name.
    pub fn index_of(&self, what: Resource, name: &str) -> Option<usize> {
        let p = &self.plan;
        match what {
            Resource::Table => p.tables.iter().position(|x| x.name == name),
            Resource::Action => p.actions.iter().position(|x| x.name == name),
            Resource::Profile => p.profiles.iter().position(|x| x.name == name),
            Resource::Counter => p.counters.iter().position(|x| x.name == name),
            Resource::Meter => p.meters.iter().position(|x| x.name == name),
            Resource::Register => p.registers.iter().position(|x| x.name == name),
            Resource::ValueSet => p.vsets.iter().position(|x| x.0 == name),
        }
    }

    /// Reads: packs an action's parameter values (big-endian, any length
    /// that fits the parameter width) into its action data.
    pub fn pack_action(&self, action: u32, values: &[Vec<u8>]) -> Result<Box<[u8]>, RtError> {
        let Some(ap) = self.plan.actions.get(action as usize) else {
            return fail(RtCode::InvalidActionName, format!("no action {action}"));
        };
        if values.len() != ap.params.len() {
            return fail(
                RtCode::BadActionData,
                format!("action {} takes {} parameters, got {}", ap.name, ap.params.len(), values.len()),
            );
        }
        let mut fitted = Vec::with_capacity(values.len());
        for (v, (pname, w)) in values.iter().zip(&ap.params) {
            match fit_value(v, *w) {
                Some(x) => fitted.push(x),
                None => {
                    return fail(
                        RtCode::BadActionData,
                        format!("parameter {pname} of action {} does not fit {w} bits", ap.name),
                    )
                }
            }
        }
        crate::plan::pack_action_data(ap, &fitted)
            .map(Vec::into_boxed_slice)
            .map_err(|m| RtError { code: RtCode::BadActionData, message: m })
    }

    /// Reads: the parameter values of packed action data, one right-aligned
    /// byte string each.
    pub fn unpack_action(&self, action: u32, data: &[u8]) -> Vec<Vec<u8>> {
        let ap = &self.plan.actions[action as usize];
        ap.param_layout
            .iter()
            .map(|(off, len)| data.get(*off as usize..(*off + *len) as usize).unwrap_or(&[]).to_vec())
            .collect()
    }

    /// Reads: checks that `action` may be used in table `t`.
    pub fn check_table_action(&self, t: usize, action: u32) -> Result<(), RtError> {
        let tp = &self.plan.tables[t];
        if !tp.actions.contains(&action) {
            let name = self.plan.actions.get(action as usize).map_or("?", |a| a.name.as_str());
            return fail(RtCode::InvalidActionName, format!("table {} has no action {name}", tp.name));
        }
        Ok(())
    }

    /// Reads: checks a match key against table `t`'s key shape and
    /// normalizes each value to the field's width. An LPM value keeps the
    /// bits past its prefix: the table cuts them when it adds the entry
    /// and keeps the value as given for reading back, as bmv2 does.
    pub fn check_match_key(&self, t: usize, matches: Vec<FieldMatch>) -> Result<Vec<FieldMatch>, RtError> {
        let tp = &self.plan.tables[t];
        if matches.len() != tp.key.len() {
            return fail(
                RtCode::BadMatchKey,
                format!("table {} has {} key fields, got {}", tp.name, tp.key.len(), matches.len()),
            );
        }
        let mut out = Vec::with_capacity(matches.len());
        for (k, m) in tp.key.iter().zip(matches) {
            let w = k.width;
            let bad = |what: &str| RtError {
                code: RtCode::BadMatchKey,
                message: format!("key field {} of table {}: {what}", k.name, tp.name),
            };
            let fit = |v: &[u8]| fit_value(v, w).ok_or_else(|| bad(&format!("value does not fit {w} bits")));
            let m = match (k.kind, m) {
                (MatchKind::Exact, FieldMatch::Exact(v)) => FieldMatch::Exact(fit(&v)?),
                (MatchKind::Valid, FieldMatch::Valid(b)) => FieldMatch::Valid(b),
                (MatchKind::Valid, FieldMatch::Exact(v)) => FieldMatch::Valid(v.iter().any(|b| *b != 0)),
                (MatchKind::Lpm, FieldMatch::Lpm(v, l)) => {
                    if l > w {
                        return Err(bad(&format!("prefix length {l} is longer than the field ({w} bits)")));
                    }
                    FieldMatch::Lpm(fit(&v)?, l)
                }
                (MatchKind::Ternary, FieldMatch::Ternary(v, m)) => {
                    let (mut v, m) = (fit(&v)?, fit(&m)?);
                    for (a, b) in v.iter_mut().zip(&m) {
                        *a &= *b;
                    }
                    FieldMatch::Ternary(v, m)
                }
                (MatchKind::Range, FieldMatch::Range(a, b)) => FieldMatch::Range(fit(&a)?, fit(&b)?),
                (MatchKind::Optional, FieldMatch::Optional(v)) => FieldMatch::Optional(v.map(|v| fit(&v)).transpose()?),
                (kind, m) => return Err(bad(&format!("a {kind:?} field cannot take {m:?}"))),
            };
            out.push(m);
        }
        Ok(out)
    }

    /// Reads: whether entries of table `t` carry a priority (ternary, range
    /// or optional keys).
    pub fn table_has_priority(&self, t: usize) -> bool {
        self.state.tables[t].needs_priority
    }
}

/// Table entries and default actions.
impl Switch {
    fn check_entry_action(&self, t: usize, action: &EntryAction) -> Result<(), RtError> {
        let tp = &self.plan.tables[t];
        match action {
            EntryAction::Direct { action, .. } => {
                if tp.profile.is_some() {
                    return fail(RtCode::WrongTableType, format!("table {} is indirect", tp.name));
                }
                self.check_table_action(t, *action)
            }
            EntryAction::Member(m) => {
                let Some(p) = tp.profile else {
                    return fail(RtCode::WrongTableType, format!("table {} is not indirect", tp.name));
                };
                match self.state.profiles[p as usize].members.get(*m as usize) {
                    Some(Some(_)) => Ok(()),
                    _ => fail(RtCode::InvalidMbrHandle, format!("no member {m}")),
                }
            }
            EntryAction::Group(g) => {
                let Some(p) = tp.profile else {
                    return fail(RtCode::WrongTableType, format!("table {} is not indirect", tp.name));
                };
                if self.plan.profiles[p as usize].selector.is_none() {
                    return fail(RtCode::WrongTableType, format!("table {} has no selector", tp.name));
                }
                match self.state.profiles[p as usize].groups.get(*g as usize) {
                    Some(Some(_)) => Ok(()),
                    _ => fail(RtCode::InvalidGrpHandle, format!("no group {g}")),
                }
            }
        }
    }

    /// Writes: adds an entry; returns its handle. Keys are checked and
    /// normalized with [`Switch::check_match_key`]; priority is ignored for
    /// tables without one.
    pub fn add_entry(
        &mut self,
        t: usize,
        matches: Vec<FieldMatch>,
        action: EntryAction,
        priority: i32,
    ) -> Result<u32, RtError> {
        let e = self.prepare_entry(t, matches, action, priority)?;
        self.install_entry(t, e)
    }

    /// Reads: checks and normalizes an entry for table `t` without adding
    /// it. A control plane checks once on the master and has the replicas
    /// [`Switch::install_entry`] the result.
    pub fn prepare_entry(
        &self,
        t: usize,
        matches: Vec<FieldMatch>,
        action: EntryAction,
        priority: i32,
    ) -> Result<Entry, RtError> {
        let matches = self.check_match_key(t, matches)?;
        self.check_entry_action(t, &action)?;
        let priority = if self.table_has_priority(t) { priority } else { 0 };
        Ok(Entry { matches, priority, action, packets: 0, bytes: 0, timeout_ms: None, added_key: None })
    }

    /// Writes: adds an entry as given (made by [`Switch::prepare_entry`], or
    /// by a front end that checked it its own way: key values in their
    /// fields' byte widths); fails only on a duplicate key or a full table.
    /// The entry's direct meter starts unconfigured, whatever its cell held.
    pub fn install_entry(&mut self, t: usize, e: Entry) -> Result<u32, RtError> {
        let h = self.state.tables[t].add(e)?;
        if let Some((mi, _)) = self.plan.tables[t].direct_meter {
            self.state.meters.reset(mi as usize, (h & 0x00ff_ffff) as usize);
        }
        Ok(h)
    }

    /// Writes: changes what an entry does.
    pub fn modify_entry(&mut self, t: usize, handle: u32, action: EntryAction) -> Result<(), RtError> {
        self.check_entry_action(t, &action)?;
        self.state.tables[t].index_of(handle)?;
        self.state.tables[t].set_action(handle, action)?;
        Ok(())
    }

    /// Writes: changes what an entry does, as given (no check that the
    /// action suits the table: the CLI's `table_modify`).
    pub fn modify_entry_as_given(&mut self, t: usize, handle: u32, action: EntryAction) -> Result<(), RtError> {
        self.state.tables[t].set_action(handle, action)?;
        Ok(())
    }

    /// Writes: deletes an entry.
    pub fn delete_entry(&mut self, t: usize, handle: u32) -> Result<(), RtError> {
        self.state.tables[t].delete(handle)?;
        Ok(())
    }

    /// Writes: deletes every entry of a table.
    pub fn clear_entries(&mut self, t: usize) {
        self.state.tables[t].clear();
    }

    /// Writes: sets an entry's idle timeout (0 turns it off).
    pub fn set_entry_ttl(&mut self, t: usize, handle: u32, timeout_ms: u32) -> Result<(), RtError> {
        if !self.plan.tables[t].support_timeout {
            return fail(
                RtCode::AgeingDisabled,
                format!("table {} does not support timeouts", self.plan.tables[t].name),
            );
        }
        match self.state.tables[t].get_mut(handle) {
            Some(e) => {
                e.timeout_ms = (timeout_ms > 0).then_some(timeout_ms as u64);
                Ok(())
            }
            None => fail(RtCode::InvalidHandle, format!("no entry {handle}")),
        }
    }

    /// Writes: sets the default action (for a direct table). As in bmv2,
    /// a table whose whole default entry is const takes none (not even the
    /// same one), and one whose default action is const takes only that
    /// action, with any data.
    pub fn set_default_entry(&mut self, t: usize, action: u32, data: Box<[u8]>) -> Result<(), RtError> {
        let tp = &self.plan.tables[t];
        if tp.default_entry_const {
            return fail(RtCode::DefaultEntryIsConst, format!("table {} has a const default entry", tp.name));
        }
        if tp.default_const && tp.default_action.as_ref().is_none_or(|(a, _)| *a != action) {
            return fail(RtCode::DefaultActionIsConst, format!("table {} has a const default action", tp.name));
        }
        self.check_table_action(t, action)?;
        self.set_default_as_given(t, action, data);
        Ok(())
    }

    /// Writes: sets the default action as given (const or not, any action:
    /// STF's `setdefault` and the CLI's `table_indirect_set_default`).
    pub fn set_default_as_given(&mut self, t: usize, action: u32, data: Box<[u8]>) {
        self.state.tables[t].default = Some((action, data));
    }

    /// Writes: restores the default action the program declares.
    pub fn reset_default_entry(&mut self, t: usize) {
        self.state.tables[t].default =
            self.plan.tables[t].default_action.as_ref().map(|(a, d)| (*a, d.clone().into_boxed_slice()));
    }

    /// Reads: the lookups of table `t` this copy made, `[hits, misses]`
    /// (every worker's, summed, on the master after a read).
    pub fn table_lookups(&self, t: usize) -> [u64; 2] {
        self.state.lookups.get(t).copied().unwrap_or_default()
    }

    /// Reads: how many entries table `t` holds.
    pub fn entry_count(&self, t: usize) -> usize {
        self.state.tables[t].len()
    }

    /// Reads: every entry of table `t` with its handle, in index order.
    pub fn entries(&self, t: usize) -> impl Iterator<Item = (u32, &Entry)> + '_ {
        self.state.tables[t].entries()
    }

    /// Reads: the entry behind a handle (`InvalidHandle`, or
    /// `ExpiredHandle` when its index now holds a newer entry).
    pub fn entry(&self, t: usize, handle: u32) -> Result<&Entry, RtError> {
        let ts = &self.state.tables[t];
        let idx = ts.index_of(handle)?;
        ts.entry(idx).ok_or_else(|| RtError { code: RtCode::InvalidHandle, message: format!("no entry {handle}") })
    }

    /// Reads: the handle of the entry with exactly this key (and priority,
    /// when the table has them).
    pub fn find_entry(&self, t: usize, matches: Vec<FieldMatch>, priority: i32) -> Result<Option<u32>, RtError> {
        let mut matches = self.check_match_key(t, matches)?;
        for (k, m) in self.plan.tables[t].key.iter().zip(&mut matches) {
            if let FieldMatch::Lpm(v, l) = m {
                crate::tables::apply_prefix(v, k.width, *l);
            }
        }
        let priority = if self.table_has_priority(t) { priority } else { 0 };
        let ts = &self.state.tables[t];
        Ok(ts.find(&matches, priority).map(|i| ts.handle_of(i)))
    }

    /// Reads: table `t`'s default action and its data (`None`: no action runs on a miss).
    pub fn default_entry(&self, t: usize) -> Option<(u32, &[u8])> {
        self.state.tables[t].default.as_ref().map(|(a, d)| (*a, &**d))
    }

    /// Reads: when this switch last saw a packet hit an entry of a table
    /// with idle timeouts (`None`: not since it was added).
    pub fn entry_last_hit(&self, t: usize, handle: u32) -> Option<Instant> {
        let us = self.state.tables[t].last_hit(handle & 0x00ff_ffff);
        (us != 0).then(|| self.instant_at(us))
    }

    /// Reads: `(hits, misses, bypassed)` of table `t`'s lookup cache, if it has one.
    pub fn lookup_cache_stats(&self, t: usize) -> Option<(u64, u64, u64)> {
        let ts = &self.state.tables[t];
        ts.cache_stats().map(|(hits, misses)| (hits, misses, ts.cache_bypassed()))
    }
}

/// Action profile members and selector groups.
impl Switch {
    fn profile_state(&mut self, p: usize) -> Result<&mut crate::state::ProfileState, RtError> {
        match self.state.profiles.get_mut(p) {
            Some(x) => Ok(x),
            None => fail(RtCode::InvalidTableName, format!("no action profile {p}")),
        }
    }

    /// Whether some table entry uses member `m` (or group `g`) of profile `p`.
    fn profile_in_use(&self, p: usize, what: EntryAction) -> bool {
        self.plan.tables.iter().enumerate().any(|(t, tp)| {
            tp.profile == Some(p as u32) && self.state.tables[t].entries().any(|(_, e)| e.action == what)
        })
    }

    /// Checks an action for profile `p` (it must be an action of a table the profile serves).
    fn check_profile_action(&self, p: usize, action: u32) -> Result<(), RtError> {
        let ok = self.plan.tables.iter().any(|tp| tp.profile == Some(p as u32) && tp.actions.contains(&action));
        if ok {
            Ok(())
        } else {
            fail(
                RtCode::InvalidActionName,
                format!("action {action} is not an action of profile {}", self.plan.profiles[p].name),
            )
        }
    }

    /// Writes: adds a member to an action profile; returns its handle.
    pub fn add_member(&mut self, p: usize, action: u32, data: Box<[u8]>) -> Result<u32, RtError> {
        self.check_profile_action(p, action)?;
        Ok(self.profile_state(p)?.add_member(action, data))
    }

    /// Writes: adds a member as given (any action of the program: the CLI's
    /// `act_prof_create_member`); returns its handle.
    pub fn add_member_as_given(&mut self, p: usize, action: u32, data: Box<[u8]>) -> Result<u32, RtError> {
        Ok(self.profile_state(p)?.add_member(action, data))
    }

    /// Writes: changes a member's action.
    pub fn modify_member(&mut self, p: usize, m: u32, action: u32, data: Box<[u8]>) -> Result<(), RtError> {
        self.check_profile_action(p, action)?;
        match self.profile_state(p)?.members.get_mut(m as usize) {
            Some(Some(x)) => {
                *x = (action, data);
                Ok(())
            }
            _ => fail(RtCode::InvalidMbrHandle, format!("no member {m}")),
        }
    }

    /// Writes: deletes a member that no entry uses.
    pub fn delete_member(&mut self, p: usize, m: u32) -> Result<(), RtError> {
        if self.profile_in_use(p, EntryAction::Member(m)) {
            return fail(RtCode::MbrStillUsed, format!("member {m} is used by a table entry"));
        }
        self.delete_member_as_given(p, m)
    }

    /// Writes: deletes a member even if entries use it (the CLI's
    /// `act_prof_delete_member`); it leaves the groups that held it.
    pub fn delete_member_as_given(&mut self, p: usize, m: u32) -> Result<(), RtError> {
        if self.profile_state(p)?.delete_member(m) {
            Ok(())
        } else {
            fail(RtCode::InvalidMbrHandle, format!("no member {m}"))
        }
    }

    /// Writes: creates an empty group; returns its handle.
    pub fn create_group(&mut self, p: usize) -> Result<u32, RtError> {
        Ok(self.profile_state(p)?.create_group())
    }

    /// Writes: deletes a group that no entry uses.
    pub fn delete_group(&mut self, p: usize, g: u32) -> Result<(), RtError> {
        if self.profile_in_use(p, EntryAction::Group(g)) {
            return fail(RtCode::GrpStillUsed, format!("group {g} is used by a table entry"));
        }
        self.delete_group_as_given(p, g)
    }

    /// Writes: deletes a group even if entries use it (the CLI's `act_prof_delete_group`).
    pub fn delete_group_as_given(&mut self, p: usize, g: u32) -> Result<(), RtError> {
        if self.profile_state(p)?.delete_group(g) {
            Ok(())
        } else {
            fail(RtCode::InvalidGrpHandle, format!("no group {g}"))
        }
    }

    /// Writes: adds (`true`) or removes a member of a group.
    pub fn group_member(&mut self, p: usize, g: u32, m: u32, add: bool) -> Result<(), RtError> {
        let ps = self.profile_state(p)?;
        if !matches!(ps.members.get(m as usize), Some(Some(_))) {
            return fail(RtCode::InvalidMbrHandle, format!("no member {m}"));
        }
        let Some(Some(grp)) = ps.groups.get_mut(g as usize) else {
            return fail(RtCode::InvalidGrpHandle, format!("no group {g}"));
        };
        if add && !grp.insert(m) {
            return fail(RtCode::MbrAlreadyInGrp, format!("member {m} is already in group {g}"));
        }
        if !add && !grp.remove(&m) {
            return fail(RtCode::MbrNotInGrp, format!("member {m} is not in group {g}"));
        }
        Ok(())
    }

    /// Writes: replaces a group's members.
    pub fn set_group_members(&mut self, p: usize, g: u32, members: BTreeSet<u32>) -> Result<(), RtError> {
        let ps = self.profile_state(p)?;
        if let Some(m) = members.iter().find(|m| !matches!(ps.members.get(**m as usize), Some(Some(_)))) {
            return fail(RtCode::InvalidMbrHandle, format!("no member {m}"));
        }
        match ps.groups.get_mut(g as usize) {
            Some(Some(grp)) => {
                *grp = members.into_iter().collect();
                Ok(())
            }
            _ => fail(RtCode::InvalidGrpHandle, format!("no group {g}")),
        }
    }

    /// Reads: member `m` of profile `p` as `(action, action data)`.
    pub fn member(&self, p: usize, m: u32) -> Option<(u32, &[u8])> {
        self.state.profiles[p].members.get(m as usize)?.as_ref().map(|(a, d)| (*a, &**d))
    }

    /// Reads: every member of profile `p` as `(handle, action, action data)`, by handle.
    pub fn members(&self, p: usize) -> impl Iterator<Item = (u32, u32, &[u8])> + '_ {
        let ms = &self.state.profiles[p].members;
        ms.iter().enumerate().filter_map(|(h, m)| m.as_ref().map(|(a, d)| (h as u32, *a, &**d)))
    }

    /// Reads: group `g` of profile `p`: its members in handle order.
    pub fn group(&self, p: usize, g: u32) -> Option<&MemberSet> {
        self.state.profiles[p].groups.get(g as usize)?.as_ref()
    }

    /// Reads: every group of profile `p` with its handle, by handle.
    pub fn groups(&self, p: usize) -> impl Iterator<Item = (u32, &MemberSet)> + '_ {
        let gs = &self.state.profiles[p].groups;
        gs.iter().enumerate().filter_map(|(h, g)| g.as_ref().map(|g| (h as u32, g)))
    }
}

/// Counter arrays and direct counters. Each replica counts its own packets:
/// reads on a pool's master are meaningful once the workers' counts are
/// merged in; a write keeps its value on one replica and zero on the others.
impl Switch {
    /// Reads: how many cells counter array `c` has.
    pub fn counter_len(&self, c: usize) -> usize {
        self.state.counters[c].len()
    }

    /// Reads: cell `i` of counter array `c` as `(packets, bytes)`.
    pub fn counter_read(&self, c: usize, i: usize) -> Result<(u64, u64), RtError> {
        match self.state.counters.get(c).map(|a| a.get(i)) {
            Some(Some(x)) => Ok(*x),
            Some(None) => fail(RtCode::InvalidIndex, format!("index {i} is outside counter {c}")),
            None => fail(RtCode::InvalidName, format!("no counter {c}")),
        }
    }

    /// Reads: every cell of counter array `c` as `(packets, bytes)`.
    pub fn counter_values(&self, c: usize) -> &[(u64, u64)] {
        &self.state.counters[c]
    }

    /// Writes: sets cell `i` of counter array `c` to `(packets, bytes)`.
    pub fn counter_write(&mut self, c: usize, i: usize, value: (u64, u64)) -> Result<(), RtError> {
        match self.state.counters.get_mut(c).map(|a| a.get_mut(i)) {
            Some(Some(x)) => {
                *x = value;
                Ok(())
            }
            Some(None) => fail(RtCode::InvalidIndex, format!("index {i} is outside counter {c}")),
            None => fail(RtCode::InvalidName, format!("no counter {c}")),
        }
    }

    /// Writes: zeroes every cell of counter array `c`.
    pub fn counter_reset(&mut self, c: usize) {
        self.state.counters[c].iter_mut().for_each(|x| *x = (0, 0));
    }

    /// Reads: the direct counter of an entry as `(packets, bytes)`.
    pub fn entry_counter_read(&self, t: usize, handle: u32) -> Result<(u64, u64), RtError> {
        self.entry(t, handle).map(|e| (e.packets, e.bytes))
    }

    /// Writes: sets the direct counter of an entry to `(packets, bytes)`.
    pub fn entry_counter_write(&mut self, t: usize, handle: u32, value: (u64, u64)) -> Result<(), RtError> {
        match self.state.tables[t].entry_by_handle_mut(handle) {
            Some(e) => {
                (e.packets, e.bytes) = value;
                Ok(())
            }
            None => fail(RtCode::InvalidHandle, format!("no entry {handle}")),
        }
    }

    /// Writes: zeroes the direct counters of every entry of table `t`.
    pub fn entry_counters_reset(&mut self, t: usize) {
        let handles: Vec<u32> = self.state.tables[t].entries().map(|(h, _)| h).collect();
        for h in handles {
            let _ = self.entry_counter_write(t, h, (0, 0));
        }
    }
}

/// Meters: indirect arrays and direct meters (one cell per entry). The
/// replicas share every meter cell: rates are *shared writes*.
impl Switch {
    /// Reads: how many cells meter `m` has (a direct meter: one per entry slot).
    pub fn meter_len(&self, m: usize) -> usize {
        self.state.meters.len(m)
    }

    /// Reads: the meter cell of meter `m` that an index names: the index
    /// itself for a meter array, the entry a handle names for a direct meter.
    pub fn meter_index(&self, m: usize, index: u32) -> Result<usize, RtError> {
        let mp = &self.plan.meters[m];
        if !mp.is_direct {
            if index as usize >= self.state.meters.len(m) {
                return fail(RtCode::InvalidIndex, format!("index {index} is outside meter {}", mp.name));
            }
            return Ok(index as usize);
        }
        let t = self
            .plan
            .tables
            .iter()
            .position(|t| t.direct_meter.as_ref().is_some_and(|(mi, _)| *mi as usize == m))
            .ok_or_else(|| RtError {
                code: RtCode::InvalidName,
                message: format!("meter {} is bound to no table", mp.name),
            })?;
        Ok(self.state.tables[t].index_of(index)? as usize)
    }

    /// Shared write: sets a meter cell's `(rate per microsecond, burst)`
    /// pairs, checked as bmv2's runtime checks them ([`check_rates`]); an
    /// empty list unconfigures it.
    pub fn set_meter_rates(&mut self, m: usize, cell: usize, rates: Vec<(f64, u32)>) -> Result<(), RtError> {
        check_rates(&rates)?;
        self.set_meter_rates_as_given(m, cell, rates)
    }

    /// Sets a meter cell's rates as given (checked by the caller).
    fn set_meter_rates_as_given(&mut self, m: usize, cell: usize, rates: Vec<(f64, u32)>) -> Result<(), RtError> {
        if self.state.meters.configure(m, cell, rates) {
            Ok(())
        } else {
            Err(outside_meter(m, cell))
        }
    }

    /// Reads: a meter cell's configured `(rate per microsecond, burst)` pairs (empty when unconfigured).
    pub fn meter_rates(&self, m: usize, cell: usize) -> Result<Vec<(f64, u32)>, RtError> {
        self.state.meters.rates(m, cell).ok_or_else(|| outside_meter(m, cell))
    }
}

/// Register arrays. The replicas share every register cell: writes are *shared writes*.
impl Switch {
    /// Reads: how many cells register array `r` has.
    pub fn register_len(&self, r: usize) -> usize {
        self.state.registers.len(r)
    }

    /// Reads: a register cell.
    pub fn register_read(&self, r: usize, i: usize) -> Result<u128, RtError> {
        self.state.registers.read(r, i).ok_or_else(|| outside_register(r, i))
    }

    /// Reads: every cell of register array `r`.
    pub fn register_values(&self, r: usize) -> Vec<u128> {
        self.state.registers.values(r)
    }

    /// Shared write: writes a register cell (the value is cut to the register's width).
    pub fn register_write(&mut self, r: usize, i: usize, v: u128) -> Result<(), RtError> {
        if self.state.registers.write(r, i, v) {
            Ok(())
        } else {
            Err(outside_register(r, i))
        }
    }

    /// Shared write: zeroes every cell of register array `r`.
    pub fn register_reset(&mut self, r: usize) {
        self.state.registers.reset(r);
    }
}

/// The packet replication engine: multicast groups and their nodes.
impl Switch {
    /// Writes: creates a multicast group (an existing one is kept).
    pub fn mc_group_create(&mut self, mgid: u32) {
        self.state.pre.groups.entry(mgid).or_default();
    }

    /// Writes: destroys a multicast group.
    pub fn mc_group_destroy(&mut self, mgid: u32) -> Result<(), RtError> {
        match self.state.pre.groups.remove(&mgid) {
            Some(_) => Ok(()),
            None => fail(RtCode::InvalidMgid, format!("no multicast group {mgid}")),
        }
    }

    /// Writes: creates a node `(rid, ports, lags)`; returns its handle.
    pub fn mc_node_create(&mut self, rid: u16, ports: BTreeSet<u32>, lags: BTreeSet<u32>) -> u32 {
        self.state.pre.create_node(rid, ports, lags)
    }

    /// Writes: replaces a node's ports and LAGs.
    pub fn mc_node_update(&mut self, h: u32, ports: BTreeSet<u32>, lags: BTreeSet<u32>) -> Result<(), RtError> {
        match self.state.pre.nodes.get_mut(h as usize) {
            Some(Some(n)) => {
                n.ports = ports;
                n.lags = lags;
                Ok(())
            }
            _ => fail(RtCode::InvalidL1Handle, format!("no node {h}")),
        }
    }

    /// Writes: sets the member ports of LAG `lag` (replacing them; an
    /// empty set leaves the LAG with no member). An index above
    /// [`crate::state::MAX_LAG_INDEX`] is refused, as bmv2 refuses it.
    pub fn mc_lag_set_membership(&mut self, lag: u32, ports: BTreeSet<u32>) -> Result<(), RtError> {
        if lag > crate::state::MAX_LAG_INDEX {
            return fail(RtCode::PreError, format!("LAG index {lag} is above {}", crate::state::MAX_LAG_INDEX));
        }
        self.state.pre.lags.insert(lag, ports);
        Ok(())
    }

    /// Reads: every LAG whose membership was set, with its member ports, by index.
    pub fn mc_lags(&self) -> impl Iterator<Item = (u32, &BTreeSet<u32>)> + '_ {
        self.state.pre.lags.iter().map(|(l, p)| (*l, p))
    }

    /// Writes: destroys a node (it leaves every group).
    pub fn mc_node_destroy(&mut self, h: u32) -> Result<(), RtError> {
        if self.state.pre.destroy_node(h) {
            Ok(())
        } else {
            fail(RtCode::InvalidL1Handle, format!("no node {h}"))
        }
    }

    /// Writes: associates (`true`) a node with a group, or dissociates it.
    pub fn mc_node_associate(&mut self, mgid: u32, h: u32, associate: bool) -> Result<(), RtError> {
        if !matches!(self.state.pre.nodes.get(h as usize), Some(Some(_))) {
            return fail(RtCode::InvalidL1Handle, format!("no node {h}"));
        }
        let Some(grp) = self.state.pre.groups.get_mut(&mgid) else {
            return fail(RtCode::InvalidMgid, format!("no multicast group {mgid}"));
        };
        let present = grp.contains(&h);
        match (associate, present) {
            (true, false) => grp.push(h),
            (false, true) => grp.retain(|x| *x != h),
            (true, true) => return fail(RtCode::PreError, format!("node {h} is already in group {mgid}")),
            (false, false) => return fail(RtCode::PreError, format!("node {h} is not in group {mgid}")),
        }
        Ok(())
    }

    /// Reads: a multicast group's node handles, in association order.
    pub fn mc_group(&self, mgid: u32) -> Option<&[u32]> {
        self.state.pre.groups.get(&mgid).map(Vec::as_slice)
    }

    /// Reads: every multicast group with its node handles, by group id.
    pub fn mc_groups(&self) -> impl Iterator<Item = (u32, &[u32])> + '_ {
        self.state.pre.groups.iter().map(|(g, nodes)| (*g, nodes.as_slice()))
    }

    /// Reads: a node by handle.
    pub fn mc_node(&self, h: u32) -> Option<&McNode> {
        self.state.pre.nodes.get(h as usize)?.as_ref()
    }

    /// Reads: every node with its handle, by handle.
    pub fn mc_nodes(&self) -> impl Iterator<Item = (u32, &McNode)> + '_ {
        self.state.pre.nodes.iter().enumerate().filter_map(|(h, n)| n.as_ref().map(|n| (h as u32, n)))
    }
}

/// Mirroring sessions, parser value sets and hash calculations.
impl Switch {
    /// Writes: adds or replaces a mirroring session.
    pub fn mirror_set(&mut self, id: u32, session: MirrorSession) {
        self.state.mirror.insert(id, session);
    }

    /// Writes: deletes a mirroring session.
    pub fn mirror_delete(&mut self, id: u32) -> Result<(), RtError> {
        match self.state.mirror.remove(&id) {
            Some(_) => Ok(()),
            None => fail(RtCode::SessionNotFound, format!("no mirroring session {id}")),
        }
    }

    /// Reads: a mirroring session.
    pub fn mirror_session(&self, id: u32) -> Option<&MirrorSession> {
        self.state.mirror.get(&id)
    }

    /// Writes: adds a value to a parser value set (an existing value is kept once).
    pub fn vset_add(&mut self, v: usize, value: &[u8], mask: Option<&[u8]>) -> Result<(), RtError> {
        let w = self.plan.vsets[v].1;
        let val = fit_value(value, w)
            .ok_or_else(|| RtError { code: RtCode::BadMatchKey, message: format!("value does not fit {w} bits") })?;
        let mask = match mask {
            Some(m) => fit_value(m, w)
                .ok_or_else(|| RtError { code: RtCode::BadMatchKey, message: format!("mask does not fit {w} bits") })?,
            None => vec![0xff; val.len()],
        };
        if !self.state.vsets[v].iter().any(|(x, m)| *x == val && *m == mask) {
            self.state.vsets[v].push((val, mask));
        }
        Ok(())
    }

    /// Writes: removes a value from a parser value set.
    pub fn vset_remove(&mut self, v: usize, value: &[u8]) -> Result<(), RtError> {
        let w = self.plan.vsets[v].1;
        let val = fit_value(value, w)
            .ok_or_else(|| RtError { code: RtCode::BadMatchKey, message: format!("value does not fit {w} bits") })?;
        self.state.vsets[v].retain(|(x, _)| *x != val);
        Ok(())
    }

    /// Writes: empties a parser value set.
    pub fn vset_clear(&mut self, v: usize) {
        self.state.vsets[v].clear();
    }

    /// Reads: a parser value set's `(value, mask)` pairs, in insertion order.
    pub fn vset_values(&self, v: usize) -> &[(Vec<u8>, Vec<u8>)] {
        &self.state.vsets[v]
    }

    /// Writes: sets the parameters of custom CRC calculation `c`; a
    /// calculation of another kind or width, or parameters that make no
    /// CRC, are refused and change nothing.
    pub fn set_crc_params(&mut self, c: usize, params: CrcParams) -> Result<(), ConfigError> {
        self.state.calc_algos[c].set_crc_params(params)
    }
}

/// The per-packet trace, data-plane notifications and the state as a whole.
impl Switch {
    /// Writes: turns the per-packet trace on (a trace already on goes on,
    /// with its packet ids) or off (dropping what was not drained).
    pub fn set_trace(&mut self, on: bool) {
        match (on, &self.trace) {
            (true, None) => self.trace = Some(crate::trace::Trace::new()),
            (false, Some(_)) => self.trace = None,
            _ => {}
        }
    }

    /// Reads: everything packets can change besides what they emit (every
    /// counter, register and direct counter), as text: two switches that
    /// ran the same packets must give the same.
    pub fn packet_state_summary(&self) -> String {
        let p = self.program();
        let counters: Vec<&[(u64, u64)]> = (0..p.counters.len()).map(|c| self.counter_values(c)).collect();
        let registers: Vec<Vec<u128>> = (0..p.registers.len()).map(|r| self.register_values(r)).collect();
        let entries: Vec<(u64, u64)> = (0..p.tables.len())
            .flat_map(|t| self.entries(t).map(|(_, e)| (e.packets, e.bytes)).collect::<Vec<_>>())
            .collect();
        format!("counters {counters:?}\nregisters {registers:?}\ndirect counters {entries:?}")
    }

    /// Reads: whether packets are traced.
    pub fn tracing(&self) -> bool {
        self.trace.is_some()
    }

    /// Writes: takes the trace since the last drain as bmv2's log lines,
    /// every level, one per line (`None` when tracing is off); tracing
    /// stays on.
    pub fn drain_trace(&mut self) -> Option<String> {
        let plan = &self.plan;
        self.trace.as_mut().map(|t| t.take_text(plan))
    }

    /// Writes: hands every `digest()` message the pipeline produced since the
    /// last drain to `to`, oldest first.
    pub fn drain_digests(&mut self, to: &mut dyn FnMut(Digest)) {
        for d in self.state.digests.drain(..) {
            to(d);
        }
    }

    /// Writes: puts all state back as loaded: const entries and declared
    /// default actions only, every counter, register and meter zero,
    /// no members, groups, multicast groups, sessions or value set members.
    /// Registers and meters get fresh cells (a replica sharing the old ones
    /// no longer shares them).
    pub fn reset_state(&mut self) -> Result<(), crate::CompileError> {
        self.state = crate::state::State::new(&self.plan)?;
        Ok(())
    }

    /// Reads: a copy of the state as loaded (what [`Switch::reset_state`]
    /// puts back), to give to several switches with
    /// [`Switch::restore_state`].
    pub fn loaded_state(&self) -> Result<SavedState, crate::CompileError> {
        Ok(SavedState(crate::state::State::new(&self.plan)?))
    }

    /// Reads: a copy of the current state, registers and meters included
    /// (not shared with this switch or its replicas: later packets here do
    /// not change the copy).
    pub fn save_state(&self) -> SavedState {
        SavedState(self.state.clone()).unshared()
    }

    /// Writes: replaces the whole state by a copy of `saved` (from
    /// [`Switch::save_state`] or [`Switch::loaded_state`] of a switch of
    /// the same program). The registers and meters are `saved`'s own:
    /// every switch restored from one `SavedState` shares them, as replicas
    /// do; restore from [`SavedState::unshared`] copies to keep them apart.
    /// The tracing setting is no state and stays.
    pub fn restore_state(&mut self, saved: &SavedState) {
        self.state = saved.0.clone();
    }
}

/// A copy of a switch's state: table entries, action profiles, counters,
/// meters, registers, the replication engine, mirroring, value sets.
/// Cheap to take: the direct-indexed LPM structures are shared
/// copy-on-write with the switch they came from.
#[derive(Debug)]
pub struct SavedState(crate::state::State);

impl SavedState {
    /// The same state with registers and meters of its own (no longer
    /// shared with the switches restored from `self`).
    pub fn unshared(mut self) -> SavedState {
        self.0.registers = self.0.registers.deep_copy();
        self.0.meters = self.0.meters.deep_copy();
        self
    }

    /// [`SavedState::unshared`] of a copy of `self`.
    pub fn unshared_copy(&self) -> SavedState {
        SavedState(self.0.clone()).unshared()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_fit_their_width_or_are_refused() {
        assert_eq!(fit_value(&[0, 0, 5], 9), Some(vec![0, 5]));
        assert_eq!(fit_value(&[1, 0xff], 9), Some(vec![1, 0xff]));
        assert_eq!(fit_value(&[2, 0], 9), None);
        assert_eq!(fit_value(&[], 8), Some(vec![0]));
        assert_eq!(fit_value(&[1, 0], 8), None);
    }

    fn edge() -> Switch {
        crate::load_switch(include_str!("../../../examples/edge.json")).expect("the edge example loads")
    }

    #[test]
    fn checked_writes_refuse_what_the_as_given_ones_let_through() {
        let mut sw = edge();
        let p = sw.index_of(Resource::Profile, "EdgeIngress.ecmp").unwrap();
        let t = sw.index_of(Resource::Table, "EdgeIngress.routes").unwrap();
        let plan = sw.program();
        let drop =
            plan.tables[t].actions.iter().copied().find(|a| plan.actions[*a as usize].name == "EdgeIngress.drop");
        let drop = drop.expect("routes can drop");
        let permit = sw.index_of(Resource::Action, "EdgeIngress.permit").unwrap() as u32;
        // An action of no table the profile serves.
        assert_eq!(sw.add_member(p, permit, Box::default()).unwrap_err().code, RtCode::InvalidActionName);
        let stray = sw.add_member_as_given(p, permit, Box::default()).unwrap();
        // A member an entry uses.
        let m = sw.add_member(p, drop, Box::default()).unwrap();
        sw.add_entry(t, vec![FieldMatch::Lpm(vec![10, 0, 0, 0], 8)], EntryAction::Member(m), 0).unwrap();
        assert_eq!(sw.delete_member(p, m).unwrap_err().code, RtCode::MbrStillUsed);
        sw.delete_member_as_given(p, m).unwrap();
        assert_eq!(sw.member(p, m), None);
        assert_eq!(sw.delete_member(p, stray), Ok(()));
        // Committed above peak.
        let meter = sw.index_of(Resource::Meter, "EdgeIngress.policer").unwrap();
        let rates = vec![(2.0, 10), (1.0, 10)];
        assert_eq!(sw.set_meter_rates(meter, 0, rates.clone()).unwrap_err().code, RtCode::InvalidInfoRateValue);
        assert_eq!(sw.set_meter_rates(meter, 0, vec![(1.0, 10)]).unwrap_err().code, RtCode::BadRatesList);
        sw.set_meter_rates(meter, 0, vec![(1.0, 10), (2.0, 10)]).unwrap();
        assert_eq!(sw.meter_rates(meter, 0).unwrap(), vec![(1.0, 10), (2.0, 10)]);
    }

    #[test]
    fn reset_state_puts_back_the_state_as_loaded() {
        let mut sw = edge();
        let r = sw.index_of(Resource::Register, "EdgeIngress.last_len").unwrap();
        let p = sw.index_of(Resource::Profile, "EdgeIngress.ecmp").unwrap();
        sw.register_write(r, 3, 99).unwrap();
        sw.create_group(p).unwrap();
        sw.mirror_set(5, MirrorSession { port: Some(2), ..Default::default() });
        sw.set_trace(true);
        sw.reset_state().unwrap();
        assert_eq!(sw.register_read(r, 3), Ok(0));
        assert_eq!(sw.groups(p).count(), 0);
        assert_eq!(sw.mirror_session(5), None);
        // The trace is no state of the program: it stays on.
        assert_eq!(sw.drain_trace(), Some(String::new()));
    }

    #[test]
    fn a_saved_state_comes_back_whole_and_apart_from_later_packets() {
        let mut sw = edge();
        let r = sw.index_of(Resource::Register, "EdgeIngress.last_len").unwrap();
        let p = sw.index_of(Resource::Profile, "EdgeIngress.ecmp").unwrap();
        sw.register_write(r, 3, 99).unwrap();
        let g = sw.create_group(p).unwrap();
        let saved = sw.save_state();
        sw.register_write(r, 3, 7).unwrap();
        sw.delete_group(p, g).unwrap();
        sw.restore_state(&saved.unshared_copy());
        assert_eq!(sw.register_read(r, 3), Ok(99));
        assert_eq!(sw.groups(p).count(), 1);
        // The restored copy's registers are not the saved ones.
        sw.register_write(r, 3, 5).unwrap();
        sw.restore_state(&saved);
        assert_eq!(sw.register_read(r, 3), Ok(99));
        // Two switches restored from one saved state share its registers, as replicas do.
        let mut other = edge();
        other.restore_state(&saved);
        sw.register_write(r, 4, 11).unwrap();
        assert_eq!(other.register_read(r, 4), Ok(11));
        // The state as loaded.
        sw.restore_state(&sw.loaded_state().unwrap());
        assert_eq!((sw.register_read(r, 3), sw.groups(p).count()), (Ok(0), 0));
    }
}
