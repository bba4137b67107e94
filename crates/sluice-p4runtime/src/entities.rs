//! P4Runtime entities to and from the engine's runtime API: table entries,
//! action profile members and groups, counters, meters, registers, the
//! replication engine, value sets.
//!
//! Writes go through a [`Target`]: the worker pool for real, or a scratch
//! copy of the switch when a batch must be tried whole first (rollback and
//! data-plane atomicity). Reads work on a switch whose counters are merged.

// `controller_metadata` is deprecated in the schema but still read and echoed.
#![allow(deprecated)]

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use prost::Message;
use sluice_engine::runtime::{fit_value, EntryAction, FieldMatch, MatchKind, MirrorSession, RtCode, RtError};
use sluice_engine::Switch;
use sluice_node::Session;
use tonic::Code;

use crate::pipeline::{Pipeline, TableIds};
use crate::proto::p4::v1 as p4;
use p4::entity::Entity as E;

/// Why one update or read failed: a gRPC code and a sentence.
#[derive(Debug, Clone, PartialEq)]
pub struct Fail {
    pub code: Code,
    pub message: String,
}

/// Where a Read puts what it finds: each entity kept by the filter is
/// encoded at once, as a ReadResponse's `entities` field, into parts of at
/// most `chunk` bytes (one entity larger than that is a part of its own).
/// The answer is held in its wire form, far smaller than the messages.
pub struct ReadOut<'a> {
    chunk: usize,
    keep: &'a dyn Fn(&p4::Entity) -> bool,
    parts: Vec<Vec<u8>>,
    cur: Vec<u8>,
}

impl<'a> ReadOut<'a> {
    pub fn new(chunk: usize, keep: &'a dyn Fn(&p4::Entity) -> bool) -> ReadOut<'a> {
        ReadOut { chunk, keep, parts: Vec::new(), cur: Vec::new() }
    }

    pub fn push(&mut self, e: p4::Entity) {
        if !(self.keep)(&e) {
            return;
        }
        let len = e.encoded_len();
        let n = 1 + prost::length_delimiter_len(len) + len;
        if !self.cur.is_empty() && self.cur.len() + n > self.chunk {
            self.parts.push(std::mem::take(&mut self.cur));
        }
        prost::encoding::message::encode(1, &e, &mut self.cur);
    }

    /// The encoded ReadResponses, in order (one, empty, when nothing was found).
    pub fn finish(mut self) -> Vec<Vec<u8>> {
        if !self.cur.is_empty() || self.parts.is_empty() {
            self.parts.push(self.cur);
        }
        self.parts
    }
}

/// The P4 id an entity belongs to (its table, profile, counter, meter,
/// register, value set, digest or extern), as role configurations name
/// it; `None` for PRE entries, which have none.
pub fn p4_id(e: &E) -> Option<u32> {
    match e {
        E::TableEntry(t) => Some(t.table_id),
        E::ActionProfileMember(m) => Some(m.action_profile_id),
        E::ActionProfileGroup(g) => Some(g.action_profile_id),
        E::CounterEntry(c) => Some(c.counter_id),
        E::DirectCounterEntry(d) => d.table_entry.as_ref().map(|t| t.table_id),
        E::MeterEntry(m) => Some(m.meter_id),
        E::DirectMeterEntry(d) => d.table_entry.as_ref().map(|t| t.table_id),
        E::RegisterEntry(r) => Some(r.register_id),
        E::PacketReplicationEngineEntry(_) => None,
        E::ValueSetEntry(v) => Some(v.value_set_id),
        E::DigestEntry(d) => Some(d.digest_id),
        E::ExternEntry(x) => Some(x.extern_id),
    }
}

/// Shorthand for a failure.
pub fn fail<T>(code: Code, message: impl Into<String>) -> Result<T, Fail> {
    Err(Fail { code, message: message.into() })
}

impl From<RtError> for Fail {
    fn from(e: RtError) -> Fail {
        let code = match e.code {
            RtCode::DuplicateEntry => Code::AlreadyExists,
            RtCode::InvalidHandle
            | RtCode::ExpiredHandle
            | RtCode::InvalidMgid
            | RtCode::InvalidL1Handle
            | RtCode::SessionNotFound
            | RtCode::InvalidMbrHandle
            | RtCode::InvalidGrpHandle => Code::NotFound,
            RtCode::TableFull => Code::ResourceExhausted,
            RtCode::MbrStillUsed | RtCode::GrpStillUsed | RtCode::EmptyGrp => Code::FailedPrecondition,
            RtCode::DefaultActionIsConst | RtCode::DefaultEntryIsConst | RtCode::ImmutableTableEntries => {
                Code::PermissionDenied
            }
            RtCode::InvalidIndex => Code::OutOfRange,
            _ => Code::InvalidArgument,
        };
        Fail { code, message: e.message }
    }
}

/// A replicated change as the pool replays it.
pub type Change = Arc<dyn Fn(&mut Switch, bool) -> Result<u32, RtError> + Send + Sync>;

/// Where writes land.
pub trait Target {
    /// The state to validate against (the master, or the scratch copy).
    fn sw(&self) -> &Switch;
    /// A change every replica makes.
    fn apply(&mut self, f: Change) -> Result<u32, RtError>;
    /// A change of shared state (registers, meters), made once.
    fn apply_shared(&mut self, f: &dyn Fn(&mut Switch) -> Result<(), RtError>) -> Result<(), RtError>;
}

impl Target for Session<'_, Switch> {
    fn sw(&self) -> &Switch {
        self.view()
    }
    fn apply(&mut self, f: Change) -> Result<u32, RtError> {
        self.try_change(move |sw, first| f(sw, first))
    }
    fn apply_shared(&mut self, f: &dyn Fn(&mut Switch) -> Result<(), RtError>) -> Result<(), RtError> {
        self.change_shared(f)
    }
}

/// A scratch switch: changes land on it alone.
pub struct Scratch(pub Switch);

impl Target for Scratch {
    fn sw(&self) -> &Switch {
        &self.0
    }
    fn apply(&mut self, f: Change) -> Result<u32, RtError> {
        f(&mut self.0, true)
    }
    fn apply_shared(&mut self, f: &dyn Fn(&mut Switch) -> Result<(), RtError>) -> Result<(), RtError> {
        f(&mut self.0)
    }
}

/// The controller's names for things the engine numbers itself: member and
/// group ids, multicast nodes, clone sessions. Kept per pipeline.
#[derive(Debug, Clone, Default)]
pub struct Handles {
    /// (profile id, member id) -> engine member handle; and back.
    pub members: HashMap<(u32, u32), u32>,
    pub member_ids: HashMap<(u32, u32), u32>,
    /// (profile id, group id) -> engine group handle; and back.
    pub groups: HashMap<(u32, u32), u32>,
    pub group_ids: HashMap<(u32, u32), u32>,
    /// Multicast group id -> its nodes.
    pub mc_nodes: HashMap<u32, Vec<u32>>,
    /// Multicast groups as written (replicas in the controller's order).
    pub mc_groups: HashMap<u32, p4::MulticastGroupEntry>,
    /// Clone sessions as written.
    pub clones: HashMap<u32, p4::CloneSessionEntry>,
    /// (table index, entry handle) -> (controller_metadata, metadata).
    pub entry_meta: HashMap<(usize, u32), (u64, Vec<u8>)>,
    /// (table index, entry handle) -> the one-shot group and members behind it.
    pub one_shots: HashMap<(usize, u32), (usize, u32, Vec<u32>)>,
    /// Digest configurations by digest id.
    pub digests: HashMap<u32, p4::digest_entry::Config>,
    /// Entries with an idle timeout: (table index, handle) -> their aging.
    pub aging: HashMap<(usize, u32), Aging>,
}

/// One entry's idle timeout: its length, when it was (re)armed, and whether
/// the controller has been told it went idle (told once, until it is hit again).
#[derive(Debug, Clone, Copy)]
pub struct Aging {
    pub timeout: std::time::Duration,
    pub since: std::time::Instant,
    pub notified: bool,
}

/// Multicast groups Sluice makes for clone sessions with several replicas
/// live above this id, out of the controller's way.
pub const CLONE_GROUP_BASE: u32 = 0x8000_0000;

/// Engine priority for a P4Runtime priority: P4Runtime's higher wins, the engine's lower wins.
pub fn engine_priority(p: i32) -> i32 {
    i32::MAX - p
}

/// A value right-aligned in its field's bytes; `what` names it in the error (built only then).
fn canonical_with(v: &[u8], width: u32, what: impl Fn() -> String) -> Result<Vec<u8>, Fail> {
    fit_value(v, width).ok_or_else(|| Fail {
        code: Code::InvalidArgument,
        message: format!("{}: value 0x{} does not fit {width} bits", what(), hex(v)),
    })
}

fn canonical(v: &[u8], width: u32, what: &str) -> Result<Vec<u8>, Fail> {
    canonical_with(v, width, || what.to_string())
}

fn hex(v: &[u8]) -> String {
    v.iter().map(|b| format!("{b:02x}")).collect()
}

/// Minimal big-endian bytes of a value (P4Runtime's canonical form: at least one byte).
pub fn minimal(v: &[u8]) -> Vec<u8> {
    let first = v.iter().position(|b| *b != 0).unwrap_or(v.len().saturating_sub(1));
    v[first.min(v.len())..].to_vec()
}

/// The engine match key of a table entry; fields left out are wildcards.
fn match_key(t: &TableIds, fields: &[p4::FieldMatch]) -> Result<Vec<FieldMatch>, Fail> {
    use p4::field_match::FieldMatchType as M;
    let mut out: Vec<Option<FieldMatch>> = vec![None; t.key.len()];
    for f in fields {
        let Some(pos) = t.key.iter().position(|k| k.id == f.field_id) else {
            return fail(Code::InvalidArgument, format!("table {} has no match field {}", t.id, f.field_id));
        };
        if out[pos].is_some() {
            return fail(Code::InvalidArgument, format!("match field {} is given twice", f.field_id));
        }
        let k = &t.key[pos];
        let w = k.bitwidth;
        let fid = f.field_id;
        let what = &|| format!("match field {fid}");
        let m = match (k.kind, &f.field_match_type) {
            (MatchKind::Exact, Some(M::Exact(x))) => FieldMatch::Exact(canonical_with(&x.value, w, what)?),
            (MatchKind::Valid, Some(M::Exact(x))) => FieldMatch::Valid(x.value.iter().any(|b| *b != 0)),
            (MatchKind::Lpm, Some(M::Lpm(x))) => {
                if x.prefix_len < 0 || x.prefix_len as u32 > w {
                    return fail(
                        Code::InvalidArgument,
                        format!("{}: prefix length {} outside 0..={w}", what(), x.prefix_len),
                    );
                }
                FieldMatch::Lpm(canonical_with(&x.value, w, what)?, x.prefix_len as u32)
            }
            (MatchKind::Ternary, Some(M::Ternary(x))) => {
                FieldMatch::Ternary(canonical_with(&x.value, w, what)?, canonical_with(&x.mask, w, what)?)
            }
            (MatchKind::Range, Some(M::Range(x))) => {
                let (lo, hi) = (canonical_with(&x.low, w, what)?, canonical_with(&x.high, w, what)?);
                if lo > hi {
                    return fail(Code::InvalidArgument, format!("{}: range low is above high", what()));
                }
                FieldMatch::Range(lo, hi)
            }
            (MatchKind::Optional, Some(M::Optional(x))) => {
                FieldMatch::Optional(Some(canonical_with(&x.value, w, what)?))
            }
            (kind, _) => {
                return fail(
                    Code::InvalidArgument,
                    format!("{} is a {kind:?} field; the match given is another kind", what()),
                )
            }
        };
        out[pos] = Some(m);
    }
    t.key
        .iter()
        .zip(out)
        .map(|(k, m)| match m {
            Some(m) => Ok(m),
            None => {
                let n = (k.bitwidth as usize).div_ceil(8);
                Ok(match k.kind {
                    MatchKind::Lpm => FieldMatch::Lpm(vec![0; n], 0),
                    MatchKind::Ternary => FieldMatch::Ternary(vec![0; n], vec![0; n]),
                    MatchKind::Range => FieldMatch::Range(vec![0; n], all_ones(k.bitwidth)),
                    MatchKind::Optional => FieldMatch::Optional(None),
                    _ => return fail(Code::InvalidArgument, format!("exact match field {} is missing", k.id)),
                })
            }
        })
        .collect()
}

/// The largest value of a field, right-aligned in its bytes.
fn all_ones(width: u32) -> Vec<u8> {
    let n = (width as usize).div_ceil(8);
    let mut v = vec![0xff; n];
    let spare = (n * 8) as u32 - width;
    if spare > 0 {
        v[0] >>= spare;
    }
    v
}

/// P4Runtime field matches of an engine key (wildcards left out).
fn key_fields(t: &TableIds, key: &[FieldMatch]) -> Vec<p4::FieldMatch> {
    use p4::field_match::{self as fm, FieldMatchType as M};
    let mut out = Vec::new();
    for (k, m) in t.key.iter().zip(key) {
        let ty = match m {
            FieldMatch::Exact(v) => Some(M::Exact(fm::Exact { value: minimal(v) })),
            FieldMatch::Valid(b) => Some(M::Exact(fm::Exact { value: vec![u8::from(*b)] })),
            FieldMatch::Lpm(_, 0) => None,
            FieldMatch::Lpm(v, l) => Some(M::Lpm(fm::Lpm { value: minimal(v), prefix_len: *l as i32 })),
            FieldMatch::Ternary(_, m) if m.iter().all(|b| *b == 0) => None,
            FieldMatch::Ternary(v, m) => Some(M::Ternary(fm::Ternary { value: minimal(v), mask: minimal(m) })),
            FieldMatch::Range(lo, hi) => {
                let full = lo.iter().all(|b| *b == 0) && *hi == all_ones(k.bitwidth);
                (!full).then(|| M::Range(fm::Range { low: minimal(lo), high: minimal(hi) }))
            }
            FieldMatch::Optional(None) => None,
            FieldMatch::Optional(Some(v)) => Some(M::Optional(fm::Optional { value: minimal(v) })),
        };
        if let Some(ty) = ty {
            out.push(p4::FieldMatch { field_id: k.id, field_match_type: Some(ty) });
        }
    }
    out
}

/// Engine action and data for a P4Runtime action, checked against a table's action list.
fn action(pl: &Pipeline, sw: &Switch, a: &p4::Action, table: Option<&TableIds>) -> Result<(u32, Box<[u8]>), Fail> {
    let Some(ai) = pl.ids.actions.get(&a.action_id) else {
        return fail(Code::InvalidArgument, format!("unknown action id {}", a.action_id));
    };
    if let Some(t) = table {
        if !t.actions.contains(&a.action_id) {
            return fail(Code::InvalidArgument, format!("action {} is not an action of table {}", a.action_id, t.id));
        }
    }
    let mut values = Vec::with_capacity(ai.params.len());
    for (pid, w) in &ai.params {
        let Some(p) = a.params.iter().find(|p| p.param_id == *pid) else {
            return fail(Code::InvalidArgument, format!("action {}: parameter {pid} is missing", a.action_id));
        };
        values.push(canonical_with(&p.value, *w, || format!("action {} parameter {pid}", a.action_id))?);
    }
    if a.params.len() != ai.params.len() {
        return fail(Code::InvalidArgument, format!("action {}: unknown or repeated parameters", a.action_id));
    }
    let index = pl.ids.engine_action(sw, ai, table.map(|t| t.index));
    Ok((index, sw.pack_action(index, &values)?))
}

fn action_out(pl: &Pipeline, sw: &Switch, index: u32, data: &[u8]) -> p4::Action {
    let id = pl.ids.action_by_index.get(&index).copied().unwrap_or(0);
    let params = pl.ids.actions.get(&id).map(|a| a.params.clone()).unwrap_or_default();
    p4::Action {
        action_id: id,
        params: params
            .iter()
            .zip(sw.unpack_action(index, data))
            .map(|((pid, _), v)| p4::action::Param { param_id: *pid, value: minimal(&v) })
            .collect(),
    }
}

fn table(pl: &Pipeline, id: u32) -> Result<&TableIds, Fail> {
    pl.ids.tables.get(&id).ok_or_else(|| Fail { code: Code::NotFound, message: format!("unknown table id {id}") })
}

/// The update kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Insert,
    Modify,
    Delete,
}

/// Applies one update.
pub fn write(pl: &Pipeline, h: &mut Handles, tg: &mut dyn Target, op: Op, e: &E) -> Result<(), Fail> {
    match e {
        E::TableEntry(te) => write_table_entry(pl, h, tg, op, te),
        E::ActionProfileMember(m) => write_member(pl, h, tg, op, m),
        E::ActionProfileGroup(g) => write_group(pl, h, tg, op, g),
        E::CounterEntry(c) => {
            no_insert(op, "counter entries")?;
            let Some(&ci) = pl.ids.counters.get(&c.counter_id) else {
                return fail(Code::NotFound, format!("unknown counter id {}", c.counter_id));
            };
            let d = c.data.unwrap_or_default();
            let (p, b) = (d.packet_count as u64, d.byte_count as u64);
            let size = tg.sw().counter_len(ci);
            let cells = indices(&c.index, size, "counter")?;
            tg.apply(Arc::new(move |sw, first| {
                for &i in &cells {
                    sw.counter_write(ci, i, if first { (p, b) } else { (0, 0) })?;
                }
                Ok(0)
            }))?;
            Ok(())
        }
        E::DirectCounterEntry(d) => {
            no_insert(op, "direct counter entries")?;
            let te = d
                .table_entry
                .as_ref()
                .ok_or_else(|| Fail { code: Code::InvalidArgument, message: "no table_entry".into() })?;
            let t = table(pl, te.table_id)?;
            if t.direct_counter.is_none() {
                return fail(Code::InvalidArgument, format!("table {} has no direct counter", t.id));
            }
            let hd = find(pl, tg.sw(), t, te)?;
            let cd = d.data.unwrap_or_default();
            let (p, b, ti) = (cd.packet_count as u64, cd.byte_count as u64, t.index);
            tg.apply(Arc::new(move |sw, first| {
                sw.entry_counter_write(ti, hd, if first { (p, b) } else { (0, 0) })?;
                Ok(0)
            }))?;
            Ok(())
        }
        E::MeterEntry(m) => {
            no_insert(op, "meter entries")?;
            let Some(&mi) = pl.ids.meters.get(&m.meter_id) else {
                return fail(Code::NotFound, format!("unknown meter id {}", m.meter_id));
            };
            let rates = meter_rates(m.config.as_ref())?;
            let size = tg.sw().meter_len(mi);
            let cells = indices(&m.index, size, "meter")?;
            tg.apply_shared(&|sw| cells.iter().try_for_each(|&i| sw.set_meter_rates(mi, i, rates.clone())))?;
            Ok(())
        }
        E::DirectMeterEntry(d) => {
            no_insert(op, "direct meter entries")?;
            let te = d
                .table_entry
                .as_ref()
                .ok_or_else(|| Fail { code: Code::InvalidArgument, message: "no table_entry".into() })?;
            let t = table(pl, te.table_id)?;
            let Some((mi, _)) = tg.sw().program().tables[t.index].direct_meter else {
                return fail(Code::InvalidArgument, format!("table {} has no direct meter", t.id));
            };
            let hd = find(pl, tg.sw(), t, te)?;
            let rates = meter_rates(d.config.as_ref())?;
            let cell = tg.sw().meter_index(mi as usize, hd)?;
            tg.apply_shared(&|sw| sw.set_meter_rates(mi as usize, cell, rates.clone()))?;
            Ok(())
        }
        E::RegisterEntry(r) => {
            no_insert(op, "register entries")?;
            let Some(&ri) = pl.ids.registers.get(&r.register_id) else {
                return fail(Code::NotFound, format!("unknown register id {}", r.register_id));
            };
            let v = match r.data.as_ref().and_then(|d| d.data.as_ref()) {
                Some(p4::p4_data::Data::Bitstring(b)) => b.clone(),
                _ => return fail(Code::InvalidArgument, "register data must be a bitstring"),
            };
            let w = tg.sw().program().registers[ri].width;
            let v = canonical(&v, w, "register value")?;
            let v = v.iter().fold(0u128, |x, b| (x << 8) | u128::from(*b));
            let size = tg.sw().register_len(ri);
            let cells = indices(&r.index, size, "register")?;
            tg.apply_shared(&|sw| cells.iter().try_for_each(|&i| sw.register_write(ri, i, v)))?;
            Ok(())
        }
        E::PacketReplicationEngineEntry(pre) => match &pre.r#type {
            Some(p4::packet_replication_engine_entry::Type::MulticastGroupEntry(g)) => write_mc_group(h, tg, op, g),
            Some(p4::packet_replication_engine_entry::Type::CloneSessionEntry(c)) => write_clone(h, tg, op, c),
            None => fail(Code::InvalidArgument, "empty packet replication engine entry"),
        },
        E::ValueSetEntry(v) => {
            if op != Op::Modify {
                return fail(Code::InvalidArgument, "value sets are written with MODIFY only");
            }
            let Some((vi, fields)) = pl.ids.value_sets.get(&v.value_set_id).cloned() else {
                return fail(Code::NotFound, format!("unknown value set id {}", v.value_set_id));
            };
            if fields.len() != 1 {
                return fail(Code::Unimplemented, "value sets with several match fields are not supported");
            }
            let w = fields[0].1;
            let mut values = Vec::new();
            for m in &v.members {
                use p4::field_match::FieldMatchType as M;
                let f = m.r#match.first().and_then(|f| f.field_match_type.clone());
                values.push(match f {
                    Some(M::Exact(x)) => (canonical(&x.value, w, "value set member")?, None),
                    Some(M::Ternary(x)) => {
                        (canonical(&x.value, w, "value set member")?, Some(canonical(&x.mask, w, "mask")?))
                    }
                    _ => return fail(Code::InvalidArgument, "value set members are exact or ternary matches"),
                });
            }
            tg.apply(Arc::new(move |sw, _| {
                sw.vset_clear(vi);
                for (v, m) in &values {
                    sw.vset_add(vi, v, m.as_deref())?;
                }
                Ok(0)
            }))?;
            Ok(())
        }
        E::DigestEntry(d) => {
            if !pl.ids.digests.contains_key(&d.digest_id) {
                return fail(Code::NotFound, format!("unknown digest id {}", d.digest_id));
            }
            match op {
                Op::Delete => h.digests.remove(&d.digest_id).map(|_| ()).ok_or_else(|| Fail {
                    code: Code::NotFound,
                    message: format!("digest {} is not configured", d.digest_id),
                }),
                _ => {
                    let cfg = d
                        .config
                        .ok_or_else(|| Fail { code: Code::InvalidArgument, message: "digest config missing".into() })?;
                    if op == Op::Insert && h.digests.contains_key(&d.digest_id) {
                        return fail(Code::AlreadyExists, format!("digest {} is already configured", d.digest_id));
                    }
                    if op == Op::Modify && !h.digests.contains_key(&d.digest_id) {
                        return fail(Code::NotFound, format!("digest {} is not configured", d.digest_id));
                    }
                    h.digests.insert(d.digest_id, cfg);
                    Ok(())
                }
            }
        }
        E::ExternEntry(_) => fail(Code::Unimplemented, "v1model has no P4Runtime extern entries"),
    }
}

/// The cells an optional index names in an array of `size`: that one (checked) or all of them.
fn indices(index: &Option<p4::Index>, size: usize, what: &str) -> Result<Vec<usize>, Fail> {
    match index {
        Some(i) if i.index < 0 || i.index as usize >= size => {
            fail(Code::OutOfRange, format!("{what} index {} outside 0..{size}", i.index))
        }
        Some(i) => Ok(vec![i.index as usize]),
        None => Ok((0..size).collect()),
    }
}

fn no_insert(op: Op, what: &str) -> Result<(), Fail> {
    if op == Op::Modify {
        Ok(())
    } else {
        fail(Code::InvalidArgument, format!("{what} are written with MODIFY only"))
    }
}

/// `(rate per µs, burst)` pairs of a meter config (units per second in P4Runtime); none resets.
fn meter_rates(c: Option<&p4::MeterConfig>) -> Result<Vec<(f64, u32)>, Fail> {
    let Some(c) = c else { return Ok(Vec::new()) };
    if c.cir < 0 || c.pir < 0 || c.cburst < 0 || c.pburst < 0 {
        return fail(Code::InvalidArgument, "meter rates and bursts must not be negative");
    }
    if c.cir > c.pir {
        return fail(Code::InvalidArgument, "meter cir is above pir");
    }
    let burst = |b: i64| b.min(i64::from(u32::MAX)) as u32;
    Ok(vec![(c.cir as f64 / 1e6, burst(c.cburst)), (c.pir as f64 / 1e6, burst(c.pburst))])
}

fn meter_config(r: &[(f64, u32)]) -> Option<p4::MeterConfig> {
    (r.len() == 2).then(|| p4::MeterConfig {
        cir: (r[0].0 * 1e6).round() as i64,
        cburst: i64::from(r[0].1),
        pir: (r[1].0 * 1e6).round() as i64,
        pburst: i64::from(r[1].1),
        eburst: 0,
    })
}

/// The handle of the entry a table entry's key names.
fn find(_pl: &Pipeline, sw: &Switch, t: &TableIds, te: &p4::TableEntry) -> Result<u32, Fail> {
    let key = match_key(t, &te.r#match)?;
    let prio = if sw.table_has_priority(t.index) { engine_priority(te.priority) } else { 0 };
    sw.find_entry(t.index, key, prio)?
        .ok_or_else(|| Fail { code: Code::NotFound, message: format!("table {}: no entry with this key", t.id) })
}

fn write_table_entry(
    pl: &Pipeline,
    h: &mut Handles,
    tg: &mut dyn Target,
    op: Op,
    te: &p4::TableEntry,
) -> Result<(), Fail> {
    let t = table(pl, te.table_id)?;
    let ti = t.index;
    // A const table's entries are the program's; its default entry may be
    // changed unless the program makes the default action const (the
    // engine refuses that with DefaultActionIsConst / DefaultEntryIsConst).
    if t.is_const && !te.is_default_action {
        return fail(Code::PermissionDenied, format!("table {} is const", t.id));
    }
    if te.is_default_action {
        if op != Op::Modify {
            return fail(Code::InvalidArgument, "the default entry is written with MODIFY only");
        }
        if !te.r#match.is_empty() {
            return fail(Code::InvalidArgument, "a default entry has no match key");
        }
        return match te.action.as_ref().and_then(|a| a.r#type.as_ref()) {
            None => {
                tg.apply(Arc::new(move |sw, _| {
                    sw.reset_default_entry(ti);
                    Ok(0)
                }))?;
                Ok(())
            }
            Some(p4::table_action::Type::Action(a)) => {
                let (ai, data) = action(pl, tg.sw(), a, Some(t))?;
                tg.apply(Arc::new(move |sw, _| sw.set_default_entry(ti, ai, data.clone()).map(|_| 0)))?;
                Ok(())
            }
            Some(_) => {
                fail(Code::Unimplemented, "an action profile member or group as default action is not supported")
            }
        };
    }
    let sw = tg.sw();
    let has_prio = sw.table_has_priority(ti);
    if has_prio && op == Op::Insert && te.priority <= 0 {
        return fail(Code::InvalidArgument, format!("table {} needs a priority > 0", t.id));
    }
    if !has_prio && te.priority != 0 {
        return fail(Code::InvalidArgument, format!("table {} takes no priority", t.id));
    }
    let key = match_key(t, &te.r#match)?;
    let prio = if has_prio { engine_priority(te.priority) } else { 0 };
    if op == Op::Delete {
        let hd = sw
            .find_entry(ti, key, prio)?
            .ok_or_else(|| Fail { code: Code::NotFound, message: "no such entry".into() })?;
        tg.apply(Arc::new(move |sw, _| sw.delete_entry(ti, hd).map(|_| 0)))?;
        h.entry_meta.remove(&(ti, hd));
        h.aging.remove(&(ti, hd));
        if let Some((p, g, members)) = h.one_shots.remove(&(ti, hd)) {
            tg.apply(Arc::new(move |sw, _| {
                sw.delete_group(p, g)?;
                for m in &members {
                    sw.delete_member(p, *m)?;
                }
                Ok(0)
            }))?;
        }
        return Ok(());
    }
    let act = te.action.as_ref().and_then(|a| a.r#type.as_ref());
    let ea = match act {
        None => return fail(Code::InvalidArgument, "a table entry needs an action"),
        Some(p4::table_action::Type::Action(a)) => {
            if t.profile.is_some() {
                return fail(
                    Code::InvalidArgument,
                    format!("table {} is indirect: use a member, group or action set", t.id),
                );
            }
            let (ai, data) = action(pl, sw, a, Some(t))?;
            EntryAction::Direct { action: ai, data }
        }
        Some(p4::table_action::Type::ActionProfileMemberId(m)) => {
            let p = t
                .profile
                .ok_or_else(|| Fail { code: Code::InvalidArgument, message: "table is not indirect".into() })?;
            EntryAction::Member(
                *h.members
                    .get(&(p, *m))
                    .ok_or_else(|| Fail { code: Code::NotFound, message: format!("no member {m}") })?,
            )
        }
        Some(p4::table_action::Type::ActionProfileGroupId(g)) => {
            let p = t
                .profile
                .ok_or_else(|| Fail { code: Code::InvalidArgument, message: "table is not indirect".into() })?;
            EntryAction::Group(
                *h.groups
                    .get(&(p, *g))
                    .ok_or_else(|| Fail { code: Code::NotFound, message: format!("no group {g}") })?,
            )
        }
        Some(p4::table_action::Type::ActionProfileActionSet(set)) => {
            if op == Op::Modify {
                return fail(
                    Code::Unimplemented,
                    "modifying a one-shot action set is not supported: delete and insert",
                );
            }
            let p = t
                .profile
                .ok_or_else(|| Fail { code: Code::InvalidArgument, message: "table is not indirect".into() })?;
            let pi = *pl
                .ids
                .profiles
                .get(&p)
                .ok_or_else(|| Fail { code: Code::InvalidArgument, message: "unknown profile".into() })?;
            let mut parts = Vec::new();
            for a in &set.action_profile_actions {
                let act = a.action.as_ref().ok_or_else(|| Fail {
                    code: Code::InvalidArgument,
                    message: "an action set entry needs an action".into(),
                })?;
                parts.push(action(pl, sw, act, Some(t))?);
            }
            if parts.is_empty() {
                return fail(Code::InvalidArgument, "an empty action set");
            }
            let g = tg.apply(Arc::new(move |sw, _| sw.create_group(pi)))?;
            let mut members = Vec::new();
            for (ai, data) in parts {
                let m = tg.apply(Arc::new(move |sw, _| sw.add_member(pi, ai, data.clone())))?;
                tg.apply(Arc::new(move |sw, _| sw.group_member(pi, g, m, true).map(|_| 0)))?;
                members.push(m);
            }
            let k = key.clone();
            let hd = tg.apply(Arc::new(move |sw, _| sw.add_entry(ti, k.clone(), EntryAction::Group(g), prio)))?;
            h.one_shots.insert((ti, hd), (pi, g, members));
            return finish_entry(h, tg, t, te, hd);
        }
    };
    let hd = match op {
        Op::Insert => {
            // Checked once here; every replica installs the checked entry.
            let entry = sw.prepare_entry(ti, key, ea, prio)?;
            tg.apply(Arc::new(move |sw, _| sw.install_entry(ti, entry.clone())))?
        }
        _ => {
            let hd = sw
                .find_entry(ti, key, prio)?
                .ok_or_else(|| Fail { code: Code::NotFound, message: "no such entry".into() })?;
            tg.apply(Arc::new(move |sw, _| sw.modify_entry(ti, hd, ea.clone()).map(|_| hd)))?
        }
    };
    finish_entry(h, tg, t, te, hd)
}

/// Sets what comes with an entry besides its action: metadata, idle timeout, direct counter and meter.
fn finish_entry(h: &mut Handles, tg: &mut dyn Target, t: &TableIds, te: &p4::TableEntry, hd: u32) -> Result<(), Fail> {
    let ti = t.index;
    if te.controller_metadata != 0 || !te.metadata.is_empty() {
        h.entry_meta.insert((ti, hd), (te.controller_metadata, te.metadata.clone()));
    } else {
        h.entry_meta.remove(&(ti, hd));
    }
    if te.idle_timeout_ns < 0 {
        return fail(Code::InvalidArgument, "idle_timeout_ns is negative");
    }
    if te.idle_timeout_ns != 0 {
        if !t.idle_timeout {
            return fail(Code::InvalidArgument, format!("table {} does not support idle timeouts", t.id));
        }
        let ms = (te.idle_timeout_ns / 1_000_000).clamp(1, i64::from(u32::MAX)) as u32;
        tg.apply(Arc::new(move |sw, _| sw.set_entry_ttl(ti, hd, ms).map(|_| 0)))?;
        h.aging.insert(
            (ti, hd),
            Aging {
                timeout: std::time::Duration::from_nanos(te.idle_timeout_ns as u64),
                since: std::time::Instant::now(),
                notified: false,
            },
        );
    } else {
        h.aging.remove(&(ti, hd));
    }
    if let Some(cd) = te.counter_data {
        let (p, b) = (cd.packet_count as u64, cd.byte_count as u64);
        tg.apply(Arc::new(move |sw, first| {
            sw.entry_counter_write(ti, hd, if first { (p, b) } else { (0, 0) })?;
            Ok(0)
        }))?;
    }
    if let Some(mc) = te.meter_config.as_ref() {
        let Some((mi, _)) = tg.sw().program().tables[ti].direct_meter else {
            return fail(Code::InvalidArgument, format!("table {} has no direct meter", t.id));
        };
        let rates = meter_rates(Some(mc))?;
        let cell = tg.sw().meter_index(mi as usize, hd)?;
        tg.apply_shared(&|sw| sw.set_meter_rates(mi as usize, cell, rates.clone()))?;
    }
    Ok(())
}

fn profile(pl: &Pipeline, id: u32) -> Result<usize, Fail> {
    pl.ids
        .profiles
        .get(&id)
        .copied()
        .ok_or_else(|| Fail { code: Code::NotFound, message: format!("unknown action profile id {id}") })
}

fn write_member(
    pl: &Pipeline,
    h: &mut Handles,
    tg: &mut dyn Target,
    op: Op,
    m: &p4::ActionProfileMember,
) -> Result<(), Fail> {
    let pi = profile(pl, m.action_profile_id)?;
    let key = (m.action_profile_id, m.member_id);
    let existing = h.members.get(&key).copied();
    match (op, existing) {
        (Op::Insert, Some(_)) => fail(Code::AlreadyExists, format!("member {} exists", m.member_id)),
        (Op::Modify | Op::Delete, None) => fail(Code::NotFound, format!("no member {}", m.member_id)),
        (Op::Delete, Some(eh)) => {
            tg.apply(Arc::new(move |sw, _| sw.delete_member(pi, eh).map(|_| 0)))?;
            h.members.remove(&key);
            h.member_ids.remove(&(m.action_profile_id, eh));
            Ok(())
        }
        (_, existing) => {
            let a = m
                .action
                .as_ref()
                .ok_or_else(|| Fail { code: Code::InvalidArgument, message: "a member needs an action".into() })?;
            let table = pl.ids.tables.values().find(|t| t.profile == Some(m.action_profile_id));
            let (ai, data) = action(pl, tg.sw(), a, table)?;
            match existing {
                Some(eh) => {
                    tg.apply(Arc::new(move |sw, _| sw.modify_member(pi, eh, ai, data.clone()).map(|_| 0)))?;
                }
                None => {
                    let eh = tg.apply(Arc::new(move |sw, _| sw.add_member(pi, ai, data.clone())))?;
                    h.members.insert(key, eh);
                    h.member_ids.insert((m.action_profile_id, eh), m.member_id);
                }
            }
            Ok(())
        }
    }
}

fn write_group(
    pl: &Pipeline,
    h: &mut Handles,
    tg: &mut dyn Target,
    op: Op,
    g: &p4::ActionProfileGroup,
) -> Result<(), Fail> {
    let pi = profile(pl, g.action_profile_id)?;
    let key = (g.action_profile_id, g.group_id);
    let existing = h.groups.get(&key).copied();
    let eg = match (op, existing) {
        (Op::Insert, Some(_)) => return fail(Code::AlreadyExists, format!("group {} exists", g.group_id)),
        (Op::Modify | Op::Delete, None) => return fail(Code::NotFound, format!("no group {}", g.group_id)),
        (Op::Delete, Some(eg)) => {
            tg.apply(Arc::new(move |sw, _| sw.delete_group(pi, eg).map(|_| 0)))?;
            h.groups.remove(&key);
            h.group_ids.remove(&(g.action_profile_id, eg));
            return Ok(());
        }
        (Op::Insert, None) => {
            if tg.sw().program().profiles[pi].selector.is_none() {
                return fail(
                    Code::InvalidArgument,
                    format!("action profile {} has no selector: no groups", g.action_profile_id),
                );
            }
            None
        }
        (_, Some(eg)) => Some(eg),
    };
    let mut members = BTreeSet::new();
    for m in &g.members {
        let eh = h.members.get(&(g.action_profile_id, m.member_id)).ok_or_else(|| Fail {
            code: Code::NotFound,
            message: format!("group {}: no member {}", g.group_id, m.member_id),
        })?;
        if m.weight > 1 {
            return fail(Code::Unimplemented, "member weights above 1 are not supported");
        }
        members.insert(*eh);
    }
    let eg = match eg {
        Some(eg) => eg,
        None => {
            let eg = tg.apply(Arc::new(move |sw, _| sw.create_group(pi)))?;
            h.groups.insert(key, eg);
            h.group_ids.insert((g.action_profile_id, eg), g.group_id);
            eg
        }
    };
    tg.apply(Arc::new(move |sw, _| sw.set_group_members(pi, eg, members.clone()).map(|_| 0)))?;
    Ok(())
}

/// `(rid, port)` pairs of replicas.
fn replicas(r: &[p4::Replica]) -> Result<Vec<(u16, u32)>, Fail> {
    let mut out = Vec::new();
    for x in r {
        #[allow(deprecated)]
        let port = match &x.port_kind {
            Some(p4::replica::PortKind::EgressPort(p)) => *p,
            Some(p4::replica::PortKind::Port(b)) => {
                let v = fit_value(b, 32)
                    .ok_or_else(|| Fail { code: Code::InvalidArgument, message: "replica port too wide".into() })?;
                u32::from_be_bytes(v.try_into().unwrap_or([0; 4]))
            }
            None => return fail(Code::InvalidArgument, "a replica needs a port"),
        };
        if x.instance > 0xffff {
            return fail(Code::InvalidArgument, format!("replica instance {} does not fit 16 bits", x.instance));
        }
        if out.contains(&(x.instance as u16, port)) {
            return fail(
                Code::InvalidArgument,
                format!("replica (port {port}, instance {}) is given twice", x.instance),
            );
        }
        out.push((x.instance as u16, port));
    }
    Ok(out)
}

/// Replaces group `g`'s nodes with one node per replica instance.
fn set_group_nodes(h: &mut Handles, tg: &mut dyn Target, g: u32, reps: Vec<(u16, u32)>) -> Result<(), Fail> {
    let old = h.mc_nodes.remove(&g).unwrap_or_default();
    let nodes = tg.apply(Arc::new(move |sw, _| {
        for n in &old {
            sw.mc_node_destroy(*n)?;
        }
        sw.mc_group_create(g);
        Ok(0)
    }));
    nodes?;
    let mut by_rid: Vec<(u16, BTreeSet<u32>)> = Vec::new();
    for (rid, port) in reps {
        match by_rid.iter_mut().find(|(r, _)| *r == rid) {
            Some((_, ports)) => {
                ports.insert(port);
            }
            None => by_rid.push((rid, BTreeSet::from([port]))),
        }
    }
    let mut handles = Vec::new();
    for (rid, ports) in by_rid {
        let n = tg.apply(Arc::new(move |sw, _| {
            let n = sw.mc_node_create(rid, ports.clone(), BTreeSet::new());
            sw.mc_node_associate(g, n, true)?;
            Ok(n)
        }))?;
        handles.push(n);
    }
    h.mc_nodes.insert(g, handles);
    Ok(())
}

fn write_mc_group(h: &mut Handles, tg: &mut dyn Target, op: Op, g: &p4::MulticastGroupEntry) -> Result<(), Fail> {
    let id = g.multicast_group_id;
    if id == 0 || id >= CLONE_GROUP_BASE {
        return fail(Code::InvalidArgument, format!("multicast group id {id} outside 1..{CLONE_GROUP_BASE}"));
    }
    let exists = h.mc_groups.contains_key(&id);
    match (op, exists) {
        (Op::Insert, true) => fail(Code::AlreadyExists, format!("multicast group {id} exists")),
        (Op::Modify | Op::Delete, false) => fail(Code::NotFound, format!("no multicast group {id}")),
        (Op::Delete, true) => {
            let old = h.mc_nodes.remove(&id).unwrap_or_default();
            tg.apply(Arc::new(move |sw, _| {
                for n in &old {
                    sw.mc_node_destroy(*n)?;
                }
                sw.mc_group_destroy(id).map(|_| 0)
            }))?;
            h.mc_groups.remove(&id);
            Ok(())
        }
        _ => {
            let reps = replicas(&g.replicas)?;
            set_group_nodes(h, tg, id, reps)?;
            h.mc_groups.insert(id, g.clone());
            Ok(())
        }
    }
}

fn write_clone(h: &mut Handles, tg: &mut dyn Target, op: Op, c: &p4::CloneSessionEntry) -> Result<(), Fail> {
    let id = c.session_id;
    let exists = h.clones.contains_key(&id);
    match (op, exists) {
        (Op::Insert, true) => return fail(Code::AlreadyExists, format!("clone session {id} exists")),
        (Op::Modify | Op::Delete, false) => return fail(Code::NotFound, format!("no clone session {id}")),
        _ => {}
    }
    if id == 0 || id >= CLONE_GROUP_BASE {
        return fail(Code::InvalidArgument, format!("clone session id {id} is out of range"));
    }
    // The replication group that carries the session's replicas.
    let group = CLONE_GROUP_BASE + id;
    // The old group, if any, goes in every case; a new one is made when needed.
    if let Some(old) = h.mc_nodes.remove(&group) {
        tg.apply(Arc::new(move |sw, _| {
            for n in &old {
                sw.mc_node_destroy(*n)?;
            }
            let _ = sw.mc_group_destroy(group);
            Ok(0)
        }))?;
    }
    if op == Op::Delete {
        tg.apply(Arc::new(move |sw, _| sw.mirror_delete(id).map(|_| 0)))?;
        h.clones.remove(&id);
        return Ok(());
    }
    let truncate = match c.packet_length_bytes {
        0 => None,
        n if n < 0 => return fail(Code::InvalidArgument, format!("packet_length_bytes {n} is negative")),
        n => Some(n as u32),
    };
    let Ok(cos) = u8::try_from(c.class_of_service) else {
        return fail(Code::InvalidArgument, format!("class_of_service {} is above 255", c.class_of_service));
    };
    let reps = replicas(&c.replicas)?;
    let session = match reps.as_slice() {
        [] => return fail(Code::InvalidArgument, "a clone session needs a replica"),
        [(0, port)] => MirrorSession { port: Some(*port), mgid: None, truncate, cos },
        _ => {
            set_group_nodes(h, tg, group, reps)?;
            MirrorSession { port: None, mgid: Some(group), truncate, cos }
        }
    };
    tg.apply(Arc::new(move |sw, _| {
        sw.mirror_set(id, session.clone());
        Ok(0)
    }))?;
    h.clones.insert(id, c.clone());
    Ok(())
}

// ---------------------------------------------------------------- reads

/// A table entry as a Read answers it (`None` when the handle is gone).
pub fn table_entry_out(
    pl: &Pipeline,
    h: &Handles,
    sw: &Switch,
    t: &TableIds,
    hd: u32,
    with_counters: bool,
) -> Option<p4::TableEntry> {
    let e = sw.entry(t.index, hd).ok()?;
    let action = match &e.action {
        EntryAction::Direct { action, data } => p4::table_action::Type::Action(action_out(pl, sw, *action, data)),
        EntryAction::Member(m) => {
            let p = t.profile.unwrap_or(0);
            p4::table_action::Type::ActionProfileMemberId(h.member_ids.get(&(p, *m)).copied().unwrap_or(*m))
        }
        EntryAction::Group(g) => {
            let p = t.profile.unwrap_or(0);
            match h.one_shots.get(&(t.index, hd)) {
                Some((pi, _, members)) => p4::table_action::Type::ActionProfileActionSet(p4::ActionProfileActionSet {
                    action_profile_actions: members
                        .iter()
                        .filter_map(|m| sw.member(*pi, *m))
                        .map(|(a, d)| p4::ActionProfileAction {
                            action: Some(action_out(pl, sw, a, d)),
                            weight: 1,
                            watch_kind: None,
                        })
                        .collect(),
                    ..Default::default()
                }),
                None => p4::table_action::Type::ActionProfileGroupId(h.group_ids.get(&(p, *g)).copied().unwrap_or(*g)),
            }
        }
    };
    let (cm, md) = h.entry_meta.get(&(t.index, hd)).cloned().unwrap_or_default();
    let has_prio = sw.table_has_priority(t.index);
    let meter_config = sw.program().tables[t.index]
        .direct_meter
        .as_ref()
        .and_then(|(mi, _)| sw.meter_rates(*mi as usize, (hd & 0x00ff_ffff) as usize).ok())
        .and_then(|r| meter_config(&r));
    Some(p4::TableEntry {
        table_id: t.id,
        r#match: key_fields(t, &e.matches),
        action: Some(p4::TableAction { r#type: Some(action) }),
        priority: if has_prio { i32::MAX - e.priority } else { 0 },
        controller_metadata: cm,
        metadata: md,
        meter_config,
        counter_data: (with_counters && t.direct_counter.is_some())
            .then_some(p4::CounterData { byte_count: e.bytes as i64, packet_count: e.packets as i64 }),
        is_default_action: false,
        idle_timeout_ns: e.timeout_ms.map_or(0, |ms| ms as i64 * 1_000_000),
        is_const: t.is_const,
        ..Default::default()
    })
}

fn default_entry_out(pl: &Pipeline, sw: &Switch, t: &TableIds) -> p4::TableEntry {
    let action = sw
        .default_entry(t.index)
        .map(|(a, d)| p4::TableAction { r#type: Some(p4::table_action::Type::Action(action_out(pl, sw, a, d))) });
    p4::TableEntry { table_id: t.id, action, is_default_action: true, ..Default::default() }
}

/// Answers one read request entity (wildcards expand), appending to `out`.
pub fn read(pl: &Pipeline, h: &Handles, sw: &Switch, e: &E, out: &mut ReadOut<'_>) -> Result<(), Fail> {
    let push = |out: &mut ReadOut<'_>, e: E| out.push(p4::Entity { entity: Some(e) });
    match e {
        E::TableEntry(q) => {
            let tables: Vec<&TableIds> = if q.table_id == 0 {
                let mut v: Vec<&TableIds> = pl.ids.tables.values().collect();
                v.sort_by_key(|t| t.id);
                v
            } else {
                vec![table(pl, q.table_id)?]
            };
            let with_counters = q.counter_data.is_some();
            for t in tables {
                if q.is_default_action {
                    push(out, E::TableEntry(default_entry_out(pl, sw, t)));
                    continue;
                }
                if !q.r#match.is_empty() {
                    let hd = find(pl, sw, t, q)?;
                    if let Some(te) = table_entry_out(pl, h, sw, t, hd, with_counters) {
                        push(out, E::TableEntry(te));
                    }
                    continue;
                }
                let handles: Vec<u32> = sw.entries(t.index).map(|(hd, _)| hd).collect();
                for hd in handles {
                    if let Some(te) = table_entry_out(pl, h, sw, t, hd, with_counters) {
                        if q.priority == 0 || te.priority == q.priority {
                            push(out, E::TableEntry(te));
                        }
                    }
                }
            }
            Ok(())
        }
        E::ActionProfileMember(q) => {
            let mut keys: Vec<(&(u32, u32), &u32)> = h
                .members
                .iter()
                .filter(|((p, m), _)| {
                    (q.action_profile_id == 0 || *p == q.action_profile_id) && (q.member_id == 0 || *m == q.member_id)
                })
                .collect();
            keys.sort();
            if q.member_id != 0 && keys.is_empty() {
                return fail(Code::NotFound, format!("no member {}", q.member_id));
            }
            for ((p, m), eh) in keys {
                let pi = profile(pl, *p)?;
                if let Some((a, d)) = sw.member(pi, *eh) {
                    push(
                        out,
                        E::ActionProfileMember(p4::ActionProfileMember {
                            action_profile_id: *p,
                            member_id: *m,
                            action: Some(action_out(pl, sw, a, d)),
                        }),
                    );
                }
            }
            Ok(())
        }
        E::ActionProfileGroup(q) => {
            let mut keys: Vec<(&(u32, u32), &u32)> = h
                .groups
                .iter()
                .filter(|((p, g), _)| {
                    (q.action_profile_id == 0 || *p == q.action_profile_id) && (q.group_id == 0 || *g == q.group_id)
                })
                .collect();
            keys.sort();
            if q.group_id != 0 && keys.is_empty() {
                return fail(Code::NotFound, format!("no group {}", q.group_id));
            }
            for ((p, g), eg) in keys {
                let pi = profile(pl, *p)?;
                if let Some(members) = sw.group(pi, *eg) {
                    push(
                        out,
                        E::ActionProfileGroup(p4::ActionProfileGroup {
                            action_profile_id: *p,
                            group_id: *g,
                            members: members
                                .iter()
                                .map(|m| p4::action_profile_group::Member {
                                    member_id: h.member_ids.get(&(*p, *m)).copied().unwrap_or(*m),
                                    weight: 1,
                                    watch_kind: None,
                                })
                                .collect(),
                            max_size: 0,
                        }),
                    );
                }
            }
            Ok(())
        }
        E::CounterEntry(q) => {
            let mut ids: Vec<(u32, usize)> = pl
                .ids
                .counters
                .iter()
                .map(|(k, v)| (*k, *v))
                .filter(|(k, _)| q.counter_id == 0 || *k == q.counter_id)
                .collect();
            if q.counter_id != 0 && ids.is_empty() {
                return fail(Code::NotFound, format!("unknown counter id {}", q.counter_id));
            }
            ids.sort();
            for (id, ci) in ids {
                let cells = sw.counter_values(ci);
                let range = indices(&q.index, cells.len(), "counter")?;
                for i in range {
                    let (p, b) = cells[i];
                    push(
                        out,
                        E::CounterEntry(p4::CounterEntry {
                            counter_id: id,
                            index: Some(p4::Index { index: i as i64 }),
                            data: Some(p4::CounterData { byte_count: b as i64, packet_count: p as i64 }),
                        }),
                    );
                }
            }
            Ok(())
        }
        E::DirectCounterEntry(q) => {
            let te = q.table_entry.clone().unwrap_or_default();
            let tables: Vec<&TableIds> = if te.table_id == 0 {
                pl.ids.tables.values().filter(|t| t.direct_counter.is_some()).collect()
            } else {
                vec![table(pl, te.table_id)?]
            };
            for t in tables {
                let handles: Vec<u32> = if te.r#match.is_empty() {
                    sw.entries(t.index).map(|(hd, _)| hd).collect()
                } else {
                    vec![find(pl, sw, t, &te)?]
                };
                for hd in handles {
                    if let Some(mut e) = table_entry_out(pl, h, sw, t, hd, true) {
                        let data = e.counter_data.take();
                        push(out, E::DirectCounterEntry(p4::DirectCounterEntry { table_entry: Some(e), data }));
                    }
                }
            }
            Ok(())
        }
        E::MeterEntry(q) => {
            let mut ids: Vec<(u32, usize)> = pl
                .ids
                .meters
                .iter()
                .map(|(k, v)| (*k, *v))
                .filter(|(k, _)| q.meter_id == 0 || *k == q.meter_id)
                .collect();
            ids.sort();
            for (id, mi) in ids {
                let n = sw.meter_len(mi);
                let range = indices(&q.index, n, "meter")?;
                for i in range {
                    push(
                        out,
                        E::MeterEntry(p4::MeterEntry {
                            meter_id: id,
                            index: Some(p4::Index { index: i as i64 }),
                            config: meter_config(&sw.meter_rates(mi, i)?),
                            counter_data: None,
                        }),
                    );
                }
            }
            Ok(())
        }
        E::DirectMeterEntry(q) => {
            let te = q.table_entry.clone().unwrap_or_default();
            let t = table(pl, te.table_id)?;
            let handles: Vec<u32> = if te.r#match.is_empty() {
                sw.entries(t.index).map(|(hd, _)| hd).collect()
            } else {
                vec![find(pl, sw, t, &te)?]
            };
            for hd in handles {
                if let Some(mut e) = table_entry_out(pl, h, sw, t, hd, false) {
                    let config = e.meter_config.take();
                    push(
                        out,
                        E::DirectMeterEntry(p4::DirectMeterEntry { table_entry: Some(e), config, counter_data: None }),
                    );
                }
            }
            Ok(())
        }
        E::RegisterEntry(q) => {
            let mut ids: Vec<(u32, usize)> = pl
                .ids
                .registers
                .iter()
                .map(|(k, v)| (*k, *v))
                .filter(|(k, _)| q.register_id == 0 || *k == q.register_id)
                .collect();
            ids.sort();
            for (id, ri) in ids {
                let n = sw.register_len(ri);
                let w = sw.program().registers[ri].width;
                let range = indices(&q.index, n, "register")?;
                for i in range {
                    let v = sw.register_read(ri, i)?;
                    let bytes = v.to_be_bytes();
                    let nb = (w as usize).div_ceil(8).max(1);
                    push(
                        out,
                        E::RegisterEntry(p4::RegisterEntry {
                            register_id: id,
                            index: Some(p4::Index { index: i as i64 }),
                            data: Some(p4::P4Data {
                                data: Some(p4::p4_data::Data::Bitstring(minimal(&bytes[16 - nb.min(16)..]))),
                            }),
                        }),
                    );
                }
            }
            Ok(())
        }
        E::PacketReplicationEngineEntry(q) => {
            use p4::packet_replication_engine_entry::Type as T;
            match &q.r#type {
                Some(T::MulticastGroupEntry(g)) => {
                    let mut ids: Vec<&u32> = h
                        .mc_groups
                        .keys()
                        .filter(|id| g.multicast_group_id == 0 || **id == g.multicast_group_id)
                        .collect();
                    ids.sort();
                    if g.multicast_group_id != 0 && ids.is_empty() {
                        return fail(Code::NotFound, format!("no multicast group {}", g.multicast_group_id));
                    }
                    for id in ids {
                        push(
                            out,
                            E::PacketReplicationEngineEntry(p4::PacketReplicationEngineEntry {
                                r#type: Some(T::MulticastGroupEntry(h.mc_groups[id].clone())),
                            }),
                        );
                    }
                }
                Some(T::CloneSessionEntry(c)) => {
                    let mut ids: Vec<&u32> =
                        h.clones.keys().filter(|id| c.session_id == 0 || **id == c.session_id).collect();
                    ids.sort();
                    if c.session_id != 0 && ids.is_empty() {
                        return fail(Code::NotFound, format!("no clone session {}", c.session_id));
                    }
                    for id in ids {
                        push(
                            out,
                            E::PacketReplicationEngineEntry(p4::PacketReplicationEngineEntry {
                                r#type: Some(T::CloneSessionEntry(h.clones[id].clone())),
                            }),
                        );
                    }
                }
                None => return fail(Code::InvalidArgument, "empty packet replication engine entry"),
            }
            Ok(())
        }
        E::ValueSetEntry(q) => {
            let Some((vi, fields)) = pl.ids.value_sets.get(&q.value_set_id) else {
                return fail(Code::NotFound, format!("unknown value set id {}", q.value_set_id));
            };
            use p4::field_match::{self as fm, FieldMatchType as M};
            let fid = fields.first().map_or(1, |f| f.0);
            let members = sw
                .vset_values(*vi)
                .iter()
                .map(|(v, m)| p4::ValueSetMember {
                    r#match: vec![p4::FieldMatch {
                        field_id: fid,
                        field_match_type: Some(if m.iter().all(|b| *b == 0xff) {
                            M::Exact(fm::Exact { value: minimal(v) })
                        } else {
                            M::Ternary(fm::Ternary { value: minimal(v), mask: minimal(m) })
                        }),
                    }],
                })
                .collect();
            push(out, E::ValueSetEntry(p4::ValueSetEntry { value_set_id: q.value_set_id, members }));
            Ok(())
        }
        E::DigestEntry(q) => {
            let mut ids: Vec<(&u32, &p4::digest_entry::Config)> =
                h.digests.iter().filter(|(id, _)| q.digest_id == 0 || **id == q.digest_id).collect();
            ids.sort_by_key(|(id, _)| **id);
            for (id, cfg) in ids {
                push(out, E::DigestEntry(p4::DigestEntry { digest_id: *id, config: Some(*cfg) }));
            }
            Ok(())
        }
        E::ExternEntry(_) => fail(Code::Unimplemented, "v1model has no P4Runtime extern entries"),
    }
}
