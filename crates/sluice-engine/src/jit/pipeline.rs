//! The control pipelines (`sluice_ingress`, `sluice_egress`,
//! `fn(*mut JitCtx)`): one function per non-empty pipeline, which the
//! general path runs (the forwarding function emits the same code for
//! ingress and egress with its own ends).
//!
//! Contract of the generated function:
//! - reads: the PHV; the tables, counters and registers through
//!   `JitCtx::views`, `counters` and `registers`; `JitCtx::len` (counters);
//!   `JitCtx::data` after a helper's table result;
//! - writes: the PHV fields its actions write, counter and register cells;
//!   the helpers it calls write anything engine code writes (the packet's
//!   metadata, `JitCtx::special` for the general path, `JitCtx::marks`);
//! - leaves: by returning at the pipeline's end or at an `exit` (no status:
//!   the caller reads the PHV and the metadata).

use cranelift_codegen::ir::{AbiParam, InstBuilder, Signature, UserFuncName};
use cranelift_codegen::Context;
use cranelift_frontend::FunctionBuilderContext;
use cranelift_jit::JITModule;
use cranelift_module::{FuncId, Linkage, Module};

use super::gen::Gen;
use super::module::{define, generate};
use super::JitStats;
use crate::plan::{Node, Plan};

/// Compiles the ingress and egress pipelines that are not empty, adding
/// their IR to `listing` and what they inline to `stats`: their ids, in
/// that order.
pub(super) fn compile_pipelines(
    plan: &Plan,
    module: &mut JITModule,
    helpers: &[FuncId],
    fctx: &mut FunctionBuilderContext,
    listing: &mut String,
    stats: &mut JitStats,
) -> Result<[Option<FuncId>; 2], String> {
    let mut pipe_sig = Signature::new(module.isa().default_call_conv());
    pipe_sig.params.push(AbiParam::new(module.target_config().pointer_type()));
    let mut ids: [Option<FuncId>; 2] = [None, None];
    for (k, (name, init)) in [("ingress", plan.ingress.init), ("egress", plan.egress.init)].into_iter().enumerate() {
        let Some(init) = init else { continue };
        let id =
            module.declare_function(&format!("sluice_{name}"), Linkage::Local, &pipe_sig).map_err(|e| e.to_string())?;
        let mut ctx = Context::new();
        ctx.func.signature = pipe_sig.clone();
        ctx.func.name = UserFuncName::user(0, k as u32);
        generate(plan, module, helpers, fctx, &mut ctx, true, stats, |g, _| g.function(init));
        listing.push_str(&format!("; {name} pipeline\n{}\n", ctx.func.display()));
        define(module, id, &mut ctx, &format!("sluice_{name}"))?;
        ids[k] = Some(id);
    }
    Ok(ids)
}

impl Gen<'_, '_, '_> {
    /// A pipeline's body, from its entry block (set up by [`generate`]).
    fn function(&mut self, init: Node) {
        let ret = self.b.create_block();
        self.body(Some(init), ret);
        self.b.switch_to_block(ret);
        self.b.ins().return_(&[]);
    }
}
