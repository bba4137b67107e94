//! What can be generated: the analyses of a plan that decide which
//! functions exist and what they cover, run once per program before any
//! code is generated.
//! - `parser_shape`: the parser's reachable states when each of them can be
//!   compiled, and whether the end of parsing and the PHV setup can run in
//!   generated code too (`ParserShape`);
//! - `forward_shape`: the deparsed headers, updated checksums and standard
//!   metadata writers of the forwarding function (`ForwardShape`);
//! - `post_parse_writes` and `plan_stash`: which checksum words nothing
//!   writes after parsing, summed once at the end of parsing (`SumStash`);
//! - `parser_reads`, `fast_slots`, `fast_stable`: what expressions read.

use std::collections::BTreeSet;

use super::abi::{OFF_STASH, STASH_MAX};
use super::gen::{wire_bits, Gen};
use crate::expr::Fast;
use crate::phv::{mask64, FieldSrc};
use crate::plan::{Dst, Plan, Prim};

/// What [`compile_parser`] can generate code for: the reachable states in
/// depth-first order, and the end of parsing and the PHV setup when they
/// can run in generated code too.
///
/// [`compile_parser`]: super::parser::compile_parser
pub(super) struct ParserShape {
    pub(super) init: u32,
    pub(super) order: Vec<u32>,
    /// `parser_error` and `checksum_error` writers and the verified checksums.
    pub(super) ends: Option<(StdWriter, StdWriter, Vec<crate::checksum::ByteChecksum>)>,
    /// Writers of `ingress_port`, `ingress_global_timestamp`, `packet_length` and `instance_type`.
    pub(super) setup: Option<[StdWriter; 4]>,
}

/// A standard metadata field's hot-path writer and width mask (`None`: the
/// program lacks the field), as [`std_writer`] finds it.
type StdWriter = Option<(FieldSrc, u64)>;

/// Most PHV bytes the compiled parser zeroes itself (bigger PHVs are reset by the engine).
const SETUP_MAX_BYTES: u32 = 2048;

/// The [`ParserShape`] of `plan`'s parser (v1model's, or PSA's ingress
/// parser), `None` when it cannot be compiled.
pub(super) fn parser_shape(plan: &Plan) -> Option<ParserShape> {
    parser_shape_from(plan, plan.init_state?)
}

/// The [`ParserShape`] of the parser whose first state is `init`. A PSA
/// parser gets neither the end of parsing nor the setup: the PSA packet
/// path (`switch/psa.rs`) sets its metadata up and records its error.
pub(super) fn parser_shape_from(plan: &Plan, init: u32) -> Option<ParserShape> {
    // Reachable states in depth-first order, refusing loops and uncompilable states.
    let mut order: Vec<u32> = vec![init];
    let mut stack: Vec<(u32, usize)> = vec![(init, 0)];
    let mut on_path: Vec<u32> = vec![init];
    while let Some((si, k)) = stack.pop() {
        let st = &plan.states[si as usize];
        let key_ok = st.key.is_empty() || (st.fast_transitions.is_some() && parser_key(st).is_some());
        if !key_ok || !st.ops.iter().all(|op| parser_op_ok(plan, op)) {
            return None;
        }
        let nexts = parser_next_states(plan, si);
        if k < nexts.len() {
            stack.push((si, k + 1));
            let n = nexts[k];
            if on_path.contains(&n) {
                return None;
            }
            if !order.contains(&n) {
                order.push(n);
                on_path.push(n);
                stack.push((n, 0));
            }
        } else {
            on_path.retain(|x| *x != si);
        }
    }
    // The end of parsing runs here too when every verified checksum has the
    // byte-range form and the error fields have hot-path writers.
    let ends = (|| {
        if plan.psa.is_some() {
            return None;
        }
        let perr = std_writer(plan, plan.std.parser_error)?;
        let cerr = std_writer(plan, plan.std.checksum_error)?;
        let sums: Option<Vec<_>> =
            plan.checksums.iter().filter(|c| c.verify).map(|c| compiled_checksum(plan, c)).collect();
        Some((perr, cerr, sums?))
    })();
    // PHV setup runs here too when the PHV is small and only has the
    // vectors the context points to (no wide fields, varbits or stacks) and
    // the ingress standard metadata have hot-path writers.
    let layout = &plan.layout;
    let setup = (|| {
        if plan.psa.is_some() {
            return None;
        }
        let plain = layout.wide_bytes == 0
            && layout.stacks.is_empty()
            && layout.union_stacks.is_empty()
            && layout.headers.iter().all(|h| h.varbit_field.is_none());
        let bytes = 16 * layout.n_slots + layout.wire_bytes + crate::phv::WIRE_PAD as u32;
        if !plain || bytes > SETUP_MAX_BYTES {
            return None;
        }
        let std = &plan.std;
        Some([
            std_writer(plan, std.ingress_port)?,
            std_writer(plan, std.ingress_global_timestamp)?,
            std_writer(plan, std.packet_length)?,
            std_writer(plan, std.instance_type)?,
        ])
    })();
    Some(ParserShape { init, order, ends, setup })
}

/// The states compiled parser code goes to from state `si`: its default
/// transition's without a select key, else its integer-form cases'.
pub(super) fn parser_next_states(plan: &Plan, si: u32) -> Vec<u32> {
    let st = &plan.states[si as usize];
    if st.key.is_empty() {
        st.transitions.iter().find(|t| t.default).and_then(|t| t.next).into_iter().collect()
    } else {
        st.fast_transitions.iter().flatten().filter_map(|(_, _, n)| *n).collect()
    }
}

/// The key reader of a parser state's select, when the compiled parser can
/// evaluate it: `(field reader, bits)` per part, at most 64 bits in all.
pub(super) fn parser_key(st: &crate::plan::PState) -> Option<Vec<(FieldSrc, u32)>> {
    let parts: Option<Vec<(FieldSrc, u32)>> = st
        .key
        .iter()
        .map(|(r, nb)| match r.fast {
            Fast::Field(src) => Some((src, nb * 8)),
            _ => None,
        })
        .collect();
    parts.filter(|p| p.iter().map(|x| x.1).sum::<u32>() <= 64)
}

/// Whether the compiled parser can run this operation: extraction of a
/// wire-format header outside unions, an assignment of a shortcut value to a
/// field of at most 64 bits, or a `verify` with a shortcut condition and a
/// constant error.
fn parser_op_ok(plan: &Plan, op: &crate::plan::POp) -> bool {
    use crate::plan::{ExtractTo, POp};
    let layout = &plan.layout;
    match op {
        POp::Extract(ExtractTo::Header(h)) => {
            let hi = &layout.headers[*h as usize];
            hi.wire.is_some() && hi.union.is_none() && hi.varbit_field.is_none()
        }
        POp::Set(Dst::Field(f), r) => {
            FieldSrc::of(&layout.fields[*f as usize]).is_some() && Gen::supported(&r.fast, false)
        }
        POp::Verify(cond, e) => Gen::supported(&cond.fast, false) && matches!(e.fast, Fast::Const(_)),
        // `setInvalid` on a named header (p4c's PSA parsers start with one per header).
        POp::Prim(Prim::SetInvalid(crate::expr::HRef::Fixed(_))) => true,
        _ => false,
    }
}

/// The hot-path writer of a standard metadata field and its width mask:
/// `Some(None)` when the program lacks the field, `None` when the field has
/// no hot-path writer (the code that needs it is then not generated).
fn std_writer(plan: &Plan, f: Option<u32>) -> Option<Option<(FieldSrc, u64)>> {
    match f {
        None => Some(None),
        Some(f) => {
            let fi = &plan.layout.fields[f as usize];
            FieldSrc::of(fi).map(|s| Some((s, mask64(fi.width))))
        }
    }
}

/// The byte-range form of a checksum whose condition generated code can
/// evaluate, if it has one.
fn compiled_checksum(plan: &Plan, c: &crate::plan::ChecksumPlan) -> Option<crate::checksum::ByteChecksum> {
    crate::checksum::ByteChecksum::of(plan, c).filter(|bc| bc.cond.as_ref().is_none_or(|f| Gen::supported(f, false)))
}

/// The PHV slots the compiled parser's states `order` read (assignments,
/// `verify` conditions, select keys); `None` when that cannot be told.
pub(super) fn parser_reads(plan: &Plan, order: &[u32]) -> Option<BTreeSet<u32>> {
    use crate::plan::POp;
    let mut out = BTreeSet::new();
    for si in order {
        let st = &plan.states[*si as usize];
        for op in &st.ops {
            let ok = match op {
                POp::Set(_, r) => fast_slots(&r.fast, &mut out),
                POp::Verify(c, _) => fast_slots(&c.fast, &mut out),
                _ => true,
            };
            if !ok {
                return None;
            }
        }
        for (src, _) in parser_key(st).unwrap_or_default() {
            if let FieldSrc::Slot(i) = src {
                out.insert(i);
            }
        }
    }
    Some(out)
}

/// Adds the PHV slots a shortcut expression reads to `out`; false when it
/// cannot tell (no shortcut, or an action parameter).
fn fast_slots(f: &Fast, out: &mut BTreeSet<u32>) -> bool {
    let mut slot = |s: &FieldSrc| {
        if let FieldSrc::Slot(i) = s {
            out.insert(*i);
        }
        true
    };
    match f {
        Fast::None | Fast::Param { .. } => false,
        Fast::Const(_) | Fast::Valid(_) | Fast::NotValid(_) => true,
        Fast::Field(s) | Fast::NonZero(s) => slot(s),
        Fast::AddMask { slot: s, .. } | Fast::Cmp { slot: s, .. } | Fast::AndConst { slot: s, .. } => slot(s),
        Fast::CmpFields { a, b, .. } => slot(a) && slot(b),
        Fast::And(b) | Fast::Or(b) => fast_slots(&b.0, out) && fast_slots(&b.1, out),
    }
}

/// What [`compile_forward`] generates code for: the deparsed headers
/// `(header, wire offset, bytes)`, the updated checksums and the writers of
/// `mcast_grp`, `egress_spec`, `instance_type`, `egress_global_timestamp`,
/// `egress_port` and `packet_length`.
///
/// [`compile_forward`]: super::forward::compile_forward
pub(super) struct ForwardShape {
    pub(super) deparse: Vec<(u32, u32, u32)>,
    pub(super) sums: Vec<crate::checksum::ByteChecksum>,
    pub(super) fields: [StdWriter; 6],
}

/// The [`ForwardShape`] of `plan`, `None` when it has no forwarding function.
pub(super) fn forward_shape(plan: &Plan) -> Option<ForwardShape> {
    if plan.psa.is_some() {
        // Its unicast decision and deparser are v1model's.
        return None;
    }
    let layout = &plan.layout;
    let deparse = plan
        .deparse_order
        .iter()
        .map(|h| layout.headers[*h as usize].wire.map(|(off, n)| (*h, off, n)))
        .collect::<Option<Vec<_>>>()?;
    let sums: Vec<_> =
        plan.checksums.iter().filter(|c| c.update).map(|c| compiled_checksum(plan, c)).collect::<Option<_>>()?;
    // Standard metadata the function reads or writes: each must have a hot-path reader.
    let std = &plan.std;
    let fields: Option<Vec<_>> = [
        std.mcast_grp,
        std.egress_spec,
        std.instance_type,
        std.egress_global_timestamp,
        std.egress_port,
        std.packet_length,
    ]
    .into_iter()
    .map(|f| std_writer(plan, f))
    .collect();
    let fields: [StdWriter; 6] = fields?.try_into().ok()?;
    Some(ForwardShape { deparse, sums, fields })
}

/// Whether nothing on the forwarding function's path reads the egress
/// standard metadata it would write: the program has no egress pipeline
/// and no checksum update condition reads a slot field they live in.
pub(super) fn egress_std_unread(plan: &Plan, sums: &[crate::checksum::ByteChecksum], fields: &[StdWriter; 6]) -> bool {
    let mut read = BTreeSet::new();
    let known = sums.iter().all(|bc| bc.cond.as_ref().is_none_or(|f| fast_slots(f, &mut read)));
    let written = fields.iter().flatten().any(|(s, _)| matches!(s, FieldSrc::Slot(i) if read.contains(i)));
    plan.egress.init.is_none() && known && !written
}

/// An updated checksum whose words over wire bytes that nothing writes
/// after parsing (see [`post_parse_writes`]) the batch function sums at the
/// end of parsing, where the verification of the same bytes loads them
/// anyway; the update then adds only the words that may have changed. Why:
/// in a router that decrements the TTL, that is one word of the IPv4
/// header's nine, and the update's loads and additions were a tenth of the
/// per-packet code.
#[derive(Clone)]
pub(super) struct SumStash {
    /// The checksum (the update's, as the forwarding shape has it).
    pub(super) bc: crate::checksum::ByteChecksum,
    /// Where in the context the stable words' sum goes (not folded;
    /// [`SUM_SKIPPED`] when `decided` and the checksum does not apply).
    pub(super) at: i32,
    /// The words (as [`csum_words`] lists them) summed at the end of parsing.
    pub(super) stable: Vec<Vec<u32>>,
    /// The words the update sums itself.
    pub(super) changing: Vec<Vec<u32>>,
    /// Whether the checksum's condition reads only bytes and validity
    /// flags nothing changes after parsing: then the end of parsing decides
    /// it too.
    pub(super) decided: bool,
}

/// [`SumStash::at`]'s value for a checksum that does not apply (no sum of wire
/// words reaches it: they are far fewer than 2^48).
pub(super) const SUM_SKIPPED: i64 = -1;

/// The 16-bit words a checksum sums, as wire byte offsets (high byte
/// first; a last odd byte alone).
pub(super) fn csum_words(bc: &crate::checksum::ByteChecksum) -> Vec<Vec<u32>> {
    let bytes: Vec<u32> = bc.ranges.iter().flat_map(|(a, b)| *a..*b).collect();
    bytes.chunks(2).map(<[u32]>::to_vec).collect()
}

/// Adds the wire bytes a hot-path field access covers to `out` (none for a slot).
fn src_wire_bytes(src: FieldSrc, out: &mut BTreeSet<u32>) {
    if let FieldSrc::Wire { byte, shift, mask } = src {
        let (bit, width) = wire_bits(byte, shift, mask);
        if width > 0 {
            out.extend(bit / 8..=(bit + width - 1) / 8);
        }
    }
}

/// Adds header `h`'s wire bytes to `out` (none when it is not on the wire).
fn header_wire_bytes(plan: &Plan, h: u32, out: &mut BTreeSet<u32>) {
    if let Some((off, n)) = plan.layout.headers[h as usize].wire {
        out.extend(off..off + n);
    }
}

/// Adds field `f`'s wire bytes to `out`: its own, or its whole header's
/// when it has no hot-path access (wider than 64 bits).
fn field_wire_bytes(plan: &Plan, f: u32, out: &mut BTreeSet<u32>) {
    let fi = &plan.layout.fields[f as usize];
    match FieldSrc::of(fi) {
        Some(src) => src_wire_bytes(src, out),
        None => header_wire_bytes(plan, fi.header, out),
    }
}

/// The headers a header reference may name.
fn href_headers(plan: &Plan, r: &crate::expr::HRef) -> Vec<u32> {
    use crate::expr::HRef;
    match r {
        HRef::Fixed(h) => vec![*h],
        HRef::StackElem(st, _) | HRef::StackLast(st) => plan.layout.stacks[*st as usize].headers.clone(),
        HRef::UnionStackLast(us, m) => {
            let unions = &plan.layout.union_stacks[*us as usize].unions;
            unions.iter().filter_map(|u| plan.layout.unions[*u as usize].headers.get(*m).copied()).collect()
        }
    }
}

/// What code after the parser may change in the PHV's wire area: `(wire
/// bytes, headers whose validity)`, over every action of both pipelines,
/// the standard metadata the forwarding function writes and the updated
/// checksums' targets; `None` when that cannot be told (header unions,
/// stack-wide operations or varbit assignments). Why: wire bytes outside
/// that set keep at the deparser the values they had at the end of
/// parsing (see [`SumStash`]).
fn post_parse_writes(plan: &Plan) -> Option<(BTreeSet<u32>, BTreeSet<u32>)> {
    let mut bytes = BTreeSet::new();
    let mut validity = BTreeSet::new();
    let dst_bytes = |d: &Dst, bytes: &mut BTreeSet<u32>| match d {
        Dst::Field(f) => field_wire_bytes(plan, *f, bytes),
        Dst::Dyn(r, i) => {
            for h in href_headers(plan, r) {
                match plan.layout.headers[h as usize].fields.get(*i) {
                    Some(f) => field_wire_bytes(plan, *f, bytes),
                    None => header_wire_bytes(plan, h, bytes),
                }
            }
        }
    };
    for a in &plan.actions {
        for p in &a.prims {
            match p {
                Prim::SetField { dst, .. } => src_wire_bytes(*dst, &mut bytes),
                Prim::Assign { dst, .. }
                | Prim::ExecuteMeter { dst, .. }
                | Prim::RegRead { dst, .. }
                | Prim::HashOffset { dst, .. }
                | Prim::CsumGet { dst, .. }
                | Prim::CsumVerify { dst, .. }
                | Prim::Rng { dst, .. } => dst_bytes(dst, &mut bytes),
                Prim::AssignHeader { dst, .. } | Prim::SetValid(dst) | Prim::SetInvalid(dst) => {
                    for h in href_headers(plan, dst) {
                        header_wire_bytes(plan, h, &mut bytes);
                        validity.insert(h);
                    }
                }
                Prim::AssignUnion { .. }
                | Prim::AssignStack { .. }
                | Prim::Push { .. }
                | Prim::Pop { .. }
                | Prim::AssignVl { .. } => return None,
                Prim::MarkToDrop
                | Prim::Exit
                | Prim::Jump(_)
                | Prim::JumpIfZero(..)
                | Prim::Count { .. }
                | Prim::RegWrite { .. }
                | Prim::Clone { .. }
                | Prim::Resubmit(_)
                | Prim::Recirculate(_)
                | Prim::Truncate(_)
                | Prim::Digest { .. }
                | Prim::Assert(_)
                | Prim::CsumClear(_)
                | Prim::CsumAdd { .. }
                | Prim::CsumSetState { .. }
                | Prim::Log { .. } => {}
            }
        }
    }
    // Standard metadata (mark_to_drop's and the egress fields) is not on
    // the wire in a v1model layout; counted anyway, should it be.
    let std = &plan.std;
    for f in [
        std.egress_spec,
        std.mcast_grp,
        std.egress_port,
        std.instance_type,
        std.packet_length,
        std.egress_global_timestamp,
    ]
    .into_iter()
    .flatten()
    {
        field_wire_bytes(plan, f, &mut bytes);
    }
    for c in plan.checksums.iter().filter(|c| c.update) {
        field_wire_bytes(plan, c.target, &mut bytes);
    }
    Some((bytes, validity))
}

/// Whether a shortcut expression reads only wire bytes outside `bytes` and
/// validity flags of headers outside `validity` (so it has the same value
/// at the deparser as at the end of parsing).
fn fast_stable(f: &Fast, bytes: &BTreeSet<u32>, validity: &BTreeSet<u32>) -> bool {
    let src = |s: &FieldSrc| {
        let mut b = BTreeSet::new();
        src_wire_bytes(*s, &mut b);
        matches!(s, FieldSrc::Wire { .. }) && b.is_disjoint(bytes)
    };
    match f {
        Fast::None | Fast::Param { .. } => false,
        Fast::Const(_) => true,
        Fast::Valid(h) | Fast::NotValid(h) => !validity.contains(h),
        Fast::Field(s) | Fast::NonZero(s) => src(s),
        Fast::AddMask { slot: s, .. } | Fast::Cmp { slot: s, .. } | Fast::AndConst { slot: s, .. } => src(s),
        Fast::CmpFields { a, b, .. } => src(a) && src(b),
        Fast::And(b) | Fast::Or(b) => fast_stable(&b.0, bytes, validity) && fast_stable(&b.1, bytes, validity),
    }
}

/// The [`SumStash`] of each of `sums` (the forwarding shape's updated
/// checksums, in order; at most [`STASH_MAX`] of them stashed): only for
/// a checksum the end of parsing verifies over the same bytes (`verified`).
/// Why: there its stable words are loaded and added anyway; without a
/// verification, summing them there only moves the work and keeps more
/// values live through the parser (edge: 20 instructions more a packet).
pub(super) fn plan_stash(
    plan: &Plan,
    sums: &[crate::checksum::ByteChecksum],
    verified: &[crate::checksum::ByteChecksum],
) -> Vec<Option<SumStash>> {
    let Some((bytes, validity)) = post_parse_writes(plan) else { return Vec::new() };
    let mut used = 0;
    sums.iter()
        .map(|bc| {
            let verifies = verified.iter().any(|v| v.same_words(bc));
            if !verifies || validity.contains(&bc.header) || used == STASH_MAX {
                return None;
            }
            let (stable, changing): (Vec<_>, Vec<_>) =
                csum_words(bc).into_iter().partition(|w| w.iter().all(|x| !bytes.contains(x)));
            if stable.is_empty() {
                return None;
            }
            let decided = bc.cond.as_ref().is_none_or(|f| fast_stable(f, &bytes, &validity));
            let at = OFF_STASH + 8 * used as i32;
            used += 1;
            Some(SumStash { bc: bc.clone(), at, stable, changing, decided })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The router with its `forward` action also rewriting the IPv4
    /// source address (as a NAT would): one more checksummed field written.
    fn router_rewriting_the_source() -> String {
        let json = include_str!("../../../../examples/router.json");
        let at = json.find("\"name\" : \"RouterIngress.forward\"").expect("the forward action");
        let prims = at + json[at..].find("\"primitives\" : [").expect("its primitives") + "\"primitives\" : [".len();
        let nat = r#"{"op": "assign", "parameters": [{"type": "field", "value": ["ipv4", "src_addr"]},
            {"type": "hexstr", "value": "0xc0a80a01"}]},"#;
        format!("{}{nat}{}", &json[..prims], &json[prims..])
    }

    #[test]
    fn checksum_updates_sum_again_only_the_words_the_program_may_write() {
        let stash_of = |json: &str| {
            let plan = crate::plan::compile(&sluice_json::load_str(json).expect("parses")).expect("compiles");
            let shape = forward_shape(&plan).expect("a forwarding function");
            let ip4 = plan.layout.headers.iter().find(|h| h.name == "ipv4").and_then(|h| h.wire).expect("ipv4").0;
            let parser = parser_shape(&plan).expect("a compiled parser");
            let verified = parser.ends.as_ref().map(|e| e.2.clone()).unwrap_or_default();
            let stash = plan_stash(&plan, &shape.sums, &verified);
            let [Some(st)] = stash.as_slice() else { panic!("one stashed checksum, not {}", stash.len()) };
            let rel =
                |ws: &[Vec<u32>]| ws.iter().map(|w| w.iter().map(|b| b - ip4).collect()).collect::<Vec<Vec<u32>>>();
            (rel(&st.stable), rel(&st.changing), st.decided)
        };
        // The router writes only the TTL (byte 8, summed with the protocol)
        // of the IPv4 header's nine checksummed words (the checksum, bytes
        // 10 and 11, is not one of them).
        let (stable, changing, decided) = stash_of(include_str!("../../../../examples/router.json"));
        assert_eq!(changing, vec![vec![8, 9]]);
        assert_eq!(
            stable,
            vec![
                vec![0, 1],
                vec![2, 3],
                vec![4, 5],
                vec![6, 7],
                vec![12, 13],
                vec![14, 15],
                vec![16, 17],
                vec![18, 19]
            ]
        );
        assert!(decided, "validity and IHL are never written: the end of parsing decides the update");
        // Rewriting the source address adds its two words.
        let (stable, changing, _) = stash_of(&router_rewriting_the_source());
        assert_eq!(changing, vec![vec![8, 9], vec![12, 13], vec![14, 15]]);
        assert_eq!(stable.len(), 6);
        // Edge updates the IPv4 checksum without verifying it: nothing to share.
        let plan = crate::plan::compile(
            &sluice_json::load_str(include_str!("../../../../examples/edge.json")).expect("parses"),
        )
        .expect("compiles");
        let sums = forward_shape(&plan).expect("a forwarding function").sums;
        assert_eq!(sums.len(), 1);
        let verified = parser_shape(&plan).and_then(|p| p.ends).map(|e| e.2).unwrap_or_default();
        assert!(plan_stash(&plan, &sums, &verified).iter().all(Option::is_none));
    }

    #[test]
    fn stashed_checksum_sums_give_the_interpreters_packets() {
        let json = router_rewriting_the_source();
        let mut sw = crate::load_switch(&json).expect("loads");
        assert_eq!(sw.mode(), crate::ExecMode::Compiled);
        {
            use crate::runtime::{EntryAction, FieldMatch, Resource};
            let table = |sw: &crate::Switch, n: &str| sw.index_of(Resource::Table, n).expect("table");
            let action = |sw: &crate::Switch, n: &str| sw.index_of(Resource::Action, n).expect("action") as u32;
            let mut add = |t: &str, key: FieldMatch, a: &str, params: &[&[u8]]| {
                let (t, a) = (table(&sw, t), action(&sw, a));
                let data = sw.pack_action(a, &params.iter().map(|p| p.to_vec()).collect::<Vec<_>>()).expect("data");
                sw.add_entry(t, vec![key], EntryAction::Direct { action: a, data }, 0).expect("entry");
            };
            // nexthop 1 => port 2, source 02:00:00:00:00:02, destination 00:00:5e:00:00:02
            let (src, dst) = ([2, 0, 0, 0, 0, 2], [0, 0, 0x5e, 0, 0, 2]);
            add("RouterIngress.nexthop", FieldMatch::Exact(vec![1]), "RouterIngress.forward", &[&[2], &src, &dst]);
            // 10.0.0.0/8 => nexthop 1
            let route = FieldMatch::Lpm(vec![10, 0, 0, 0], 8);
            add("RouterIngress.ipv4_lpm", route, "RouterIngress.set_nexthop", &[&[1]]);
        }
        let mut twin = sw.scratch().expect("an interpreted copy");
        assert_eq!(twin.mode(), crate::ExecMode::Interpreted);
        let ipv4 = |ihl: u8, ttl: u8, good_sum: bool| {
            let mut p = vec![0u8; 14 + 4 * usize::from(ihl) + 8];
            p[12] = 0x08;
            p[14] = 0x40 | ihl;
            let total = (p.len() - 14) as u16;
            p[16..18].copy_from_slice(&total.to_be_bytes());
            p[22] = ttl;
            p[23] = 17;
            p[26..30].copy_from_slice(&[172, 16, 0, 9]);
            p[30..34].copy_from_slice(&[10, 1, 2, 3]);
            let hdr = 14..14 + 4 * usize::from(ihl);
            let sum = sluice_hash::csum16_ranges(&p[hdr.clone()], &[(0, 10), (12, hdr.len() as u32)]);
            let sum = if good_sum { sum } else { sum ^ 0x0100 };
            p[24..26].copy_from_slice(&sum.to_be_bytes());
            p
        };
        // Good checksums (updated with the TTL and the new source), a bad
        // one (dropped), an IHL of 6 (no verification, no update) and a
        // TTL of 1 (dropped).
        let batch = [ipv4(5, 64, true), ipv4(5, 64, false), ipv4(6, 9, true), ipv4(5, 1, true), ipv4(5, 2, true)];
        let mut compiled = Vec::new();
        let frames: Vec<&[u8]> = batch.iter().map(|p| p.as_slice()).collect();
        sw.process_batch(0, &frames, &mut |_, port, d: &[u8]| compiled.push((port, d.to_vec())));
        let mut interpreted = Vec::new();
        for p in &batch {
            twin.process(0, p, &mut |port, d| interpreted.push((port, d.to_vec())));
        }
        assert_eq!(compiled, interpreted);
        assert_eq!(compiled.len(), 3, "three packets forwarded: {compiled:?}");
        let (_, first) = &compiled[0];
        assert_eq!(&first[26..30], &[192, 168, 10, 1], "source rewritten");
        assert_eq!(first[22], 63, "TTL decremented");
        let sum = sluice_hash::csum16_ranges(&first[14..34], &[(0, 10), (12, 20)]);
        assert_eq!(u16::from_be_bytes([first[24], first[25]]), sum, "the checksum covers the new header");
    }
}
