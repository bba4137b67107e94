//! Deparser: header order and the calls made before emitting.
//!
//! Reads from the JSON model: `deparsers` (their header order and, in a
//! PSA program, their primitives: `InternetChecksum` calls).
//! Produces in the plan: `deparse_order` and `deparse_prims` (the ingress
//! deparser's, or v1model's only one), `egress_deparse_order` and
//! `egress_deparse_prims` (a PSA program's egress deparser).
//! Errors: more than one deparser or any deparser primitive in a v1model
//! program, an unknown header, and the errors of the primitives.

use super::actions::Prim;
use super::cx::Cx;
use crate::psa;
use crate::CompileError;

/// The compiled deparsers.
pub(super) struct Deparsers {
    pub(super) deparse_order: Vec<u32>,
    pub(super) egress_deparse_order: Vec<u32>,
    pub(super) deparse_prims: Vec<Prim>,
    pub(super) egress_deparse_prims: Vec<Prim>,
}

/// Compiles the deparsers (PSA: an ingress and an egress one).
pub(super) fn compile_deparsers(cx: &Cx, psa: bool) -> Result<Deparsers, CompileError> {
    let (p, layout) = (cx.p, cx.layout);
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
    Ok(Deparsers { deparse_order, egress_deparse_order, deparse_prims, egress_deparse_prims })
}
