//! The Cranelift JIT module generated code lives in: its setup (flags,
//! the helpers' symbols and signatures), the declaration and body of each
//! generated function (`declare_context_function`, `generate`), its
//! definition (with the load forwarding passes of `loadfwd` first) and,
//! for profiling, the code sizes and the perf map.

use std::collections::BTreeSet;

use cranelift_codegen::ir::{types, AbiParam, Signature, UserFuncName, Value};
use cranelift_codegen::settings::{self, Configurable};
use cranelift_codegen::Context;
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{FuncId, Linkage, Module};

use super::gen::{region_id, Gen, Mem, ZERO16};
use super::helpers::{
    h_action, h_action_nodata, h_cond, h_indirect, h_meter, h_run_from, h_table, h_table_key, h_table_words,
};
use super::JitStats;
use crate::plan::Plan;

/// A JIT module for the host, with the engine helpers (see `helpers`)
/// registered as symbols and declared as imports: returns it and the
/// helpers' ids, in the order `Gen::new` takes them.
pub(super) fn new_module() -> Result<(JITModule, Vec<FuncId>), String> {
    let mut flags = settings::builder();
    let set = |f: &mut settings::Builder, k: &str, v: &str| f.set(k, v).map_err(|e| format!("cranelift flag {k}: {e}"));
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
    jb.symbol("sluice_h_run_from", h_run_from as *const u8);
    jb.symbol("sluice_h_meter", h_meter as *const u8);
    jb.symbol("sluice_h_indirect", h_indirect as *const u8);
    jb.symbol("sluice_h_table_words", h_table_words as *const u8);
    jb.symbol("sluice_h_table_key", h_table_key as *const u8);
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
        ("sluice_h_run_from", sig(&[ptr, types::I64], None)),
        ("sluice_h_meter", sig(&[ptr, types::I32, types::I64], Some(types::I64))),
        ("sluice_h_indirect", sig(&[ptr, types::I32, ptr], Some(types::I64))),
        (
            "sluice_h_table_words",
            sig(&[ptr, types::I32, types::I64, types::I64, types::I64, types::I64], Some(types::I64)),
        ),
        ("sluice_h_table_key", sig(&[ptr, types::I32, types::I64], Some(types::I64))),
    ];
    let mut helpers = Vec::new();
    for (name, s) in &helper_sigs {
        helpers.push(module.declare_function(name, Linkage::Import, s).map_err(|e| e.to_string())?);
    }
    Ok((module, helpers))
}

/// Code sizes of the functions defined so far, by name (for [`write_perf_map`]).
static CODE_SIZES: std::sync::Mutex<Vec<(String, usize)>> = std::sync::Mutex::new(Vec::new());

/// Defines a generated function in the module and remembers its code size.
pub(super) fn define(module: &mut JITModule, id: FuncId, ctx: &mut Context, name: &str) -> Result<(), String> {
    // Headers and valid flags may be carried into joins: the parser's
    // paths meet before the checksum verification reads them again.
    let joins = [region_id(Mem::Wire), region_id(Mem::Valid)];
    super::loadfwd::forward_loads(&mut ctx.func, ZERO16.as_ptr() as i64, &joins);
    super::loadfwd::fold_decided_selects(&mut ctx.func);
    module.define_function(id, ctx).map_err(|e| format!("cranelift: {e:?}"))?;
    let size = ctx.compiled_code().map_or(0, |c| c.code_buffer().len());
    if let Ok(mut s) = CODE_SIZES.lock() {
        s.retain(|(n, _)| n != name);
        s.push((name.to_string(), size));
    }
    Ok(())
}

/// With `SLUICE_PERF_MAP` set: appends the generated functions to
/// `/tmp/perf-PID.map` (so `perf report` names them) and writes each one's
/// machine code to `/tmp/sluice-jit-PID-NAME.bin` (for `objdump -D -b binary
/// -m i386:x86-64`). Why: profiles of generated code are otherwise anonymous.
pub(super) fn write_perf_map(module: &JITModule, funcs: &[(Option<FuncId>, &str)]) {
    use std::io::Write;
    let pid = std::process::id();
    let sizes = CODE_SIZES.lock().map(|s| s.clone()).unwrap_or_default();
    let Ok(mut map) = std::fs::OpenOptions::new().create(true).append(true).open(format!("/tmp/perf-{pid}.map")) else {
        return;
    };
    for (id, name) in funcs {
        let (Some(id), Some((_, size))) = (id, sizes.iter().find(|(n, _)| n == name)) else { continue };
        let p = module.get_finalized_function(*id);
        let _ = writeln!(map, "{:x} {:x} {name}", p as usize, size);
        // SAFETY: `p` points at `size` bytes of finalized, immutable code.
        let code = unsafe { std::slice::from_raw_parts(p, *size) };
        let _ = std::fs::write(format!("/tmp/sluice-jit-{pid}-{name}.bin"), code);
        eprintln!("sluice: {name} at {:x}, {size} bytes", p as usize);
    }
}

/// Declares a local function `fn(context pointer)` (returning an `i64`
/// status when `status`) and a code generation context for it; `user` tells
/// the listing's functions apart.
pub(super) fn declare_context_function(
    module: &mut JITModule,
    name: &str,
    user: u32,
    status: bool,
) -> Result<(FuncId, Context), String> {
    let mut sig = Signature::new(module.isa().default_call_conv());
    sig.params.push(AbiParam::new(module.target_config().pointer_type()));
    if status {
        sig.returns.push(AbiParam::new(types::I64));
    }
    let id = module.declare_function(name, Linkage::Local, &sig).map_err(|e| e.to_string())?;
    let mut ctx = Context::new();
    ctx.func.signature = sig;
    ctx.func.name = UserFuncName::user(user, 0);
    Ok((id, ctx))
}

/// Generates the body of a function declared by [`declare_context_function`]:
/// the builder, its entry block and a [`Gen`] with the context pointers
/// loaded (`with_views`: also the table and counter views), then `body`
/// (given the context pointer), then sealing and finalization. Returns the
/// PHV slots the function may store to ([`Gen::written`]).
#[allow(clippy::too_many_arguments)]
pub(super) fn generate(
    plan: &Plan,
    module: &mut JITModule,
    helpers: &[FuncId],
    fctx: &mut FunctionBuilderContext,
    ctx: &mut Context,
    with_views: bool,
    stats: &mut JitStats,
    body: impl FnOnce(&mut Gen<'_, '_, '_>, Value),
) -> BTreeSet<u32> {
    let mut b = FunctionBuilder::new(&mut ctx.func, fctx);
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    let pc = b.block_params(entry)[0];
    let mut g = Gen::new(plan, &mut b, module, helpers, pc, stats);
    g.load_bases(with_views);
    body(&mut g, pc);
    let written = std::mem::take(&mut g.written);
    b.seal_all_blocks();
    b.finalize(module.target_config());
    written
}
