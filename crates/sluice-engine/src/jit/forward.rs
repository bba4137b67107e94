//! The forwarding function (`sluice_forward`, `fn(*mut JitCtx) -> i64`):
//! ingress, the unicast decision, the egress standard metadata, egress,
//! checksum updates and the header part of the deparser for one packet
//! already parsed into the PHV; also emitted inside the batch function.
//!
//! Contract of the generated function:
//! - reads: the PHV; the tables, counters and registers through
//!   `JitCtx::views`, `counters` and `registers`; `JitCtx::len` (counters,
//!   egress `packet_length`), `now` (egress timestamp) and `out`;
//!   `JitCtx::special`, which helpers set;
//! - writes: the PHV (actions, egress standard metadata, checksums),
//!   counter and register cells, at most [`forward_hdr_max`] bytes of
//!   headers at `JitCtx::out`, and `JitCtx::port` and `out_len`; helpers it
//!   calls write anything engine code writes (`MARK_DIRTY` then says so);
//! - leaves: by returning a status: 0 to transmit (port and header length
//!   in the context, the payload to follow the headers), 1 for the general
//!   path after ingress, 2 dropped, 3 for the general path after egress (see
//!   `Forward`). Emitted inside the batch function, it jumps to the batch's
//!   block with the status, port, header length and output area instead.

use super::flow::DROPPED_AFTER_INGRESS;
use std::collections::BTreeSet;

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, Block, InstBuilder, Value};
use cranelift_frontend::FunctionBuilderContext;
use cranelift_jit::JITModule;
use cranelift_module::FuncId;

use super::abi::{OFF_NOW, OFF_OUT, OFF_OUT_LEN, OFF_PORT, OFF_SPECIAL, OFF_VALID, OFF_WIRE};
use super::gen::{mem, Gen, Mem};
use super::module::{declare_context_function, define, generate};
use super::shape::{egress_std_unread, ForwardShape, SUM_SKIPPED};
use super::JitStats;
use crate::phv::FieldSrc;
use crate::plan::Plan;

/// Compiles the forwarding function: ingress, the unicast decision, the
/// egress standard metadata, egress, checksum updates and the header part of
/// the deparser, in one function per program. Why: between the stages the
/// general path pays for queues, metadata bookkeeping in `u128` and
/// interpreted checksum conditions; for a unicast packet none of it is
/// needed, and the stages' boundaries cost more than their work.
///
/// Available when every header the deparser emits is in wire format, every
/// checksum update has the byte-range form (`ByteChecksum`) and the standard
/// metadata it writes have hot-path readers; `None` otherwise.
///
/// Returns 0 to transmit (port and header length in the context), 1 when the
/// packet needs the general path after ingress (multicast, or a helper asked
/// for a clone, resubmit, recirculate or truncate, or changed the length),
/// 2 when dropped, 3 for the general path after egress.
pub(super) fn compile_forward(
    plan: &Plan,
    module: &mut JITModule,
    helpers: &[FuncId],
    fctx: &mut FunctionBuilderContext,
    listing: &mut String,
    shape: Option<&ForwardShape>,
) -> Result<Option<(FuncId, BTreeSet<u32>)>, String> {
    let Some(shape) = shape else { return Ok(None) };
    let (id, mut ctx) = declare_context_function(module, "sluice_forward", 2, true)?;
    let written = generate(plan, module, helpers, fctx, &mut ctx, true, &mut JitStats::default(), |g, pc| {
        emit_forward(g, pc, shape, None)
    });
    listing.push_str(&format!("; forwarding function (ingress to deparser)\n{}\n", ctx.func.display()));
    define(module, id, &mut ctx, "sluice_forward")?;
    Ok(Some((id, written)))
}

/// Generates, where it is called, the address of the packet's output area
/// (for the batch function: computed where the deparser needs it, so that
/// it is not kept, and spilled, across the whole forwarding code).
type OutArea<'a> = &'a dyn Fn(&mut Gen<'_, '_, '_>) -> Value;

/// Generates the forwarding function of `shape` at the current block, with
/// `pc` the [`JitCtx`]: returns the status (egress port
/// and header bytes stored to the context), or, when `exit` is given,
/// deparses into the area its [`OutArea`] computes and jumps to its block
/// with the status, egress port, header bytes and output area as
/// parameters.
///
/// [`JitCtx`]: super::abi::JitCtx
pub(super) fn emit_forward(
    g: &mut Gen<'_, '_, '_>,
    pc: Value,
    shape: &ForwardShape,
    exit: Option<(Block, OutArea<'_>)>,
) {
    let plan = g.plan;
    let deparse = shape.deparse.clone();
    let sums = &shape.sums;
    let [mcast, spec_f, itype, egress_ts, egress_port, pkt_len] = shape.fields;
    // The exit block takes (status, egress port, header bytes, output
    // area; 0 for the last two unless transmitted): in the batch function
    // they go straight to the packet's result; a function of its own
    // stores them to the context for its caller.
    let ret = match exit {
        Some((e, _)) => e,
        None => {
            let r = g.b.create_block();
            for _ in 0..4 {
                g.b.append_block_param(r, types::I64);
            }
            r
        }
    };
    let ret_with = |g: &mut Gen, status: i64, port: Value| {
        let v = g.b.ins().iconst(types::I64, status);
        let none = g.b.ins().iconst(types::I64, 0);
        g.b.ins().jump(ret, &[v.into(), port.into(), none.into(), none.into()]);
    };
    let read_or_zero = |g: &mut Gen, f: Option<(FieldSrc, u64)>| match f {
        Some((s, _)) => g.read(s),
        None => g.b.ins().iconst(types::I64, 0),
    };
    // Branches to a block returning `status` (with egress port `port`)
    // when `cond` is non-zero, else continues.
    let bail_if = |g: &mut Gen, cond: Value, status: i64, port: Value| {
        let out = g.b.create_block();
        let cont = g.b.create_block();
        g.b.ins().brif(cond, out, &[], cont, &[]);
        g.b.switch_to_block(out);
        ret_with(g, status, port);
        g.b.switch_to_block(cont);
    };

    // Ingress.
    let after_ingress = g.b.create_block();
    g.body(plan.ingress.init, after_ingress);
    g.b.switch_to_block(after_ingress);
    let no_port = g.b.ins().iconst(types::I64, 0);
    let mf = mem(g.b, Mem::Ctx);
    let special = g.b.ins().load(types::I64, mf, pc, OFF_SPECIAL);
    bail_if(g, special, 1, no_port);
    if let Some((s, _)) = mcast {
        let m = g.read(s);
        bail_if(g, m, 1, no_port);
    }
    let spec = read_or_zero(g, spec_f);
    let drop = g.b.ins().icmp_imm_u(IntCC::Equal, spec, crate::v1model::DROP_PORT as i64);
    if g.flow.is_some() {
        // Counted: egress's entries are the packets that reach it (see `jit::flow`).
        let out = g.b.create_block();
        let cont = g.b.create_block();
        g.b.ins().brif(drop, out, &[], cont, &[]);
        g.b.switch_to_block(out);
        g.count_edge_slot(DROPPED_AFTER_INGRESS);
        ret_with(g, 2, no_port);
        g.b.switch_to_block(cont);
    } else {
        bail_if(g, drop, 2, no_port);
    }
    // Egress standard metadata, as `Switch::egress_pipeline` sets them.
    let port = spec;
    if egress_std_unread(plan, &shape.sums, &shape.fields) {
        // No egress pipeline: nothing after this point reads them (and no
        // helper runs), and once the packet is transmitted or dropped its
        // PHV is dead. `egress_spec` is then the 512 written here.
        let spec = spec_f.map_or(0, |(_, m)| 512 & m);
        if u128::from(spec) == crate::v1model::DROP_PORT {
            let always = g.b.ins().iconst(types::I64, 1);
            bail_if(g, always, 2, port);
        }
    } else {
        if let Some((s, m)) = itype {
            let z = g.b.ins().iconst(types::I64, 0);
            g.write(s, z, m);
        }
        if let Some((s, m)) = egress_ts {
            let mf = mem(g.b, Mem::Ctx);
            let now = g.b.ins().load(types::I64, mf, pc, OFF_NOW);
            g.write(s, now, m);
        }
        if let Some((s, m)) = egress_port {
            g.write(s, spec, m);
        }
        if let Some((s, m)) = spec_f {
            let v = g.b.ins().iconst(types::I64, 512);
            g.write(s, v, m);
        }
        if let Some((s, m)) = pkt_len {
            let len = g.packet_len();
            g.write(s, len, m);
        }

        // Egress.
        let after_egress = g.b.create_block();
        g.body(plan.egress.init, after_egress);
        g.b.switch_to_block(after_egress);
        let mf = mem(g.b, Mem::Ctx);
        let special = g.b.ins().load(types::I64, mf, pc, OFF_SPECIAL);
        bail_if(g, special, 3, port);
        let spec = read_or_zero(g, spec_f);
        let drop = g.b.ins().icmp_imm_u(IntCC::Equal, spec, crate::v1model::DROP_PORT as i64);
        bail_if(g, drop, 2, port);
    }

    // Checksum updates: csum16 of the byte ranges, summed as
    // little-endian words and stored as such (the one's complement sum
    // does not depend on byte order).
    for (i, bc) in sums.iter().enumerate() {
        let stash = g.stash.get(i).cloned().flatten();
        let (cond, part) = match &stash {
            Some(st) => {
                let mf = mem(g.b, Mem::Ctx);
                let part = g.b.ins().load(types::I64, mf, g.ctx, st.at);
                let cond = if st.decided {
                    g.b.ins().icmp_imm_s(IntCC::NotEqual, part, SUM_SKIPPED)
                } else {
                    g.checksum_applies(bc)
                };
                (cond, Some((st, part)))
            }
            None => (g.checksum_applies(bc), None),
        };
        let compute = g.b.create_block();
        let next = g.b.create_block();
        g.b.ins().brif(cond, compute, &[], next, &[]);
        g.b.switch_to_block(compute);
        let v = match part {
            Some((st, part)) => {
                let rest = g.csum16_raw(&st.changing);
                let all = g.b.ins().iadd(part, rest);
                g.csum16_fold(all)
            }
            None => g.csum16_swapped(bc),
        };
        match g.le16_byte(bc.target) {
            Some(b) => g.merge_le(b, 2, v),
            None => {
                let v = g.swap16(v);
                g.write(bc.target, v, 0xffff);
            }
        }
        g.b.ins().jump(next, &[]);
        g.b.switch_to_block(next);
    }

    // Headers in deparser order: only valid ones are copied. Why a
    // branch per header: copying every header and advancing only over
    // valid ones costs an IPv4 packet the 40-byte IPv6 copy.
    let out = match exit {
        Some((_, out)) => out(g),
        None => {
            let mf = mem(g.b, Mem::Ctx);
            g.b.ins().load(types::I64, mf, pc, OFF_OUT)
        }
    };
    let wire = g.ptr(OFF_WIRE);
    let valid = g.ptr(OFF_VALID);
    // Headers in place (batch function, `Gen::in_place`): `out` is the
    // wire area itself. While every header so far was valid, each is
    // where it belongs and the write pointer is a constant offset: a
    // valid header costs its flag's test and nothing else. From the first
    // invalid header on (the gap), each valid one moves down to the write
    // pointer (ascending pieces, so a move never overwrites bytes it has
    // yet to read). Why two chains: the router's packets are deparsed
    // without a gap, and one chain that compares the write pointer with
    // each header's place cost them nine instructions more.
    if g.in_place {
        let ok = g.b.ins().iconst(types::I64, 0);
        let gap = g.b.create_block();
        g.b.append_block_param(gap, types::I64);
        let mut emitted = 0;
        let mut gaps = Vec::new();
        for (i, &(h, off, n)) in deparse.iter().enumerate() {
            debug_assert_eq!(off, emitted, "in place: the layout is the deparser's sequence");
            let valid_next = g.b.create_block();
            let first_gap = g.b.create_block();
            let mf = mem(g.b, Mem::Valid);
            let v = g.b.ins().uload8(types::I64, mf, valid, h as i32);
            // (Invalid as the branch's condition: Cranelift lays the
            // valid path out as the fall-through.)
            let invalid = g.b.ins().icmp_imm_u(IntCC::Equal, v, 0);
            g.b.ins().brif(invalid, first_gap, &[], valid_next, &[]);
            gaps.push((i, first_gap, off));
            g.b.switch_to_block(valid_next);
            emitted = off + n;
        }
        let pos = g.b.ins().iconst(types::I64, i64::from(emitted));
        g.b.ins().jump(ret, &[ok.into(), port.into(), pos.into(), out.into()]);
        // From header `i` invalid on: the rest of the sequence with a gap.
        for (i, first_gap, off) in gaps {
            g.b.switch_to_block(first_gap);
            if i + 1 == deparse.len() {
                // The last header: nothing behind it moves.
                let pos = g.b.ins().iconst(types::I64, i64::from(off));
                g.b.ins().jump(ret, &[ok.into(), port.into(), pos.into(), out.into()]);
                continue;
            }
            let at = g.b.ins().iadd_imm_u(wire, i64::from(off));
            let at = emit_valid_copies(g, &deparse[i + 1..], (wire, valid), (Mem::Wire, at));
            g.b.ins().jump(gap, &[at.into()]);
        }
        g.b.switch_to_block(gap);
        let at = g.b.block_params(gap)[0];
        let pos = g.b.ins().isub(at, out);
        g.b.ins().jump(ret, &[ok.into(), port.into(), pos.into(), out.into()]);
    } else {
        // The headers' write pointer, not their length, goes from header
        // to header: the output area's address is then used (computed)
        // once here, not again in each header's copy (Cranelift places
        // pure values at their uses, per branch).
        let at = emit_valid_copies(g, &deparse, (wire, valid), (Mem::Out, out));
        let pos = g.b.ins().isub(at, out);
        let ok = g.b.ins().iconst(types::I64, 0);
        g.b.ins().jump(ret, &[ok.into(), port.into(), pos.into(), out.into()]);
    }

    if exit.is_none() {
        g.b.switch_to_block(ret);
        let &[status, port, hdr, _] = g.b.block_params(ret) else { unreachable!("four parameters") };
        let mf = mem(g.b, Mem::Ctx);
        g.b.ins().store(mf, port, pc, OFF_PORT);
        let mf = mem(g.b, Mem::Ctx);
        g.b.ins().store(mf, hdr, pc, OFF_OUT_LEN);
        g.b.ins().return_(&[status]);
    }
}

/// The deparser's copies of `headers` (`(header, wire offset, bytes)`, in
/// order): each valid one is copied from the wire area (`wire`, its
/// valid flags at `valid`) to the write pointer `dst.1` in memory `dst.0`,
/// which then moves past it. Returns the write pointer after the last.
fn emit_valid_copies(
    g: &mut Gen<'_, '_, '_>,
    headers: &[(u32, u32, u32)],
    (wire, valid): (Value, Value),
    (dst, mut at): (Mem, Value),
) -> Value {
    for &(h, off, n) in headers {
        let copy = g.b.create_block();
        let next = g.b.create_block();
        g.b.append_block_param(next, types::I64);
        let mf = mem(g.b, Mem::Valid);
        let v = g.b.ins().uload8(types::I64, mf, valid, h as i32);
        g.b.ins().brif(v, copy, &[], next, &[at.into()]);
        g.b.switch_to_block(copy);
        g.copy_bytes((Mem::Wire, wire, off as i32), (dst, at, 0), n);
        let after = g.b.ins().iadd_imm_u(at, i64::from(n));
        g.b.ins().jump(next, &[after.into()]);
        g.b.switch_to_block(next);
        at = g.b.block_params(next)[0];
    }
    at
}
/// Bytes of `out` the forwarding function may write: every header the
/// deparser can emit, plus 8 for the widest store.
pub fn forward_hdr_max(plan: &Plan) -> usize {
    plan.layout.headers.iter().filter_map(|h| h.wire).map(|(_, n)| n as usize).sum::<usize>() + 8
}
