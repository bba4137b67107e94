//! The batch function (`sluice_batch`, `fn(*mut JitCtx) -> i64`, called
//! with `FastContexts::fwd`): the parser and the forwarding function for
//! each arriving packet of a batch, in one loop.
//!
//! Contract of the generated function:
//! - reads: the `BatchCtx` beside its argument (packets, their number,
//!   output areas, their stride and room, results, the limit and the
//!   work ahead); each packet's bytes; the parser's
//!   context for the setup inputs (port, time); `JitCtx::marks`; what
//!   the parser and the forwarding function read;
//! - writes: per packet, the PHV (a setup, then parsing and forwarding),
//!   its output area (`out + 16 * i * stride16`: headers, then the
//!   payload for a transmitted packet) and its `PktResult`; with the
//!   headers in place (see `compile_batch`), the PHV's headers, padding
//!   and valid flags are that area itself, whose address each helper call
//!   first stores to `BatchCtx::phv_wire_at`; the stashed
//!   checksum sums (`JitCtx::stash`); the counted edges of the pipelines'
//!   graphs (`BatchCtx::edges`, see `jit::flow`); clears `JitCtx::marks`
//!   when set;
//! - calls: `BatchCtx::ahead` with its state when the loop reaches its
//!   limit with packets left, and goes on to the limit it returns;
//! - leaves: by returning the index of the first packet that needs the
//!   general path (status 1 or 3; its PHV, and with the headers in place
//!   its area, are left as the forwarding function left them) or that is
//!   longer than the areas' room (not parsed at all), or the number of
//!   packets when none is.

use std::collections::BTreeSet;

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, Block, InstBuilder, Value};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::JITModule;
use cranelift_module::FuncId;

use super::abi::{
    B_AHEAD, B_AHEAD_STATE, B_LIMIT16, B_N, B_OUT, B_PKTS, B_RESULTS, B_ROOM, B_STRIDE16, OFF_WIRE, PARSE_FROM_FWD,
};
use super::flow::{BatchFlow, FlowPlan};
use super::forward::emit_forward;
use super::gen::{band_u, mem, Gen, Mem};
use super::module::{declare_context_function, define, generate};
use super::parser::{emit_parser, ParseInputs, SetupFlag};
use super::shape::{plan_stash, ForwardShape, ParserShape};
use super::JitStats;
use crate::plan::Plan;

/// Compiles the batch function: for each packet of a [`BatchCtx`], the
/// parser's setup flag from the last packet's helpers, the parser, the
/// forwarding function into the packet's own output area, and the packet's
/// [`PktResult`]; it stops after the first packet that needs the general
/// path and returns its index (the number of packets when none does). Why:
/// per packet, the Rust loop around the two calls cost about a quarter of
/// the instructions of the whole path. With it, how its tables' applies
/// follow from its edge counts (see `jit::flow`), unless it counts its
/// inline hits one by one.
///
/// [`BatchCtx`]: super::abi::BatchCtx
/// [`PktResult`]: super::abi::PktResult
#[allow(clippy::too_many_arguments)]
pub(super) fn compile_batch(
    plan: &Plan,
    module: &mut JITModule,
    helpers: &[FuncId],
    fctx: &mut FunctionBuilderContext,
    listing: &mut String,
    parser: &ParserShape,
    forward: &ForwardShape,
    fwd_written: &BTreeSet<u32>,
) -> Result<(FuncId, Option<BatchFlow>, bool), String> {
    let (id, mut ctx) = declare_context_function(module, "sluice_batch", 3, true)?;
    let mut flow = Ok(None);
    // The headers go straight into each packet's output area when the
    // header layout is the deparser's sequence from its first byte: a
    // packet whose valid headers are the first ones of that sequence then
    // needs no copy at all (a later valid header behind an invalid one
    // moves down). Why: copying the headers from the PHV into the area (a
    // load and a store per 8 bytes) cost the router 8% of its rate at 10
    // routes; where the layout starts with a header the deparser does not
    // emit (the edge example's packet-out header), every packet would move
    // its headers and nothing is gained.
    let mut at = 0;
    let in_place = forward.deparse.iter().all(|&(_, off, n)| {
        let next = off == at;
        at = off + n;
        next
    });
    // The argument is the forwarding function's context, with the parser's
    // and the batch's beside it (see `FastContexts`).
    generate(plan, module, helpers, fctx, &mut ctx, false, &mut JitStats::default(), |g, fc| {
        let load = |g: &mut Gen<'_, '_, '_>, m: Mem, base: Value, off: i32| {
            let mf = mem(g.b, m);
            g.b.ins().load(types::I64, mf, base, off)
        };
        let pc = g.b.ins().iadd_imm_s(fc, PARSE_FROM_FWD);
        g.ctx = fc;
        // Inline hits follow from a few edge counts (see `jit::flow`),
        // unless the program has too many edges to count.
        g.flow = Some(FlowPlan::new(plan)).filter(FlowPlan::fits);
        // Only the PHV's two pointers stay in registers. The table views,
        // counters and registers, like the batch's own fields (packets,
        // areas, results), are loaded where they are used: kept across the
        // packet's code they would be spilled, and a spilled value costs a
        // store back per packet besides its load (memory operations bound
        // this loop).
        g.load_bases(false);
        // The loop counts `at`, 16 times the packet's index (the offset of
        // its `PktRef` and its `PktResult`). Why not the index: both would
        // be live across the packet's code, and one more value kept there is
        // one more spilled.
        let head = g.b.create_block();
        g.b.append_block_param(head, types::I64);
        let body = g.b.create_block();
        let next = g.b.create_block();
        let stop = g.b.create_block();
        g.b.append_block_param(stop, types::I64);
        let zero = g.b.ins().iconst(types::I64, 0);
        // With the headers in place, the packet's area goes round the loop
        // too: a loop parameter is one register, where `out + at * stride`
        // recomputed per packet is folded by Cranelift into every access's
        // address as two (base and index), and the extra one is spilled.
        if in_place {
            g.b.append_block_param(head, types::I64);
            let out = load(g, Mem::Inputs, fc, B_OUT);
            g.b.ins().jump(head, &[zero.into(), out.into()]);
        } else {
            g.b.ins().jump(head, &[zero.into()]);
        }

        g.b.switch_to_block(head);
        let at = g.b.block_params(head)[0];
        let area_param = in_place.then(|| g.b.block_params(head)[1]);
        // Up to the limit (the packet count unless work ahead is asked
        // for, see `BatchCtx::limit16`), then the work ahead or the end.
        let mf = mem(g.b, Mem::Ctx);
        let limit16 = g.b.ins().load(types::I64, mf, fc, B_LIMIT16);
        let more = g.b.ins().icmp(IntCC::UnsignedLessThan, at, limit16);
        let limit = g.b.create_block();
        g.b.set_cold_block(limit);
        g.b.ins().brif(more, body, &[], limit, &[]);
        // (The limit's blocks are laid out after the loop: the common path
        // falls through into the packet's code.)
        let limit_code = |g: &mut Gen<'_, '_, '_>| {
            g.b.switch_to_block(limit);
            let n = load(g, Mem::Inputs, fc, B_N);
            let n16 = g.b.ins().ishl_imm_u(n, 4);
            let more = g.b.ins().icmp(IntCC::UnsignedLessThan, at, n16);
            let ahead = on_or_stop(g.b, more, stop, n16);
            g.b.set_cold_block(ahead);
            let f = load(g, Mem::Inputs, fc, B_AHEAD);
            let state = load(g, Mem::Inputs, fc, B_AHEAD_STATE);
            let index = g.b.ins().ushr_imm_u(at, 4);
            let mut sig = cranelift_codegen::ir::Signature::new(g.b.func.signature.call_conv);
            sig.params.push(cranelift_codegen::ir::AbiParam::new(types::I64));
            sig.params.push(cranelift_codegen::ir::AbiParam::new(types::I64));
            sig.returns.push(cranelift_codegen::ir::AbiParam::new(types::I64));
            let sig = g.b.import_signature(sig);
            let call = g.b.ins().call_indirect(sig, f, &[state, index]);
            let next_limit = g.b.inst_results(call)[0];
            let next16 = g.b.ins().ishl_imm_u(next_limit, 4);
            let mf = mem(g.b, Mem::Ctx);
            g.b.ins().store(mf, next16, fc, B_LIMIT16);
            g.b.ins().jump(body, &[]);
        };

        // The parser, after its inputs: the packet, and the setup the
        // helper marks ask for (see `JitCtx::marks`).
        g.b.switch_to_block(body);
        // With the headers in place, the parser puts them in the packet's area.
        if let Some(a) = area_param {
            g.set_base(OFF_WIRE, a);
            g.in_place = true;
        }
        let pkts = load(g, Mem::Inputs, fc, B_PKTS);
        let p = g.b.ins().iadd(pkts, at);
        let ptr = load(g, Mem::Inputs, p, 0);
        let len = load(g, Mem::Inputs, p, 8);
        // A packet its area would not hold stops the loop unparsed.
        let room = load(g, Mem::Inputs, fc, B_ROOM);
        let fits = g.b.ins().icmp(IntCC::UnsignedLessThanOrEqual, len, room);
        on_or_stop(g.b, fits, stop, at);
        let parsed = g.b.create_block();
        g.b.append_block_param(parsed, types::I64); // the cursor
        let inputs = ParseInputs { setup: SetupFlag::Marks(fc), pkt: ptr, len };
        // Checksum words nothing changes are summed where the parser ends
        // (it verifies there); only then does every packet pass there.
        if let Some((_, _, verified)) = &parser.ends {
            g.stash = plan_stash(plan, &forward.sums, verified);
        }
        emit_parser(g, pc, parser, Some(fwd_written), Some(parsed), Some(inputs));

        // The forwarding function, into the packet's area. `special` is
        // zero here without a store: a fresh context has it zero, and a
        // packet whose helpers set it ends the batch (status 1 or 3).
        g.b.switch_to_block(parsed);
        let cursor = g.b.block_params(parsed)[0];
        // The length goes to the context only before a helper call (see `Gen::call`).
        g.len = Some(len);
        let forwarded = g.b.create_block();
        for _ in 0..4 {
            g.b.append_block_param(forwarded, types::I64); // status, port, header bytes, area
        }
        // The output area's address is computed by the deparser, rather
        // than kept across the forwarding code (kept, it would be spilled,
        // one more store per packet); the payload copy gets it from there
        // through the exit block.
        let area = |g: &mut Gen<'_, '_, '_>| match area_param {
            Some(a) => a,
            None => {
                let mf = mem(g.b, Mem::Inputs);
                let stride16 = g.b.ins().load(types::I64, mf, fc, B_STRIDE16);
                let mf = mem(g.b, Mem::Inputs);
                let out = g.b.ins().load(types::I64, mf, fc, B_OUT);
                let o = g.b.ins().imul(at, stride16);
                g.b.ins().iadd(out, o)
            }
        };
        emit_forward(g, fc, forward, Some((forwarded, &area)));

        // The result: two 8-byte stores, (status, port) and (length, cursor).
        g.b.switch_to_block(forwarded);
        let &[status, port, hdr, o] = g.b.block_params(forwarded) else { unreachable!("four parameters") };
        let results = load(g, Mem::Inputs, fc, B_RESULTS);
        let r = g.b.ins().iadd(results, at);
        let st32 = band_u(g.b, status, 0xffff_ffff);
        let port_hi = g.b.ins().ishl_imm_u(port, 32);
        let first = g.b.ins().bor(st32, port_hi);
        let mf = mem(g.b, Mem::Out);
        g.b.ins().store(mf, first, r, 0);
        let cursor_hi = g.b.ins().ishl_imm_u(cursor, 32);
        // Transmitted (0): the payload goes behind the headers and the
        // length covers both; dropped (2): next packet; else stop.
        let transmit = g.b.create_block();
        let other = g.b.create_block();
        g.b.ins().brif(status, other, &[], transmit, &[]);
        g.b.switch_to_block(other);
        let second = g.b.ins().bor(hdr, cursor_hi);
        let mf = mem(g.b, Mem::Out);
        g.b.ins().store(mf, second, r, 8);
        let low = band_u(g.b, status, !2);
        g.b.ins().brif(low, stop, &[at.into()], next, &[]);

        g.b.switch_to_block(transmit);
        // The packet's address is loaded again rather than kept across the
        // forwarding code, which frees a register for the loop counter
        // (kept, one of them is spilled: two loads and two stores).
        let pkts = load(g, Mem::Inputs, fc, B_PKTS);
        let p = g.b.ins().iadd(pkts, at);
        let ptr = load(g, Mem::Inputs, p, 0);
        let from = g.b.ins().umin(cursor, len);
        let n_pay = g.b.ins().isub(len, from);
        let src = g.b.ins().iadd(ptr, from);
        let dst = g.b.ins().iadd(o, hdr);
        let total = g.b.ins().iadd(hdr, n_pay);
        let second = g.b.ins().bor(total, cursor_hi);
        let mf = mem(g.b, Mem::Out);
        g.b.ins().store(mf, second, r, 8);
        copy_var(g.b, src, dst, n_pay, next);

        g.b.switch_to_block(next);
        let at1 = g.b.ins().iadd_imm_u(at, 16);
        match area_param {
            Some(a) => {
                let stride16 = load(g, Mem::Inputs, fc, B_STRIDE16);
                let stride = g.b.ins().ishl_imm_u(stride16, 4);
                let a1 = g.b.ins().iadd(a, stride);
                g.b.ins().jump(head, &[at1.into(), a1.into()]);
            }
            None => {
                g.b.ins().jump(head, &[at1.into()]);
            }
        }

        limit_code(g);
        g.b.switch_to_block(stop);
        let at = g.b.block_params(stop)[0];
        flow = match (g.flow.take(), g.flow_overflow) {
            (Some(_), true) => Err("too many counted edges in the pipelines' graphs".to_string()),
            (f, _) => Ok(f.map(|f| f.finish(plan))),
        };
        let v = g.b.ins().ushr_imm_u(at, 4);
        g.b.ins().return_(&[v]);
    });
    listing
        .push_str(&format!("; batch function (parser and forwarding function per packet)\n{}\n", ctx.func.display()));
    let flow = flow?;
    define(module, id, &mut ctx, "sluice_batch")?;
    Ok((id, flow, in_place))
}

/// Branches on `cond`: when it holds, on in a new block (current on
/// return), else through a cold block (laid out after the loop, without
/// the edge block a branch with arguments would need) to `stop` with
/// `arg`.
fn on_or_stop(b: &mut FunctionBuilder, cond: Value, stop: Block, arg: Value) -> Block {
    let on = b.create_block();
    let out = b.create_block();
    b.set_cold_block(out);
    b.ins().brif(cond, on, &[], out, &[]);
    b.switch_to_block(out);
    b.ins().jump(stop, &[arg.into()]);
    b.switch_to_block(on);
    on
}

/// Generates a copy of `n` bytes (known at run time) from `src` to `dst`
/// that reads and writes only inside both ranges, then jumps to `done`:
/// for 16 to 32 bytes two 16-byte pieces, one at each end (overlapping);
/// above, 32-byte steps with the last step ending at `n`; for fewer than 16
/// bytes two overlapping 8-, 4-, 2- or 1-byte pieces. Why not `memcpy`:
/// packet payloads are short, and a call costs more than the copy. Why no
/// loop up to 32 bytes: a 64-byte frame's payload behind Ethernet and IPv4
/// is 26 bytes, and the loop's compares and jumps cost more than its moves
/// (router, 64 B: see `sluice bench --example router`).
fn copy_var(b: &mut FunctionBuilder, src: Value, dst: Value, n: Value, done: Block) {
    let from = mem(b, Mem::Packet);
    let to = mem(b, Mem::Out);
    // Two 16-byte pieces at `at` and `at + second` (relative to both ends' starts).
    let pair = |b: &mut FunctionBuilder, at: Value, second: Value| {
        let s = b.ins().iadd(src, at);
        let d = b.ins().iadd(dst, at);
        let s2 = b.ins().iadd(s, second);
        let d2 = b.ins().iadd(d, second);
        let v = b.ins().load(types::I8X16, from, s, 0);
        let w = b.ins().load(types::I8X16, from, s2, 0);
        b.ins().store(to, v, d, 0);
        b.ins().store(to, w, d2, 0);
    };
    let big = b.create_block();
    let small = b.create_block();
    let is_big = b.ins().icmp_imm_u(IntCC::UnsignedGreaterThanOrEqual, n, 16);
    b.ins().brif(is_big, big, &[], small, &[]);
    b.switch_to_block(big);
    let short = b.create_block();
    let long = b.create_block();
    let is_long = b.ins().icmp_imm_u(IntCC::UnsignedGreaterThan, n, 32);
    b.ins().brif(is_long, long, &[], short, &[]);
    // 16 <= n <= 32: the first 16 bytes and the last 16.
    b.switch_to_block(short);
    let zero = b.ins().iconst(types::I64, 0);
    let last16 = b.ins().iadd_imm_s(n, -16);
    pair(b, zero, last16);
    b.ins().jump(done, &[]);
    // n > 32: 32-byte steps at 0, 32, ... below n - 32, then the last 32 bytes.
    b.switch_to_block(long);
    let lp = b.create_block();
    b.append_block_param(lp, types::I64);
    let tail = b.create_block();
    let zero = b.ins().iconst(types::I64, 0);
    let sixteen = b.ins().iconst(types::I64, 16);
    let last = b.ins().iadd_imm_s(n, -32);
    b.ins().jump(lp, &[zero.into()]);
    b.switch_to_block(lp);
    let k = b.block_params(lp)[0];
    let more = b.ins().icmp(IntCC::UnsignedLessThan, k, last);
    let body = b.create_block();
    b.ins().brif(more, body, &[], tail, &[]);
    b.switch_to_block(body);
    pair(b, k, sixteen);
    let k32 = b.ins().iadd_imm_u(k, 32);
    b.ins().jump(lp, &[k32.into()]);
    b.switch_to_block(tail);
    pair(b, last, sixteen);
    b.ins().jump(done, &[]);
    // n < 16: two pieces of the largest size that fits, one at each end.
    b.switch_to_block(small);
    for (size, ty) in [(8i64, types::I64), (4, types::I32), (2, types::I16), (1, types::I8)] {
        let fits = b.create_block();
        let smaller = b.create_block();
        let ok = b.ins().icmp_imm_u(IntCC::UnsignedGreaterThanOrEqual, n, size);
        b.ins().brif(ok, fits, &[], smaller, &[]);
        b.switch_to_block(fits);
        let end = b.ins().iadd_imm_s(n, -size);
        let a = b.ins().load(ty, from, src, 0);
        let s = b.ins().iadd(src, end);
        let z = b.ins().load(ty, from, s, 0);
        b.ins().store(to, a, dst, 0);
        let d = b.ins().iadd(dst, end);
        b.ins().store(to, z, d, 0);
        b.ins().jump(done, &[]);
        b.switch_to_block(smaller);
    }
    // n == 0 here.
    b.ins().jump(done, &[]);
}
