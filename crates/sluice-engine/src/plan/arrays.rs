//! Arrays: counters, meters and registers, and the extern instances.
//!
//! Reads from the JSON model: `counter_arrays`, `meter_arrays`,
//! `register_arrays` and `extern_instances` (a PSA program's `Counter`s and
//! indirect `Meter`s become arrays; `Hash`, `Random` and
//! `InternetChecksum` instances are checked here).
//! Produces in the plan: `counters`, `meters`, `registers` (the program's
//! arrays, then the extern ones).
//! Errors: an unsupported extern type or `Hash` algorithm, a missing or
//! too large size, bad `Random` bounds or `Meter` type, more than
//! `MAX_CHECKSUMS` `InternetChecksum` instances, an array larger than
//! `MAX_ARRAY_SIZE`, a register width outside 1..=128.

use sluice_json::Program;

use super::checksums::MAX_CHECKSUMS;
use super::cx::{attribute_number, extern_attribute};
use crate::CompileError;

/// Counter, meter and register arrays.
#[derive(Debug, Clone)]
pub struct ArrayPlan {
    pub name: String,
    pub size: usize,
    pub is_direct: bool,
    pub binding: Option<String>,
    /// Registers: bit width. Meters: 1 for packet meters, 0 for byte meters.
    pub width: u32,
}

/// Largest counter/meter/register array Sluice allocates (cells).
pub const MAX_ARRAY_SIZE: u64 = 1 << 24;

/// A PSA program's `Meter`s and `Counter`s as arrays, numbered after the
/// program's meter and counter arrays.
#[derive(Default)]
pub(super) struct ExternArrays {
    /// `(name, size, counts packets)`.
    pub(super) meters: Vec<(String, u64, bool)>,
    /// `(name, size)`.
    pub(super) counters: Vec<(String, u64)>,
}

/// The program's extern instances checked (those Sluice runs: `Hash`,
/// `InternetChecksum`, `Counter`, `Random` and indirect `Meter`), and its
/// meters and counters as arrays.
pub(super) fn extern_arrays(p: &Program) -> Result<ExternArrays, CompileError> {
    let (mut arrays, mut csums) = (ExternArrays::default(), 0);
    for e in &p.extern_instances {
        match e.kind.as_str() {
            "Hash" => {
                let algo = extern_attribute(e, "algo").unwrap_or("");
                if sluice_hash::Algorithm::from_name(algo).is_none() {
                    return Err(CompileError::at(&e.path, format!("Hash algorithm \"{algo}\" is not supported")));
                }
            }
            "Counter" => {
                let size = extern_size(e, "n_counters", "Counter")?;
                // p4c-bm2-psa may declare it in `counter_arrays` too: one array.
                if !p.counter_arrays.iter().any(|c| c.name == e.name) {
                    arrays.counters.push((e.name.clone(), size));
                }
            }
            "Random" => {
                let bound = |a: &str| extern_attribute(e, a).and_then(attribute_number);
                match (bound("min"), bound("max")) {
                    (Some(lo), Some(hi)) if lo <= hi => {}
                    (lo, hi) => {
                        return Err(CompileError::at(
                            &e.path,
                            format!("a Random needs numeric \"min\" <= \"max\" attributes (min {lo:?}, max {hi:?})"),
                        ))
                    }
                }
            }
            "InternetChecksum" => {
                csums += 1;
                if csums > MAX_CHECKSUMS {
                    return Err(CompileError::at(
                        &e.path,
                        format!("more than {} InternetChecksum instances", MAX_CHECKSUMS),
                    ));
                }
            }
            "Meter" if extern_attribute(e, "is_direct").and_then(attribute_number).unwrap_or(0) == 0 => {
                let size = extern_size(e, "n_meters", "Meter")?;
                let packets = match extern_attribute(e, "type") {
                    Some("packets") => true,
                    Some("bytes") => false,
                    other => {
                        return Err(CompileError::at(
                            &e.path,
                            format!("a Meter's \"type\" must be packets or bytes, not {other:?}"),
                        ))
                    }
                };
                if !p.meter_arrays.iter().any(|m| m.name == e.name) {
                    arrays.meters.push((e.name.clone(), size, packets));
                }
            }
            // Declarations only: p4c-bm2-psa binds a direct counter or meter
            // to its table through the `counter_arrays`/`meter_arrays` entry
            // (`is_direct`, `binding`), which is what Sluice runs; one bound
            // to no table is never counted, as in bmv2.
            "DirectCounter" | "DirectMeter" => {}
            other => {
                return Err(CompileError::at(
                    &e.path,
                    format!("extern instances of type \"{other}\" are not supported yet"),
                ))
            }
        }
    }
    Ok(arrays)
}

/// The size attribute `attr` of extern `e` (a `kind` array), checked.
fn extern_size(e: &sluice_json::ExternInstance, attr: &str, kind: &str) -> Result<u64, CompileError> {
    let size = extern_attribute(e, attr)
        .and_then(attribute_number)
        .ok_or_else(|| CompileError::at(&e.path, format!("a {kind} needs a numeric \"{attr}\" attribute")))?;
    if size > MAX_ARRAY_SIZE {
        return Err(CompileError::at(
            &e.path,
            format!("{kind}: size {size} exceeds the supported maximum {MAX_ARRAY_SIZE}"),
        ));
    }
    Ok(size)
}

/// The compiled counter, meter and register arrays.
pub(super) struct Arrays {
    pub(super) counters: Vec<ArrayPlan>,
    pub(super) meters: Vec<ArrayPlan>,
    pub(super) registers: Vec<ArrayPlan>,
}

/// Checks the arrays' sizes and register widths, and lists the arrays:
/// the program's, then `externs`.
pub(super) fn compile_arrays(p: &Program, externs: &ExternArrays) -> Result<Arrays, CompileError> {
    let ExternArrays { meters: extern_meters, counters: extern_counters } = externs;
    for (what, arrs) in [
        ("counter_arrays", p.counter_arrays.iter().map(|c| (c.size, &c.path)).collect::<Vec<_>>()),
        ("meter_arrays", p.meter_arrays.iter().map(|c| (c.size, &c.path)).collect()),
        ("register_arrays", p.register_arrays.iter().map(|c| (c.size, &c.path)).collect()),
    ] {
        for (size, path) in arrs {
            if size > MAX_ARRAY_SIZE {
                return Err(CompileError::at(
                    path,
                    format!("{what}: size {size} exceeds the supported maximum {MAX_ARRAY_SIZE}"),
                ));
            }
        }
    }
    if let Some(r) = p.register_arrays.iter().find(|r| r.bitwidth > 128 || r.bitwidth == 0) {
        return Err(CompileError::at(&r.path, format!("register bitwidth {} is not supported (1..=128)", r.bitwidth)));
    }
    let arrays = |v: Vec<(String, u64, bool, Option<String>, u32)>| -> Vec<ArrayPlan> {
        v.into_iter()
            .map(|(name, size, is_direct, binding, width)| ArrayPlan {
                name,
                size: size as usize,
                is_direct,
                binding,
                width,
            })
            .collect()
    };
    let counters = arrays(
        p.counter_arrays
            .iter()
            .map(|c| (c.name.clone(), c.size, c.is_direct, c.binding.clone(), 0))
            .chain(extern_counters.iter().map(|(n, size)| (n.clone(), *size, false, None, 0)))
            .collect(),
    );
    let meters = arrays(
        p.meter_arrays
            .iter()
            .map(|c| (c.name.clone(), c.size, c.is_direct, c.binding.clone(), c.packets as u32))
            .chain(extern_meters.iter().map(|(n, size, packets)| (n.clone(), *size, false, None, *packets as u32)))
            .collect(),
    );
    let registers =
        arrays(p.register_arrays.iter().map(|c| (c.name.clone(), c.size, false, None, c.bitwidth)).collect());
    Ok(Arrays { counters, meters, registers })
}
