//! Checksums over wire bytes (`ByteChecksum`) as generated code: whether
//! one applies, the one's complement sum of its words (whole, or split
//! into the part the end of parsing stashes and the rest, see `SumStash`),
//! and the 16-bit byte swaps the stored forms need.

use cranelift_codegen::ir::{types, InstBuilder, Value};

use super::{band_u, mem, wire_bits, Gen, Mem};
use crate::jit::abi::{OFF_VALID, OFF_WIRE};
use crate::jit::shape::csum_words;
use crate::phv::FieldSrc;

impl Gen<'_, '_, '_> {
    /// 1 when a specialized checksum applies to this packet (its header is
    /// valid and its condition holds), else 0.
    pub(in crate::jit) fn checksum_applies(&mut self, bc: &crate::checksum::ByteChecksum) -> Value {
        let valid = self.ptr(OFF_VALID);
        let mf = mem(self.b, Mem::Valid);
        let mut cond = self.b.ins().uload8(types::I64, mf, valid, bc.header as i32);
        if let Some(f) = &bc.cond {
            let c = self.fast_bool(f);
            cond = self.b.ins().band(cond, c);
        }
        cond
    }

    /// The csum16 of a specialized checksum's byte ranges, as
    /// `sluice_hash::csum16_ranges` computes it, byte-swapped: the words are
    /// summed as little-endian loads (the one's complement sum does not
    /// depend on byte order), so the result's little-endian 16-bit form is
    /// the checksum's big-endian bytes. Why swapped: the parser compares it
    /// with the field's bytes loaded the same way, and the forwarding
    /// function stores it so, neither with a byte swap.
    pub(in crate::jit) fn csum16_swapped(&mut self, bc: &crate::checksum::ByteChecksum) -> Value {
        let words = csum_words(bc);
        let sum = self.csum16_raw(&words);
        self.csum16_fold(sum)
    }

    /// The 64-bit sum of `pairs` (wire byte offsets of 16-bit words, high
    /// byte first; a last word of one byte is padded with zero), summed as
    /// little-endian loads: not yet folded to 16 bits, so that partial sums
    /// add up (see [`SumStash`]).
    ///
    /// [`SumStash`]: crate::jit::shape::SumStash
    pub(in crate::jit) fn csum16_raw(&mut self, pairs: &[Vec<u32>]) -> Value {
        let wire = self.ptr(OFF_WIRE);
        // Two adjacent words in contiguous bytes load as one 32-bit value:
        // 2^16 is 1 modulo 0xffff, so summing 32-bit pieces and folding
        // gives the same sum as summing the 16-bit words.
        let mut terms = Vec::with_capacity(pairs.len());
        let mut i = 0;
        while i < pairs.len() {
            let p = &pairs[i];
            let contiguous = |q: &[u32]| q.len() == 2 && q[1] == q[0] + 1;
            // Four adjacent words inside one piece of the wire grid (a
            // load across two of the parser's stores is not forwarded from
            // them, and stalls) load as one 64-bit value, summed as its two
            // 32-bit halves: one load (loads bound this code) for two
            // register operations.
            if (0..4).all(|k| pairs.get(i + k).is_some_and(|q| contiguous(q) && q[0] == p[0] + 2 * k as u32))
                && self.whole_in_piece(8 * p[0], 64).is_some()
            {
                let mf = mem(self.b, Mem::Wire);
                let v = self.b.ins().load(types::I64, mf, wire, p[0] as i32);
                terms.push(band_u(self.b, v, 0xffff_ffff));
                terms.push(self.b.ins().ushr_imm_u(v, 32));
                i += 4;
                continue;
            }
            if contiguous(p) && i + 1 < pairs.len() && contiguous(&pairs[i + 1]) && pairs[i + 1][0] == p[0] + 2 {
                let mf = mem(self.b, Mem::Wire);
                terms.push(self.b.ins().uload32(mf, wire, p[0] as i32));
                i += 2;
                continue;
            }
            let w = match *p.as_slice() {
                [hi, lo] if lo == hi + 1 => {
                    let mf = mem(self.b, Mem::Wire);
                    self.b.ins().uload16(types::I64, mf, wire, hi as i32)
                }
                [hi, lo] => {
                    let mf = mem(self.b, Mem::Wire);
                    let h = self.b.ins().uload8(types::I64, mf, wire, hi as i32);
                    let mf = mem(self.b, Mem::Wire);
                    let l = self.b.ins().uload8(types::I64, mf, wire, lo as i32);
                    let l = self.b.ins().ishl_imm_u(l, 8);
                    self.b.ins().bor(h, l)
                }
                [hi] => {
                    let mf = mem(self.b, Mem::Wire);
                    self.b.ins().uload8(types::I64, mf, wire, hi as i32)
                }
                _ => unreachable!("chunks of two"),
            };
            terms.push(w);
            i += 1;
        }
        // A tree of additions: the sum's latency grows with the log of the terms.
        while terms.len() > 1 {
            let next: Vec<Value> =
                terms.chunks(2).map(|c| if let [a, b] = *c { self.b.ins().iadd(a, b) } else { c[0] }).collect();
            terms = next;
        }
        match terms.first() {
            Some(t) => *t,
            None => self.b.ins().iconst(types::I64, 0),
        }
    }

    /// A [`Gen::csum16_raw`] sum folded to 16 bits and complemented: the
    /// checksum, byte-swapped (see [`Gen::csum16_swapped`]).
    pub(in crate::jit) fn csum16_fold(&mut self, sum: Value) -> Value {
        // Folded with end-around carries by rotation: `x + rotl(x, half)`
        // holds the one's complement sum of x's two halves in its upper
        // half (the carry out of the lower half lands in it). 64 to 32
        // bits, then 32 to 16.
        let rot = self.b.ins().rotl_imm_u(sum, 32);
        let sum = self.b.ins().iadd(sum, rot);
        let sum = self.b.ins().ushr_imm_u(sum, 32);
        let s32 = self.b.ins().ireduce(types::I32, sum);
        let rot = self.b.ins().rotl_imm_u(s32, 16);
        let s32 = self.b.ins().iadd(s32, rot);
        let s32 = self.b.ins().ushr_imm_u(s32, 16);
        let sum = self.b.ins().uextend(types::I64, s32);
        self.b.ins().bxor_imm_u(sum, 0xffff)
    }

    /// Swaps the two bytes of a 16-bit value.
    pub(in crate::jit) fn swap16(&mut self, v: Value) -> Value {
        let lo = band_u(self.b, v, 0xff);
        let lo = self.b.ins().ishl_imm_u(lo, 8);
        let hi = self.b.ins().ushr_imm_u(v, 8);
        let hi = band_u(self.b, hi, 0xff);
        self.b.ins().bor(lo, hi)
    }

    /// The wire byte of field `s` when it is two whole bytes inside one
    /// piece of the wire grid: it can then be read and written in
    /// little-endian form (see [`Gen::csum16_swapped`], [`Gen::merge_le`]).
    pub(in crate::jit) fn le16_byte(&self, s: FieldSrc) -> Option<u32> {
        let FieldSrc::Wire { byte, shift, mask } = s else { return None };
        let (bit, width) = wire_bits(byte, shift, mask);
        (width == 16 && self.whole_in_piece(bit, width).is_some()).then_some(bit / 8)
    }
}
