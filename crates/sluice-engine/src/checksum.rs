//! Checksums of the v1model `verify_checksum` / `update_checksum` controls:
//! whether one applies to a packet, and the specialized form most programs'
//! IPv4 checksums take (a csum16 over byte ranges of one header), shared by
//! the interpreter's parser and deparser and the code generator.

use crate::expr::Env;
use crate::phv::Phv;
use crate::plan::Plan;

/// A checksum the specializer reduced to byte ranges of one wire-format
/// header: csum16 over `ranges` of the wire area into a 16-bit field of the
/// same header, under a shortcut condition. Why: the generic path evaluates
/// the condition through the expression walker, dispatches on the algorithm
/// and reads the target through the layout, for what is a 20-byte sum.
#[derive(Debug, Clone)]
pub(crate) struct ByteChecksum {
    pub(crate) header: u32,
    pub(crate) ranges: Vec<(u32, u32)>,
    pub(crate) target: crate::phv::FieldSrc,
    pub(crate) cond: Option<crate::expr::Fast>,
}

impl ByteChecksum {
    /// Whether `other` sums the same bytes of the same header (a
    /// verification and an update of one checksum, for instance).
    pub(crate) fn same_words(&self, other: &ByteChecksum) -> bool {
        self.header == other.header && self.ranges == other.ranges
    }

    /// The specialized form of `c`, when it has one.
    pub(crate) fn of(plan: &Plan, c: &crate::plan::ChecksumPlan) -> Option<ByteChecksum> {
        let calc = &plan.calcs[c.calc as usize];
        let (h, ranges) = calc.csum_bytes.as_ref()?;
        let tf = &plan.layout.fields[c.target as usize];
        if !calc.is_csum16 || calc.with_payload || tf.header != *h || tf.width != 16 {
            return None;
        }
        let target = crate::phv::FieldSrc::of(tf)?;
        let cond = match &c.cond {
            None => None,
            Some(e) if matches!(e.fast, crate::expr::Fast::None) => return None,
            Some(e) => Some(e.fast.clone()),
        };
        Some(ByteChecksum { header: *h, ranges: ranges.clone(), target, cond })
    }

    /// Whether the checksum is computed for this packet: its header is valid and the condition holds.
    #[inline]
    pub(crate) fn applies(&self, phv: &Phv) -> bool {
        phv.valid()[self.header as usize]
            && self.cond.as_ref().is_none_or(|f| crate::expr::fast_value(f, phv, &[]) != 0)
    }
}

/// Whether a checksum's `if_cond` (if any) holds for this packet.
pub(crate) fn checksum_applies(plan: &Plan, c: &crate::plan::ChecksumPlan, phv: &Phv) -> bool {
    c.cond.as_ref().is_none_or(|cond| {
        if !matches!(cond.fast, crate::expr::Fast::None) {
            crate::expr::fast_value(&cond.fast, phv, &[]) != 0
        } else {
            cond.eval_bool(&Env { layout: &plan.layout, phv, params: &[], packet: &[], cursor_bits: 0 })
        }
    })
}

/// Verifies the program's checksums for a parsed packet (`payload`: the
/// bytes after the parsed headers, for calculations over the payload);
/// returns whether one of them failed.
pub(crate) fn verify_all(
    plan: &Plan,
    state: &crate::state::State,
    specialized: &[Option<ByteChecksum>],
    phv: &Phv,
    hash_buf: &mut sluice_hash::BitPacker,
    payload: &[u8],
) -> bool {
    let mut bad = false;
    for (c, fast) in plan.checksums.iter().zip(specialized) {
        if !c.verify {
            continue;
        }
        if let Some(f) = fast {
            if f.applies(phv) && u64::from(sluice_hash::csum16_ranges(phv.wire(), &f.ranges)) != f.target.read(phv) {
                bad = true;
            }
            continue;
        }
        let tf = &plan.layout.fields[c.target as usize];
        if !phv.valid()[tf.header as usize] || !checksum_applies(plan, c, phv) {
            continue;
        }
        let v = crate::control::compute_calc(plan, state, phv, hash_buf, c.calc as usize, payload);
        if v as u128 != plan.layout.read(phv, c.target) {
            bad = true;
        }
    }
    bad
}

/// Computes the program's updated checksums into their fields, before the
/// deparser writes the headers (`payload`: the bytes after the headers).
pub(crate) fn update_all(
    plan: &Plan,
    state: &crate::state::State,
    specialized: &[Option<ByteChecksum>],
    phv: &mut Phv,
    hash_buf: &mut sluice_hash::BitPacker,
    payload: &[u8],
) {
    for (c, fast) in plan.checksums.iter().zip(specialized) {
        if !c.update {
            continue;
        }
        if let Some(f) = fast {
            if f.applies(phv) {
                let v = sluice_hash::csum16_ranges(phv.wire(), &f.ranges);
                f.target.write(phv, u64::from(v), 0xffff);
            }
            continue;
        }
        if !checksum_applies(plan, c, phv) {
            continue;
        }
        let v = crate::control::compute_calc(plan, state, phv, hash_buf, c.calc as usize, payload);
        plan.layout.write(phv, c.target, v as u128);
    }
}
