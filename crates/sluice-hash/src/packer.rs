//! Building the byte buffer a calculation hashes, the way bmv2's
//! `BufBuilder` does (see the crate documentation for the rules).

/// Packs calculation inputs (fields, constants, whole headers, payload) into
/// the byte buffer that bmv2 feeds to the hash function.
///
/// Fields are concatenated MSB-first with no padding between them; the
/// buffer is `ceil(total_bits / 8)` bytes long and the unused low bits of
/// its last byte are zero. The payload, if any, starts at the next byte
/// boundary. The packer can be reused with [`BitPacker::clear`] to avoid
/// reallocating per packet.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BitPacker {
    buf: Vec<u8>,
    nbits: usize,
}

impl BitPacker {
    /// An empty packer.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty packer with room for `bytes` bytes, for hot paths.
    pub fn with_capacity(bytes: usize) -> Self {
        BitPacker { buf: Vec::with_capacity(bytes), nbits: 0 }
    }

    /// Empties the packer, keeping its allocation.
    pub fn clear(&mut self) {
        self.buf.clear();
        self.nbits = 0;
    }

    /// Number of bits pushed so far (the payload counts as whole bytes).
    pub fn bit_len(&self) -> usize {
        self.nbits
    }

    /// Appends the low `width` bits of `value`, a big-endian byte string.
    ///
    /// `value` may be shorter than `ceil(width / 8)` bytes (it is
    /// zero-extended) or longer (its high bits are dropped), so a field's
    /// storage bytes or a `u64::to_be_bytes()` both work. A zero width adds
    /// nothing. The engine must not call this for fields of invalid headers:
    /// bmv2 skips those entirely (they contribute no bits at all).
    pub fn push_field(&mut self, value: &[u8], width: usize) {
        if width == 0 {
            return;
        }
        let nbytes = width.div_ceil(8);
        let lead = nbytes * 8 - width;
        let off = self.nbits % 8;
        let start = self.nbits / 8;
        self.nbits += width;
        self.buf.resize(self.nbits.div_ceil(8), 0);

        // Byte i of the right-aligned, zero-extended `nbytes`-byte value.
        let missing = nbytes.saturating_sub(value.len());
        let skip = value.len().saturating_sub(nbytes);
        let src = |i: usize| -> u8 {
            if i < missing {
                0
            } else {
                value[skip + i - missing]
            }
        };

        if lead == 0 && off == 0 {
            for i in 0..nbytes {
                self.buf[start + i] = src(i);
            }
            return;
        }
        for i in 0..nbytes {
            // Byte i of the value left-aligned (field MSB at bit 7 of byte 0).
            let hi = if i == 0 { src(0) & (0xff >> lead) } else { src(i) };
            let mut aligned = hi << lead;
            if lead > 0 && i + 1 < nbytes {
                aligned |= src(i + 1) >> (8 - lead);
            }
            self.buf[start + i] |= aligned >> off;
            if off > 0 {
                let spill = aligned << (8 - off);
                if let Some(b) = self.buf.get_mut(start + i + 1) {
                    *b |= spill;
                }
            }
        }
    }

    /// Appends the low `width` bits of `value` (`width` ≤ 64).
    pub fn push_u64(&mut self, value: u64, width: usize) {
        assert!(width <= 64, "push_u64 width {width} > 64");
        if width == 0 {
            return;
        }
        // Fast path for the hot case (checksums over header fields): place
        // the bits in a 128-bit window that starts at the current byte.
        let v = if width == 64 { value } else { value & ((1u64 << width) - 1) };
        let off = self.nbits % 8;
        let start = self.nbits / 8;
        let nb = (off + width).div_ceil(8);
        self.buf.resize(start + nb, 0);
        let mut w: u128 = ((self.buf[start] & !(0xffu8 >> off)) as u128) << 120;
        w |= (v as u128) << (128 - off - width);
        let bytes = w.to_be_bytes();
        self.buf[start..start + nb].copy_from_slice(&bytes[..nb]);
        self.nbits += width;
    }

    /// Appends raw bytes as `8 * bytes.len()` bits, e.g. a whole deparsed
    /// header (a JSON `"header"` input). bmv2 requires (asserts) that such
    /// a header start on a byte boundary; this method packs bit-exactly
    /// wherever it starts.
    pub fn push_bytes(&mut self, bytes: &[u8]) {
        if self.nbits & 7 == 0 {
            self.buf.extend_from_slice(bytes);
            self.nbits += bytes.len() * 8;
        } else {
            self.push_field(bytes, bytes.len() * 8);
        }
    }

    /// Appends the packet payload at the next byte boundary (the padding
    /// bits of a partial last byte stay zero).
    ///
    /// bmv2 appends the payload after *all* other inputs, wherever
    /// `"payload"` appears in the calculation's input list, so call this
    /// last.
    pub fn append_payload(&mut self, payload: &[u8]) {
        self.buf.extend_from_slice(payload);
        self.nbits = self.buf.len() * 8;
    }

    /// The packed bytes so far, trailing padding bits zero.
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf
    }

    /// Consumes the packer and returns the packed bytes.
    pub fn into_bytes(self) -> Vec<u8> {
        self.buf
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_u64_matches_push_field_at_every_offset() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for lead in 0..8 {
            for width in 1..=64 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let mut a = BitPacker::new();
                let mut b = BitPacker::new();
                a.push_field(&[0xff], lead);
                b.push_field(&[0xff], lead);
                a.push_u64(x, width);
                b.push_field(&x.to_be_bytes(), width);
                a.push_u64(x >> 3, 5);
                b.push_field(&(x >> 3).to_be_bytes(), 5);
                assert_eq!(a.as_bytes(), b.as_bytes(), "lead {lead} width {width}");
                assert_eq!(a.bit_len(), b.bit_len());
            }
        }
    }

    /// Bit-by-bit reference: pushes each of the `width` low bits MSB-first.
    fn reference(fields: &[(Vec<u8>, usize)]) -> Vec<u8> {
        let mut bits = Vec::new();
        for (value, width) in fields {
            for k in (0..*width).rev() {
                let byte_from_end = k / 8;
                let bit = if byte_from_end < value.len() {
                    (value[value.len() - 1 - byte_from_end] >> (k % 8)) & 1
                } else {
                    0
                };
                bits.push(bit);
            }
        }
        let mut out = vec![0u8; bits.len().div_ceil(8)];
        for (i, b) in bits.iter().enumerate() {
            out[i / 8] |= b << (7 - i % 8);
        }
        out
    }

    fn lcg(state: &mut u64) -> u64 {
        *state = state.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        *state >> 11
    }

    #[test]
    fn four_twelve_nine_bits() {
        // 4-bit 0xA, 12-bit 0xBCD, 9-bit 0x1FF = 25 bits:
        // 1010 1011 1100 1101 1111 1111 1 + 7 zero padding bits.
        let mut p = BitPacker::new();
        p.push_u64(0xa, 4);
        p.push_u64(0xbcd, 12);
        p.push_u64(0x1ff, 9);
        assert_eq!(p.bit_len(), 25);
        assert_eq!(p.as_bytes(), &[0xab, 0xcd, 0xff, 0x80]);
    }

    #[test]
    fn padding_goes_at_the_end() {
        let mut p = BitPacker::new();
        p.push_u64(0x5, 3); // 101
        assert_eq!(p.as_bytes(), &[0b1010_0000]);
        p.push_u64(0x1, 1); // 1011
        assert_eq!(p.as_bytes(), &[0b1011_0000]);
        p.push_u64(0x3, 9); // 1011 0000 0001 1
        assert_eq!(p.as_bytes(), &[0b1011_0000, 0b0001_1000]);
    }

    #[test]
    fn high_bits_beyond_width_are_ignored() {
        let mut p = BitPacker::new();
        p.push_field(&[0xff, 0xff], 4);
        p.push_field(&[0xff, 0x00], 4);
        assert_eq!(p.as_bytes(), &[0xf0]);
        p.push_u64(u64::MAX, 3);
        assert_eq!(p.as_bytes(), &[0xf0, 0xe0]);
    }

    #[test]
    fn short_values_are_zero_extended() {
        let mut p = BitPacker::new();
        p.push_u64(1, 1);
        p.push_field(&[0x01], 16);
        assert_eq!(p.as_bytes(), &[0x80, 0x00, 0x80]);
        assert_eq!(p.bit_len(), 17);
    }

    #[test]
    fn payload_starts_on_byte_boundary() {
        let mut p = BitPacker::new();
        p.push_u64(0x7, 3);
        p.append_payload(&[0xde, 0xad]);
        assert_eq!(p.as_bytes(), &[0xe0, 0xde, 0xad]);
        assert_eq!(p.bit_len(), 24);
        p.clear();
        assert!(p.as_bytes().is_empty());
        p.append_payload(&[1, 2]);
        assert_eq!(p.into_bytes(), vec![1, 2]);
    }

    #[test]
    fn whole_header_bytes() {
        let mut p = BitPacker::with_capacity(8);
        p.push_bytes(&[0x45, 0x00]);
        p.push_u64(0, 0);
        p.push_bytes(&[0x12]);
        assert_eq!(p.as_bytes(), &[0x45, 0x00, 0x12]);
        // Unaligned bytes are still packed bit-exactly.
        let mut q = BitPacker::new();
        q.push_u64(1, 4);
        q.push_bytes(&[0xab, 0xcd]);
        assert_eq!(q.as_bytes(), &[0x1a, 0xbc, 0xd0]);
    }

    #[test]
    fn random_field_lists_match_bitwise_reference() {
        let mut s = 4242u64;
        for _ in 0..2000 {
            let n = 1 + (lcg(&mut s) % 8) as usize;
            let mut fields = Vec::new();
            let mut p = BitPacker::new();
            for _ in 0..n {
                let width = (lcg(&mut s) % 80) as usize;
                // Value lengths shorter, equal to and longer than needed.
                let len = (width.div_ceil(8) as i64 + (lcg(&mut s) % 5) as i64 - 2).max(0);
                let value: Vec<u8> = (0..len).map(|_| lcg(&mut s) as u8).collect();
                p.push_field(&value, width);
                fields.push((value, width));
            }
            assert_eq!(p.as_bytes(), reference(&fields).as_slice(), "{fields:?}");
            assert_eq!(p.bit_len(), fields.iter().map(|f| f.1).sum::<usize>());
        }
    }
}
