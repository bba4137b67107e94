//! Compiled control pipelines: each pipeline of a loaded program becomes one
//! native function (generated with Cranelift at load time).
//!
//! Why: the interpreter in `control.rs` pays a dispatch (and often a branch
//! misprediction) for every node, primitive and expression of the program.
//! Here the pipeline's graph becomes straight-line native code in which the
//! offsets, widths, masks and constants the JSON fixes are immediates:
//! - conditions with a shortcut form (`Fast`) are evaluated inline;
//! - actions whose primitives are all simple (field assignments from
//!   shortcut expressions, counters, `mark_to_drop`, `exit`) run inline;
//!   any other action runs in the interpreter through a helper call;
//! - table lookups call a helper that returns which `(action, hit)` case the
//!   result is, with the action data copied into the context; the compiled
//!   code then runs that action and jumps to the statically known next node.
//!   A result the compiled code cannot take (indirect entries, direct
//!   counters or meters, large action data) is applied completely by the
//!   interpreter and only the next node comes back.
//!
//! The interpreter stays the reference: tracing always uses it, and
//! `ExecMode::Interpreted` selects it for a whole switch (the conformance
//! corpora and a differential test run both).
//!
//! Memory invariant: the generated code reads and writes the packet's PHV
//! through the raw pointers in [`JitCtx`]; the PHV's vectors are allocated
//! once per PHV and never resized, so the pointers stay valid for the whole
//! call. The code memory is immutable after finalisation and freed when the
//! [`CompiledPipelines`] is dropped; nothing else refers to it.

use std::collections::HashMap;
use std::ffi::c_void;

use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{types, AbiParam, Block, InstBuilder, MemFlagsData, Signature, UserFuncName, Value};
use cranelift_codegen::settings::{self, Configurable};
use cranelift_codegen::Context;
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext, Switch as CaseSwitch};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{FuncId, Linkage, Module};

use crate::control::Exec;
use crate::expr::{BinOp, Fast};
use crate::phv::{mask64, FieldSrc};
use crate::plan::{Node, Plan, Prim};

/// Which engine runs a switch's control pipelines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ExecMode {
    /// Native code generated at load time (the default).
    #[default]
    Compiled,
    /// The plan interpreter (the reference; also used whenever tracing).
    Interpreted,
}

/// What the generated code and its helpers share for one pipeline run.
///
/// Field offsets are part of the generated code: keep `#[repr(C)]` and the
/// `OFF_*` constants in step.
#[repr(C)]
pub struct JitCtx {
    exec: *mut c_void,
    wire: *mut u8,
    slots: *mut u128,
    valid: *mut bool,
    /// Action data of the current table result, zero-padded.
    data: [u8; 64],
}

const OFF_WIRE: i32 = 8;
const OFF_SLOTS: i32 = 16;
const OFF_VALID: i32 = 24;
const OFF_DATA: i32 = 32;
const DATA_LEN: u32 = 64;
/// Bytes of `JitCtx::data` that table results overwrite; the rest stays zero.
const HOT_RECORD: usize = crate::tables::HOT_DATA + 16;

type PipelineFn = unsafe extern "C" fn(*mut JitCtx);
type ParserFn = unsafe extern "C" fn(*mut ParseCtx);

/// What the compiled parser reads and writes. Its first four fields have
/// [`JitCtx`]'s layout, so the parser is generated with the same field
/// readers and expression code as the pipelines. Field offsets are part of
/// the generated code: keep `#[repr(C)]` and the `P_*` constants in step.
#[repr(C)]
pub struct ParseCtx {
    exec: *mut c_void,
    wire: *mut u8,
    slots: *mut u128,
    valid: *mut bool,
    pkt: *const u8,
    len: u64,
    /// Out: bytes consumed.
    cursor: u64,
    /// Out: 0 done, 1 the packet ended inside a header, 2 a `verify` failed.
    status: u64,
    /// Out: the error code of a failed `verify`.
    code: u64,
}

const P_PKT: i32 = 32;
const P_LEN: i32 = 40;
const P_CURSOR: i32 = 48;
const P_STATUS: i32 = 56;
const P_CODE: i32 = 64;

/// How a compiled parser run ended.
pub enum ParseOutcome {
    /// Parsing finished (accept, or no transition matched): bytes consumed.
    Done(usize),
    /// The packet ended inside a header; bytes consumed before it.
    TooShort(usize),
    /// A `verify` failed with this error code; bytes consumed before it.
    Verify(usize, u64),
}

/// The native code of a program's ingress and egress pipelines.
pub struct CompiledPipelines {
    module: Option<JITModule>,
    ingress: Option<PipelineFn>,
    egress: Option<PipelineFn>,
    /// The parser, when every state it can reach copies wire-format headers
    /// and selects on at most 64 bits of fields (see [`compile_parser`]).
    parser: Option<ParserFn>,
    /// Cranelift IR of each compiled function, for `sluice inspect`.
    pub listing: String,
    /// How many actions run inline vs through the interpreter, per pipeline.
    pub stats: JitStats,
}

/// Counts of what the compiler managed to turn into native code.
#[derive(Debug, Clone, Default)]
pub struct JitStats {
    pub conditions_inline: usize,
    pub conditions_helper: usize,
    pub actions_inline: usize,
    pub actions_helper: usize,
    pub tables: usize,
}

// SAFETY: the module is only touched again to free its memory on drop; the
// generated code is immutable and reentrant (all state lives in `JitCtx`).
unsafe impl Send for CompiledPipelines {}

impl Drop for CompiledPipelines {
    fn drop(&mut self) {
        if let Some(m) = self.module.take() {
            // SAFETY: the function pointers die with `self`; nothing else holds them.
            unsafe { m.free_memory() };
        }
    }
}

impl CompiledPipelines {
    /// Runs the ingress (`ingress == true`) or egress pipeline on `ex`.
    /// Returns false when that pipeline was not compiled (it is empty).
    pub fn run(&self, ingress: bool, ex: &mut Exec<'_>) -> bool {
        let Some(f) = (if ingress { self.ingress } else { self.egress }) else {
            return false;
        };
        let mut ctx = JitCtx {
            exec: std::ptr::null_mut(),
            wire: ex.phv.wire.as_mut_ptr(),
            slots: ex.phv.slots.as_mut_ptr(),
            valid: ex.phv.valid.as_mut_ptr(),
            data: [0; 64],
        };
        ctx.exec = ex as *mut Exec<'_> as *mut c_void;
        // SAFETY: `f` was generated for this plan; `ctx` points at live PHV
        // vectors (never resized) and at `ex`, which outlives the call.
        unsafe { f(&mut ctx) };
        true
    }

    /// Runs the compiled parser on `data` into `phv`, or returns `None` when
    /// the parser was not compiled (the interpreter then parses).
    pub fn run_parser(&self, phv: &mut crate::phv::Phv, data: &[u8]) -> Option<ParseOutcome> {
        let f = self.parser?;
        let mut ctx = ParseCtx {
            exec: std::ptr::null_mut(),
            wire: phv.wire.as_mut_ptr(),
            slots: phv.slots.as_mut_ptr(),
            valid: phv.valid.as_mut_ptr(),
            pkt: data.as_ptr(),
            len: data.len() as u64,
            cursor: 0,
            status: 0,
            code: 0,
        };
        // SAFETY: `f` was generated for this plan's layout; it reads at most
        // `len` bytes from `pkt` (every copy is bounds-checked first) and
        // writes inside the PHV's vectors, whose sizes come from the same layout.
        unsafe { f(&mut ctx) };
        let c = ctx.cursor as usize;
        Some(match ctx.status {
            0 => ParseOutcome::Done(c),
            1 => ParseOutcome::TooShort(c),
            _ => ParseOutcome::Verify(c, ctx.code),
        })
    }

    /// Whether the parser runs as native code.
    pub fn parser_compiled(&self) -> bool {
        self.parser.is_some()
    }

    /// Generates native code for a plan's pipelines.
    pub fn compile(plan: &Plan) -> Result<CompiledPipelines, String> {
        let mut flags = settings::builder();
        let set =
            |f: &mut settings::Builder, k: &str, v: &str| f.set(k, v).map_err(|e| format!("cranelift flag {k}: {e}"));
        set(&mut flags, "opt_level", "speed")?;
        set(&mut flags, "is_pic", "false")?;
        set(&mut flags, "use_colocated_libcalls", "false")?;
        let isa = cranelift_native::builder()
            .map_err(|e| format!("no native code generator for this host: {e}"))?
            .finish(settings::Flags::new(flags))
            .map_err(|e| format!("cranelift: {e}"))?;
        let mut jb = JITBuilder::with_isa(isa, cranelift_module::default_libcall_names());
        jb.symbol("sluice_h_table", h_table as *const u8);
        jb.symbol("sluice_h_action", h_action as *const u8);
        jb.symbol("sluice_h_action_nodata", h_action_nodata as *const u8);
        jb.symbol("sluice_h_cond", h_cond as *const u8);
        jb.symbol("sluice_h_count", h_count as *const u8);
        jb.symbol("sluice_h_run_from", h_run_from as *const u8);
        let mut module = JITModule::new(jb);
        let ptr = module.target_config().pointer_type();
        let call_conv = module.isa().default_call_conv();
        let sig = |params: &[types::Type], ret: Option<types::Type>| {
            let mut s = Signature::new(call_conv);
            for p in params {
                s.params.push(AbiParam::new(*p));
            }
            if let Some(r) = ret {
                s.returns.push(AbiParam::new(r));
            }
            s
        };
        let helper_sigs = [
            ("sluice_h_table", sig(&[ptr, types::I32], Some(types::I64))),
            ("sluice_h_action", sig(&[ptr, types::I32], Some(types::I32))),
            ("sluice_h_action_nodata", sig(&[ptr, types::I32], Some(types::I32))),
            ("sluice_h_cond", sig(&[ptr, types::I32], Some(types::I32))),
            ("sluice_h_count", sig(&[ptr, types::I32, types::I64], None)),
            ("sluice_h_run_from", sig(&[ptr, types::I64], None)),
        ];
        let mut helpers = Vec::new();
        for (name, s) in &helper_sigs {
            helpers.push(module.declare_function(name, Linkage::Import, s).map_err(|e| e.to_string())?);
        }
        let pipe_sig = sig(&[ptr], None);
        let mut listing = String::new();
        let mut stats = JitStats::default();
        let mut ids: [Option<FuncId>; 2] = [None, None];
        let mut fctx = FunctionBuilderContext::new();
        for (k, (name, init)) in [("ingress", plan.ingress.init), ("egress", plan.egress.init)].into_iter().enumerate()
        {
            let Some(init) = init else { continue };
            let id = module
                .declare_function(&format!("sluice_{name}"), Linkage::Local, &pipe_sig)
                .map_err(|e| e.to_string())?;
            let mut ctx = Context::new();
            ctx.func.signature = pipe_sig.clone();
            ctx.func.name = UserFuncName::user(0, k as u32);
            {
                let mut b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
                let mut g = Gen::new(plan, &mut b, &mut module, &helpers, Value::from_u32(0), &mut stats);
                g.function(init);
                b.seal_all_blocks();
                b.finalize(module.target_config());
            }
            listing.push_str(&format!("; {name} pipeline\n{}\n", ctx.func.display()));
            module.define_function(id, &mut ctx).map_err(|e| format!("cranelift: {e:?}"))?;
            ids[k] = Some(id);
        }
        let parser_id = compile_parser(plan, &mut module, &helpers, &mut fctx, &mut listing)?;
        module.finalize_definitions().map_err(|e| e.to_string())?;
        // SAFETY: the parser was defined with the signature `fn(*mut ParseCtx)`.
        let parser = parser_id
            .map(|id| unsafe { std::mem::transmute::<*const u8, ParserFn>(module.get_finalized_function(id)) });
        let get = |id: Option<FuncId>| {
            // SAFETY: the function was defined with `pipe_sig`, i.e. `fn(*mut JitCtx)`.
            id.map(|id| unsafe { std::mem::transmute::<*const u8, PipelineFn>(module.get_finalized_function(id)) })
        };
        let (ingress, egress) = (get(ids[0]), get(ids[1]));
        Ok(CompiledPipelines { module: Some(module), ingress, egress, parser, listing, stats })
    }
}

/// The key reader of a parser state's select, when the compiled parser can
/// evaluate it: `(field reader, bits)` per part, at most 64 bits in all.
fn parser_key(st: &crate::plan::PState) -> Option<Vec<(FieldSrc, u32)>> {
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
    use crate::plan::{Dst, ExtractTo, POp};
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
        _ => false,
    }
}

/// Compiles the parser when every state reachable from the start is made
/// of operations [`parser_op_ok`] accepts and selects on at most 64 bits of
/// fields, and the states form no loop (the interpreter bounds loops; this
/// code does not need to). Returns `None` (interpreted parser) otherwise.
///
/// Each state becomes a block: per header a bounds check, then 8/4/2/1-byte
/// copies at constant PHV offsets and its valid flag; assignments and
/// `verify` with the pipelines' expression code; the select as a chain of
/// masked compares on the key read once, in the plan's order.
fn compile_parser(
    plan: &Plan,
    module: &mut JITModule,
    helpers: &[FuncId],
    fctx: &mut FunctionBuilderContext,
    listing: &mut String,
) -> Result<Option<FuncId>, String> {
    use crate::plan::{Dst, ExtractTo, POp};
    let Some(init) = plan.init_state else { return Ok(None) };
    // Reachable states in depth-first order, refusing loops and uncompilable states.
    let next_states = |si: u32| -> Vec<u32> {
        let st = &plan.states[si as usize];
        if st.key.is_empty() {
            st.transitions.iter().find(|t| t.default).and_then(|t| t.next).into_iter().collect()
        } else {
            st.fast_transitions.iter().flatten().filter_map(|(_, _, n)| *n).collect()
        }
    };
    let mut order: Vec<u32> = vec![init];
    let mut stack: Vec<(u32, usize)> = vec![(init, 0)];
    let mut on_path: Vec<u32> = vec![init];
    while let Some((si, k)) = stack.pop() {
        let st = &plan.states[si as usize];
        let key_ok = st.key.is_empty() || (st.fast_transitions.is_some() && parser_key(st).is_some());
        if !key_ok || !st.ops.iter().all(|op| parser_op_ok(plan, op)) {
            return Ok(None);
        }
        let nexts = next_states(si);
        if k < nexts.len() {
            stack.push((si, k + 1));
            let n = nexts[k];
            if on_path.contains(&n) {
                return Ok(None);
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
    let ptr = module.target_config().pointer_type();
    let mut sig = Signature::new(module.isa().default_call_conv());
    sig.params.push(AbiParam::new(ptr));
    let id = module.declare_function("sluice_parser", Linkage::Local, &sig).map_err(|e| e.to_string())?;
    let mut ctx = Context::new();
    ctx.func.signature = sig;
    ctx.func.name = UserFuncName::user(1, 0);
    let mut stats = JitStats::default();
    {
        let fl = MemFlagsData::new().with_notrap();
        let mut b = FunctionBuilder::new(&mut ctx.func, fctx);
        let entry = b.create_block();
        b.append_block_params_for_function_params(entry);
        b.switch_to_block(entry);
        let pc = b.block_params(entry)[0];
        let mut g = Gen::new(plan, &mut b, module, helpers, pc, &mut stats);
        let blocks: HashMap<u32, Block> = order.iter().map(|si| (*si, g.b.create_block())).collect();
        let done = g.b.create_block();
        let short = g.b.create_block();
        let failed = g.b.create_block();
        for blk in blocks.values().chain([&done, &short, &failed]) {
            g.b.append_block_param(*blk, types::I64); // the cursor
        }
        g.b.append_block_param(failed, types::I64); // the error code
        let pkt = g.b.ins().load(types::I64, fl, pc, P_PKT);
        let len = g.b.ins().load(types::I64, fl, pc, P_LEN);
        let zero = g.b.ins().iconst(types::I64, 0);
        g.b.ins().jump(blocks[&init], &[zero.into()]);
        for si in &order {
            let st = &plan.states[*si as usize];
            let blk = blocks[si];
            g.b.switch_to_block(blk);
            let mut cursor = g.b.block_params(blk)[0];
            for op in &st.ops {
                match op {
                    POp::Extract(ExtractTo::Header(h)) => {
                        let (off, n) = plan.layout.headers[*h as usize].wire.expect("checked");
                        // Bounds check: cursor + n <= len, else PacketTooShort before this header.
                        let end = g.b.ins().iadd_imm_u(cursor, i64::from(n));
                        let fits = g.b.ins().icmp(IntCC::UnsignedLessThanOrEqual, end, len);
                        let copy = g.b.create_block();
                        g.b.ins().brif(fits, copy, &[], short, &[cursor.into()]);
                        g.b.switch_to_block(copy);
                        let src = g.b.ins().iadd(pkt, cursor);
                        let wire = g.ptr(OFF_WIRE);
                        let mut at = 0u32;
                        for (size, ty) in [(8u32, types::I64), (4, types::I32), (2, types::I16), (1, types::I8)] {
                            while n - at >= size {
                                let v = g.b.ins().load(ty, fl, src, at as i32);
                                g.b.ins().store(fl, v, wire, (off + at) as i32);
                                at += size;
                            }
                        }
                        let valid = g.ptr(OFF_VALID);
                        let one = g.b.ins().iconst(types::I8, 1);
                        g.b.ins().store(fl, one, valid, *h as i32);
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
                        g.b.ins().brif(ok, cont, &[], failed, &[cursor.into(), code.into()]);
                        g.b.switch_to_block(cont);
                    }
                    _ => unreachable!("checked by parser_op_ok"),
                }
            }
            if st.key.is_empty() {
                match st.transitions.iter().find(|t| t.default).and_then(|t| t.next) {
                    Some(n) => g.b.ins().jump(blocks[&n], &[cursor.into()]),
                    None => g.b.ins().jump(done, &[cursor.into()]),
                };
                continue;
            }
            let mut key = g.b.ins().iconst(types::I64, 0);
            for (src, bits) in parser_key(st).expect("checked") {
                let v = g.read(src);
                let v = if bits >= 64 { v } else { g.b.ins().band_imm_u(v, mask64(bits) as i64) };
                key = if bits >= 64 {
                    v
                } else {
                    let sh = g.b.ins().ishl_imm_u(key, i64::from(bits));
                    g.b.ins().bor(sh, v)
                };
            }
            for (v, m, next) in st.fast_transitions.iter().flatten() {
                let target = next.map_or(done, |n| blocks[&n]);
                let masked = g.b.ins().band_imm_u(key, *m as u64 as i64);
                let hit = g.b.ins().icmp_imm_u(IntCC::Equal, masked, *v as u64 as i64);
                let miss = g.b.create_block();
                g.b.ins().brif(hit, target, &[cursor.into()], miss, &[]);
                g.b.switch_to_block(miss);
            }
            g.b.ins().jump(done, &[cursor.into()]);
        }
        for (blk, status) in [(done, 0i64), (short, 1), (failed, 2)] {
            g.b.switch_to_block(blk);
            let c = g.b.block_params(blk)[0];
            g.b.ins().store(fl, c, pc, P_CURSOR);
            let st = g.b.ins().iconst(types::I64, status);
            g.b.ins().store(fl, st, pc, P_STATUS);
            if status == 2 {
                let code = g.b.block_params(blk)[1];
                g.b.ins().store(fl, code, pc, P_CODE);
            }
            g.b.ins().return_(&[]);
        }
        b.seal_all_blocks();
        b.finalize(module.target_config());
    }
    listing.push_str(&format!("; parser\n{}\n", ctx.func.display()));
    module.define_function(id, &mut ctx).map_err(|e| format!("cranelift: {e:?}"))?;
    Ok(Some(id))
}

/// Code generation state for one pipeline function.
struct Gen<'p, 'b, 'f> {
    plan: &'p Plan,
    b: &'b mut FunctionBuilder<'f>,
    ctx: Value,
    blocks: HashMap<(u8, u32), Block>,
    work: Vec<(Node, Block)>,
    ret: Block,
    h_table: cranelift_codegen::ir::FuncRef,
    h_action: cranelift_codegen::ir::FuncRef,
    h_action_nodata: cranelift_codegen::ir::FuncRef,
    h_cond: cranelift_codegen::ir::FuncRef,
    h_count: cranelift_codegen::ir::FuncRef,
    h_run_from: cranelift_codegen::ir::FuncRef,
    stats: &'b mut JitStats,
}

fn node_key(n: Node) -> (u8, u32) {
    match n {
        Node::Table(t) => (0, t),
        Node::Cond(c) => (1, c),
    }
}

/// How the helpers report a next node: 0 for the end of the pipeline.
fn encode_node(n: Option<Node>) -> i64 {
    match n {
        None => 0,
        Some(Node::Table(t)) => 1 + 2 * i64::from(t),
        Some(Node::Cond(c)) => 2 + 2 * i64::from(c),
    }
}

fn decode_node(v: i64) -> Option<Node> {
    match v {
        0 => None,
        v if v % 2 == 1 => Some(Node::Table(((v - 1) / 2) as u32)),
        v => Some(Node::Cond(((v - 2) / 2) as u32)),
    }
}

/// Result of an inline action: whether it always ends the pipeline (`exit`).
enum ActionEnd {
    Continue,
    Exit,
    /// The action ran in a helper; the value is its exit flag (i32).
    Dynamic(Value),
}

impl<'p, 'b, 'f> Gen<'p, 'b, 'f> {
    /// A generator for one function being built in `b`, with the engine
    /// helpers (`helpers`, in `compile`'s order) declared in it; `ctx` is the
    /// context pointer parameter (set later by `function` for pipelines).
    fn new(
        plan: &'p Plan,
        b: &'b mut FunctionBuilder<'f>,
        module: &mut JITModule,
        helpers: &[FuncId],
        ctx: Value,
        stats: &'b mut JitStats,
    ) -> Self {
        let refs: Vec<_> = helpers.iter().map(|h| module.declare_func_in_func(*h, b.func)).collect();
        Gen {
            plan,
            b,
            ctx,
            blocks: HashMap::new(),
            work: Vec::new(),
            ret: Block::from_u32(0),
            h_table: refs[0],
            h_action: refs[1],
            h_action_nodata: refs[2],
            h_cond: refs[3],
            h_count: refs[4],
            h_run_from: refs[5],
            stats,
        }
    }
}

impl Gen<'_, '_, '_> {
    fn flags() -> MemFlagsData {
        MemFlagsData::new().with_notrap()
    }

    fn function(&mut self, init: Node) {
        let entry = self.b.create_block();
        self.b.append_block_params_for_function_params(entry);
        self.b.switch_to_block(entry);
        self.ctx = self.b.block_params(entry)[0];
        self.ret = self.b.create_block();
        let first = self.block_for(Some(init));
        self.b.ins().jump(first, &[]);
        while let Some((n, blk)) = self.work.pop() {
            self.b.switch_to_block(blk);
            match n {
                Node::Cond(c) => self.cond(c),
                Node::Table(t) => self.table(t),
            }
        }
        self.b.switch_to_block(self.ret);
        self.b.ins().return_(&[]);
    }

    /// The block that runs node `n` (the return block for the end).
    fn block_for(&mut self, n: Option<Node>) -> Block {
        let Some(n) = n else { return self.ret };
        if let Some(b) = self.blocks.get(&node_key(n)) {
            return *b;
        }
        let b = self.b.create_block();
        self.blocks.insert(node_key(n), b);
        self.work.push((n, b));
        b
    }

    fn ptr(&mut self, off: i32) -> Value {
        self.b.ins().load(types::I64, Self::flags(), self.ctx, off)
    }

    fn read(&mut self, s: FieldSrc) -> Value {
        match s {
            FieldSrc::Slot(i) => {
                let base = self.ptr(OFF_SLOTS);
                self.b.ins().load(types::I64, Self::flags(), base, (16 * i) as i32)
            }
            FieldSrc::Wire { byte, shift, mask } => {
                let base = self.ptr(OFF_WIRE);
                let w = self.b.ins().load(types::I64, Self::flags(), base, byte as i32);
                let v = self.b.ins().bswap(w);
                let v = if shift > 0 { self.b.ins().ushr_imm_u(v, i64::from(shift)) } else { v };
                if mask == u64::MAX {
                    v
                } else {
                    self.b.ins().band_imm_u(v, mask as i64)
                }
            }
        }
    }

    fn write(&mut self, s: FieldSrc, v: Value, width_mask: u64) {
        match s {
            FieldSrc::Slot(i) => {
                let base = self.ptr(OFF_SLOTS);
                let v = if width_mask == u64::MAX { v } else { self.b.ins().band_imm_u(v, width_mask as i64) };
                let zero = self.b.ins().iconst(types::I64, 0);
                self.b.ins().store(Self::flags(), v, base, (16 * i) as i32);
                self.b.ins().store(Self::flags(), zero, base, (16 * i + 8) as i32);
            }
            FieldSrc::Wire { byte, shift, mask } => {
                let base = self.ptr(OFF_WIRE);
                let w = self.b.ins().load(types::I64, Self::flags(), base, byte as i32);
                let cur = self.b.ins().bswap(w);
                let m = mask << shift;
                let kept = self.b.ins().band_imm_u(cur, !m as i64);
                let nv = if mask == u64::MAX { v } else { self.b.ins().band_imm_u(v, mask as i64) };
                let nv = if shift > 0 { self.b.ins().ishl_imm_u(nv, i64::from(shift)) } else { nv };
                let out = self.b.ins().bor(kept, nv);
                let out = self.b.ins().bswap(out);
                self.b.ins().store(Self::flags(), out, base, byte as i32);
            }
        }
    }

    fn bool_to_i64(&mut self, c: Value) -> Value {
        self.b.ins().uextend(types::I64, c)
    }

    /// Whether [`Gen::fast`] can generate `f` (`data`: action data in scope).
    fn supported(f: &Fast, data: bool) -> bool {
        match f {
            Fast::None => false,
            Fast::Param { off, len } => data && *len <= 8 && off + 8 <= DATA_LEN,
            Fast::And(p) | Fast::Or(p) => Self::supported(&p.0, data) && Self::supported(&p.1, data),
            _ => true,
        }
    }

    /// Generates a shortcut expression's value (as `fast_u64` computes it).
    fn fast(&mut self, f: &Fast) -> Value {
        match f {
            Fast::Const(c) => self.b.ins().iconst(types::I64, *c as i64),
            Fast::Field(s) => self.read(*s),
            Fast::Param { off, len } => {
                let w = self.b.ins().load(types::I64, Self::flags(), self.ctx, OFF_DATA + *off as i32);
                let v = self.b.ins().bswap(w);
                if *len < 8 {
                    self.b.ins().ushr_imm_u(v, i64::from(64 - 8 * *len))
                } else {
                    v
                }
            }
            Fast::AddMask { slot, c, mask } => {
                let v = self.read(*slot);
                let v = self.b.ins().iadd_imm_u(v, *c as i64);
                self.b.ins().band_imm_u(v, *mask as i64)
            }
            Fast::Valid(h) | Fast::NotValid(h) => {
                let base = self.ptr(OFF_VALID);
                let v = self.b.ins().uload8(types::I64, Self::flags(), base, *h as i32);
                if matches!(f, Fast::NotValid(_)) {
                    self.b.ins().bxor_imm_u(v, 1)
                } else {
                    v
                }
            }
            Fast::Cmp { slot, c, op } => {
                let v = self.read(*slot);
                let cc = match op {
                    BinOp::Eq => IntCC::Equal,
                    BinOp::Ne => IntCC::NotEqual,
                    BinOp::Lt => IntCC::UnsignedLessThan,
                    BinOp::Le => IntCC::UnsignedLessThanOrEqual,
                    BinOp::Gt => IntCC::UnsignedGreaterThan,
                    _ => IntCC::UnsignedGreaterThanOrEqual,
                };
                let r = self.b.ins().icmp_imm_u(cc, v, *c as i64);
                self.bool_to_i64(r)
            }
            Fast::AndConst { slot, mask } => {
                let v = self.read(*slot);
                self.b.ins().band_imm_u(v, *mask as i64)
            }
            Fast::NonZero(s) => {
                let v = self.read(*s);
                let r = self.b.ins().icmp_imm_u(IntCC::NotEqual, v, 0);
                self.bool_to_i64(r)
            }
            Fast::And(p) | Fast::Or(p) => {
                // Shortcut leaves have no side effects: evaluate both sides.
                let a = self.fast(&p.0);
                let a = self.b.ins().icmp_imm_u(IntCC::NotEqual, a, 0);
                let c = self.fast(&p.1);
                let c = self.b.ins().icmp_imm_u(IntCC::NotEqual, c, 0);
                let r = if matches!(f, Fast::And(_)) { self.b.ins().band(a, c) } else { self.b.ins().bor(a, c) };
                self.bool_to_i64(r)
            }
            Fast::None => unreachable!("checked by `supported`"),
        }
    }

    fn cond(&mut self, c: u32) {
        let cp = &self.plan.conds[c as usize];
        let v = if Self::supported(&cp.expr.fast, false) {
            self.stats.conditions_inline += 1;
            self.fast(&cp.expr.fast)
        } else {
            self.stats.conditions_helper += 1;
            let ci = self.b.ins().iconst(types::I32, i64::from(c));
            let call = self.b.ins().call(self.h_cond, &[self.ctx, ci]);
            self.b.inst_results(call)[0]
        };
        let (t, f) = (self.block_for(cp.true_next), self.block_for(cp.false_next));
        self.b.ins().brif(v, t, &[], f, &[]);
    }

    /// Whether action `ai` can run inline (`data`: it has action data).
    fn action_inlinable(&self, ai: u32, data: bool) -> bool {
        let std = &self.plan.std;
        self.plan.actions[ai as usize].prims.iter().all(|p| match p {
            Prim::SetField { src, .. } => Self::supported(&src.fast, data),
            Prim::Count { idx, .. } => Self::supported(&idx.fast, data),
            Prim::MarkToDrop => [std.egress_spec, std.mcast_grp]
                .iter()
                .all(|f| f.is_none_or(|f| FieldSrc::of(&self.plan.layout.fields[f as usize]).is_some())),
            Prim::Exit => true,
            _ => false,
        })
    }

    /// Generates action `ai` in the current block (data, if any, in `JitCtx::data`).
    fn action(&mut self, ai: u32, data: bool) -> ActionEnd {
        if !self.action_inlinable(ai, data) {
            self.stats.actions_helper += 1;
            let a = self.b.ins().iconst(types::I32, i64::from(ai));
            let h = if data { self.h_action } else { self.h_action_nodata };
            let call = self.b.ins().call(h, &[self.ctx, a]);
            return ActionEnd::Dynamic(self.b.inst_results(call)[0]);
        }
        self.stats.actions_inline += 1;
        let plan = self.plan;
        let mut exit = false;
        for p in &plan.actions[ai as usize].prims {
            match p {
                Prim::SetField { dst, mask, src } => {
                    let v = self.fast(&src.fast);
                    self.write(*dst, v, *mask);
                }
                Prim::Count { arr, idx } => {
                    let i = self.fast(&idx.fast);
                    let a = self.b.ins().iconst(types::I32, i64::from(*arr));
                    self.b.ins().call(self.h_count, &[self.ctx, a, i]);
                }
                Prim::MarkToDrop => {
                    for (f, v) in [(plan.std.egress_spec, 511i64), (plan.std.mcast_grp, 0)] {
                        if let Some(f) = f {
                            let fi = &plan.layout.fields[f as usize];
                            let src = FieldSrc::of(fi).expect("checked by action_inlinable");
                            let c = self.b.ins().iconst(types::I64, v);
                            self.write(src, c, mask64(fi.width));
                        }
                    }
                }
                Prim::Exit => exit = true,
                _ => unreachable!("checked by action_inlinable"),
            }
        }
        if exit {
            ActionEnd::Exit
        } else {
            ActionEnd::Continue
        }
    }

    /// Ends the current block after an action: to `next`, or out on exit.
    fn after_action(&mut self, end: ActionEnd, next: Option<Node>) {
        match end {
            ActionEnd::Continue => {
                let n = self.block_for(next);
                self.b.ins().jump(n, &[]);
            }
            ActionEnd::Exit => {
                self.b.ins().jump(self.ret, &[]);
            }
            ActionEnd::Dynamic(exit) => {
                let n = self.block_for(next);
                self.b.ins().brif(exit, self.ret, &[], n, &[]);
            }
        }
    }

    fn table(&mut self, t: u32) {
        self.stats.tables += 1;
        let tp = &self.plan.tables[t as usize];
        if let Some((a, next)) = tp.inline_default {
            let end = self.action(a, false);
            self.after_action(end, next);
            return;
        }
        let ti = self.b.ins().iconst(types::I32, i64::from(t));
        let call = self.b.ins().call(self.h_table, &[self.ctx, ti]);
        let r = self.b.inst_results(call)[0];
        let hot = self.b.create_block();
        let full = self.b.create_block();
        let neg = self.b.ins().icmp_imm_u(IntCC::SignedLessThan, r, 0);
        self.b.ins().brif(neg, full, &[], hot, &[]);

        // Hot results: case `2 * position + hit`.
        self.b.switch_to_block(hot);
        let mut cases = CaseSwitch::new();
        let fallback = self.b.create_block();
        let mut case_blocks = Vec::new();
        for (pos, a) in tp.actions.iter().enumerate() {
            for hit in [false, true] {
                let blk = self.b.create_block();
                cases.set_entry((2 * pos + hit as usize) as u128, blk);
                case_blocks.push((blk, *a, pos, hit));
            }
        }
        cases.emit(self.b, r, fallback);
        for (blk, a, pos, hit) in case_blocks {
            self.b.switch_to_block(blk);
            let next = match (hit, tp.next_hit, tp.next_miss) {
                (true, Some(n), _) | (false, _, Some(n)) => n,
                _ => tp.next_by_action[pos],
            };
            let end = self.action(a, true);
            self.after_action(end, next);
        }
        // Not expected (the helper only returns listed actions): end the pipeline.
        self.b.switch_to_block(fallback);
        self.b.ins().jump(self.ret, &[]);

        // Applied by the interpreter: `-1 - next node`, or i64::MIN on exit.
        self.b.switch_to_block(full);
        let exit = self.b.ins().icmp_imm_u(IntCC::Equal, r, i64::MIN);
        let dispatch = self.b.create_block();
        self.b.ins().brif(exit, self.ret, &[], dispatch, &[]);
        self.b.switch_to_block(dispatch);
        let minus_one = self.b.ins().iconst(types::I64, -1);
        let enc = self.b.ins().isub(minus_one, r);
        let mut succ: Vec<Option<Node>> = vec![tp.base_default_next];
        succ.extend(tp.next_by_action.iter().copied());
        succ.extend(tp.next_hit);
        succ.extend(tp.next_miss);
        let mut seen = Vec::new();
        let mut sw = CaseSwitch::new();
        for n in succ {
            let e = encode_node(n);
            if !seen.contains(&e) {
                seen.push(e);
                let blk = self.block_for(n);
                sw.set_entry(e as u128, blk);
            }
        }
        let other = self.b.create_block();
        sw.emit(self.b, enc, other);
        // Any other node (not expected): let the interpreter run the rest.
        self.b.switch_to_block(other);
        self.b.ins().call(self.h_run_from, &[self.ctx, enc]);
        self.b.ins().jump(self.ret, &[]);
    }
}

/// The `Exec` behind a context.
///
/// # Safety
/// `ctx` must be the live context of a running compiled pipeline.
unsafe fn exec_of<'a>(ctx: *mut JitCtx) -> (&'a mut Exec<'a>, &'a mut [u8; 64]) {
    let c = &mut *ctx;
    (&mut *(c.exec as *mut Exec<'a>), &mut c.data)
}

extern "C" fn h_table(ctx: *mut JitCtx, ti: u32) -> i64 {
    // SAFETY: called only by generated code with its live context.
    let (ex, data) = unsafe { exec_of(ctx) };
    ex.apply_table_for_jit(ti as usize, data)
}

extern "C" fn h_action(ctx: *mut JitCtx, ai: u32) -> u32 {
    // SAFETY: as above.
    let (ex, data) = unsafe { exec_of(ctx) };
    let d = *data;
    ex.run_action(ai as usize, &d);
    ex.meta.exit as u32
}

extern "C" fn h_action_nodata(ctx: *mut JitCtx, ai: u32) -> u32 {
    // SAFETY: as above.
    let (ex, _) = unsafe { exec_of(ctx) };
    ex.run_action(ai as usize, &[]);
    ex.meta.exit as u32
}

extern "C" fn h_cond(ctx: *mut JitCtx, ci: u32) -> u32 {
    // SAFETY: as above.
    let (ex, _) = unsafe { exec_of(ctx) };
    ex.eval_cond(ci as usize) as u32
}

extern "C" fn h_count(ctx: *mut JitCtx, arr: u32, idx: u64) {
    // SAFETY: as above.
    let (ex, _) = unsafe { exec_of(ctx) };
    ex.count(arr as usize, idx);
}

extern "C" fn h_run_from(ctx: *mut JitCtx, node: i64) {
    // SAFETY: as above.
    let (ex, _) = unsafe { exec_of(ctx) };
    ex.run_pipeline(decode_node(node));
}

/// Table results as the compiled code consumes them (see `h_table`).
impl Exec<'_> {
    /// Looks table `ti` up for compiled code. For a direct action with at
    /// most `HOT_DATA` bytes of data and nothing else to do (no direct
    /// counter or meter, no profile) it copies the zero-padded data into
    /// `out` and returns `2 * position of the action in the table + hit`.
    /// Anything else is applied completely here; the result is then
    /// `-1 - encoded next node`, or `i64::MIN` when the action exited.
    pub fn apply_table_for_jit(&mut self, ti: usize, out: &mut [u8; 64]) -> i64 {
        let tp = &self.plan.tables[ti];
        // Tables with idle timeouts record their hits: the full path does that.
        if !tp.with_counters && tp.direct_meter.is_none() && !tp.support_timeout {
            let found = match self.lookup_integer_key(ti) {
                Some(Some(h)) => {
                    let hot = self.state.tables[ti].hot(h);
                    (hot.action != u32::MAX).then(|| {
                        // The record is zero-padded; `out` beyond it stays zero.
                        out[..hot.data.len()].copy_from_slice(&hot.data);
                        (hot.action, 1)
                    })
                }
                Some(None) => match &self.state.tables[ti].default {
                    Some((a, d)) if d.len() <= crate::tables::HOT_DATA => {
                        out[..d.len()].copy_from_slice(d);
                        out[d.len()..HOT_RECORD].fill(0);
                        Some((*a, 0))
                    }
                    _ => None,
                },
                None => None,
            };
            if let Some((a, hit)) = found {
                if let Some(pos) = tp.actions.iter().position(|x| *x == a) {
                    return 2 * pos as i64 + hit;
                }
            }
        }
        let next = self.apply_table(ti);
        if self.meta.exit {
            i64::MIN
        } else {
            -1 - encode_node(next)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_encoding_round_trips() {
        for n in [None, Some(Node::Table(0)), Some(Node::Cond(0)), Some(Node::Table(77)), Some(Node::Cond(1234))] {
            assert_eq!(decode_node(encode_node(n)), n);
        }
    }
}
