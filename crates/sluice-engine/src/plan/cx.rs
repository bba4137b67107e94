//! The compile context every stage shares.
//!
//! Reads from the JSON model: the calculations, the counter, meter and
//! register arrays, and the extern instances (`Hash`, `InternetChecksum`,
//! `Random`), whose names it numbers once; the architecture (`is_psa`).
//! Produces: no part of the plan itself, but what the stages compile
//! with: `Cx` (expressions, assignment destinations, value roots, header
//! stacks, constants and names resolved against the layout), `Dst`.
//! Errors: an unknown name, an assignment target that is no field, a
//! header stack or constant where one is expected, each at the JSON path
//! being compiled.

use std::collections::HashMap;

use sluice_json::{Expr, Program};

use crate::expr::{CExpr, ExprCx, HRef, Root};
use crate::phv::Layout;
use crate::psa;
use crate::CompileError;

/// Destination of an assignment.
#[derive(Debug, Clone)]
pub enum Dst {
    Field(u32),
    /// A field of a run-time selected header: `(header, field index)`.
    Dyn(HRef, usize),
}

/// Whether `p` is what `p4c-bm2-psa` emits: parsers and deparsers named
/// for PSA's ingress and egress, and PSA's ingress output metadata.
pub fn is_psa(p: &Program) -> bool {
    p.parsers.iter().any(|x| x.name == psa::EGRESS_PARSER)
        && p.deparsers.iter().any(|x| x.name == psa::EGRESS_DEPARSER)
        && p.headers.iter().any(|h| h.name == psa::INGRESS_OUTPUT)
}

/// What every stage compiles with: the program, its layout, and the
/// names of its calculations, arrays and extern instances numbered.
pub(super) struct Cx<'a> {
    pub(super) p: &'a Program,
    pub(super) layout: &'a Layout,
    pub(super) calcs: HashMap<&'a str, u32>,
    pub(super) counters: HashMap<&'a str, u32>,
    pub(super) meters: HashMap<&'a str, u32>,
    pub(super) registers: HashMap<&'a str, u32>,
    /// PSA `Hash` instances: their name and algorithm.
    pub(super) hashes: HashMap<&'a str, (&'a str, &'a str)>,
    /// PSA `InternetChecksum` instances: their index.
    pub(super) csums: HashMap<&'a str, u32>,
    /// PSA `Random` instances: their bounds.
    pub(super) randoms: HashMap<&'a str, (u64, u64)>,
    /// Calculations PSA `Hash` calls make (name, algorithm, input, path):
    /// numbered after the program's.
    pub(super) extern_calcs: std::cell::RefCell<Vec<ExternCalc>>,
}

/// A calculation a PSA `Hash` call makes: name, algorithm, input, path.
pub(super) type ExternCalc = (String, String, Vec<sluice_json::CalcInput>, String);

/// The value of attribute `name` of an extern instance.
pub(super) fn extern_attribute<'a>(e: &'a sluice_json::ExternInstance, name: &str) -> Option<&'a str> {
    e.attributes.iter().find(|a| a.0 == name).map(|a| a.2.as_str())
}

/// Each name with its index.
fn numbered<'a>(names: impl Iterator<Item = &'a str>) -> HashMap<&'a str, u32> {
    names.enumerate().map(|(i, n)| (n, i as u32)).collect()
}

/// A number written as an extern attribute (`0x...` or decimal).
pub(super) fn attribute_number(v: &str) -> Option<u64> {
    match v.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => v.parse().ok(),
    }
}

pub(super) fn width_of(layout: &Layout, e: &CExpr) -> u32 {
    match e {
        CExpr::Field(f) => layout.fields[*f as usize].width,
        _ => 0,
    }
}

impl<'a> Cx<'a> {
    /// The context for `p` laid out as `layout`, a PSA program's extern
    /// counters and meters numbered after the program's arrays.
    pub(super) fn new(
        p: &'a Program,
        layout: &'a Layout,
        extern_counters: &'a [(String, u64)],
        extern_meters: &'a [(String, u64, bool)],
    ) -> Cx<'a> {
        Cx {
            p,
            layout,
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
        }
    }

    pub(super) fn ecx<'b>(&'b self, params: &'b [(u32, u32)], path: &'b str) -> ExprCx<'b> {
        ExprCx { layout: self.layout, params, path }
    }

    pub(super) fn dst(&self, e: &Expr, params: &[(u32, u32)], path: &str) -> Result<(Dst, u32), CompileError> {
        let cx = self.ecx(params, path);
        match cx.expr(e)? {
            CExpr::Field(f) => Ok((Dst::Field(f), self.layout.fields[f as usize].width)),
            CExpr::DynField(h, i) => Ok((Dst::Dyn(h, i), 128)),
            _ => Err(CompileError::at(path, "assignment target is not a field")),
        }
    }

    pub(super) fn root(
        &self,
        e: &Expr,
        params: &[(u32, u32)],
        path: &str,
        dst_width: u32,
    ) -> Result<Root, CompileError> {
        let c = self.ecx(params, path).expr(e)?;
        Ok(Root::new(c, self.layout, dst_width))
    }

    pub(super) fn named<T: Copy>(
        &self,
        map: &HashMap<&str, T>,
        e: &Expr,
        kind: &str,
        path: &str,
    ) -> Result<T, CompileError> {
        match e {
            Expr::Object { name, .. } => map
                .get(name.as_str())
                .copied()
                .ok_or_else(|| CompileError::at(path, format!("unknown {kind} \"{name}\""))),
            _ => Err(CompileError::at(path, format!("expected a {kind}"))),
        }
    }

    pub(super) fn stack_of(&self, e: &Expr, path: &str) -> Result<u32, CompileError> {
        match e {
            Expr::HeaderStack(s) => {
                self.layout.stack(s).ok_or_else(|| CompileError::at(path, format!("unknown header stack \"{s}\"")))
            }
            _ => Err(CompileError::at(path, "expected a header stack")),
        }
    }

    pub(super) fn const_u64(&self, e: &Expr, path: &str) -> Result<u64, CompileError> {
        match e {
            Expr::Hex { negative: false, magnitude } => Ok(crate::value::be_to_u128(magnitude) as u64),
            _ => Err(CompileError::at(path, "expected a constant")),
        }
    }

    pub(super) fn field_list_id(&self, e: Option<&Expr>, path: &str) -> Result<Option<u32>, CompileError> {
        match e {
            None => Ok(None),
            Some(e) => {
                let id = self.const_u64(e, path)?;
                Ok(if id == 0 { None } else { Some(id as u32) })
            }
        }
    }
}
