//! The packet header vector (PHV): every field of every header at a fixed place.
//!
//! Layout is decided once at load time ([`Layout`]); a [`Phv`] is then a few
//! flat vectors indexed by numbers the compiler baked into the plan, so the
//! packet path never looks a name up.
//!
//! Memory invariant: a `Phv` is sized at creation for its program and is
//! reset, never reallocated, between packets. Fields of up to 128 bits live in
//! `slots` (right-aligned, masked to their width); wider fields and varbits
//! live as big-endian bytes in `wide`.

use std::collections::HashMap;

use sluice_json::{FieldWidth, Program};

use crate::value::{be_to_u128, mask128, nbytes, u128_to_be};
use crate::CompileError;

/// Where a field's bits are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Loc {
    /// `slots[i]`.
    Slot(u32),
    /// `wide[off..off+len]`, big-endian.
    Wide { off: u32, len: u32 },
}

/// Everything the engine needs to know about one field.
#[derive(Debug, Clone)]
pub struct FieldInfo {
    pub name: String,
    pub header: u32,
    pub loc: Loc,
    /// Width in bits (for a varbit: its maximum).
    pub width: u32,
    pub signed: bool,
    pub varbit: bool,
}

/// One header instance.
#[derive(Debug, Clone)]
pub struct HeaderInfo {
    pub name: String,
    pub type_name: String,
    pub metadata: bool,
    /// Field ids in declaration order.
    pub fields: Vec<u32>,
    /// Fixed size in bits, varbit counted as 0.
    pub fixed_bits: u32,
    /// Index of the varbit field among `fields`, if any.
    pub varbit_field: Option<usize>,
    /// Union this header belongs to.
    pub union: Option<u32>,
    /// `(slot, bit offset in header, width)` of every field, when all live in
    /// slots (no varbit, none wider than 128 bits): extraction and deparsing
    /// then run without per-field layout lookups.
    pub codec: Option<Vec<(u32, u32, u32)>>,
    /// The same fields cut into pieces of 64-bit words, for byte-aligned
    /// headers of at most 64 bytes: extraction loads whole words and
    /// deparsing stores whole words (see [`WordPiece`]).
    pub words: Option<WordCodec>,
}

/// One piece of a field inside one 64-bit word of a header.
#[derive(Debug, Clone, Copy)]
pub struct WordPiece {
    pub slot: u32,
    /// Index of the 64-bit word within the header.
    pub word: u8,
    /// The piece is `(slot >> field_shift) & mask` ...
    pub field_shift: u8,
    pub mask: u64,
    /// ... placed at `<< word_shift` in the word.
    pub word_shift: u8,
    /// The field is at most 64 bits wide (its value fits a `u64`).
    pub narrow: bool,
    /// The whole field is this one piece.
    pub whole: bool,
}

/// Word-level layout of a header (see `HeaderInfo::words`).
#[derive(Debug, Clone)]
pub struct WordCodec {
    pub bytes: usize,
    pub nwords: usize,
    /// Slots of the header's fields (cleared before pieces are OR-ed in).
    pub slots: Vec<u32>,
    pub pieces: Vec<WordPiece>,
}

impl WordCodec {
    /// Builds the pieces for `(slot, bit offset, width)` fields spanning `bits` bits.
    pub fn new(codec: &[(u32, u32, u32)], bits: u32) -> Option<WordCodec> {
        if !bits.is_multiple_of(8) || bits > 512 || bits == 0 {
            return None;
        }
        let mut pieces = Vec::new();
        for (slot, off, width) in codec {
            let (mut pos, end) = (*off, *off + *width);
            while pos < end {
                let word = pos / 64;
                let in_word = pos % 64;
                let take = (64 - in_word).min(end - pos);
                // Bits [pos, pos+take) of the header are field bits [pos-off, ...) from the MSB.
                let field_shift = end - (pos + take);
                let word_shift = 64 - in_word - take;
                let mask = if take == 64 { u64::MAX } else { (1u64 << take) - 1 };
                pieces.push(WordPiece {
                    slot: *slot,
                    word: word as u8,
                    field_shift: field_shift as u8,
                    mask,
                    word_shift: word_shift as u8,
                    narrow: *width <= 64,
                    whole: take == *width,
                });
                pos += take;
            }
        }
        Some(WordCodec {
            bytes: bits as usize / 8,
            nwords: (bits as usize).div_ceil(64),
            slots: codec.iter().map(|c| c.0).collect(),
            pieces,
        })
    }

    /// Extracts the header from `data` (at least `bytes` long) into the slots.
    #[inline]
    pub fn extract(&self, slots: &mut [u128], data: &[u8]) {
        let mut buf = [0u8; 64];
        buf[..self.bytes].copy_from_slice(&data[..self.bytes]);
        let mut words = [0u64; 8];
        for (i, w) in words.iter_mut().enumerate().take(self.nwords) {
            *w = u64::from_be_bytes(buf[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
        }
        for s in &self.slots {
            slots[*s as usize] = 0;
        }
        for p in &self.pieces {
            let v = (words[p.word as usize] >> p.word_shift) & p.mask;
            if p.whole {
                slots[p.slot as usize] = v as u128;
            } else if p.narrow {
                slots[p.slot as usize] |= (v << p.field_shift) as u128;
            } else {
                slots[p.slot as usize] |= (v as u128) << p.field_shift;
            }
        }
    }

    /// Packs the fields from the slots into big-endian-ordered 64-bit words.
    #[inline]
    pub fn pack(&self, slots: &[u128]) -> [u64; 8] {
        let mut words = [0u64; 8];
        for p in &self.pieces {
            let v = if p.narrow {
                ((slots[p.slot as usize] as u64) >> p.field_shift) & p.mask
            } else {
                ((slots[p.slot as usize] >> p.field_shift) as u64) & p.mask
            };
            words[p.word as usize] |= v << p.word_shift;
        }
        words
    }

    /// Writes the header's bytes from the slots into `out` (at least `bytes` long).
    #[inline]
    pub fn deparse(&self, slots: &[u128], out: &mut [u8]) {
        let words = self.pack(slots);
        let mut buf = [0u8; 64];
        for (i, w) in words.iter().enumerate().take(self.nwords) {
            buf[i * 8..i * 8 + 8].copy_from_slice(&w.to_be_bytes());
        }
        out[..self.bytes].copy_from_slice(&buf[..self.bytes]);
    }
}

/// A header stack.
#[derive(Debug, Clone)]
pub struct StackInfo {
    pub name: String,
    pub headers: Vec<u32>,
}

/// A header union.
#[derive(Debug, Clone)]
pub struct UnionInfo {
    pub name: String,
    /// Member headers, in the union type's member order.
    pub headers: Vec<u32>,
    pub member_names: Vec<String>,
}

/// A stack of header unions.
#[derive(Debug, Clone)]
pub struct UnionStackInfo {
    pub name: String,
    pub unions: Vec<u32>,
}

/// The resolved layout of all headers, stacks and unions of a program.
#[derive(Debug, Clone, Default)]
pub struct Layout {
    pub fields: Vec<FieldInfo>,
    pub headers: Vec<HeaderInfo>,
    pub stacks: Vec<StackInfo>,
    pub unions: Vec<UnionInfo>,
    pub union_stacks: Vec<UnionStackInfo>,
    pub n_slots: u32,
    pub wide_bytes: u32,
    field_by_name: HashMap<(String, String), u32>,
    header_by_name: HashMap<String, u32>,
    stack_by_name: HashMap<String, u32>,
    union_by_name: HashMap<String, u32>,
    union_stack_by_name: HashMap<String, u32>,
    aliases: HashMap<String, (String, String)>,
}

impl Layout {
    /// Builds the layout from a program.
    pub fn new(p: &Program) -> Result<Layout, CompileError> {
        let mut l = Layout::default();
        let types: HashMap<&str, &sluice_json::HeaderType> =
            p.header_types.iter().map(|t| (t.name.as_str(), t)).collect();
        let mut id_to_idx: HashMap<u64, u32> = HashMap::new();
        for h in &p.headers {
            let t = types
                .get(h.header_type.as_str())
                .ok_or_else(|| CompileError::at(&h.path, format!("unknown header_type \"{}\"", h.header_type)))?;
            let hidx = l.headers.len() as u32;
            id_to_idx.insert(h.id, hidx);
            let mut fields = Vec::new();
            let mut fixed_bits = 0;
            let mut varbit_field = None;
            for (i, f) in t.fields.iter().enumerate() {
                let (width, varbit) = match f.width {
                    FieldWidth::Bits(w) => (w, false),
                    FieldWidth::Varbit => {
                        varbit_field = Some(i);
                        let max_bytes = t.max_length.unwrap_or(0) * 8;
                        let other: u32 = t
                            .fields
                            .iter()
                            .filter_map(|f| match f.width {
                                FieldWidth::Bits(w) => Some(w),
                                FieldWidth::Varbit => None,
                            })
                            .sum();
                        (max_bytes.saturating_sub(other).max(8), true)
                    }
                };
                if !varbit {
                    fixed_bits += width;
                }
                let loc = if width <= 128 && !varbit {
                    l.n_slots += 1;
                    Loc::Slot(l.n_slots - 1)
                } else {
                    let len = nbytes(width) as u32;
                    l.wide_bytes += len;
                    Loc::Wide { off: l.wide_bytes - len, len }
                };
                let fid = l.fields.len() as u32;
                l.fields.push(FieldInfo { name: f.name.clone(), header: hidx, loc, width, signed: f.signed, varbit });
                l.field_by_name.insert((h.name.clone(), f.name.clone()), fid);
                fields.push(fid);
            }
            l.header_by_name.insert(h.name.clone(), hidx);
            let mut codec = Some(Vec::new());
            let mut off = 0;
            for f in &fields {
                let fi = &l.fields[*f as usize];
                match (fi.loc, codec.as_mut()) {
                    (Loc::Slot(s), Some(c)) if !fi.varbit => c.push((s, off, fi.width)),
                    _ => codec = None,
                }
                off += fi.width;
            }
            let words = codec.as_ref().and_then(|c| WordCodec::new(c, fixed_bits));
            l.headers.push(HeaderInfo {
                words,
                codec,
                name: h.name.clone(),
                type_name: h.header_type.clone(),
                metadata: h.metadata,
                fields,
                fixed_bits,
                varbit_field,
                union: None,
            });
        }
        for s in &p.header_stacks {
            let mut hs = Vec::new();
            for id in &s.header_ids {
                hs.push(
                    *id_to_idx
                        .get(id)
                        .ok_or_else(|| CompileError::at(&s.path, format!("header_ids: unknown header id {id}")))?,
                );
            }
            l.stack_by_name.insert(s.name.clone(), l.stacks.len() as u32);
            l.stacks.push(StackInfo { name: s.name.clone(), headers: hs });
        }
        let utypes: HashMap<&str, &sluice_json::HeaderUnionType> =
            p.header_union_types.iter().map(|t| (t.name.as_str(), t)).collect();
        let mut union_id_to_idx = HashMap::new();
        for u in &p.header_unions {
            let mut hs = Vec::new();
            for id in &u.header_ids {
                hs.push(
                    *id_to_idx.get(id).ok_or_else(|| {
                        CompileError::at("header_unions", format!("{}: unknown header id {id}", u.name))
                    })?,
                );
            }
            let uidx = l.unions.len() as u32;
            for h in &hs {
                l.headers[*h as usize].union = Some(uidx);
            }
            let member_names = utypes
                .get(u.union_type.as_str())
                .map(|t| t.headers.iter().map(|(n, _)| n.clone()).collect())
                .unwrap_or_default();
            union_id_to_idx.insert(u.id, uidx);
            l.union_by_name.insert(u.name.clone(), uidx);
            l.unions.push(UnionInfo { name: u.name.clone(), headers: hs, member_names });
        }
        for s in &p.header_union_stacks {
            let mut us = Vec::new();
            for id in &s.header_union_ids {
                us.push(*union_id_to_idx.get(id).ok_or_else(|| {
                    CompileError::at("header_union_stacks", format!("{}: unknown union id {id}", s.name))
                })?);
            }
            l.union_stack_by_name.insert(s.name.clone(), l.union_stacks.len() as u32);
            l.union_stacks.push(UnionStackInfo { name: s.name.clone(), unions: us });
        }
        for (alias, target) in &p.field_aliases {
            l.aliases.insert(alias.clone(), target.clone());
        }
        Ok(l)
    }

    /// Field id of `header.field`, following field aliases.
    pub fn field(&self, header: &str, field: &str) -> Option<u32> {
        if let Some(f) = self.field_by_name.get(&(header.to_string(), field.to_string())) {
            return Some(*f);
        }
        let full = format!("{header}.{field}");
        if let Some((h, f)) = self.aliases.get(&full) {
            return self.field_by_name.get(&(h.clone(), f.clone())).copied();
        }
        None
    }

    /// A v1model intrinsic field, looked up under the names bmv2 accepts for it.
    pub fn intrinsic(&self, name: &str) -> Option<u32> {
        for h in ["standard_metadata", "intrinsic_metadata", "queueing_metadata"] {
            if let Some(f) = self.field(h, name) {
                return Some(f);
            }
        }
        None
    }

    /// Header index by instance name.
    pub fn header(&self, name: &str) -> Option<u32> {
        self.header_by_name.get(name).copied()
    }

    /// Stack index by name.
    pub fn stack(&self, name: &str) -> Option<u32> {
        self.stack_by_name.get(name).copied()
    }

    /// Union index by name.
    pub fn union(&self, name: &str) -> Option<u32> {
        self.union_by_name.get(name).copied()
    }

    /// Union stack index by name.
    pub fn union_stack(&self, name: &str) -> Option<u32> {
        self.union_stack_by_name.get(name).copied()
    }

    /// Index of field `name` within header type of `header` (for stack_field / access_field).
    pub fn field_index_in_header(&self, header: u32, name: &str) -> Option<usize> {
        self.headers[header as usize].fields.iter().position(|f| self.fields[*f as usize].name == name)
    }

    /// `header.field` as text, for traces and messages.
    pub fn field_name(&self, f: u32) -> String {
        let fi = &self.fields[f as usize];
        format!("{}.{}", self.headers[fi.header as usize].name, fi.name)
    }

    /// A fresh PHV for this layout.
    pub fn new_phv(&self) -> Phv {
        let mut phv = Phv {
            slots: vec![0; self.n_slots as usize],
            wide: vec![0; self.wide_bytes as usize],
            valid: vec![false; self.headers.len()],
            varbit_len: vec![0; self.headers.len()],
            stack_next: vec![0; self.stacks.len()],
            union_stack_next: vec![0; self.union_stacks.len()],
            metadata: self.headers.iter().map(|h| h.metadata).collect(),
            meta_slots: Vec::new(),
            meta_wide: Vec::new(),
        };
        for f in &self.fields {
            if self.headers[f.header as usize].metadata {
                match f.loc {
                    Loc::Slot(i) => phv.meta_slots.push(i),
                    Loc::Wide { off, len } => phv.meta_wide.push((off, len)),
                }
            }
        }
        phv.slots.fill(0);
        phv.wide.fill(0);
        phv.reset();
        phv
    }
}

/// The per-packet header vector.
#[derive(Debug, Clone)]
pub struct Phv {
    pub slots: Vec<u128>,
    pub wide: Vec<u8>,
    pub valid: Vec<bool>,
    /// Current length in bits of each header's varbit field.
    pub varbit_len: Vec<u32>,
    pub stack_next: Vec<u32>,
    pub union_stack_next: Vec<u32>,
    metadata: Vec<bool>,
    /// Slots and wide ranges of metadata fields: the only ones reset per packet.
    meta_slots: Vec<u32>,
    meta_wide: Vec<(u32, u32)>,
}

impl Phv {
    /// Zeroes all metadata and marks all non-metadata headers invalid.
    ///
    /// Fields of packet headers keep stale values, as in bmv2: they are
    /// overwritten by extraction, zeroed by `setValid`, read as zero in table
    /// keys and skipped by checksums while their header is invalid.
    pub fn reset(&mut self) {
        for i in &self.meta_slots {
            self.slots[*i as usize] = 0;
        }
        for (off, len) in &self.meta_wide {
            self.wide[*off as usize..(*off + *len) as usize].fill(0);
        }
        self.valid.copy_from_slice(&self.metadata);
        // Empty vectors are skipped on purpose: glibc's AVX-512 memset of zero
        // bytes at a dangling pointer costs ~100 ns on some AMD VMs.
        for v in [&mut self.varbit_len, &mut self.stack_next, &mut self.union_stack_next] {
            if !v.is_empty() {
                v.fill(0);
            }
        }
    }

    /// Copies everything from another PHV of the same layout without reallocating.
    pub fn copy_from(&mut self, o: &Phv) {
        self.slots.copy_from_slice(&o.slots);
        self.wide.copy_from_slice(&o.wide);
        self.valid.copy_from_slice(&o.valid);
        self.varbit_len.copy_from_slice(&o.varbit_len);
        self.stack_next.copy_from_slice(&o.stack_next);
        self.union_stack_next.copy_from_slice(&o.union_stack_next);
    }

    /// Reads a field of at most 128 bits (wide fields: their low 128 bits).
    #[inline]
    pub fn get(&self, f: &FieldInfo) -> u128 {
        match f.loc {
            Loc::Slot(i) => self.slots[i as usize],
            Loc::Wide { off, len } => be_to_u128(&self.wide[off as usize..(off + len) as usize]),
        }
    }

    /// Writes a field of at most 128 bits, masking to its width.
    #[inline]
    pub fn set(&mut self, f: &FieldInfo, v: u128) {
        match f.loc {
            Loc::Slot(i) => self.slots[i as usize] = v & mask128(f.width),
            Loc::Wide { off, len } => {
                let b = &mut self.wide[off as usize..(off + len) as usize];
                b.fill(0);
                let n = b.len().min(16);
                let l = b.len();
                u128_to_be(v, &mut b[l - n..]);
                mask_top(b, f.width);
            }
        }
    }

    /// Writes a field's value as big-endian bytes (right-aligned, truncated to width).
    pub fn set_bytes(&mut self, f: &FieldInfo, bytes: &[u8]) {
        match f.loc {
            Loc::Slot(i) => self.slots[i as usize] = be_to_u128(bytes) & mask128(f.width),
            Loc::Wide { off, len } => {
                let b = &mut self.wide[off as usize..(off + len) as usize];
                b.fill(0);
                let n = bytes.len().min(b.len());
                let bl = b.len();
                b[bl - n..].copy_from_slice(&bytes[bytes.len() - n..]);
                mask_top(b, f.width);
            }
        }
    }

    /// Reads a field as `nbytes(width)` big-endian bytes into `out`.
    pub fn get_bytes(&self, f: &FieldInfo, out: &mut [u8]) {
        match f.loc {
            Loc::Slot(i) => u128_to_be(self.slots[i as usize], out),
            Loc::Wide { off, len } => {
                let b = &self.wide[off as usize..(off + len) as usize];
                out.fill(0);
                let n = out.len().min(b.len());
                let ol = out.len();
                out[ol - n..].copy_from_slice(&b[b.len() - n..]);
            }
        }
    }

    /// Copies all fields, validity and varbit length of header `src` into header `dst` (same type).
    pub fn copy_header(&mut self, layout: &Layout, dst: u32, src: u32) {
        if dst == src {
            return;
        }
        let (hd, hs) = (&layout.headers[dst as usize], &layout.headers[src as usize]);
        for (fd, fs) in hd.fields.iter().zip(hs.fields.iter()) {
            let (fd, fs) = (&layout.fields[*fd as usize], &layout.fields[*fs as usize]);
            match (fd.loc, fs.loc) {
                (Loc::Slot(a), Loc::Slot(b)) => self.slots[a as usize] = self.slots[b as usize],
                (Loc::Wide { off: a, len }, Loc::Wide { off: b, .. }) => {
                    self.wide.copy_within(b as usize..(b + len) as usize, a as usize)
                }
                _ => {}
            }
        }
        self.valid[dst as usize] = self.valid[src as usize];
        self.varbit_len[dst as usize] = self.varbit_len[src as usize];
    }

    /// Zeroes every field of a header.
    pub fn zero_header(&mut self, layout: &Layout, h: u32) {
        for f in &layout.headers[h as usize].fields {
            match layout.fields[*f as usize].loc {
                Loc::Slot(i) => self.slots[i as usize] = 0,
                Loc::Wide { off, len } => self.wide[off as usize..(off + len) as usize].fill(0),
            }
        }
        self.varbit_len[h as usize] = 0;
    }
}

/// Clears the bits above `width` in a right-aligned big-endian byte string.
pub fn mask_top(b: &mut [u8], width: u32) {
    let total = b.len() as u32 * 8;
    if width >= total {
        return;
    }
    let excess = total - width;
    let full = (excess / 8) as usize;
    for x in b.iter_mut().take(full) {
        *x = 0;
    }
    let rem = excess % 8;
    if rem > 0 && full < b.len() {
        b[full] &= 0xff >> rem;
    }
}

/// Reads `width` (<= 128) bits starting at bit `off` of `buf` (big-endian bit order).
#[inline]
pub fn read_bits(buf: &[u8], off: usize, width: u32) -> u128 {
    let w = width as usize;
    if w == 0 {
        return 0;
    }
    let first = off / 8;
    let shift = off % 8;
    let nb = (shift + w).div_ceil(8);
    if nb <= 16 {
        // One 128-bit window holds the whole field; load it with a fixed-size
        // read when the buffer is long enough (no variable-length memcpy).
        let v = match buf.get(first..first + 16) {
            Some(b) => u128::from_be_bytes(b.try_into().expect("16 bytes")),
            None => {
                let mut tmp = [0u8; 16];
                tmp[..nb].copy_from_slice(&buf[first..first + nb]);
                u128::from_be_bytes(tmp)
            }
        };
        return (v << shift) >> (128 - w);
    }
    let mut v: u128 = 0;
    for i in 0..w {
        let p = off + i;
        v = (v << 1) | ((buf[p / 8] >> (7 - p % 8)) & 1) as u128;
    }
    v
}

/// Writes the low `width` (<= 128) bits of `v` at bit `off` of `buf`.
#[inline]
pub fn write_bits(buf: &mut [u8], off: usize, width: u32, v: u128) {
    let w = width as usize;
    if w == 0 {
        return;
    }
    let first = off / 8;
    let shift = off % 8;
    let nb = (shift + w).div_ceil(8);
    if nb <= 16 {
        let sh = 128 - shift - w;
        let m = mask128(width) << sh;
        if let Some(win) = buf.get_mut(first..first + 16) {
            let win: &mut [u8; 16] = win.try_into().expect("16 bytes");
            let cur = u128::from_be_bytes(*win);
            *win = ((cur & !m) | ((v << sh) & m)).to_be_bytes();
            return;
        }
        let mut tmp = [0u8; 16];
        tmp[..nb].copy_from_slice(&buf[first..first + nb]);
        let cur = u128::from_be_bytes(tmp);
        let new = (cur & !m) | ((v << sh) & m);
        buf[first..first + nb].copy_from_slice(&new.to_be_bytes()[..nb]);
        return;
    }
    for i in 0..w {
        let bit = (v >> (w - 1 - i)) & 1;
        let pos = off + i;
        let mask = 0x80u8 >> (pos % 8);
        if bit == 1 {
            buf[pos / 8] |= mask;
        } else {
            buf[pos / 8] &= !mask;
        }
    }
}

/// Reads `width` bits at bit `off` into `out` (right-aligned big-endian, any width).
pub fn read_bits_into(buf: &[u8], off: usize, width: u32, out: &mut [u8]) {
    out.fill(0);
    let total = out.len() * 8;
    let start = total - width as usize;
    for i in 0..width as usize {
        let p = off + i;
        if buf[p / 8] & (0x80 >> (p % 8)) != 0 {
            let q = start + i;
            out[q / 8] |= 0x80 >> (q % 8);
        }
    }
}

/// Writes `width` bits of right-aligned big-endian `src` at bit `off` of `buf` (any width).
pub fn write_bits_from(buf: &mut [u8], off: usize, width: u32, src: &[u8]) {
    let total = src.len() * 8;
    let start = total - width as usize;
    for i in 0..width as usize {
        let q = start + i;
        let bit = src[q / 8] & (0x80 >> (q % 8)) != 0;
        let p = off + i;
        let mask = 0x80u8 >> (p % 8);
        if bit {
            buf[p / 8] |= mask;
        } else {
            buf[p / 8] &= !mask;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bit_reads_and_writes_round_trip() {
        let buf = [0x45u8, 0x00, 0x12, 0x34, 0xff];
        assert_eq!(read_bits(&buf, 0, 4), 4);
        assert_eq!(read_bits(&buf, 4, 4), 5);
        assert_eq!(read_bits(&buf, 16, 16), 0x1234);
        assert_eq!(read_bits(&buf, 19, 13), 0x1234 & 0x1fff);
        let mut out = [0u8; 5];
        write_bits(&mut out, 0, 4, 4);
        write_bits(&mut out, 4, 4, 5);
        write_bits(&mut out, 16, 16, 0x1234);
        write_bits(&mut out, 32, 8, 0xff);
        assert_eq!(out, buf);
        let mut wide = [0u8; 3];
        read_bits_into(&buf, 4, 20, &mut wide);
        assert_eq!(wide, [0x05, 0x00, 0x12]);
        let mut back = [0u8; 5];
        write_bits_from(&mut back, 4, 20, &wide);
        assert_eq!(back[..3], [0x05, 0x00, 0x12]);
    }

    #[test]
    fn word_codec_agrees_with_bit_reads_and_writes() {
        // Field widths that straddle 64-bit words, including a 128-bit field.
        let widths = [4u32, 4, 8, 16, 3, 13, 48, 1, 7, 128, 9, 23, 64, 8];
        let bits: u32 = widths.iter().sum();
        assert_eq!(bits % 8, 0);
        let mut off = 0;
        let codec: Vec<(u32, u32, u32)> = widths
            .iter()
            .enumerate()
            .map(|(i, w)| {
                off += w;
                (i as u32, off - w, *w)
            })
            .collect();
        let wc = WordCodec::new(&codec, bits).unwrap();
        let data: Vec<u8> = (0..bits / 8).map(|i| (i as u8).wrapping_mul(37).wrapping_add(11)).collect();
        let mut slots = vec![0u128; widths.len()];
        wc.extract(&mut slots, &data);
        for (slot, off, w) in &codec {
            assert_eq!(slots[*slot as usize], read_bits(&data, *off as usize, *w), "field at {off}");
        }
        let mut out = vec![0u8; data.len()];
        wc.deparse(&slots, &mut out);
        assert_eq!(out, data);
    }

    #[test]
    fn mask_top_clears_excess_bits() {
        let mut b = [0xff, 0xff];
        mask_top(&mut b, 9);
        assert_eq!(b, [0x01, 0xff]);
    }
}
