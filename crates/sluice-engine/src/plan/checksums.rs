//! Checksums and calculations.
//!
//! Reads from the JSON model: `calculations` (algorithm and inputs), the
//! inputs of PSA `Hash` calls (gathered while the actions compile), and
//! `checksums` (target field, calculation, condition, verify/update).
//! Produces in the plan: `calcs` (the program's, then those of `Hash`
//! calls), each with its packed input and, when its inputs are bytes of
//! one wire-format header, their byte ranges; `checksums`. Also the limit
//! on a PSA program's `InternetChecksum` instances (`MAX_CHECKSUMS`).
//! Errors: an unsupported algorithm, checksum type or input, a negative or
//! too wide constant input, an unknown header, target field or
//! calculation.

use sluice_json::Expr;

use super::cx::{width_of, Cx};
use crate::expr::{CExpr, Root};
use crate::phv::Layout;
use crate::value::nbytes;
use crate::CompileError;

/// `InternetChecksum` instances a PSA program may have.
pub const MAX_CHECKSUMS: usize = 8;

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

/// Compiles the calculations: the program's, then those of PSA `Hash` calls.
pub(super) fn compile_calcs(cx: &Cx) -> Result<Vec<CalcPlan>, CompileError> {
    let p = cx.p;
    let mut calcs = Vec::new();
    for c in &p.calculations {
        calcs.push(compile_calc(cx, &c.name, &c.algo, &c.input, &c.path, false)?);
    }
    for (name, algo, input, path) in cx.extern_calcs.take() {
        calcs.push(compile_calc(cx, &name, &algo, &input, &path, true)?);
    }
    Ok(calcs)
}

/// Compiles the checksums to verify and update.
pub(super) fn compile_checksums(cx: &Cx) -> Result<Vec<ChecksumPlan>, CompileError> {
    let (p, layout) = (cx.p, cx.layout);
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
    Ok(checksums)
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
