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

/// The Internet checksum of the concatenation of byte ranges of `bytes`.
///
/// One's complement sums do not depend on where the words start as long as
/// bytes keep their parity, so each range is summed on its own and a range
/// starting at an odd position of the concatenation counts byte-swapped
/// (RFC 1071, section 2).
pub fn csum16_ranges(bytes: &[u8], ranges: &[(u32, u32)]) -> u16 {
    let mut total: u64 = 0;
    let mut odd = false;
    for (a, b) in ranges {
        let r = &bytes[*a as usize..*b as usize];
        let mut sum = sum_words(r);
        if odd {
            sum = u64::from(fold16(sum).swap_bytes());
        }
        total = add_carry(total, sum);
        odd ^= r.len() % 2 == 1;
    }
    !fold16(total)
}

/// Adds with end-around carry: the sum stays the same modulo 2^64 - 1, and so
/// modulo 2^16 - 1.
#[inline(always)]
fn add_carry(a: u64, b: u64) -> u64 {
    let (t, carry) = a.overflowing_add(b);
    t + carry as u64
}

/// A value congruent, modulo 2^16 - 1, to the one's complement sum of the
/// big-endian 16-bit words of `r` (an odd last byte padded with zero). A
/// big-endian 64-bit word is congruent to the sum of its four 16-bit words.
#[inline(always)]
fn sum_words(r: &[u8]) -> u64 {
    let mut sum: u64 = 0;
    let mut i = 0;
    while let Some(w) = r.get(i..i + 8) {
        sum = add_carry(sum, u64::from_be_bytes(w.try_into().expect("8 bytes")));
        i += 8;
    }
    if let Some(w) = r.get(i..i + 4) {
        sum = add_carry(sum, u64::from(u32::from_be_bytes(w.try_into().expect("4 bytes"))));
        i += 4;
    }
    if let Some(w) = r.get(i..i + 2) {
        sum = add_carry(sum, u64::from(u16::from_be_bytes([w[0], w[1]])));
        i += 2;
    }
    if let Some(b) = r.get(i) {
        sum = add_carry(sum, u64::from(*b) << 8);
    }
    sum
}

/// Folds a sum into 16 bits with end-around carry.
///
/// Every step keeps the value modulo 2^16 - 1, which divides 2^32 - 1, so
/// the fold runs in a fixed number of steps.
#[inline]
fn fold16(x: u64) -> u16 {
    let mut y = (x & 0xffff_ffff) + (x >> 32);
    y = (y & 0xffff_ffff) + (y >> 32);
    let mut z = (y & 0xffff) + (y >> 16);
    z = (z & 0xffff) + (z >> 16);
    z = (z & 0xffff) + (z >> 16);
    z as u16
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
            if f.applies(phv) && u64::from(csum16_ranges(phv.wire(), &f.ranges)) != f.target.read(phv) {
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
                let v = csum16_ranges(phv.wire(), &f.ranges);
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

#[cfg(test)]
mod tests {
    use super::csum16_ranges;

    #[test]
    fn csum16_ranges_equals_the_checksum_of_the_concatenation() {
        let bytes: Vec<u8> = (0..64u32).map(|i| (i * 37 + 11) as u8).collect();
        let cases: &[&[(u32, u32)]] =
            &[&[(0, 20)], &[(0, 10), (12, 20)], &[(1, 4), (7, 8), (9, 30)], &[(3, 3)], &[(5, 6), (6, 23), (40, 63)]];
        for ranges in cases {
            let cat: Vec<u8> =
                ranges.iter().flat_map(|(a, b)| bytes[*a as usize..*b as usize].iter().copied()).collect();
            assert_eq!(csum16_ranges(&bytes, ranges), sluice_hash::csum16(&cat), "{ranges:?}");
        }
        assert_eq!(csum16_ranges(&[0u8; 4], &[(0, 4)]), 0xffff);
        assert_eq!(csum16_ranges(&[0xff; 4], &[(0, 4)]), 0);
        assert_eq!(csum16_ranges(&[0xff; 64], &[(0, 64)]), 0);
        assert_eq!(super::fold16(u64::MAX), 0xffff);
        assert_eq!(super::fold16(0x1_0000), 1);
    }
}
