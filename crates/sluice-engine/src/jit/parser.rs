//! The compiled parser (`sluice_parser`, `fn(*mut ParseCtx)`), also
//! emitted inside the batch and key functions.
//!
//! Contract of the generated function:
//! - reads: the packet's bytes through `ParseCtx::pkt` and `len` (each
//!   header bounds-checked before its copy); the PHV slots that
//!   assignments, `verify` conditions and select keys read; with a setup,
//!   `ParseCtx::setup`, `port` and `now`;
//! - writes: the PHV's wire area (each extracted header) and valid flags,
//!   the slots parser assignments write; with a setup, first the PHV's
//!   reset (slots zeroed, metadata headers valid, ingress standard
//!   metadata written); with the end of parsing, `parser_error` and
//!   `checksum_error` (checksums verified);
//! - leaves: by returning, with `ParseCtx::status` 0 (done: accept, or no
//!   transition matched), 1 (the packet ended inside a header) or 2 (a
//!   `verify` failed, its error in `ParseCtx::code`), and the bytes consumed
//!   in `ParseCtx::cursor`. Emitted inside another function, it jumps to
//!   that function's exit block instead; when that block takes the cursor
//!   as its parameter (the batch and key functions), `cursor`, `status`
//!   and `code` are not stored. The key function also has it store where
//!   each tracked header started (`Gen::track`).

use std::collections::{BTreeSet, HashMap};

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, Block, BlockArg, InstBuilder, Value};
use cranelift_frontend::FunctionBuilderContext;
use cranelift_jit::JITModule;
use cranelift_module::FuncId;

use super::abi::{
    MARK_DIRTY, OFF_MARKS, OFF_SLOTS, OFF_VALID, OFF_WIRE, P_CODE, P_CURSOR, P_LEN, P_NOW, P_PKT, P_PORT, P_SETUP,
    P_STATUS, SETUP_FULL,
};
use super::gen::{band_u, chunk_type, copy_chunks, mem, zero_vector, Gen, Mem};
use super::module::{declare_context_function, define, generate};
use super::shape::{parser_key, parser_next_states, parser_reads, ParserShape};
use super::JitStats;
use crate::expr::Fast;
use crate::phv::{mask64, FieldSrc};
use crate::plan::{Dst, Plan};

/// Compiles the parser when every state reachable from the start is made
/// of operations `shape::parser_op_ok` accepts and selects on at most 64 bits of
/// fields, and the states form no loop (the interpreter bounds loops; this
/// code does not need to). Returns `None` (interpreted parser) otherwise.
///
/// Each state becomes a block: per header a bounds check, then 8/4/2/1-byte
/// copies at constant PHV offsets and its valid flag; assignments and
/// `verify` with the pipelines' expression code; the select as a chain of
/// masked compares on the key read once, in the plan's order. `shape`
/// comes with the generated function's name (`sluice_parser`, or
/// `sluice_egress_parser` for a PSA program's second parser).
pub(super) fn compile_parser(
    plan: &Plan,
    module: &mut JITModule,
    helpers: &[FuncId],
    fctx: &mut FunctionBuilderContext,
    listing: &mut String,
    fwd_written: Option<&BTreeSet<u32>>,
    shape: Option<(&ParserShape, &str)>,
) -> Result<Option<(FuncId, bool, bool)>, String> {
    let Some((shape, name)) = shape else { return Ok(None) };
    let user = if name == "sluice_egress_parser" { 5 } else { 1 };
    let (id, mut ctx) = declare_context_function(module, name, user, false)?;
    generate(plan, module, helpers, fctx, &mut ctx, false, &mut JitStats::default(), |g, pc| {
        emit_parser(g, pc, shape, fwd_written, None, None)
    });
    listing.push_str(&format!("; {}\n{}\n", name.trim_start_matches("sluice_").replace('_', " "), ctx.func.display()));
    define(module, id, &mut ctx, name)?;
    Ok(Some((id, shape.ends.is_some(), shape.setup.is_some())))
}

/// A packet's parser inputs as values of the generating function, for an
/// emitter inside a loop over packets (see [`emit_parser`]): they need not
/// go through the parser context's memory and be loaded back.
#[derive(Clone, Copy)]
pub(super) struct ParseInputs {
    pub(super) setup: SetupFlag,
    pub(super) pkt: Value,
    pub(super) len: Value,
}

/// Which setup a packet's parser does (see [`ParseCtx::setup`]).
///
/// [`ParseCtx::setup`]: super::abi::ParseCtx::setup
#[derive(Clone, Copy)]
pub(super) enum SetupFlag {
    /// The flag as a value: 0 none, [`SETUP_FULL`], else the written setup.
    Value(Value),
    /// The batch function, which always sets up: from the helper marks
    /// of the context at this address (`JitCtx::marks`). Unmarked, the
    /// written setup; marked, a cold block clears the marks, and the setup
    /// is the full one when a helper marked the PHV dirty.
    Marks(Value),
}

/// Generates the parser of `shape` at the current block, with `pc` the
/// [`ParseCtx`]: returns from the function, or jumps to `exit` when given
/// (the batch function goes on with the packet). `fwd_written`: the slots
/// the forwarding function writes (the written setup, see
/// [`ParseCtx::setup`]). `inputs`: the setup flag, packet and length as
/// values (else loaded from `pc`).
///
/// [`ParseCtx`]: super::abi::ParseCtx
/// [`ParseCtx::setup`]: super::abi::ParseCtx::setup
pub(super) fn emit_parser(
    g: &mut Gen<'_, '_, '_>,
    pc: Value,
    shape: &ParserShape,
    fwd_written: Option<&BTreeSet<u32>>,
    exit: Option<Block>,
    inputs: Option<ParseInputs>,
) {
    use crate::plan::{ExtractTo, POp};
    let plan = g.plan;
    let layout = &plan.layout;
    let (init, order, ends, setup) = (shape.init, &shape.order, &shape.ends, shape.setup);
    // An exit block with a parameter takes the cursor (the batch function
    // needs nothing else of the parser's outputs): no context stores.
    let to_block = exit.is_some_and(|e| g.b.block_params(e).len() == 1);
    let leave = |g: &mut Gen<'_, '_, '_>, cursor: Value| match exit {
        Some(e) => {
            let args: &[BlockArg] = if to_block { &[cursor.into()] } else { &[] };
            g.b.ins().jump(e, args);
        }
        None => {
            g.b.ins().return_(&[]);
        }
    };
    // The setup's blocks; the per-packet part is filled last, when every
    // slot the parser writes is known.
    let mut setup_blocks = None;
    if setup.is_some() {
        let set_up = g.b.create_block();
        let full = g.b.create_block();
        let written = g.b.create_block();
        let parse = g.b.create_block();
        let flag = match inputs {
            Some(i) => i.setup,
            None => {
                let mf = mem(g.b, Mem::Inputs);
                SetupFlag::Value(g.b.ins().load(types::I64, mf, pc, P_SETUP))
            }
        };
        match flag {
            SetupFlag::Value(flag) => {
                g.b.ins().brif(flag, set_up, &[], parse, &[]);
                g.b.switch_to_block(set_up);
                let is_full = g.b.ins().icmp_imm_u(IntCC::Equal, flag, SETUP_FULL as i64);
                g.b.ins().brif(is_full, full, &[], written, &[]);
            }
            // The setup dominates the parser, so that Cranelift knows what
            // it stored there (the ingress port, the zeroed metadata).
            SetupFlag::Marks(ctx) => {
                let mf = mem(g.b, Mem::Ctx);
                let marks = g.b.ins().load(types::I64, mf, ctx, OFF_MARKS);
                g.b.set_cold_block(set_up);
                g.b.ins().brif(marks, set_up, &[], written, &[]);
                g.b.switch_to_block(set_up);
                let zero = g.b.ins().iconst(types::I64, 0);
                let mf = mem(g.b, Mem::Ctx);
                g.b.ins().store(mf, zero, ctx, OFF_MARKS);
                let dirty = g.b.ins().band_imm_u(marks, MARK_DIRTY as i64);
                g.b.ins().brif(dirty, full, &[], written, &[]);
            }
        }
        setup_blocks = Some((full, written, parse));
        g.b.switch_to_block(parse);
    }
    let blocks: HashMap<u32, Block> = order.iter().map(|si| (*si, g.b.create_block())).collect();
    // With a setup, the ways out of the parser zero what their path did
    // not extract (see `ZeroPlan`): edges that need it go through a block
    // of their own, filled after the states.
    let zeros = setup.is_some().then(|| ZeroPlan::of(plan, init, order));
    let mut zero_edges: Vec<(Block, BTreeSet<u32>, Block, Vec<BlockArg>)> = Vec::new();
    let mut edge = |g: &mut Gen<'_, '_, '_>, si: u32, got: &[u32], to: Block, args: Vec<BlockArg>| {
        let hs = zeros.as_ref().map(|z| z.on_exit(si, got)).unwrap_or_default();
        if hs.is_empty() {
            return (to, args);
        }
        let blk = g.b.create_block();
        zero_edges.push((blk, hs, to, args));
        (blk, Vec::new())
    };
    let done = g.b.create_block();
    let short = g.b.create_block();
    let failed = g.b.create_block();
    for blk in blocks.values().chain([&done, &short, &failed]) {
        g.b.append_block_param(*blk, types::I64); // the cursor
    }
    g.b.append_block_param(failed, types::I64); // the error code
    let (pkt, len) = match inputs {
        Some(i) => (i.pkt, i.len),
        None => {
            let mf = mem(g.b, Mem::Inputs);
            (g.b.ins().load(types::I64, mf, pc, P_PKT), g.b.ins().load(types::I64, mf, pc, P_LEN))
        }
    };
    let zero = g.b.ins().iconst(types::I64, 0);
    g.b.ins().jump(blocks[&init], &[zero.into()]);
    for si in order {
        let st = &plan.states[*si as usize];
        let blk = blocks[si];
        g.b.switch_to_block(blk);
        let mut cursor = g.b.block_params(blk)[0];
        let mut got: Vec<u32> = Vec::new();
        for op in &st.ops {
            match op {
                POp::Extract(ExtractTo::Header(h)) => {
                    let (off, n) = plan.layout.headers[*h as usize].wire.expect("checked");
                    // Bounds check: cursor + n <= len, else PacketTooShort before this header.
                    let end = g.b.ins().iadd_imm_u(cursor, i64::from(n));
                    let fits = g.b.ins().icmp(IntCC::UnsignedLessThanOrEqual, end, len);
                    let copy = g.b.create_block();
                    let (to, args) = edge(g, *si, &got, short, vec![cursor.into()]);
                    g.b.ins().brif(fits, copy, &[], to, &args);
                    got.push(*h);
                    g.b.switch_to_block(copy);
                    for at in g.track.iter().filter(|t| t.0 == *h).map(|t| t.1).collect::<Vec<_>>() {
                        let mf = mem(g.b, Mem::Ctx);
                        g.b.ins().store(mf, cursor, pc, at);
                    }
                    let src = g.b.ins().iadd(pkt, cursor);
                    let wire = g.ptr(OFF_WIRE);
                    g.copy_bytes((Mem::Packet, src, 0), (Mem::Wire, wire, off as i32), n);
                    let valid = g.ptr(OFF_VALID);
                    let one = g.b.ins().iconst(types::I8, 1);
                    let mf = mem(g.b, Mem::Valid);
                    g.b.ins().store(mf, one, valid, *h as i32);
                    cursor = end;
                }
                POp::Set(Dst::Field(f), r) => {
                    let fi = &plan.layout.fields[*f as usize];
                    let dst = FieldSrc::of(fi).expect("checked");
                    let v = g.fast(&r.fast);
                    g.write(dst, v, mask64(fi.width));
                }
                POp::Verify(cond, e) => {
                    let Fast::Const(code) = e.fast else { unreachable!("checked") };
                    let ok = g.fast(&cond.fast);
                    let cont = g.b.create_block();
                    let code = g.b.ins().iconst(types::I64, code as i64);
                    let (to, args) = edge(g, *si, &got, failed, vec![cursor.into(), code.into()]);
                    g.b.ins().brif(ok, cont, &[], to, &args);
                    g.b.switch_to_block(cont);
                }
                POp::Prim(crate::plan::Prim::SetInvalid(crate::expr::HRef::Fixed(h))) => {
                    // As the interpreter: a metadata header stays valid; the bytes stay.
                    if !plan.layout.headers[*h as usize].metadata {
                        let valid = g.ptr(OFF_VALID);
                        let zero = g.b.ins().iconst(types::I8, 0);
                        let mf = mem(g.b, Mem::Valid);
                        g.b.ins().store(mf, zero, valid, *h as i32);
                    }
                }
                _ => unreachable!("checked by parser_op_ok"),
            }
        }
        if st.key.is_empty() {
            match st.transitions.iter().find(|t| t.default).and_then(|t| t.next) {
                Some(n) => g.b.ins().jump(blocks[&n], &[cursor.into()]),
                None => {
                    let (to, args) = edge(g, *si, &got, done, vec![cursor.into()]);
                    g.b.ins().jump(to, &args)
                }
            };
            continue;
        }
        let mut key = g.b.ins().iconst(types::I64, 0);
        for (src, bits) in parser_key(st).expect("checked") {
            let v = g.read(src);
            let v = if bits >= 64 { v } else { band_u(g.b, v, mask64(bits) as i64) };
            key = if bits >= 64 {
                v
            } else {
                let sh = g.b.ins().ishl_imm_u(key, i64::from(bits));
                g.b.ins().bor(sh, v)
            };
        }
        for (v, m, next) in st.fast_transitions.iter().flatten() {
            let (target, args) = match next {
                Some(n) => (blocks[n], vec![cursor.into()]),
                None => edge(g, *si, &got, done, vec![cursor.into()]),
            };
            let masked = band_u(g.b, key, *m as u64 as i64);
            let hit = g.b.ins().icmp_imm_u(IntCC::Equal, masked, *v as u64 as i64);
            let miss = g.b.create_block();
            g.b.ins().brif(hit, target, &args, miss, &[]);
            g.b.switch_to_block(miss);
        }
        let (to, args) = edge(g, *si, &got, done, vec![cursor.into()]);
        g.b.ins().jump(to, &args);
    }
    for (blk, hs, to, args) in zero_edges {
        g.b.switch_to_block(blk);
        zero_headers(g, &hs);
        g.b.ins().jump(to, &args);
    }
    let end = g.b.create_block();
    g.b.append_block_param(end, types::I64); // the parser error
    g.b.append_block_param(end, types::I64); // the cursor
    let too_short = plan.errors.get("PacketTooShort").copied().unwrap_or(0);
    for (blk, status) in [(done, 0i64), (short, 1), (failed, 2)] {
        g.b.switch_to_block(blk);
        let c = g.b.block_params(blk)[0];
        if !to_block {
            let mf = mem(g.b, Mem::Ctx);
            g.b.ins().store(mf, c, pc, P_CURSOR);
            let st = g.b.ins().iconst(types::I64, status);
            let mf = mem(g.b, Mem::Ctx);
            g.b.ins().store(mf, st, pc, P_STATUS);
        }
        let error = match status {
            0 => g.b.ins().iconst(types::I64, plan.no_error as i64),
            1 => g.b.ins().iconst(types::I64, too_short as i64),
            _ => {
                let code = g.b.block_params(blk)[1];
                if !to_block {
                    let mf = mem(g.b, Mem::Ctx);
                    g.b.ins().store(mf, code, pc, P_CODE);
                }
                code
            }
        };
        if let Some((perr, _, _)) = &ends {
            // `parser_error` is written here, where it is mostly a
            // constant (masked now rather than per packet).
            if let Some((s, m)) = perr {
                let v = match status {
                    0 | 1 => {
                        let e = if status == 0 { plan.no_error } else { too_short };
                        g.b.ins().iconst(types::I64, (e & *m) as i64)
                    }
                    _ => band_u(g.b, error, *m as i64),
                };
                g.write(*s, v, u64::MAX);
            }
            g.b.ins().jump(end, &[error.into(), c.into()]);
        } else {
            leave(g, c);
        }
    }
    // The end of parsing (`Switch::parse_end`): `parser_error`, then
    // checksum verification into `checksum_error`.
    g.b.switch_to_block(end);
    let cursor = g.b.block_params(end)[1];
    if let Some((_, cerr, sums)) = &ends {
        // The stable part of each updated checksum (batch function).
        let mut partial = Vec::new();
        for st in g.stash.clone().into_iter().flatten() {
            let raw = g.csum16_raw(&st.stable);
            let v = if st.decided {
                // `applies` is 0 or 1: all ones (SUM_SKIPPED) or nothing
                // over the sum, without a constant the loop would keep.
                let applies = g.checksum_applies(&st.bc);
                let skip = g.b.ins().iadd_imm_s(applies, -1);
                g.b.ins().bor(raw, skip)
            } else {
                raw
            };
            let mf = mem(g.b, Mem::Ctx);
            g.b.ins().store(mf, v, g.ctx, st.at);
            partial.push((st, raw));
        }
        let mut bad = g.b.ins().iconst(types::I64, 0);
        for bc in sums {
            let cond = g.checksum_applies(bc);
            // A verification of the same words as an update adds to its stable part.
            let shared = partial.iter().find(|(st, _)| st.bc.same_words(bc));
            let sum = match shared {
                Some((st, raw)) => {
                    let rest = g.csum16_raw(&st.changing);
                    let all = g.b.ins().iadd(*raw, rest);
                    g.csum16_fold(all)
                }
                None => g.csum16_swapped(bc),
            };
            let stored = match g.le16_byte(bc.target) {
                Some(b) => {
                    let wire = g.ptr(OFF_WIRE);
                    let mf = mem(g.b, Mem::Wire);
                    g.b.ins().uload16(types::I64, mf, wire, b as i32)
                }
                None => {
                    let v = g.read(bc.target);
                    g.swap16(v)
                }
            };
            let differs = g.b.ins().icmp(IntCC::NotEqual, sum, stored);
            let differs = g.bool_to_i64(differs);
            let counted = g.b.ins().band(cond, differs);
            bad = g.b.ins().bor(bad, counted);
        }
        if let Some((s, m)) = cerr {
            // `bad` is 0 or 1: no mask unless the field has no bit at all.
            g.write(*s, bad, if *m & 1 == 1 { u64::MAX } else { *m });
        }
    }
    leave(g, cursor);
    if let (Some([port_f, now_f, len_f, itype_f]), Some((full, written, parse))) = (setup, setup_blocks) {
        // Every slot the parser, the setup itself or the forwarding
        // function may write (all of them without a forwarding function).
        let mut dirty = g.written.clone();
        match fwd_written {
            Some(w) => dirty.extend(w),
            None => dirty.extend(0..layout.n_slots),
        }
        // The setup writes these itself (the high half of a slot field
        // is zero whoever wrote it, see `Gen::write`).
        let mut set: BTreeSet<u32> = [port_f, now_f, len_f, itype_f]
            .iter()
            .flatten()
            .filter_map(|(s, _)| match s {
                FieldSrc::Slot(i) => Some(*i),
                FieldSrc::Wire { .. } => None,
            })
            .collect();
        // The end of parsing writes the two error fields on every path:
        // when no parser state reads them first, they need no zeroing.
        if let Some((perr, cerr, _)) = ends {
            if let Some(read) = parser_reads(plan, order) {
                for (s, _) in [perr, cerr].into_iter().flatten() {
                    if let FieldSrc::Slot(i) = s {
                        if !read.contains(i) {
                            set.insert(*i);
                        }
                    }
                }
            }
        }
        // Port, time and instance type hold for a whole batch function
        // call, whose first setup is full (`JitCtx::marks` start with `MARK_DIRTY`):
        // when no generated code writes their slots, the full setup alone
        // writes them, and later packets find them still in place.
        // Per field: the context offset of its value (`None`: zero), and
        // whether it is stable (written by the full setup only).
        let stable = |f: &Option<(FieldSrc, u64)>| matches!(f, Some((FieldSrc::Slot(i), _)) if !dirty.contains(i));
        let inputs_per_call =
            [(port_f, Some(P_PORT)), (now_f, Some(P_NOW)), (itype_f, None)].map(|(f, at)| (f, at, stable(&f)));
        let write_inputs = |g: &mut Gen<'_, '_, '_>, stable: bool| {
            for &(f, at, st) in &inputs_per_call {
                if let (Some((s, m)), true) = (f, st == stable) {
                    let v = match at {
                        Some(at) => {
                            let mf = mem(g.b, Mem::Inputs);
                            g.b.ins().load(types::I64, mf, pc, at)
                        }
                        None => g.b.ins().iconst(types::I64, 0),
                    };
                    g.write(s, v, m);
                }
            }
        };
        dirty.extend(&set);
        // 16-byte stores: one per slot, then the wire area.
        g.b.switch_to_block(full);
        let zero16 = zero_vector(g);
        let slots = g.ptr(OFF_SLOTS);
        for i in 0..layout.n_slots {
            let mf = mem(g.b, Mem::Slot(i));
            g.b.ins().store(mf, zero16, slots, 16 * i as i32);
        }
        // The wire padding too, after engine code ran (it never writes
        // there either; this keeps a mistake from lasting).
        let wire = g.ptr(OFF_WIRE);
        let mf = mem(g.b, Mem::Wire);
        g.b.ins().store(mf, zero16, wire, layout.wire_bytes as i32);
        write_inputs(g, true);
        g.b.ins().jump(written, &[]);
        g.b.switch_to_block(written);
        let zero = g.b.ins().iconst(types::I64, 0);
        // Only the low halves: generated code writes no more, and since the
        // last full setup (which zeroed whole slots) only generated code ran.
        // Why: an 8-byte zero is what a later 8-byte load of the field gets
        // from Cranelift without loading it.
        for i in dirty.difference(&set) {
            let mf = mem(g.b, Mem::Slot(*i));
            g.b.ins().store(mf, zero, slots, 16 * *i as i32);
        }
        // The headers the parser's exits do not zero (see `ZeroPlan`).
        // The padding after them needs no zeroing: field reads and writes
        // mask off what they touch there (see `phv::WIRE_PAD`).
        if let Some(z) = &zeros {
            zero_headers(g, &z.setup);
        }
        // The valid flags: metadata valid, headers not, as 8-byte
        // constants (the PHV rounds the flags up to whole words).
        let valid = g.ptr(OFF_VALID);
        for (w, word) in layout.headers.chunks(8).enumerate() {
            let flags = word.iter().enumerate().fold(0u64, |v, (i, h)| v | (u64::from(h.metadata) << (8 * i)));
            let v = g.b.ins().iconst(types::I64, flags as i64);
            let mf = mem(g.b, Mem::Valid);
            g.b.ins().store(mf, v, valid, 8 * w as i32);
        }
        write_inputs(g, false);
        let len = match inputs {
            Some(i) => i.len,
            None => {
                let mf = mem(g.b, Mem::Inputs);
                g.b.ins().load(types::I64, mf, pc, P_LEN)
            }
        };
        if let Some((s, m)) = len_f {
            g.write(s, len, m);
        }
        g.b.ins().jump(parse, &[]);
    }
}

/// Where a compiled parser with a setup zeroes the headers it does not
/// extract: the setup zeroes before parsing only the headers some path may
/// or may not have extracted when it leaves the parser, and the ones no
/// state extracts; every way out of the parser zeroes the rest of the
/// headers its path surely did not extract. Why: a header the path
/// extracts is overwritten whole, so zeroing it first was a wasted store
/// per 16 bytes (the router's IPv4 path zeroes only the IPv6 header).
struct ZeroPlan {
    /// Headers in the wire area.
    wire: BTreeSet<u32>,
    /// Headers the setup zeroes.
    setup: BTreeSet<u32>,
    /// Per state: the headers some path into it extracted.
    maybe_in: HashMap<u32, BTreeSet<u32>>,
}

impl ZeroPlan {
    fn of(plan: &Plan, init: u32, order: &[u32]) -> ZeroPlan {
        use crate::plan::{ExtractTo, POp};
        let wire: BTreeSet<u32> = (0..plan.layout.headers.len() as u32)
            .filter(|h| {
                let info = &plan.layout.headers[*h as usize];
                info.wire.is_some() && !info.metadata
            })
            .collect();
        // Per state: the headers it extracts and the states it goes to.
        let steps: HashMap<u32, (BTreeSet<u32>, Vec<u32>)> = order
            .iter()
            .map(|&si| {
                let st = &plan.states[si as usize];
                let extracts = st
                    .ops
                    .iter()
                    .filter_map(|op| match op {
                        POp::Extract(ExtractTo::Header(h)) => Some(*h),
                        _ => None,
                    })
                    .collect();
                (si, (extracts, parser_next_states(plan, si)))
            })
            .collect();
        // Sure and maybe sets on entry to each state; the states form no
        // loop, so repeating the pass settles them.
        let mut sure_in: HashMap<u32, BTreeSet<u32>> = HashMap::from([(init, BTreeSet::new())]);
        let mut maybe_in: HashMap<u32, BTreeSet<u32>> = HashMap::from([(init, BTreeSet::new())]);
        loop {
            let mut changed = false;
            for &si in order {
                let (Some(sure), Some(maybe)) = (sure_in.get(&si).cloned(), maybe_in.get(&si).cloned()) else {
                    continue;
                };
                let (e, nexts) = &steps[&si];
                let sure_out: BTreeSet<u32> = sure.union(e).copied().collect();
                let maybe_out: BTreeSet<u32> = maybe.union(e).copied().collect();
                for &n in nexts {
                    let s = match sure_in.get(&n) {
                        Some(cur) => cur.intersection(&sure_out).copied().collect(),
                        None => sure_out.clone(),
                    };
                    let m: BTreeSet<u32> =
                        maybe_in.get(&n).map_or(maybe_out.clone(), |cur| cur.union(&maybe_out).copied().collect());
                    changed |= sure_in.get(&n) != Some(&s) || maybe_in.get(&n) != Some(&m);
                    sure_in.insert(n, s);
                    maybe_in.insert(n, m);
                }
            }
            if !changed {
                break;
            }
        }
        let extracted: BTreeSet<u32> = steps.values().flat_map(|(e, _)| e.iter().copied()).collect();
        let mut setup: BTreeSet<u32> = wire.difference(&extracted).copied().collect();
        for (si, maybe) in &maybe_in {
            setup.extend(maybe.difference(&sure_in[si]));
        }
        ZeroPlan { wire, setup, maybe_in }
    }

    /// The headers to zero on leaving state `si` after it extracted `done`.
    fn on_exit(&self, si: u32, done: &[u32]) -> BTreeSet<u32> {
        let maybe = &self.maybe_in[&si];
        self.wire
            .iter()
            .filter(|h| !maybe.contains(h) && !done.contains(h) && !self.setup.contains(h))
            .copied()
            .collect()
    }
}

/// Stores zeros over the wire bytes of headers `hs`, no byte outside them:
/// 16-byte stores over each run of adjacent headers (the last one moved
/// back to end with the run), narrower ones for a run under 16 bytes.
fn zero_headers(g: &mut Gen<'_, '_, '_>, hs: &BTreeSet<u32>) {
    let mut runs: Vec<(u32, u32)> = Vec::new();
    let mut ranges: Vec<(u32, u32)> =
        hs.iter().filter_map(|h| g.plan.layout.headers[*h as usize].wire).map(|(o, n)| (o, o + n)).collect();
    ranges.sort();
    for (a, b) in ranges {
        match runs.last_mut() {
            Some(last) if last.1 >= a => last.1 = last.1.max(b),
            _ => runs.push((a, b)),
        }
    }
    if runs.is_empty() {
        return;
    }
    let wire = g.ptr(OFF_WIRE);
    for (a, b) in runs {
        let n = b - a;
        if n >= 16 {
            let zero16 = zero_vector(g);
            let mut at: Vec<u32> = (0..n / 16).map(|i| a + 16 * i).collect();
            if !n.is_multiple_of(16) {
                at.push(b - 16);
            }
            for o in at {
                let mf = mem(g.b, Mem::Wire);
                g.b.ins().store(mf, zero16, wire, o as i32);
            }
        } else {
            for (o, size) in copy_chunks(n) {
                let z = g.b.ins().iconst(chunk_type(size), 0);
                let mf = mem(g.b, Mem::Wire);
                g.b.ins().store(mf, z, wire, (a + o) as i32);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jit::shape::parser_shape;

    #[test]
    fn parser_exits_zero_only_what_their_path_did_not_extract() {
        let model = sluice_json::load_str(include_str!("../../../../examples/router.json")).expect("router parses");
        let plan = crate::plan::compile(&model).expect("router compiles");
        let shape = parser_shape(&plan).expect("router's parser compiles");
        let z = ZeroPlan::of(&plan, shape.init, &shape.order);
        let h = |n: &str| plan.layout.headers.iter().position(|x| x.name == n).expect("a header") as u32;
        let st = |n: &str| plan.states.iter().position(|x| x.name == n).expect("a state") as u32;
        let (eth, ip4, ip6) = (h("ethernet"), h("ipv4"), h("ipv6"));
        let set = |hs: &[u32]| hs.iter().copied().collect::<BTreeSet<u32>>();
        // Every path either extracts a header or surely does not.
        assert!(z.setup.is_empty(), "setup zeroes {:?}", z.setup);
        assert_eq!(z.on_exit(st("start"), &[]), set(&[eth, ip4, ip6]), "too short for Ethernet");
        assert_eq!(z.on_exit(st("start"), &[eth]), set(&[ip4, ip6]), "neither IP version");
        assert_eq!(z.on_exit(st("parse_ipv4"), &[]), set(&[ip4, ip6]), "too short for IPv4");
        assert_eq!(z.on_exit(st("parse_ipv4"), &[ip4]), set(&[ip6]));
        assert_eq!(z.on_exit(st("parse_ipv6"), &[ip6]), set(&[ip4]));
    }

    #[test]
    fn headers_a_path_may_or_may_not_have_extracted_are_zeroed_by_the_setup() {
        // fabric: VLAN tags are optional before IPv4, TCP follows IPv4 or GTP-U.
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/conformance/p4c-bench/fabric/fabric.json");
        let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e} (the shared corpora)"));
        let plan = crate::plan::compile(&sluice_json::load_str(&text).expect("fabric parses")).expect("compiles");
        let order: Vec<u32> = (0..plan.states.len() as u32).collect();
        let z = ZeroPlan::of(&plan, plan.init_state.expect("a parser"), &order);
        let h = |n: &str| plan.layout.headers.iter().position(|x| x.name == n).expect("a header") as u32;
        let st = |n: &str| plan.states.iter().position(|x| x.name == n).expect("a state") as u32;
        for ambiguous in ["vlan_tag", "inner_vlan_tag", "packet_out"] {
            assert!(z.setup.contains(&h(ambiguous)), "{ambiguous} is zeroed before parsing");
            assert!(!z.on_exit(st("parse_tcp"), &[h("tcp")]).contains(&h(ambiguous)));
        }
        assert!(!z.setup.contains(&h("tcp")), "a path surely extracts TCP or surely does not");
        assert!(z.on_exit(st("parse_icmp"), &[h("icmp")]).contains(&h("tcp")));
        assert!(!z.on_exit(st("parse_tcp"), &[h("tcp")]).contains(&h("tcp")));
    }
}
