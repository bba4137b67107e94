//! Pipelines: tables, conditionals and action profiles.
//!
//! Reads from the JSON model: `pipelines` (their tables with keys, actions,
//! next nodes, default entries, const entries, direct counters and meters;
//! their conditionals; their action profiles and selectors), and the
//! direct counter and meter arrays a PSA table is bound to.
//! Produces in the plan: `tables`, `conds` (one numbering across both
//! pipelines, in JSON order), `profiles`, the `ingress` and `egress`
//! entry nodes; each table's integer key forms for the interpreter and
//! generated code.
//! Errors: an unsupported match kind, table type or selector algorithm,
//! an unknown header, field, action, next node or direct meter, a bad
//! default entry, a pipeline other than v1model's two, and a loop among a
//! control's tables and conditionals.

use std::collections::HashMap;

use sluice_json::{Expr, Program};

use super::actions::{pack_action_data, ActionPlan};
use super::cx::{width_of, Cx, Dst};
use crate::expr::{CExpr, HRef, Root};
use crate::phv::Layout;
use crate::tables::MatchKind;
use crate::value::nbytes;
use crate::CompileError;

/// One element of a table key.
#[derive(Debug, Clone)]
pub struct KeyElem {
    pub name: String,
    /// The field as bmv2's CLI names it: the target joined with `.`, or
    /// `<header>_valid` for a validity match (`table_dump`, `show_tables`).
    pub cli_name: String,
    pub kind: MatchKind,
    /// Field read (or validity for `valid`).
    pub src: CExpr,
    /// Header whose validity decides whether the field reads as zero.
    pub header: Option<HRef>,
    pub width: u32,
    /// Mask applied to the field value before matching (p4c's `mask` on keys).
    pub mask: Option<Vec<u8>>,
}

/// A compiled table.
#[derive(Debug, Clone)]
pub struct TablePlan {
    pub name: String,
    pub id: u64,
    pub key: Vec<KeyElem>,
    pub match_type: String,
    pub max_size: usize,
    pub with_counters: bool,
    pub direct_meter: Option<(u32, Dst)>,
    /// Indices into `Plan::actions`.
    pub actions: Vec<u32>,
    /// Action profile index for indirect tables.
    pub profile: Option<u32>,
    pub base_default_next: Option<Node>,
    /// Next node by action index (position in `actions`).
    pub next_by_action: Vec<Option<Node>>,
    /// `__HIT__` / `__MISS__` successors, when the program switches on hit.
    pub next_hit: Option<Option<Node>>,
    pub next_miss: Option<Option<Node>>,
    pub default_action: Option<(u32, Vec<u8>)>,
    pub default_const: bool,
    /// Its default action's data too (`action_entry_const`): no default
    /// may be set at all.
    pub default_entry_const: bool,
    pub const_entries: Vec<sluice_json::ConstEntry>,
    pub support_timeout: bool,
    /// Key as `(slot or validity, bits)` parts when it is at most 16 bytes of
    /// unmasked slot fields and validity bits: built as one integer, no bytes.
    pub key128: Option<Vec<(KeyPart, u32)>>,
    /// The same parts for a key of any length made only of unmasked fields
    /// of at most 64 bits and validity bits: its bytes are then written part
    /// by part from hot-path reads (an ACL's 17-byte key), no expression walk.
    pub key_fields: Option<Vec<(KeyPart, u32)>>,
    /// Bytes of the table's key (each field rounded up to whole bytes).
    pub key_bytes: usize,
    /// For keyless tables whose default action is fixed and takes no data
    /// (p4c wraps plain action calls this way): the action and next node, so
    /// the table is run as a direct action call.
    pub inline_default: Option<(u32, Option<Node>)>,
}

impl TablePlan {
    /// Whether the switch prefetches this table's lookups for a batch
    /// parsed ahead: only a table that can have a direct index (one LPM
    /// field of at most 32 bits, read from a header) has something to
    /// prefetch. The switch and the generated key function
    /// (`jit::Lookahead::keys`) both use this list, in table order.
    pub fn prefetchable(&self) -> bool {
        self.key.len() == 1
            && self.key[0].kind == MatchKind::Lpm
            && self.key[0].width <= 32
            && self.key128.as_ref().is_some_and(|parts| {
                parts.iter().all(|(p, _)| matches!(p, KeyPart::Field { src: crate::phv::FieldSrc::Wire { .. }, .. }))
            })
    }

    /// Whether a hit (or miss) of this table can hand its action back to
    /// generated code after a helper's lookup: the table has nothing else to
    /// do per packet but count the hit in its direct counter (no direct
    /// meter, no idle timeout) and is not a fixed action call.
    pub fn hit_returns_to_jit(&self) -> bool {
        self.direct_meter.is_none() && !self.support_timeout && self.inline_default.is_none()
    }

    /// The integer key parts when generated code builds the key and looks
    /// direct arrays, DIR-24-8 and open-addressing indexes up inline: the
    /// only per-packet work is the lookup (no direct counter or meter, no
    /// idle timeout) and the key is at most 64 bits of fields and validity
    /// bits.
    pub fn inline_key_parts(&self) -> Option<&[(KeyPart, u32)]> {
        if self.with_counters || self.direct_meter.is_some() || self.support_timeout {
            return None;
        }
        let parts = self.key128.as_deref()?;
        (parts.iter().map(|(_, b)| *b).sum::<u32>() <= 64).then_some(parts)
    }

    /// The key parts when generated code builds the key as the four
    /// little-endian words of its bytes (what tuple search and the lookup
    /// cache hash) and hands them to the engine's search: whole fields and
    /// validity bits, more than 8 bytes (shorter keys are integers) and at
    /// most 32.
    pub fn word_key_parts(&self) -> Option<&[(KeyPart, u32)]> {
        let parts = self.key_fields.as_deref()?;
        (self.key_bytes > 8 && self.key_bytes <= 32).then_some(parts)
    }
}

/// One part of an integer-built table key.
#[derive(Debug, Clone, Copy)]
pub enum KeyPart {
    /// A field with a hot-path reader; zero while `header` (if any) is invalid.
    Field { src: crate::phv::FieldSrc, header: Option<u32> },
    /// 1 if the header is valid.
    Valid(u32),
}

impl KeyPart {
    /// The part's value on `phv` (a field of an invalid header reads as 0).
    #[inline(always)]
    pub fn value(&self, phv: &crate::phv::Phv) -> u64 {
        match self {
            KeyPart::Field { src, header } => {
                if header.is_some_and(|h| !phv.valid()[h as usize]) {
                    0
                } else {
                    src.read(phv)
                }
            }
            KeyPart::Valid(h) => u64::from(phv.valid()[*h as usize]),
        }
    }
}

/// A control-flow node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Node {
    Table(u32),
    Cond(u32),
}

/// A compiled conditional.
#[derive(Debug, Clone)]
pub struct CondPlan {
    pub name: String,
    /// The P4 source of the condition, when the JSON gives it (bmv2's log prints it).
    pub source: Option<String>,
    pub expr: Root,
    pub true_next: Option<Node>,
    pub false_next: Option<Node>,
}

/// A control pipeline.
#[derive(Debug, Clone)]
pub struct PipelinePlan {
    pub name: String,
    pub init: Option<Node>,
}

/// An action profile or selector.
#[derive(Debug, Clone)]
pub struct ProfilePlan {
    pub name: String,
    pub max_size: usize,
    /// `(calculation algorithm, input fields)`.
    pub selector: Option<Selector>,
    /// The selector's input as byte copies, when every input is a field of
    /// whole bytes kept at a byte boundary of the wire area or in a slot:
    /// the hash input is then gathered without bit packing (see
    /// [`ProfilePlan::new`]).
    pub selector_bytes: Option<Vec<SelectorPiece>>,
}

/// One input field of a selector as bytes of the hash input.
#[derive(Debug, Clone, Copy)]
pub struct SelectorPiece {
    /// The field's header: fields of invalid headers are left out.
    pub header: u32,
    pub from: PieceFrom,
    /// Bytes the field contributes.
    pub len: u32,
}

/// Where a [`SelectorPiece`] is read.
#[derive(Debug, Clone, Copy)]
pub enum PieceFrom {
    /// `wire[at..at + len]`, already big-endian.
    Wire(u32),
    /// `slots[i]`, written big-endian in `len` bytes.
    Slot(u32),
}

impl ProfilePlan {
    /// A profile with its selector, working out the byte-copy form of the
    /// selector's input. Why: packing the 5-tuple field by field into the
    /// hash input cost more than the hash itself.
    pub fn new(name: String, max_size: usize, selector: Option<Selector>, layout: &Layout) -> ProfilePlan {
        let selector_bytes = selector.as_ref().and_then(|(_, inputs, widths)| {
            let pieces = inputs
                .iter()
                .zip(widths)
                .map(|(e, w)| {
                    let CExpr::Field(f) = e else { return None };
                    let fi = &layout.fields[*f as usize];
                    if fi.width != *w || !fi.width.is_multiple_of(8) || fi.width == 0 || fi.varbit {
                        return None;
                    }
                    let from = match fi.loc {
                        crate::phv::Loc::Wire { bit } if bit.is_multiple_of(8) => PieceFrom::Wire(bit / 8),
                        crate::phv::Loc::Slot(i) if fi.width <= 128 && !fi.signed => PieceFrom::Slot(i),
                        _ => return None,
                    };
                    Some(SelectorPiece { header: fi.header, from, len: fi.width / 8 })
                })
                .collect::<Option<Vec<_>>>()?;
            (pieces.iter().map(|p| p.len).sum::<u32>() <= SELECTOR_BYTES_MAX).then(|| merge_adjacent(pieces))
        });
        ProfilePlan { name, max_size, selector, selector_bytes }
    }
}

/// Joins consecutive pieces that read adjacent wire bytes of one header
/// (an IPv4 source and destination address) into one piece of at most 16
/// bytes: the same input bytes, one copy instead of two. A header is valid
/// or not as a whole, so a joined piece is left out exactly when both of
/// its parts would have been.
fn merge_adjacent(pieces: Vec<SelectorPiece>) -> Vec<SelectorPiece> {
    let mut out: Vec<SelectorPiece> = Vec::with_capacity(pieces.len());
    for p in pieces {
        if let Some(last) = out.last_mut() {
            if let (PieceFrom::Wire(a), PieceFrom::Wire(b)) = (last.from, p.from) {
                if last.header == p.header && a + last.len == b && last.len + p.len <= 16 {
                    last.len += p.len;
                    continue;
                }
            }
        }
        out.push(p);
    }
    out
}

/// Most bytes a selector's gathered input may have (its stack buffer).
pub const SELECTOR_BYTES_MAX: u32 = 64;

/// `(algorithm, input expressions, input widths)`: the algorithm resolved
/// once here, not by name per packet.
type Selector = (sluice_hash::Algorithm, Vec<CExpr>, Vec<u32>);

fn compile_selector(cx: &Cx, algo: &str, input: &[Expr], path: &str) -> Result<Selector, CompileError> {
    let Some(algorithm) = sluice_hash::Algorithm::from_name(algo) else {
        return Err(CompileError::at(path, format!("selector algorithm \"{algo}\" is not supported")));
    };
    let mut es = Vec::new();
    let mut ws = Vec::new();
    for e in input {
        let ce = cx.ecx(&[], path).expr(e)?;
        ws.push(width_of(cx.layout, &ce));
        es.push(ce);
    }
    Ok((algorithm, es, ws))
}

/// The compiled pipelines: their tables, conditionals and profiles.
pub(super) struct Pipelines {
    pub(super) tables: Vec<TablePlan>,
    pub(super) conds: Vec<CondPlan>,
    pub(super) profiles: Vec<ProfilePlan>,
    pub(super) ingress: PipelinePlan,
    pub(super) egress: PipelinePlan,
}

/// Compiles the pipelines' tables, conditionals and action profiles, then
/// checks that their control flow has no loop.
pub(super) fn compile_pipelines(
    cx: &Cx,
    psa: bool,
    actions: &[ActionPlan],
    action_by_id: &HashMap<u64, u32>,
) -> Result<Pipelines, CompileError> {
    let (p, layout) = (cx.p, cx.layout);
    // Pipelines: tables and conditionals share one numbering across pipelines.
    let mut node_by_name: HashMap<String, Node> = HashMap::new();
    let mut ti = 0u32;
    let mut ci = 0u32;
    for pl in &p.pipelines {
        for t in &pl.tables {
            node_by_name.insert(t.name.clone(), Node::Table(ti));
            ti += 1;
        }
        for c in &pl.conditionals {
            node_by_name.insert(c.name.clone(), Node::Cond(ci));
            ci += 1;
        }
    }
    let node = |n: &Option<String>, path: &str| -> Result<Option<Node>, CompileError> {
        match n {
            None => Ok(None),
            Some(s) => node_by_name
                .get(s)
                .copied()
                .map(Some)
                .ok_or_else(|| CompileError::at(path, format!("unknown next node \"{s}\""))),
        }
    };
    let mut tables = Vec::new();
    let mut conds = Vec::new();
    let mut profiles: Vec<ProfilePlan> = Vec::new();
    let mut profile_by_name = HashMap::new();
    let mut ingress = PipelinePlan { name: "ingress".into(), init: None };
    let mut egress = PipelinePlan { name: "egress".into(), init: None };
    for pl in &p.pipelines {
        for ap in &pl.action_profiles {
            let selector = match &ap.selector {
                Some((algo, input)) => Some(compile_selector(cx, algo, input, &ap.path)?),
                None => None,
            };
            profile_by_name.insert(ap.name.clone(), profiles.len() as u32);
            profiles.push(ProfilePlan::new(ap.name.clone(), ap.max_size as usize, selector, layout));
        }
        for t in &pl.tables {
            let mut key = Vec::new();
            for k in &t.key {
                let kind = MatchKind::from_name(&k.match_type).ok_or_else(|| {
                    CompileError::at(&k.path, format!("match_type \"{}\" is not supported", k.match_type))
                })?;
                let (src, header, width) = if kind == MatchKind::Valid || k.target.len() == 1 {
                    let h = k.target[0].as_str();
                    let hi =
                        layout.header(h).ok_or_else(|| CompileError::at(&k.path, format!("unknown header \"{h}\"")))?;
                    (CExpr::Valid(HRef::Fixed(hi)), None, 1)
                } else {
                    let (h, f) = (&k.target[0], &k.target[1]);
                    let ce = cx.ecx(&[], &k.path).expr(&Expr::Field(h.clone(), f.clone()))?;
                    let w = match &ce {
                        CExpr::Field(fid) => layout.fields[*fid as usize].width,
                        _ => 1,
                    };
                    let hdr = match &ce {
                        CExpr::Field(fid) => {
                            let hi = layout.fields[*fid as usize].header;
                            if layout.headers[hi as usize].metadata {
                                None
                            } else {
                                Some(HRef::Fixed(hi))
                            }
                        }
                        _ => None,
                    };
                    (ce, hdr, w)
                };
                let cli_name = if kind == MatchKind::Valid || k.target.len() == 1 || k.target[1] == "$valid$" {
                    format!("{}_valid", k.target[0])
                } else {
                    k.target.join(".")
                };
                key.push(KeyElem { name: k.name.clone(), cli_name, kind, src, header, width, mask: k.mask.clone() });
            }
            let mut tactions = Vec::new();
            for id in &t.action_ids {
                tactions.push(
                    *action_by_id
                        .get(id)
                        .ok_or_else(|| CompileError::at(&t.path, format!("action_ids: unknown action id {id}")))?,
                );
            }
            if t.action_ids.is_empty() {
                // Older bmv2 JSON names the actions only.
                for n in &t.actions {
                    let a = actions
                        .iter()
                        .position(|a| a.name == *n)
                        .ok_or_else(|| CompileError::at(&t.path, format!("actions: unknown action \"{n}\"")))?;
                    tactions.push(a as u32);
                }
            }
            let mut next_by_action = vec![None; tactions.len()];
            let mut next_hit = None;
            let mut next_miss = None;
            for (aname, nxt) in &t.next_tables {
                let n = node(nxt, &t.path)?;
                match aname.as_str() {
                    "__HIT__" => next_hit = Some(n),
                    "__MISS__" => next_miss = Some(n),
                    _ => {
                        if let Some(pos) = tactions.iter().position(|a| actions[*a as usize].name == *aname) {
                            next_by_action[pos] = n;
                            // Several actions may share a name; give them all the same successor.
                            for (i, a) in tactions.iter().enumerate() {
                                if actions[*a as usize].name == *aname {
                                    next_by_action[i] = n;
                                }
                            }
                        }
                    }
                }
            }
            let profile = match (&t.kind[..], &t.action_profile) {
                ("simple", _) => None,
                ("indirect" | "indirect_ws", Some(name)) => match profile_by_name.get(name) {
                    Some(p) => Some(*p),
                    None => {
                        // Older bmv2 JSON declares the profile (and selector) on the table.
                        let selector = match &t.selector {
                            Some((algo, input)) => Some(compile_selector(cx, algo, input, &t.path)?),
                            None if t.kind == "indirect_ws" => {
                                return Err(CompileError::at(&t.path, "indirect_ws table without a selector"))
                            }
                            None => None,
                        };
                        profile_by_name.insert(name.clone(), profiles.len() as u32);
                        profiles.push(ProfilePlan::new(name.clone(), t.max_size as usize, selector, layout));
                        Some((profiles.len() - 1) as u32)
                    }
                },
                (other, _) => {
                    return Err(CompileError::at(
                        &format!("{}.type", t.path),
                        format!("table type \"{other}\" is not supported"),
                    ))
                }
            };
            // A PSA program's DirectMeter is bound by its array alone (p4c-bm2-psa leaves `direct_meters` null).
            let bound_meter = || {
                p.meter_arrays
                    .iter()
                    .find(|m| psa && m.is_direct && m.binding.as_deref() == Some(t.name.as_str()))
                    .map(|m| &m.name)
            };
            let direct_meter = match t.direct_meters.as_ref().or_else(bound_meter) {
                Some(m) => {
                    let mi = *cx
                        .meters
                        .get(m.as_str())
                        .ok_or_else(|| CompileError::at(&t.path, format!("unknown direct meter \"{m}\"")))?;
                    let ma = &p.meter_arrays[mi as usize];
                    let (h, f) = ma
                        .result_target
                        .clone()
                        .ok_or_else(|| CompileError::at(&ma.path, "direct meter without result_target"))?;
                    let fid = layout
                        .field(&h, &f)
                        .ok_or_else(|| CompileError::at(&ma.path, format!("unknown field \"{h}.{f}\"")))?;
                    Some((mi, Dst::Field(fid)))
                }
                None => None,
            };
            let default_action = match &t.default_entry {
                Some(d) => {
                    let a = *action_by_id.get(&d.entry.action_id).ok_or_else(|| {
                        CompileError::at(&t.path, format!("default_entry: unknown action id {}", d.entry.action_id))
                    })?;
                    let data = pack_action_data(&actions[a as usize], &d.entry.action_data)
                        .map_err(|m| CompileError::at(&format!("{}.default_entry", t.path), m))?;
                    Some((a, data))
                }
                None => None,
            };
            let default_const = t.default_entry.as_ref().is_some_and(|d| d.action_const && d.action_entry_const);
            let inline_default = match &default_action {
                Some((a, data)) if key.is_empty() && t.entries.is_empty() && default_const && data.is_empty() => {
                    let next = match next_miss {
                        Some(n) => n,
                        None => match tactions.iter().position(|x| x == a) {
                            Some(pos) => next_by_action[pos],
                            None => node(&t.base_default_next, &t.path)?,
                        },
                    };
                    Some((*a, next))
                }
                _ => None,
            };
            let key_bytes: usize = key.iter().map(|k| nbytes(k.width)).sum();
            let key_fields = if key.is_empty() {
                None
            } else {
                key.iter()
                    .map(|k| {
                        let bits = nbytes(k.width) as u32 * 8;
                        match (&k.src, k.kind, &k.mask, &k.header) {
                            (CExpr::Valid(HRef::Fixed(h)), MatchKind::Valid, _, _) => Some((KeyPart::Valid(*h), bits)),
                            (CExpr::Field(f), _, None, hdr) => {
                                let src = crate::phv::FieldSrc::of(&layout.fields[*f as usize])?;
                                match hdr {
                                    None => Some((KeyPart::Field { src, header: None }, bits)),
                                    Some(HRef::Fixed(h)) => Some((KeyPart::Field { src, header: Some(*h) }, bits)),
                                    _ => None,
                                }
                            }
                            _ => None,
                        }
                    })
                    .collect::<Option<Vec<_>>>()
            };
            let key128 = key_fields.clone().filter(|_| key_bytes <= 16);
            tables.push(TablePlan {
                key128,
                key_fields,
                key_bytes,
                inline_default,
                name: t.name.clone(),
                id: t.id,
                key,
                match_type: t.match_type.clone(),
                max_size: t.max_size as usize,
                // A PSA program's DirectCounter is bound by its array alone, as its DirectMeter.
                with_counters: t.with_counters
                    || (psa
                        && p.counter_arrays
                            .iter()
                            .any(|c| c.is_direct && c.binding.as_deref() == Some(t.name.as_str()))),
                direct_meter,
                actions: tactions,
                profile,
                base_default_next: node(&t.base_default_next, &t.path)?,
                next_by_action,
                next_hit,
                next_miss,
                default_action,
                default_const: t.default_entry.as_ref().is_some_and(|d| d.action_const),
                default_entry_const: default_const,
                const_entries: t.entries.clone(),
                support_timeout: t.support_timeout,
            });
        }
        for c in &pl.conditionals {
            conds.push(CondPlan {
                name: c.name.clone(),
                source: c.source.clone(),
                expr: cx.root(&c.expression, &[], &c.path, 0)?,
                true_next: node(&c.true_next, &c.path)?,
                false_next: node(&c.false_next, &c.path)?,
            });
        }
        let init = node(&pl.init_table, &pl.path)?;
        match pl.name.as_str() {
            "ingress" => ingress.init = init,
            "egress" => egress.init = init,
            other => return Err(CompileError::at(&pl.path, format!("pipeline \"{other}\" is not a v1model pipeline"))),
        }
    }
    check_control_flow_has_no_cycle(p, &tables, &conds)?;
    Ok(Pipelines { tables, conds, profiles, ingress, egress })
}

/// Refuses a control whose tables and conditionals loop back (a
/// conditional whose branch leads back to itself, a table whose next node
/// is an earlier one): P4 controls have no loops, and such a graph would
/// run a packet for ever. The error names the node the loop comes back to.
fn check_control_flow_has_no_cycle(p: &Program, tables: &[TablePlan], conds: &[CondPlan]) -> Result<(), CompileError> {
    let succ = |n: Node| -> Vec<Node> {
        match n {
            Node::Table(t) => {
                let t = &tables[t as usize];
                let mut v: Vec<Option<Node>> = t.next_by_action.clone();
                v.extend([t.base_default_next, t.next_hit.flatten(), t.next_miss.flatten()]);
                v.extend(t.inline_default.map(|(_, n)| n));
                v.into_iter().flatten().collect()
            }
            Node::Cond(c) => {
                [conds[c as usize].true_next, conds[c as usize].false_next].into_iter().flatten().collect()
            }
        }
    };
    let index = |n: Node| match n {
        Node::Table(t) => t as usize,
        Node::Cond(c) => tables.len() + c as usize,
    };
    // 0: not seen, 1: on the current path, 2: done.
    let mut state = vec![0u8; tables.len() + conds.len()];
    let all = (0..tables.len() as u32).map(Node::Table).chain((0..conds.len() as u32).map(Node::Cond));
    for start in all {
        if state[index(start)] != 0 {
            continue;
        }
        let mut stack = vec![(start, succ(start), 0usize)];
        state[index(start)] = 1;
        while let Some((n, next, i)) = stack.last_mut() {
            if let Some(&m) = next.get(*i) {
                *i += 1;
                match state[index(m)] {
                    0 => {
                        state[index(m)] = 1;
                        stack.push((m, succ(m), 0));
                    }
                    1 => {
                        // Node numbers run over the pipelines' tables (conditionals) in order.
                        let from = match *n {
                            Node::Table(t) => {
                                p.pipelines.iter().flat_map(|pl| &pl.tables).nth(t as usize).map(|t| &t.path)
                            }
                            Node::Cond(c) => {
                                p.pipelines.iter().flat_map(|pl| &pl.conditionals).nth(c as usize).map(|c| &c.path)
                            }
                        };
                        let from = from.map_or("pipelines", String::as_str);
                        let name = |n: Node| match n {
                            Node::Table(t) => tables[t as usize].name.as_str(),
                            Node::Cond(c) => conds[c as usize].name.as_str(),
                        };
                        let (from_name, to_name) = (name(*n), name(m));
                        return Err(CompileError::at(
                            from,
                            format!(
                                "\"{from_name}\" leads back to \"{to_name}\": a control's tables and conditionals must form no loop"
                            ),
                        ));
                    }
                    _ => {}
                }
            } else {
                state[index(*n)] = 2;
                stack.pop();
            }
        }
    }
    Ok(())
}
