//! The compiler: typed model -> execution plan.
//!
//! Every name in the program is resolved here to an index (fields, headers,
//! tables, actions, externs), every parameter layout is fixed, and every
//! unsupported construct is rejected with the JSON path where it sits. The
//! plan is immutable once built; run-time state (entries, counters...) lives
//! in `state::State`.

use std::collections::HashMap;

use sluice_json::{Expr, HeaderRef, ParserOpKind, Primitive, Program, TransitionValue};

use crate::expr::{CExpr, ExprCx, HRef, Root};
use crate::phv::Layout;
use crate::psa;
use crate::tables::MatchKind;
use crate::value::nbytes;
use crate::CompileError;

/// Destination of an assignment.
#[derive(Debug, Clone)]
pub enum Dst {
    Field(u32),
    /// A field of a run-time selected header: `(header, field index)`.
    Dyn(HRef, usize),
}

/// A compiled primitive.
#[derive(Debug, Clone)]
pub enum Prim {
    /// Assignment to a field with a hot-path writer (the common case), mask precomputed.
    SetField {
        dst: crate::phv::FieldSrc,
        mask: u64,
        src: Root,
    },
    Assign {
        dst: Dst,
        src: Root,
    },
    AssignHeader {
        dst: HRef,
        src: HRef,
    },
    AssignUnion {
        dst: u32,
        src: u32,
    },
    AssignStack {
        dst: u32,
        src: u32,
    },
    SetValid(HRef),
    SetInvalid(HRef),
    MarkToDrop,
    Exit,
    Jump(usize),
    JumpIfZero(Root, usize),
    Count {
        arr: u32,
        idx: Root,
    },
    ExecuteMeter {
        arr: u32,
        idx: Root,
        dst: Dst,
    },
    RegRead {
        dst: Dst,
        arr: u32,
        idx: Root,
    },
    RegWrite {
        arr: u32,
        idx: Root,
        val: Root,
    },
    Clone {
        ingress: bool,
        session: Root,
        field_list: Option<u32>,
    },
    Resubmit(Option<u32>),
    Recirculate(Option<u32>),
    Truncate(Root),
    Digest {
        receiver: Root,
        list: u32,
    },
    HashOffset {
        dst: Dst,
        base: Root,
        calc: u32,
        size: Root,
    },
    Rng {
        dst: Dst,
        lo: Root,
        hi: Root,
    },
    Push {
        stack: u32,
        n: u32,
    },
    Pop {
        stack: u32,
        n: u32,
    },
    Assert(Root),
    /// PSA `InternetChecksum` instance `ext` (its index among the
    /// program's): `clear`.
    CsumClear(u32),
    /// `add` (or `subtract`) of the fields of a field list, packed.
    CsumAdd {
        ext: u32,
        input: Vec<(Root, u32)>,
        subtract: bool,
    },
    /// `get` (the one's complement of the sum) into `dst`, or `get_state`
    /// (the sum itself).
    CsumGet {
        ext: u32,
        dst: Dst,
        state: bool,
    },
    /// `get_verify`: `dst` = whether `field` equals `get()`.
    CsumVerify {
        ext: u32,
        dst: Dst,
        field: Root,
    },
    /// `set_state`.
    CsumSetState {
        ext: u32,
        value: Root,
    },
    Log {
        fmt: String,
        args: Vec<Root>,
    },
    AssignVl {
        dst: u32,
        src: u32,
    },
}

/// A compiled action.
#[derive(Debug, Clone)]
pub struct ActionPlan {
    pub name: String,
    pub id: u64,
    /// `(name, bitwidth)` of each parameter.
    pub params: Vec<(String, u32)>,
    /// `(byte offset, byte length)` of each parameter in the action data.
    pub param_layout: Vec<(u32, u32)>,
    pub data_len: usize,
    pub prims: Vec<Prim>,
}

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

/// A compiled conditional.
#[derive(Debug, Clone)]
pub struct CondPlan {
    pub name: String,
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
            (pieces.iter().map(|p| p.len).sum::<u32>() <= SELECTOR_BYTES_MAX).then_some(pieces)
        });
        ProfilePlan { name, max_size, selector, selector_bytes }
    }
}

/// Most bytes a selector's gathered input may have (its stack buffer).
pub const SELECTOR_BYTES_MAX: u32 = 64;

/// Where an `extract` writes.
#[derive(Debug, Clone)]
pub enum ExtractTo {
    Header(u32),
    StackNext(u32),
    UnionStackNext(u32, usize),
}

/// A parser operation.
#[derive(Debug, Clone)]
pub enum POp {
    Extract(ExtractTo),
    ExtractVl(ExtractTo, Root),
    Set(Dst, Root),
    Verify(Root, Root),
    Advance(Root),
    Prim(Prim),
}

/// One transition.
#[derive(Debug, Clone)]
pub struct PTrans {
    pub value: Vec<u8>,
    pub mask: Option<Vec<u8>>,
    pub vset: Option<u32>,
    pub default: bool,
    /// `None` accepts.
    pub next: Option<u32>,
}

/// A parser state.
#[derive(Debug, Clone)]
pub struct PState {
    pub name: String,
    pub ops: Vec<POp>,
    /// Key elements with their byte width.
    pub key: Vec<(Root, u32)>,
    pub key_len: usize,
    pub transitions: Vec<PTrans>,
    /// `(value, mask, next)` as integers, when the key is at most 16 bytes of
    /// fields and no value set is used (the default case has mask 0).
    pub fast_transitions: Option<Vec<(u128, u128, Option<u32>)>>,
    /// `(header, wire offset, bytes)` when the state only extracts
    /// wire-format headers outside unions: the parser then copies bytes.
    pub wire_extracts: Option<Vec<(u32, u32, u32)>>,
}

/// A checksum to verify or update.
#[derive(Debug, Clone)]
pub struct ChecksumPlan {
    pub name: String,
    pub target: u32,
    pub calc: u32,
    pub verify: bool,
    pub update: bool,
    pub cond: Option<Root>,
}

/// A calculation: algorithm plus input fields.
#[derive(Debug, Clone)]
pub struct CalcPlan {
    pub name: String,
    pub algo: String,
    /// Each input as `(expression, bit width)`.
    pub input: Vec<(Root, u32)>,
    /// Input fields whose header must be valid to be included (bmv2 skips invalid headers).
    pub input_headers: Vec<Option<u32>>,
    /// The algorithm is the Internet checksum: summed on the fly, no packing buffer.
    pub is_csum16: bool,
    /// The payload is appended after the fields (bmv2: wherever it is listed).
    pub with_payload: bool,
    /// csum16 over fields that all belong to one header (or to metadata):
    /// the header (if any) and the fields packed as 64-bit words.
    /// When every input is a field of one wire-format header and together
    /// they cover whole bytes: `(header, byte ranges in the wire area)`, so a
    /// checksum reads the header's bytes directly.
    pub csum_bytes: Option<(u32, Vec<(u32, u32)>)>,
    /// Zeros pad the packed bits to whole bytes in front (PSA's `Hash`),
    /// not behind (v1model's calculations).
    pub pad_left: bool,
}

/// Counter, meter and register arrays.
#[derive(Debug, Clone)]
pub struct ArrayPlan {
    pub name: String,
    pub size: usize,
    pub is_direct: bool,
    pub binding: Option<String>,
    /// Registers: bit width. Meters: 1 for packet meters, 0 for byte meters.
    pub width: u32,
}

/// The whole compiled program.
#[derive(Debug, Clone)]
pub struct Plan {
    pub layout: Layout,
    pub actions: Vec<ActionPlan>,
    pub tables: Vec<TablePlan>,
    pub conds: Vec<CondPlan>,
    pub ingress: PipelinePlan,
    pub egress: PipelinePlan,
    pub profiles: Vec<ProfilePlan>,
    pub states: Vec<PState>,
    pub init_state: Option<u32>,
    pub deparse_order: Vec<u32>,
    pub checksums: Vec<ChecksumPlan>,
    pub calcs: Vec<CalcPlan>,
    pub counters: Vec<ArrayPlan>,
    pub meters: Vec<ArrayPlan>,
    pub registers: Vec<ArrayPlan>,
    /// Field lists by JSON id: field ids.
    pub field_lists: HashMap<u64, Vec<u32>>,
    /// Learn lists by JSON id: `(name, field ids)`.
    pub learn_lists: HashMap<u64, (String, Vec<u32>)>,
    pub vsets: Vec<(String, u32)>,
    pub errors: HashMap<String, u64>,
    /// Value of `error.NoError` (0 in new p4c output, 1 in old).
    pub no_error: u64,
    pub std: StdFields,
    pub program_name: String,
    /// A PSA program's metadata fields (`None` for v1model): the
    /// architecture comes from the JSON (see [`is_psa`]).
    pub psa: Option<psa::PsaFields>,
    /// PSA: the egress parser's first state (in `states`).
    pub egress_init_state: Option<u32>,
    /// PSA: the egress deparser's order (`deparse_order` is the ingress one).
    pub egress_deparse_order: Vec<u32>,
    /// PSA: what the ingress and the egress deparser run before they emit
    /// (`InternetChecksum` calls).
    pub deparse_prims: Vec<Prim>,
    pub egress_deparse_prims: Vec<Prim>,
}

/// Whether `p` is what `p4c-bm2-psa` emits: parsers and deparsers named
/// for PSA's ingress and egress, and PSA's ingress output metadata.
pub fn is_psa(p: &Program) -> bool {
    p.parsers.iter().any(|x| x.name == psa::EGRESS_PARSER)
        && p.deparsers.iter().any(|x| x.name == psa::EGRESS_DEPARSER)
        && p.headers.iter().any(|h| h.name == psa::INGRESS_OUTPUT)
}

/// The v1model intrinsic fields the switch reads and writes.
#[derive(Debug, Clone, Default)]
pub struct StdFields {
    pub ingress_port: Option<u32>,
    pub egress_spec: Option<u32>,
    pub egress_port: Option<u32>,
    pub instance_type: Option<u32>,
    pub packet_length: Option<u32>,
    pub mcast_grp: Option<u32>,
    pub egress_rid: Option<u32>,
    pub checksum_error: Option<u32>,
    pub parser_error: Option<u32>,
    pub ingress_global_timestamp: Option<u32>,
    pub egress_global_timestamp: Option<u32>,
    pub enq_timestamp: Option<u32>,
    pub enq_qdepth: Option<u32>,
    pub deq_timedelta: Option<u32>,
    pub deq_qdepth: Option<u32>,
    pub priority: Option<u32>,
}

struct Cx<'a> {
    p: &'a Program,
    layout: &'a Layout,
    calcs: HashMap<&'a str, u32>,
    counters: HashMap<&'a str, u32>,
    meters: HashMap<&'a str, u32>,
    registers: HashMap<&'a str, u32>,
    /// PSA `Hash` instances: their name and algorithm.
    hashes: HashMap<&'a str, (&'a str, &'a str)>,
    /// PSA `InternetChecksum` instances: their index.
    csums: HashMap<&'a str, u32>,
    /// PSA `Random` instances: their bounds.
    randoms: HashMap<&'a str, (u64, u64)>,
    /// Calculations PSA `Hash` calls make (name, algorithm, input, path):
    /// numbered after the program's.
    extern_calcs: std::cell::RefCell<Vec<ExternCalc>>,
}

/// A calculation a PSA `Hash` call makes: name, algorithm, input, path.
type ExternCalc = (String, String, Vec<sluice_json::CalcInput>, String);

/// The value of attribute `name` of an extern instance.
fn extern_attribute<'a>(e: &'a sluice_json::ExternInstance, name: &str) -> Option<&'a str> {
    e.attributes.iter().find(|a| a.0 == name).map(|a| a.2.as_str())
}

/// Each name with its index.
fn numbered<'a>(names: impl Iterator<Item = &'a str>) -> HashMap<&'a str, u32> {
    names.enumerate().map(|(i, n)| (n, i as u32)).collect()
}

/// The size attribute `attr` of extern `e` (a `kind` array), checked.
fn extern_size(e: &sluice_json::ExternInstance, attr: &str, kind: &str) -> Result<u64, CompileError> {
    let size = extern_attribute(e, attr)
        .and_then(attribute_number)
        .ok_or_else(|| CompileError::at(&e.path, format!("a {kind} needs a numeric \"{attr}\" attribute")))?;
    if size > MAX_ARRAY_SIZE {
        return Err(CompileError::at(
            &e.path,
            format!("{kind}: size {size} exceeds the supported maximum {MAX_ARRAY_SIZE}"),
        ));
    }
    Ok(size)
}

/// A number written as an extern attribute (`0x...` or decimal).
fn attribute_number(v: &str) -> Option<u64> {
    match v.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => v.parse().ok(),
    }
}

/// A PSA program's `Meter`s and `Counter`s as arrays, numbered after the
/// program's meter and counter arrays.
#[derive(Default)]
struct ExternArrays {
    /// `(name, size, counts packets)`.
    meters: Vec<(String, u64, bool)>,
    /// `(name, size)`.
    counters: Vec<(String, u64)>,
}

/// The program's extern instances checked (those Sluice runs: `Hash`,
/// `InternetChecksum`, `Counter`, `Random` and indirect `Meter`), and its
/// meters and counters as arrays.
fn extern_arrays(p: &Program) -> Result<ExternArrays, CompileError> {
    let (mut arrays, mut csums) = (ExternArrays::default(), 0);
    for e in &p.extern_instances {
        match e.kind.as_str() {
            "Hash" => {
                let algo = extern_attribute(e, "algo").unwrap_or("");
                if sluice_hash::Algorithm::from_name(algo).is_none() {
                    return Err(CompileError::at(&e.path, format!("Hash algorithm \"{algo}\" is not supported")));
                }
            }
            "Counter" => {
                let size = extern_size(e, "n_counters", "Counter")?;
                // p4c-bm2-psa may declare it in `counter_arrays` too: one array.
                if !p.counter_arrays.iter().any(|c| c.name == e.name) {
                    arrays.counters.push((e.name.clone(), size));
                }
            }
            "Random" => {
                let bound = |a: &str| extern_attribute(e, a).and_then(attribute_number);
                match (bound("min"), bound("max")) {
                    (Some(lo), Some(hi)) if lo <= hi => {}
                    (lo, hi) => {
                        return Err(CompileError::at(
                            &e.path,
                            format!("a Random needs numeric \"min\" <= \"max\" attributes (min {lo:?}, max {hi:?})"),
                        ))
                    }
                }
            }
            "InternetChecksum" => {
                csums += 1;
                if csums > crate::control::MAX_CHECKSUMS {
                    return Err(CompileError::at(
                        &e.path,
                        format!("more than {} InternetChecksum instances", crate::control::MAX_CHECKSUMS),
                    ));
                }
            }
            "Meter" if extern_attribute(e, "is_direct").and_then(attribute_number).unwrap_or(0) == 0 => {
                let size = extern_size(e, "n_meters", "Meter")?;
                let packets = match extern_attribute(e, "type") {
                    Some("packets") => true,
                    Some("bytes") => false,
                    other => {
                        return Err(CompileError::at(
                            &e.path,
                            format!("a Meter's \"type\" must be packets or bytes, not {other:?}"),
                        ))
                    }
                };
                if !p.meter_arrays.iter().any(|m| m.name == e.name) {
                    arrays.meters.push((e.name.clone(), size, packets));
                }
            }
            // Declarations only: p4c-bm2-psa binds a direct counter or meter
            // to its table through the `counter_arrays`/`meter_arrays` entry
            // (`is_direct`, `binding`), which is what Sluice runs; one bound
            // to no table is never counted, as in bmv2.
            "DirectCounter" | "DirectMeter" => {}
            other => {
                return Err(CompileError::at(
                    &e.path,
                    format!("extern instances of type \"{other}\" are not supported yet"),
                ))
            }
        }
    }
    Ok(arrays)
}

/// A `hexstr` calculation input packed with `width` bits, as bmv2 packs it:
/// the low `width` bits of the constant's first `ceil(width / 8)` bytes
/// (as written; a shorter constant counts as its value).
fn calc_constant(negative: bool, magnitude: &[u8], width: u32, path: &str) -> Result<CExpr, CompileError> {
    use crate::value::{Num, Wide};
    if negative {
        return Err(CompileError::at(path, "a calculation constant cannot be negative"));
    }
    if width > Wide::BITS {
        return Err(CompileError::at(
            path,
            format!("a calculation constant of {width} bits is wider than the supported {}", Wide::BITS),
        ));
    }
    let nb = nbytes(width);
    let mut b = vec![0u8; nb];
    if magnitude.len() >= nb {
        b.copy_from_slice(&magnitude[..nb]);
    } else {
        b[nb - magnitude.len()..].copy_from_slice(magnitude);
    }
    crate::phv::mask_top(&mut b, width);
    let w = <Wide as Num>::from_be(&b);
    Ok(CExpr::Const(w.low_u128() as i128, Box::new(w)))
}

fn width_of(layout: &Layout, e: &CExpr) -> u32 {
    match e {
        CExpr::Field(f) => layout.fields[*f as usize].width,
        _ => 0,
    }
}

impl<'a> Cx<'a> {
    fn ecx<'b>(&'b self, params: &'b [(u32, u32)], path: &'b str) -> ExprCx<'b> {
        ExprCx { layout: self.layout, params, path }
    }

    fn dst(&self, e: &Expr, params: &[(u32, u32)], path: &str) -> Result<(Dst, u32), CompileError> {
        let cx = self.ecx(params, path);
        match cx.expr(e)? {
            CExpr::Field(f) => Ok((Dst::Field(f), self.layout.fields[f as usize].width)),
            CExpr::DynField(h, i) => Ok((Dst::Dyn(h, i), 128)),
            _ => Err(CompileError::at(path, "assignment target is not a field")),
        }
    }

    fn root(&self, e: &Expr, params: &[(u32, u32)], path: &str, dst_width: u32) -> Result<Root, CompileError> {
        let c = self.ecx(params, path).expr(e)?;
        Ok(Root::new(c, self.layout, dst_width))
    }

    fn named<T: Copy>(&self, map: &HashMap<&str, T>, e: &Expr, kind: &str, path: &str) -> Result<T, CompileError> {
        match e {
            Expr::Object { name, .. } => map
                .get(name.as_str())
                .copied()
                .ok_or_else(|| CompileError::at(path, format!("unknown {kind} \"{name}\""))),
            _ => Err(CompileError::at(path, format!("expected a {kind}"))),
        }
    }

    fn stack_of(&self, e: &Expr, path: &str) -> Result<u32, CompileError> {
        match e {
            Expr::HeaderStack(s) => {
                self.layout.stack(s).ok_or_else(|| CompileError::at(path, format!("unknown header stack \"{s}\"")))
            }
            _ => Err(CompileError::at(path, "expected a header stack")),
        }
    }

    fn const_u64(&self, e: &Expr, path: &str) -> Result<u64, CompileError> {
        match e {
            Expr::Hex { negative: false, magnitude } => Ok(crate::value::be_to_u128(magnitude) as u64),
            _ => Err(CompileError::at(path, "expected a constant")),
        }
    }

    fn field_list_id(&self, e: Option<&Expr>, path: &str) -> Result<Option<u32>, CompileError> {
        match e {
            None => Ok(None),
            Some(e) => {
                let id = self.const_u64(e, path)?;
                Ok(if id == 0 { None } else { Some(id as u32) })
            }
        }
    }

    fn prim(&self, pr: &Primitive, params: &[(u32, u32)]) -> Result<Prim, CompileError> {
        let path = pr.path.as_str();
        let n = pr.params.len();
        let need = |k: usize| -> Result<(), CompileError> {
            if n < k {
                Err(CompileError::at(path, format!("primitive \"{}\" needs {k} parameters, got {n}", pr.op)))
            } else {
                Ok(())
            }
        };
        let cx = self.ecx(params, path);
        Ok(match pr.op.as_str() {
            "assign" | "modify_field" => {
                need(2)?;
                let (dst, w) = self.dst(&pr.params[0], params, path)?;
                let src = self.root(&pr.params[1], params, path, w)?;
                match dst {
                    Dst::Field(f) => match crate::phv::FieldSrc::of(&self.layout.fields[f as usize]) {
                        Some(dst) => Prim::SetField { dst, mask: crate::phv::mask64(w), src },
                        None => Prim::Assign { dst: Dst::Field(f), src },
                    },
                    _ => Prim::Assign { dst, src },
                }
            }
            "add_to_field" | "subtract_from_field" => {
                need(2)?;
                let (dst, w) = self.dst(&pr.params[0], params, path)?;
                let op = if pr.op == "add_to_field" { "+" } else { "-" };
                let e = Expr::Op {
                    op: op.into(),
                    left: Some(Box::new(pr.params[0].clone())),
                    right: Some(Box::new(pr.params[1].clone())),
                };
                Prim::Assign { dst, src: self.root(&e, params, path, w)? }
            }
            "assign_header" => {
                need(2)?;
                Prim::AssignHeader { dst: cx.href(&pr.params[0])?, src: cx.href(&pr.params[1])? }
            }
            "assign_union" => {
                need(2)?;
                let u = |e: &Expr| -> Result<u32, CompileError> {
                    match e {
                        Expr::HeaderUnion(n) => self
                            .layout
                            .union(n)
                            .ok_or_else(|| CompileError::at(path, format!("unknown header union \"{n}\""))),
                        _ => Err(CompileError::at(path, "expected a header union")),
                    }
                };
                Prim::AssignUnion { dst: u(&pr.params[0])?, src: u(&pr.params[1])? }
            }
            "assign_header_stack" => {
                need(2)?;
                Prim::AssignStack { dst: self.stack_of(&pr.params[0], path)?, src: self.stack_of(&pr.params[1], path)? }
            }
            "add_header" | "setValid" => {
                need(1)?;
                Prim::SetValid(cx.href(&pr.params[0])?)
            }
            "remove_header" | "setInvalid" => {
                need(1)?;
                Prim::SetInvalid(cx.href(&pr.params[0])?)
            }
            "mark_to_drop" | "drop" => Prim::MarkToDrop,
            "exit" => Prim::Exit,
            "_jump" => {
                need(1)?;
                Prim::Jump(self.const_u64(&pr.params[0], path)? as usize)
            }
            "_jump_if_zero" => {
                need(2)?;
                Prim::JumpIfZero(
                    self.root(&pr.params[0], params, path, 0)?,
                    self.const_u64(&pr.params[1], path)? as usize,
                )
            }
            "count" => {
                need(2)?;
                Prim::Count {
                    arr: self.named(&self.counters, &pr.params[0], "counter array", path)?,
                    idx: self.root(&pr.params[1], params, path, 0)?,
                }
            }
            "_InternetChecksum_clear"
            | "_InternetChecksum_add"
            | "_InternetChecksum_subtract"
            | "_InternetChecksum_get"
            | "_InternetChecksum_get_state"
            | "_InternetChecksum_get_verify"
            | "_InternetChecksum_set_state" => {
                let method = &pr.op["_InternetChecksum_".len()..];
                need(match method {
                    "clear" => 1,
                    "get_verify" => 3,
                    _ => 2,
                })?;
                let ext = self.named(&self.csums, &pr.params[0], "InternetChecksum", path)?;
                match method {
                    "clear" => Prim::CsumClear(ext),
                    "add" | "subtract" => {
                        let Expr::List(items) = &pr.params[1] else {
                            return Err(CompileError::at(path, "expected a field list"));
                        };
                        let mut input = Vec::new();
                        for e in items {
                            let ce = self.ecx(params, path).expr(e)?;
                            let w = width_of(self.layout, &ce);
                            if w == 0 {
                                return Err(CompileError::at(path, format!("checksum input {e:?} is not supported")));
                            }
                            input.push((Root::new(ce, self.layout, w), w));
                        }
                        Prim::CsumAdd { ext, input, subtract: method == "subtract" }
                    }
                    "get" | "get_state" => {
                        let (dst, _) = self.dst(&pr.params[1], params, path)?;
                        Prim::CsumGet { ext, dst, state: method == "get_state" }
                    }
                    "get_verify" => {
                        let (dst, _) = self.dst(&pr.params[1], params, path)?;
                        Prim::CsumVerify { ext, dst, field: self.root(&pr.params[2], params, path, 0)? }
                    }
                    _ => Prim::CsumSetState { ext, value: self.root(&pr.params[1], params, path, 0)? },
                }
            }
            "_Counter_count" => {
                need(2)?;
                Prim::Count {
                    arr: self.named(&self.counters, &pr.params[0], "Counter", path)?,
                    idx: self.root(&pr.params[1], params, path, 0)?,
                }
            }
            "_Random_read" => {
                need(2)?;
                let (dst, _) = self.dst(&pr.params[1], params, path)?;
                let (lo, hi) = self.named(&self.randoms, &pr.params[0], "Random", path)?;
                let constant = |v: u64| Expr::Hex { negative: false, magnitude: v.to_be_bytes().to_vec() };
                Prim::Rng {
                    dst,
                    lo: self.root(&constant(lo), params, path, 0)?,
                    hi: self.root(&constant(hi), params, path, 0)?,
                }
            }
            "_Meter_execute" => {
                need(3)?;
                let (dst, _) = self.dst(&pr.params[2], params, path)?;
                Prim::ExecuteMeter {
                    arr: self.named(&self.meters, &pr.params[0], "Meter", path)?,
                    idx: self.root(&pr.params[1], params, path, 0)?,
                    dst,
                }
            }
            "_Hash_get_hash" | "_Hash_get_hash_mod" => {
                let with_mod = pr.op == "_Hash_get_hash_mod";
                need(if with_mod { 5 } else { 3 })?;
                let (dst, width) = self.dst(&pr.params[1], params, path)?;
                let (name, algo) = self.named(&self.hashes, &pr.params[0], "Hash", path)?;
                let Expr::List(items) = &pr.params[if with_mod { 3 } else { 2 }] else {
                    return Err(CompileError::at(path, "expected a field list"));
                };
                let input = items
                    .iter()
                    .map(|e| sluice_json::CalcInput { expr: e.clone(), bitwidth: None, path: path.to_string() })
                    .collect();
                let mut extra = self.extern_calcs.borrow_mut();
                let calc = (self.p.calculations.len() + extra.len()) as u32;
                extra.push((format!("{name}.get_hash"), algo.to_string(), input, path.to_string()));
                drop(extra);
                let constant = |v: u128| Expr::Hex { negative: false, magnitude: v.to_be_bytes().to_vec() };
                let (base, size) = if with_mod {
                    (self.root(&pr.params[2], params, path, 0)?, self.root(&pr.params[4], params, path, 0)?)
                } else {
                    // The whole hash, cut to the destination's width.
                    let size = if width < 64 { 1u128 << width } else { u128::from(u64::MAX) };
                    (self.root(&constant(0), params, path, 0)?, self.root(&constant(size), params, path, 0)?)
                };
                Prim::HashOffset { dst, base, calc, size }
            }
            "execute_meter" => {
                need(3)?;
                let (dst, _) = self.dst(&pr.params[2], params, path)?;
                Prim::ExecuteMeter {
                    arr: self.named(&self.meters, &pr.params[0], "meter array", path)?,
                    idx: self.root(&pr.params[1], params, path, 0)?,
                    dst,
                }
            }
            "register_read" => {
                need(3)?;
                let (dst, _) = self.dst(&pr.params[0], params, path)?;
                Prim::RegRead {
                    dst,
                    arr: self.named(&self.registers, &pr.params[1], "register array", path)?,
                    idx: self.root(&pr.params[2], params, path, 0)?,
                }
            }
            "register_write" => {
                need(3)?;
                let arr = self.named(&self.registers, &pr.params[0], "register array", path)?;
                let w = self.p.register_arrays.get(arr as usize).map(|r| r.bitwidth).unwrap_or(0);
                Prim::RegWrite {
                    arr,
                    idx: self.root(&pr.params[1], params, path, 0)?,
                    val: self.root(&pr.params[2], params, path, w)?,
                }
            }
            "clone_ingress_pkt_to_egress" | "clone_egress_pkt_to_egress" => {
                need(1)?;
                Prim::Clone {
                    ingress: pr.op == "clone_ingress_pkt_to_egress",
                    session: self.root(&pr.params[0], params, path, 0)?,
                    field_list: self.field_list_id(pr.params.get(1), path)?,
                }
            }
            "resubmit" => Prim::Resubmit(self.field_list_id(pr.params.first(), path)?),
            "recirculate" => Prim::Recirculate(self.field_list_id(pr.params.first(), path)?),
            "truncate" => {
                need(1)?;
                Prim::Truncate(self.root(&pr.params[0], params, path, 0)?)
            }
            // p4c-bm2-psa gives only the learn list (a PSA `Digest`): receiver 0.
            "generate_digest" if n == 1 && is_psa(self.p) => Prim::Digest {
                receiver: self.root(&Expr::Hex { negative: false, magnitude: vec![0] }, params, path, 0)?,
                list: self.const_u64(&pr.params[0], path)? as u32,
            },
            "generate_digest" => {
                need(2)?;
                Prim::Digest {
                    receiver: self.root(&pr.params[0], params, path, 0)?,
                    list: self.const_u64(&pr.params[1], path)? as u32,
                }
            }
            "modify_field_with_hash_based_offset" => {
                need(4)?;
                let (dst, _) = self.dst(&pr.params[0], params, path)?;
                Prim::HashOffset {
                    dst,
                    base: self.root(&pr.params[1], params, path, 0)?,
                    calc: self.named(&self.calcs, &pr.params[2], "calculation", path)?,
                    size: self.root(&pr.params[3], params, path, 0)?,
                }
            }
            "modify_field_rng_uniform" => {
                need(3)?;
                let (dst, _) = self.dst(&pr.params[0], params, path)?;
                Prim::Rng {
                    dst,
                    lo: self.root(&pr.params[1], params, path, 0)?,
                    hi: self.root(&pr.params[2], params, path, 0)?,
                }
            }
            "push" | "pop" => {
                need(2)?;
                let stack = self.stack_of(&pr.params[0], path)?;
                let k = self.const_u64(&pr.params[1], path)? as u32;
                if pr.op == "push" {
                    Prim::Push { stack, n: k }
                } else {
                    Prim::Pop { stack, n: k }
                }
            }
            "assert" | "assume" => {
                need(1)?;
                Prim::Assert(self.root(&pr.params[0], params, path, 0)?)
            }
            "log_msg" => {
                let fmt = match pr.params.first() {
                    Some(Expr::Str(s)) => s.clone(),
                    _ => String::new(),
                };
                let mut args = Vec::new();
                if let Some(Expr::Op { .. }) = pr.params.get(1) {
                    // p4c passes a list expression; not decoded further.
                }
                for a in pr.params.iter().skip(1) {
                    if let Ok(r) = self.root(a, params, path, 0) {
                        args.push(r);
                    }
                }
                Prim::Log { fmt, args }
            }
            "assign_VL" => {
                need(2)?;
                let f = |e: &Expr| -> Result<u32, CompileError> {
                    match cx.expr(e)? {
                        CExpr::Field(f) => Ok(f),
                        _ => Err(CompileError::at(path, "assign_VL needs fields")),
                    }
                };
                Prim::AssignVl { dst: f(&pr.params[0])?, src: f(&pr.params[1])? }
            }
            other => return Err(CompileError::at(path, format!("primitive \"{other}\" is not supported"))),
        })
    }
}

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

/// Compiles a calculation: `algo` over `input` (a whole header stands
/// for its fields). `pad_left`: the packed bits are padded with zeros in
/// front to whole bytes (PSA's `Hash`), not behind.
fn compile_calc(
    cx: &Cx,
    name: &str,
    algo: &str,
    input: &[sluice_json::CalcInput],
    path: &str,
    pad_left: bool,
) -> Result<CalcPlan, CompileError> {
    let layout = cx.layout;
    if sluice_hash::Algorithm::from_name(algo).is_none() {
        return Err(CompileError::at(&format!("{path}.algo"), format!("hash algorithm \"{algo}\" is not supported")));
    }
    let mut packed = Vec::new();
    let mut hdrs = Vec::new();
    let mut with_payload = false;
    // A whole `header` input packs as its fields (all skipped while it is invalid).
    let mut expanded = Vec::new();
    for ci in input {
        match &ci.expr {
            Expr::Payload => with_payload = true,
            Expr::Header(h) => {
                let hi = layout.header(h).ok_or_else(|| CompileError::at(path, format!("unknown header \"{h}\"")))?;
                for f in &layout.headers[hi as usize].fields {
                    let fi = &layout.fields[*f as usize];
                    expanded.push((Expr::Field(h.clone(), fi.name.clone()), ci));
                }
            }
            other => expanded.push((other.clone(), ci)),
        }
    }
    for (e, ci) in &expanded {
        let (ce, w) = match (e, ci.bitwidth) {
            (Expr::Hex { negative, magnitude }, Some(w)) => (calc_constant(*negative, magnitude, w, &ci.path)?, w),
            _ => {
                let ce = cx.ecx(&[], path).expr(e)?;
                let w = width_of(layout, &ce);
                (ce, w)
            }
        };
        if w == 0 {
            return Err(CompileError::at(path, format!("calculation input {e:?} is not supported")));
        }
        hdrs.push(match &ce {
            CExpr::Field(f) => Some(layout.fields[*f as usize].header),
            _ => None,
        });
        packed.push((Root::new(ce, layout, w), w));
    }
    let csum_bytes = if pad_left { None } else { wire_byte_ranges(layout, &packed, &hdrs) };
    Ok(CalcPlan {
        with_payload,
        name: name.to_string(),
        algo: algo.to_string(),
        input: packed,
        input_headers: hdrs,
        is_csum16: algo == "csum16" || algo == "cksum16",
        csum_bytes,
        pad_left,
    })
}

/// Largest counter/meter/register array Sluice allocates (cells).
pub const MAX_ARRAY_SIZE: u64 = 1 << 24;

/// Compiles a loaded program into an execution plan.
pub fn compile(p: &Program) -> Result<Plan, CompileError> {
    let psa = is_psa(p);
    let layout = Layout::new(p)?;
    let ExternArrays { meters: extern_meters, counters: extern_counters } = extern_arrays(p)?;
    let cx = Cx {
        p,
        layout: &layout,
        calcs: p.calculations.iter().enumerate().map(|(i, c)| (c.name.as_str(), i as u32)).collect(),
        counters: numbered(
            p.counter_arrays.iter().map(|c| c.name.as_str()).chain(extern_counters.iter().map(|c| c.0.as_str())),
        ),
        randoms: p
            .extern_instances
            .iter()
            .filter(|e| e.kind == "Random")
            .map(|e| {
                let bound = |a: &str| extern_attribute(e, a).and_then(attribute_number).unwrap_or(0);
                (e.name.as_str(), (bound("min"), bound("max")))
            })
            .collect(),
        meters: numbered(
            p.meter_arrays.iter().map(|c| c.name.as_str()).chain(extern_meters.iter().map(|m| m.0.as_str())),
        ),
        registers: p.register_arrays.iter().enumerate().map(|(i, c)| (c.name.as_str(), i as u32)).collect(),
        hashes: p
            .extern_instances
            .iter()
            .filter(|e| e.kind == "Hash")
            .map(|e| (e.name.as_str(), (e.name.as_str(), extern_attribute(e, "algo").unwrap_or(""))))
            .collect(),
        extern_calcs: std::cell::RefCell::new(Vec::new()),
        csums: p
            .extern_instances
            .iter()
            .filter(|e| e.kind == "InternetChecksum")
            .enumerate()
            .map(|(i, e)| (e.name.as_str(), i as u32))
            .collect(),
    };
    // Actions
    let mut actions = Vec::new();
    let mut action_by_id = HashMap::new();
    for a in &p.actions {
        let mut layout_p = Vec::new();
        let mut off = 0u32;
        for r in &a.runtime_data {
            let len = nbytes(r.bitwidth.max(1)) as u32;
            layout_p.push((off, len));
            off += len;
        }
        let mut prims = Vec::new();
        for pr in &a.primitives {
            prims.push(cx.prim(pr, &layout_p)?);
        }
        action_by_id.insert(a.id, actions.len() as u32);
        actions.push(ActionPlan {
            name: a.name.clone(),
            id: a.id,
            params: a.runtime_data.iter().map(|r| (r.name.clone(), r.bitwidth)).collect(),
            param_layout: layout_p,
            data_len: off as usize,
            prims,
        });
    }
    // Calculations: the program's, then those of PSA `Hash` calls.
    let mut calcs = Vec::new();
    for c in &p.calculations {
        calcs.push(compile_calc(&cx, &c.name, &c.algo, &c.input, &c.path, false)?);
    }
    for (name, algo, input, path) in cx.extern_calcs.take() {
        calcs.push(compile_calc(&cx, &name, &algo, &input, &path, true)?);
    }
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
                Some((algo, input)) => Some(compile_selector(&cx, algo, input, &ap.path)?),
                None => None,
            };
            profile_by_name.insert(ap.name.clone(), profiles.len() as u32);
            profiles.push(ProfilePlan::new(ap.name.clone(), ap.max_size as usize, selector, &layout));
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
                            Some((algo, input)) => Some(compile_selector(&cx, algo, input, &t.path)?),
                            None if t.kind == "indirect_ws" => {
                                return Err(CompileError::at(&t.path, "indirect_ws table without a selector"))
                            }
                            None => None,
                        };
                        profile_by_name.insert(name.clone(), profiles.len() as u32);
                        profiles.push(ProfilePlan::new(name.clone(), t.max_size as usize, selector, &layout));
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
                const_entries: t.entries.clone(),
                support_timeout: t.support_timeout,
            });
        }
        for c in &pl.conditionals {
            conds.push(CondPlan {
                name: c.name.clone(),
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
    // Parser
    let mut states = Vec::new();
    let mut init_state = None;
    let vsets: Vec<(String, u32)> = p.parse_vsets.iter().map(|v| (v.name.clone(), v.compressed_bitwidth)).collect();
    if p.parsers.len() > 1 && !psa {
        return Err(CompileError::at("parsers[1]", "only one parser is supported (v1model has one)"));
    }
    // Every parser's states in one list (PSA has an ingress and an egress
    // parser): a parser's transitions index the list.
    let mut egress_init_state = None;
    for parser in &p.parsers {
        let base = states.len() as u32;
        let state_idx: HashMap<&str, u32> =
            parser.states.iter().enumerate().map(|(i, s)| (s.name.as_str(), base + i as u32)).collect();
        let init =
            Some(*state_idx.get(parser.init_state.as_str()).ok_or_else(|| {
                CompileError::at(&parser.path, format!("unknown init_state \"{}\"", parser.init_state))
            })?);
        if psa && parser.name == psa::EGRESS_PARSER {
            egress_init_state = init;
        } else {
            init_state = init;
        }
        for s in &parser.states {
            let mut ops = Vec::new();
            for o in &s.ops {
                let path = o.path.as_str();
                let to = |h: &HeaderRef| -> Result<ExtractTo, CompileError> {
                    Ok(match h {
                        HeaderRef::Header(n) => ExtractTo::Header(
                            layout
                                .header(n)
                                .ok_or_else(|| CompileError::at(path, format!("unknown header \"{n}\"")))?,
                        ),
                        HeaderRef::StackNext(n) => ExtractTo::StackNext(
                            layout
                                .stack(n)
                                .ok_or_else(|| CompileError::at(path, format!("unknown header stack \"{n}\"")))?,
                        ),
                        HeaderRef::UnionStackNext(n, m) => {
                            let us = layout
                                .union_stack(n)
                                .ok_or_else(|| CompileError::at(path, format!("unknown union stack \"{n}\"")))?;
                            let u0 = layout.union_stacks[us as usize].unions[0];
                            let mi = layout.unions[u0 as usize]
                                .member_names
                                .iter()
                                .position(|x| x == m)
                                .ok_or_else(|| CompileError::at(path, format!("unknown union member \"{m}\"")))?;
                            ExtractTo::UnionStackNext(us, mi)
                        }
                    })
                };
                ops.push(match &o.kind {
                    ParserOpKind::Extract(h) => POp::Extract(to(h)?),
                    ParserOpKind::ExtractVl(h, e) => POp::ExtractVl(to(h)?, cx.root(e, &[], path, 0)?),
                    ParserOpKind::Set(d, e) => {
                        let (dst, w) = cx.dst(d, &[], path)?;
                        POp::Set(dst, cx.root(e, &[], path, w)?)
                    }
                    ParserOpKind::Verify(c, e) => POp::Verify(cx.root(c, &[], path, 0)?, cx.root(e, &[], path, 0)?),
                    ParserOpKind::Advance(e) => POp::Advance(cx.root(e, &[], path, 0)?),
                    ParserOpKind::Primitive(pr) => POp::Prim(cx.prim(pr, &[])?),
                });
            }
            let mut key = Vec::new();
            let mut key_len = 0;
            for k in &s.key {
                if let Expr::UnionStackField(us, m, f) = k {
                    let (ce, w) = cx.ecx(&[], &s.path).union_stack_field(us, m, f)?;
                    let nb = nbytes(w) as u32;
                    key_len += nb as usize;
                    key.push((Root::new(ce, &layout, w), nb));
                    continue;
                }
                let ce = cx.ecx(&[], &s.path).expr(k)?;
                let w = match &ce {
                    CExpr::Field(f) => layout.fields[*f as usize].width,
                    CExpr::DynField(HRef::StackLast(st), idx) => {
                        let h0 = layout.stacks[*st as usize].headers[0];
                        layout.fields[layout.headers[h0 as usize].fields[*idx] as usize].width
                    }
                    CExpr::Lookahead { width, .. } => *width,
                    _ => return Err(CompileError::at(&s.path, format!("transition key {k:?} is not supported"))),
                };
                let nb = nbytes(w) as u32;
                key_len += nb as usize;
                key.push((Root::new(ce, &layout, w), nb));
            }
            let mut transitions = Vec::new();
            for t in &s.transitions {
                let next = match &t.next_state {
                    None => None,
                    Some(n) => Some(
                        *state_idx
                            .get(n.as_str())
                            .ok_or_else(|| CompileError::at(&s.path, format!("unknown next_state \"{n}\"")))?,
                    ),
                };
                let tr = match &t.value {
                    TransitionValue::Default => PTrans { value: vec![], mask: None, vset: None, default: true, next },
                    TransitionValue::Value { value, mask } => PTrans {
                        value: crate::tables::fit(value, key_len, key_len as u32 * 8),
                        mask: mask.as_ref().map(|m| crate::tables::fit(m, key_len, key_len as u32 * 8)),
                        vset: None,
                        default: false,
                        next,
                    },
                    TransitionValue::Vset(name) => {
                        PTrans {
                            value: vec![],
                            mask: None,
                            vset: Some(
                                vsets.iter().position(|(n, _)| n == name).ok_or_else(|| {
                                    CompileError::at(&s.path, format!("unknown parse_vset \"{name}\""))
                                })? as u32,
                            ),
                            default: false,
                            next,
                        }
                    }
                };
                transitions.push(tr);
            }
            let fast_ok = key_len <= 16
                && !key.iter().any(|(r, _)| matches!(r.e, CExpr::Lookahead { .. }))
                && transitions.iter().all(|t| t.vset.is_none());
            let fast_transitions = fast_ok.then(|| {
                transitions
                    .iter()
                    .map(|t| {
                        if t.default {
                            (0, 0, t.next)
                        } else {
                            let m = t
                                .mask
                                .as_ref()
                                .map_or(crate::value::mask128(key_len as u32 * 8), |m| crate::value::be_to_u128(m));
                            (crate::value::be_to_u128(&t.value) & m, m, t.next)
                        }
                    })
                    .collect()
            });
            let wire_extracts = ops
                .iter()
                .map(|op| match op {
                    POp::Extract(ExtractTo::Header(h)) => {
                        let hi = &layout.headers[*h as usize];
                        match (hi.wire, hi.union) {
                            (Some((off, n)), None) => Some((*h, off, n)),
                            _ => None,
                        }
                    }
                    _ => None,
                })
                .collect::<Option<Vec<_>>>();
            states.push(PState {
                // A PSA program's states are named with their parser's name (traces, `sluice inspect`).
                name: if psa { format!("{}.{}", parser.name, s.name) } else { s.name.clone() },
                ops,
                key,
                key_len,
                transitions,
                fast_transitions,
                wire_extracts,
            });
        }
    }
    // Deparser (PSA: an ingress and an egress one)
    let mut deparse_order = Vec::new();
    let mut egress_deparse_order = Vec::new();
    let (mut deparse_prims, mut egress_deparse_prims) = (Vec::new(), Vec::new());
    if p.deparsers.len() > 1 && !psa {
        return Err(CompileError::at("deparsers[1]", "only one deparser is supported (v1model has one)"));
    }
    for d in &p.deparsers {
        let mut order = Vec::new();
        for (i, h) in d.order.iter().enumerate() {
            order.push(layout.header(h).ok_or_else(|| {
                CompileError::at(&format!("{}.order[{i}]", d.path), format!("unknown header \"{h}\""))
            })?);
        }
        if !d.primitives.is_empty() && !psa {
            return Err(CompileError::at(&d.path, "deparser primitives are not supported"));
        }
        let prims = d.primitives.iter().map(|pr| cx.prim(pr, &[])).collect::<Result<Vec<_>, _>>()?;
        if psa && d.name == psa::EGRESS_DEPARSER {
            egress_deparse_order = order;
            egress_deparse_prims = prims;
        } else {
            deparse_order = order;
            deparse_prims = prims;
        }
    }
    // Checksums
    let mut checksums = Vec::new();
    for c in &p.checksums {
        if c.kind != "generic" && c.kind != "ipv4" {
            return Err(CompileError::at(&c.path, format!("checksum type \"{}\" is not supported", c.kind)));
        }
        let target = layout.field(&c.target.0, &c.target.1).ok_or_else(|| {
            CompileError::at(&c.path, format!("unknown target field \"{}.{}\"", c.target.0, c.target.1))
        })?;
        let calc = *cx
            .calcs
            .get(c.calculation.as_str())
            .ok_or_else(|| CompileError::at(&c.path, format!("unknown calculation \"{}\"", c.calculation)))?;
        let cond = match &c.if_cond {
            Some(e) => Some(cx.root(e, &[], &c.path, 0)?),
            None => None,
        };
        checksums.push(ChecksumPlan { name: c.name.clone(), target, calc, verify: c.verify, update: c.update, cond });
    }
    for (what, arrs) in [
        ("counter_arrays", p.counter_arrays.iter().map(|c| (c.size, &c.path)).collect::<Vec<_>>()),
        ("meter_arrays", p.meter_arrays.iter().map(|c| (c.size, &c.path)).collect()),
        ("register_arrays", p.register_arrays.iter().map(|c| (c.size, &c.path)).collect()),
    ] {
        for (size, path) in arrs {
            if size > MAX_ARRAY_SIZE {
                return Err(CompileError::at(
                    path,
                    format!("{what}: size {size} exceeds the supported maximum {MAX_ARRAY_SIZE}"),
                ));
            }
        }
    }
    if let Some(r) = p.register_arrays.iter().find(|r| r.bitwidth > 128 || r.bitwidth == 0) {
        return Err(CompileError::at(&r.path, format!("register bitwidth {} is not supported (1..=128)", r.bitwidth)));
    }
    let arrays = |v: Vec<(String, u64, bool, Option<String>, u32)>| -> Vec<ArrayPlan> {
        v.into_iter()
            .map(|(name, size, is_direct, binding, width)| ArrayPlan {
                name,
                size: size as usize,
                is_direct,
                binding,
                width,
            })
            .collect()
    };
    let counters = arrays(
        p.counter_arrays
            .iter()
            .map(|c| (c.name.clone(), c.size, c.is_direct, c.binding.clone(), 0))
            .chain(extern_counters.iter().map(|(n, size)| (n.clone(), *size, false, None, 0)))
            .collect(),
    );
    let meters = arrays(
        p.meter_arrays
            .iter()
            .map(|c| (c.name.clone(), c.size, c.is_direct, c.binding.clone(), c.packets as u32))
            .chain(extern_meters.iter().map(|(n, size, packets)| (n.clone(), *size, false, None, *packets as u32)))
            .collect(),
    );
    let registers =
        arrays(p.register_arrays.iter().map(|c| (c.name.clone(), c.size, false, None, c.bitwidth)).collect());
    let mut field_lists = HashMap::new();
    for fl in &p.field_lists {
        let mut fs = Vec::new();
        for e in &fl.elements {
            match cx.ecx(&[], &fl.path).expr(e)? {
                CExpr::Field(f) => fs.push(f),
                _ => return Err(CompileError::at(&fl.path, "field list elements must be fields")),
            }
        }
        field_lists.insert(fl.id, fs);
    }
    let mut learn_lists = HashMap::new();
    for fl in &p.learn_lists {
        let mut fs = Vec::new();
        for e in &fl.elements {
            match cx.ecx(&[], &fl.path).expr(e)? {
                CExpr::Field(f) => fs.push(f),
                _ => return Err(CompileError::at(&fl.path, "learn list elements must be fields")),
            }
        }
        learn_lists.insert(fl.id, (fl.name.clone(), fs));
    }
    let std = StdFields {
        ingress_port: layout.intrinsic("ingress_port"),
        egress_spec: layout.intrinsic("egress_spec"),
        egress_port: layout.intrinsic("egress_port"),
        instance_type: layout.intrinsic("instance_type"),
        packet_length: layout.intrinsic("packet_length"),
        mcast_grp: layout.intrinsic("mcast_grp"),
        egress_rid: layout.intrinsic("egress_rid"),
        checksum_error: layout.intrinsic("checksum_error"),
        parser_error: layout.intrinsic("parser_error"),
        ingress_global_timestamp: layout.intrinsic("ingress_global_timestamp"),
        egress_global_timestamp: layout.intrinsic("egress_global_timestamp"),
        enq_timestamp: layout.intrinsic("enq_timestamp"),
        enq_qdepth: layout.intrinsic("enq_qdepth"),
        deq_timedelta: layout.intrinsic("deq_timedelta"),
        deq_qdepth: layout.intrinsic("deq_qdepth"),
        priority: layout.intrinsic("priority"),
    };
    let mut errors: HashMap<String, u64> = p.errors.iter().cloned().collect();
    for (i, n) in [
        "NoError",
        "PacketTooShort",
        "NoMatch",
        "StackOutOfBounds",
        "HeaderTooShort",
        "ParserTimeout",
        "ParserInvalidArgument",
    ]
    .iter()
    .enumerate()
    {
        errors.entry(n.to_string()).or_insert(i as u64);
    }
    let no_error = errors["NoError"];
    let psa = if psa { Some(psa::PsaFields::of(&layout)?) } else { None };
    Ok(Plan {
        psa,
        egress_init_state,
        egress_deparse_order,
        deparse_prims,
        egress_deparse_prims,
        no_error,
        layout,
        actions,
        tables,
        conds,
        ingress,
        egress,
        profiles,
        states,
        init_state,
        deparse_order,
        checksums,
        calcs,
        counters,
        meters,
        registers,
        field_lists,
        learn_lists,
        vsets,
        errors,
        std,
        program_name: p.program.clone().unwrap_or_default(),
    })
}

/// Lays out action parameter values (big-endian, any length) into action data bytes.
pub fn pack_action_data(a: &ActionPlan, values: &[Vec<u8>]) -> Result<Vec<u8>, String> {
    if values.len() != a.params.len() {
        return Err(format!("action \"{}\" takes {} parameters, got {}", a.name, a.params.len(), values.len()));
    }
    let mut data = vec![0u8; a.data_len];
    for (i, v) in values.iter().enumerate() {
        let (off, len) = a.param_layout[i];
        let dst = &mut data[off as usize..(off + len) as usize];
        crate::tables::copy_right(dst, v);
        crate::phv::mask_top(dst, a.params[i].1);
    }
    Ok(data)
}

/// The byte ranges of the wire area that a calculation's inputs cover, when
/// they are all whole fields of one wire-format header whose bits, merged in
/// order, start and end on byte boundaries (at most 128 bytes in total).
fn wire_byte_ranges(layout: &Layout, input: &[(Root, u32)], hdrs: &[Option<u32>]) -> Option<(u32, Vec<(u32, u32)>)> {
    let h0 = (*hdrs.first()?)?;
    let mut ranges: Vec<(u32, u32)> = Vec::new();
    for ((r, w), h) in input.iter().zip(hdrs) {
        let CExpr::Field(f) = &r.e else { return None };
        let fi = &layout.fields[*f as usize];
        let crate::phv::Loc::Wire { bit } = fi.loc else { return None };
        if *h != Some(h0) || *w != fi.width {
            return None;
        }
        match ranges.last_mut() {
            Some(last) if last.1 == bit => last.1 += fi.width,
            _ => ranges.push((bit, bit + fi.width)),
        }
    }
    let total: u32 = ranges.iter().map(|(a, b)| b - a).sum();
    if total > 128 * 8 || ranges.iter().any(|(a, b)| !a.is_multiple_of(8) || !b.is_multiple_of(8)) {
        return None;
    }
    Some((h0, ranges.into_iter().map(|(a, b)| (a / 8, b / 8)).collect()))
}
