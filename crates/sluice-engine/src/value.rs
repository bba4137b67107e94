//! Integer arithmetic with bmv2's semantics.
//!
//! bmv2 evaluates expressions on arbitrary-precision signed integers and
//! truncates only when a value is stored into a field. Sluice reproduces that
//! with two fixed-size representations chosen per expression at load time
//! (see `expr::Bounds`): `i128` when every intermediate value provably fits,
//! and a 512-bit signed integer otherwise. Neither allocates.

use bnum::types::{I512, U512};

/// Operations the expression evaluator needs from an integer representation.
pub trait Num: Copy + PartialEq + PartialOrd + std::fmt::Debug {
    /// Zero.
    const ZERO: Self;
    /// One.
    const ONE: Self;
    /// Number of bits of the representation.
    const BITS: u32;
    /// From an unsigned 128-bit pattern (non-negative value).
    fn from_u128(v: u128) -> Self;
    /// From a signed 64-bit value.
    fn from_i64(v: i64) -> Self;
    /// From big-endian bytes, read as a non-negative value.
    fn from_be(bytes: &[u8]) -> Self;
    /// Low 128 bits of the two's complement pattern.
    fn low_u128(self) -> u128;
    /// Writes the low `out.len() * 8` bits, big-endian.
    fn write_be(self, out: &mut [u8]);
    fn add(self, o: Self) -> Self;
    fn sub(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
    /// Truncating division; `None` on division by zero.
    fn div(self, o: Self) -> Option<Self>;
    /// Remainder; `None` on division by zero.
    fn rem(self, o: Self) -> Option<Self>;
    fn and(self, o: Self) -> Self;
    fn or(self, o: Self) -> Self;
    fn xor(self, o: Self) -> Self;
    fn not(self) -> Self;
    fn neg(self) -> Self;
    /// Shift left; amounts of `BITS` or more give 0.
    fn shl(self, n: u64) -> Self;
    /// Arithmetic shift right; amounts of `BITS` or more give 0 or -1.
    fn shr(self, n: u64) -> Self;
    /// True for negative values.
    fn is_neg(self) -> bool;
    /// The value as a shift amount / index (saturating at u64::MAX, negatives give 0).
    fn as_u64_sat(self) -> u64;

    /// Keeps the low `w` bits (non-negative result).
    fn mask(self, w: u32) -> Self {
        if w >= Self::BITS {
            return self;
        }
        self.and(Self::ONE.shl(w as u64).sub(Self::ONE))
    }

    /// Interprets the low `w` bits as a two's complement `int<w>`.
    fn sext(self, w: u32) -> Self {
        if w == 0 || w >= Self::BITS {
            return self;
        }
        let m = self.mask(w);
        if m.shr((w - 1) as u64).and(Self::ONE) == Self::ONE {
            m.sub(Self::ONE.shl(w as u64))
        } else {
            m
        }
    }
}

impl Num for i128 {
    const ZERO: Self = 0;
    const ONE: Self = 1;
    const BITS: u32 = 128;
    #[inline]
    fn from_u128(v: u128) -> Self {
        v as i128
    }
    #[inline]
    fn from_i64(v: i64) -> Self {
        v as i128
    }
    #[inline]
    fn from_be(bytes: &[u8]) -> Self {
        let mut v: u128 = 0;
        for b in bytes {
            v = (v << 8) | *b as u128;
        }
        v as i128
    }
    #[inline]
    fn low_u128(self) -> u128 {
        self as u128
    }
    fn write_be(self, out: &mut [u8]) {
        let mut v = self as u128;
        for b in out.iter_mut().rev() {
            *b = v as u8;
            v = if v == 0 && self >= 0 { 0 } else { ((v as i128) >> 8) as u128 };
        }
    }
    #[inline]
    fn add(self, o: Self) -> Self {
        self.wrapping_add(o)
    }
    #[inline]
    fn sub(self, o: Self) -> Self {
        self.wrapping_sub(o)
    }
    #[inline]
    fn mul(self, o: Self) -> Self {
        self.wrapping_mul(o)
    }
    fn div(self, o: Self) -> Option<Self> {
        self.checked_div(o)
    }
    fn rem(self, o: Self) -> Option<Self> {
        self.checked_rem(o)
    }
    #[inline]
    fn and(self, o: Self) -> Self {
        self & o
    }
    #[inline]
    fn or(self, o: Self) -> Self {
        self | o
    }
    #[inline]
    fn xor(self, o: Self) -> Self {
        self ^ o
    }
    #[inline]
    fn not(self) -> Self {
        !self
    }
    #[inline]
    fn neg(self) -> Self {
        self.wrapping_neg()
    }
    #[inline]
    fn shl(self, n: u64) -> Self {
        if n >= 128 {
            0
        } else {
            self << n
        }
    }
    #[inline]
    fn shr(self, n: u64) -> Self {
        if n >= 128 {
            if self < 0 {
                -1
            } else {
                0
            }
        } else {
            self >> n
        }
    }
    #[inline]
    fn is_neg(self) -> bool {
        self < 0
    }
    #[inline]
    fn as_u64_sat(self) -> u64 {
        if self < 0 {
            0
        } else if self > u64::MAX as i128 {
            u64::MAX
        } else {
            self as u64
        }
    }
}

/// The wide representation: 512-bit two's complement.
pub type Wide = I512;

impl Num for I512 {
    const ZERO: Self = I512::ZERO;
    const ONE: Self = I512::ONE;
    const BITS: u32 = 512;
    fn from_u128(v: u128) -> Self {
        I512::from(v)
    }
    fn from_i64(v: i64) -> Self {
        I512::from(v)
    }
    fn from_be(bytes: &[u8]) -> Self {
        let b = if bytes.len() > 64 { &bytes[bytes.len() - 64..] } else { bytes };
        if b.is_empty() {
            return I512::ZERO;
        }
        U512::from_be_slice(b).map(|u| u.cast_signed()).unwrap_or(I512::ZERO)
    }
    fn low_u128(self) -> u128 {
        let d = self.to_bits();
        let d = d.digits();
        (d[0] as u128) | ((d[1] as u128) << 64)
    }
    fn write_be(self, out: &mut [u8]) {
        let b = wide_be_bytes(self);
        let n = out.len();
        let fill = if self.is_negative() { 0xff } else { 0 };
        for (i, o) in out.iter_mut().enumerate() {
            // position from the end
            let from_end = n - i;
            *o = if from_end <= 64 { b[64 - from_end] } else { fill };
        }
    }
    fn add(self, o: Self) -> Self {
        self.wrapping_add(o)
    }
    fn sub(self, o: Self) -> Self {
        self.wrapping_sub(o)
    }
    fn mul(self, o: Self) -> Self {
        self.wrapping_mul(o)
    }
    fn div(self, o: Self) -> Option<Self> {
        self.checked_div(o)
    }
    fn rem(self, o: Self) -> Option<Self> {
        self.checked_rem(o)
    }
    fn and(self, o: Self) -> Self {
        self & o
    }
    fn or(self, o: Self) -> Self {
        self | o
    }
    fn xor(self, o: Self) -> Self {
        self ^ o
    }
    fn not(self) -> Self {
        !self
    }
    fn neg(self) -> Self {
        self.wrapping_neg()
    }
    fn shl(self, n: u64) -> Self {
        if n >= 512 {
            I512::ZERO
        } else {
            self.wrapping_shl(n as u32)
        }
    }
    fn shr(self, n: u64) -> Self {
        if n >= 512 {
            if self.is_negative() {
                I512::NEG_ONE
            } else {
                I512::ZERO
            }
        } else {
            self.wrapping_shr(n as u32)
        }
    }
    fn is_neg(self) -> bool {
        self.is_negative()
    }
    fn as_u64_sat(self) -> u64 {
        if self.is_negative() {
            0
        } else if self > I512::from(u64::MAX) {
            u64::MAX
        } else {
            self.low_u128() as u64
        }
    }
}

fn wide_be_bytes(v: I512) -> [u8; 64] {
    let bits = v.to_bits();
    let d = bits.digits();
    let mut out = [0u8; 64];
    for (i, digit) in d.iter().enumerate() {
        out[64 - 8 * (i + 1)..64 - 8 * i].copy_from_slice(&digit.to_be_bytes());
    }
    out
}

/// Reads a big-endian byte string as a u128 (low 128 bits).
#[inline]
pub fn be_to_u128(bytes: &[u8]) -> u128 {
    let mut v: u128 = 0;
    for b in bytes {
        v = (v << 8) | *b as u128;
    }
    v
}

/// Writes the low `out.len()*8` bits of `v`, big-endian.
#[inline]
pub fn u128_to_be(mut v: u128, out: &mut [u8]) {
    for b in out.iter_mut().rev() {
        *b = v as u8;
        v >>= 8;
    }
}

/// Mask of the low `w` bits of a u128.
#[inline]
pub fn mask128(w: u32) -> u128 {
    if w >= 128 {
        u128::MAX
    } else {
        (1u128 << w) - 1
    }
}

/// Number of bytes needed for `bits` bits.
#[inline]
pub fn nbytes(bits: u32) -> usize {
    bits.div_ceil(8) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sign_extension_and_masks() {
        assert_eq!(<i128 as Num>::sext(0xff, 8), -1);
        assert_eq!(<i128 as Num>::sext(0x7f, 8), 127);
        assert_eq!(<i128 as Num>::mask(-1, 4), 15);
        assert_eq!(I512::from(-1i64).mask(4), I512::from(15));
        assert_eq!(I512::from(0xffu32).sext(8), I512::from(-1));
    }

    #[test]
    fn wide_round_trip() {
        let bytes: Vec<u8> = (1..=42).collect();
        let w = <I512 as Num>::from_be(&bytes);
        let mut out = vec![0u8; 42];
        w.write_be(&mut out);
        assert_eq!(out, bytes);
        let mut short = [0u8; 2];
        w.write_be(&mut short);
        assert_eq!(short, [41, 42]);
        let mut neg = [0u8; 70];
        I512::from(-2).write_be(&mut neg);
        assert!(neg[..69].iter().all(|b| *b == 0xff) && neg[69] == 0xfe);
    }

    #[test]
    fn shifts_past_the_width() {
        assert_eq!(<i128 as Num>::shl(1, 200), 0);
        assert_eq!(<i128 as Num>::shr(-5, 300), -1);
        assert_eq!(Num::shl(I512::ONE, 600), I512::ZERO);
        assert_eq!(Num::shr(Num::shl(I512::ONE, 300), 299), I512::from(2));
    }
}
