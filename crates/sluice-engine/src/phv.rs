//! The packet header vector (PHV): every field of every header at a fixed place.
//!
//! Layout is decided once at load time ([`Layout`]); a [`Phv`] is then a few
//! flat vectors indexed by numbers the compiler baked into the plan, so the
//! packet path never looks a name up.
//!
//! Memory invariant: a `Phv` is sized at creation for its program and is
//! reset, never reallocated, between packets.
//!
//! Packet headers of a whole number of bytes (no varbit, no field wider than
//! 128 bits) are kept in `wire` exactly as they appear on the wire: extraction
//! and deparsing are then byte copies and a checksum over a header reads its
//! bytes directly. Other fields of up to 128 bits live in `slots`
//! (right-aligned, masked to their width); wider fields and varbits live as
//! big-endian bytes in `wide`.

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
    /// Bits `[bit, bit + width)` of `wire` (big-endian bit order).
    Wire { bit: u32 },
}

/// Bytes of padding after the wire area (zero in a PHV's own buffer), so
/// every field read or write there can use a fixed 16-byte window, which
/// masks off what it touches beyond the field.
pub const WIRE_PAD: usize = 16;

/// How a hot path reads an unsigned field of at most 64 bits without going
/// through [`FieldInfo`]: hot paths compute in `u64`, which costs half of `u128`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldSrc {
    /// `slots[i]` (already masked).
    Slot(u32),
    /// `(big-endian u64 at wire[byte..]) >> shift & mask`: wire fields whose
    /// bits fit one 8-byte window.
    Wire { byte: u32, shift: u8, mask: u64 },
}

impl FieldSrc {
    /// The hot-path reader for a field, if it has one.
    pub fn of(f: &FieldInfo) -> Option<FieldSrc> {
        if f.width == 0 || f.width > 64 {
            return None;
        }
        match f.loc {
            Loc::Slot(i) => Some(FieldSrc::Slot(i)),
            Loc::Wire { bit } if bit % 8 + f.width <= 64 => {
                Some(FieldSrc::Wire { byte: bit / 8, shift: (64 - bit % 8 - f.width) as u8, mask: mask64(f.width) })
            }
            _ => None,
        }
    }

    /// Reads the field.
    #[inline(always)]
    pub fn read(&self, phv: &Phv) -> u64 {
        match *self {
            FieldSrc::Slot(i) => phv.slots[i as usize] as u64,
            FieldSrc::Wire { byte, shift, mask } => {
                let b = byte as usize;
                let w: [u8; 8] = phv.buf()[b..b + 8].try_into().expect("8 bytes");
                (u64::from_be_bytes(w) >> shift) & mask
            }
        }
    }

    /// Writes the field; `width_mask` is the mask of the field's width.
    #[inline(always)]
    pub fn write(&self, phv: &mut Phv, v: u64, width_mask: u64) {
        match *self {
            FieldSrc::Slot(i) => phv.slots[i as usize] = u128::from(v & width_mask),
            FieldSrc::Wire { byte, shift, mask } => {
                let b = byte as usize;
                let win: &mut [u8; 8] = (&mut phv.buf_mut()[b..b + 8]).try_into().expect("8 bytes");
                let cur = u64::from_be_bytes(*win);
                let m = mask << shift;
                *win = ((cur & !m) | ((v & mask) << shift)).to_be_bytes();
            }
        }
    }
}

/// The mask of the low `w` bits (`w` <= 64).
#[inline]
pub fn mask64(w: u32) -> u64 {
    if w >= 64 {
        u64::MAX
    } else {
        (1u64 << w) - 1
    }
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
    /// `(byte offset in wire, length in bytes)` for a header kept in wire format.
    pub wire: Option<(u32, u32)>,
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
    /// Size of the wire area (without its padding).
    pub wire_bytes: u32,
    /// Per field: its hot-path reader/writer and width mask, if it has one.
    pub hot: Vec<Option<(FieldSrc, u64)>>,
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
            // A packet header goes to the wire area when every field has a
            // fixed width that a 16-byte window at its first byte covers and
            // the header is a whole number of bytes.
            let mut wire_ok = !h.metadata;
            let mut off = 0u32;
            for f in &t.fields {
                match f.width {
                    FieldWidth::Bits(w) if off % 8 + w <= 128 => off += w,
                    _ => wire_ok = false,
                }
            }
            wire_ok &= off > 0 && off.is_multiple_of(8);
            let wire_base = l.wire_bytes * 8;
            if wire_ok {
                l.wire_bytes += off / 8;
            }
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
                let loc = if wire_ok {
                    Loc::Wire { bit: wire_base + fixed_bits - width }
                } else if width <= 128 && !varbit {
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
            l.headers.push(HeaderInfo {
                wire: wire_ok.then_some((wire_base / 8, fixed_bits / 8)),
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
        l.hot = l.fields.iter().map(|f| FieldSrc::of(f).map(|s| (s, mask64(f.width)))).collect();
        Ok(l)
    }

    /// Reads field `f` through its hot-path reader when it has one.
    #[inline(always)]
    pub fn read(&self, phv: &Phv, f: u32) -> u128 {
        match self.hot[f as usize] {
            Some((src, _)) => u128::from(src.read(phv)),
            None => phv.get(&self.fields[f as usize]),
        }
    }

    /// Writes field `f` (masked to its width) through its hot-path writer when it has one.
    #[inline(always)]
    pub fn write(&self, phv: &mut Phv, f: u32, v: u128) {
        match self.hot[f as usize] {
            Some((src, mask)) => src.write(phv, v as u64, mask),
            None => phv.set(&self.fields[f as usize], v),
        }
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
            wire_len: self.wire_bytes as usize + WIRE_PAD,
            // Headers, padding, then one validity byte per header, rounded
            // up to whole 8-byte words: generated code sets the flags up
            // with 8-byte stores (the bytes after the last flag stay zero).
            wire: vec![0; self.wire_bytes as usize + WIRE_PAD + self.headers.len().next_multiple_of(8)],
            wire_at: std::ptr::null_mut(),
            varbit_len: vec![0; self.headers.len()],
            stack_next: vec![0; self.stacks.len()],
            union_stack_next: vec![0; self.union_stacks.len()],
            metadata: self.headers.iter().map(|h| h.metadata).collect(),
        };
        phv.reset();
        phv
    }
}

/// The per-packet header vector.
#[derive(Debug)]
pub struct Phv {
    pub slots: Vec<u128>,
    pub wide: Vec<u8>,
    /// Packet headers in wire format, followed by `WIRE_PAD` bytes of
    /// padding (zero here; in a batch function's output area, whatever was
    /// there: reads and writes mask what they touch beyond their field)
    /// (`wire_len` bytes), then the headers' valid flags, one byte each (0
    /// or 1, only written as `bool`s). Why one buffer: generated code
    /// reaches a valid flag at a fixed distance from the headers, with no
    /// pointer of its own to load or keep in a register. Private, so that
    /// nothing writes other bytes than 0 and 1 among the flags.
    wire: Vec<u8>,
    /// Null, or, while the batch function runs packets with their headers
    /// in their output areas (see [`Phv::wire_at_slot`]), the area of the
    /// packet being processed: the bytes every accessor then reads and
    /// writes instead of `wire` (same length and layout). Why: engine code
    /// that generated code calls (helpers) sees the headers where the
    /// generated code keeps them.
    ///
    /// Invariant: null whenever no batch function call is running on this
    /// PHV (`CompiledPipelines::run_batch` resets it before it returns).
    wire_at: *mut u8,
    wire_len: usize,
    /// Current length in bits of each header's varbit field.
    pub varbit_len: Vec<u32>,
    pub stack_next: Vec<u32>,
    pub union_stack_next: Vec<u32>,
    metadata: Vec<bool>,
}

// SAFETY: `wire_at` points into a buffer the batch function's caller owns
// only during that call, on that thread (see the field's invariant); at
// any other time the PHV owns all its memory.
unsafe impl Send for Phv {}

impl Clone for Phv {
    fn clone(&self) -> Phv {
        Phv {
            slots: self.slots.clone(),
            wide: self.wide.clone(),
            wire: self.buf().to_vec(),
            wire_at: std::ptr::null_mut(),
            wire_len: self.wire_len,
            varbit_len: self.varbit_len.clone(),
            stack_next: self.stack_next.clone(),
            union_stack_next: self.union_stack_next.clone(),
            metadata: self.metadata.clone(),
        }
    }
}

/// The bytes of a PHV's headers and flags: its own buffer, or the area
/// `at` points at (see `Phv::wire_at`).
#[inline]
fn buf_of(own: &[u8], at: *mut u8) -> &[u8] {
    if at.is_null() {
        own
    } else {
        // SAFETY: `at` points at `own.len()` bytes the running batch
        // function's caller owns and nothing else borrows while engine code
        // runs (see `Phv::wire_at`).
        unsafe { std::slice::from_raw_parts(at, own.len()) }
    }
}

/// [`buf_of`], writable.
#[inline]
fn buf_of_mut(own: &mut [u8], at: *mut u8) -> &mut [u8] {
    if at.is_null() {
        own
    } else {
        // SAFETY: as in `buf_of`.
        unsafe { std::slice::from_raw_parts_mut(at, own.len()) }
    }
}

impl Phv {
    #[inline]
    fn buf(&self) -> &[u8] {
        buf_of(&self.wire, self.wire_at)
    }

    #[inline]
    fn buf_mut(&mut self) -> &mut [u8] {
        buf_of_mut(&mut self.wire, self.wire_at)
    }

    /// The headers in wire format and the padding after them.
    #[inline]
    pub fn wire(&self) -> &[u8] {
        &self.buf()[..self.wire_len]
    }

    /// [`Phv::wire`], writable.
    #[inline]
    pub fn wire_mut(&mut self) -> &mut [u8] {
        let n = self.wire_len;
        &mut self.buf_mut()[..n]
    }

    /// Bytes of the headers, padding and valid flags together (what an
    /// output area holding them needs).
    pub(crate) fn wire_total(&self) -> usize {
        self.wire.len()
    }

    /// Where the batch function stores the output area of the packet it
    /// runs before calling engine code (see `Phv::wire_at`).
    pub(crate) fn wire_at_slot(&mut self) -> *mut *mut u8 {
        &mut self.wire_at
    }

    /// Ends a batch function call's redirection; `area`: the headers,
    /// padding and flags the PHV's own buffer takes first.
    pub(crate) fn end_wire_redirect(&mut self, area: Option<&[u8]>) {
        self.wire_at = std::ptr::null_mut();
        if let Some(a) = area {
            self.wire.copy_from_slice(a);
        }
    }

    /// Each header's valid flag.
    #[inline]
    pub fn valid(&self) -> &[bool] {
        let flags = &self.buf()[self.wire_len..self.wire_len + self.metadata.len()];
        // SAFETY: `bool` has the size and alignment of `u8`, and every flag
        // byte is 0 or 1: zeroed at creation, then only written through
        // `valid_mut` (as `bool`s), copied from another PHV's flags, or
        // set to 0/1 by generated code.
        unsafe { std::slice::from_raw_parts(flags.as_ptr() as *const bool, flags.len()) }
    }

    /// [`Phv::valid`], writable.
    #[inline]
    pub fn valid_mut(&mut self) -> &mut [bool] {
        self.wire_valid_mut().1
    }

    /// The headers (with padding) and the valid flags, both writable.
    #[inline]
    pub fn wire_valid_mut(&mut self) -> (&mut [u8], &mut [bool]) {
        Self::split_wire(buf_of_mut(&mut self.wire, self.wire_at), self.wire_len, self.metadata.len())
    }

    /// [`Phv::wire_valid_mut`] on the buffer alone, so that a caller can
    /// borrow other fields (the metadata flags in [`Phv::reset`]) beside it.
    fn split_wire(buf: &mut [u8], wire_len: usize, n_flags: usize) -> (&mut [u8], &mut [bool]) {
        let (wire, flags) = buf.split_at_mut(wire_len);
        let flags = &mut flags[..n_flags];
        // SAFETY: as in `valid`; the flags stay 0 or 1 as only `bool`s are written.
        let valid = unsafe { std::slice::from_raw_parts_mut(flags.as_mut_ptr() as *mut bool, flags.len()) };
        (wire, valid)
    }

    /// Where the valid flags start in the buffer [`Phv::wire_ptr`] points at.
    pub fn valid_offset(&self) -> usize {
        self.wire_len
    }

    /// The headers' buffer, for generated code: headers, padding, then the
    /// valid flags at [`Phv::valid_offset`].
    pub fn wire_ptr(&mut self) -> *mut u8 {
        debug_assert!(self.wire_at.is_null(), "the PHV's own buffer, outside a batch function call");
        self.wire.as_mut_ptr()
    }

    /// Zeroes every field and marks all non-metadata headers invalid.
    ///
    /// Header fields are zeroed too (bmv2 leaves them stale): what a packet
    /// does then never depends on the packets before it, which is what lets
    /// a batch be parsed ahead into PHVs of its own (`Switch::process_batch`)
    /// with the same results as packet by packet.
    pub fn reset(&mut self) {
        // Empty vectors are skipped on purpose (see below).
        if !self.slots.is_empty() {
            self.slots.fill(0);
        }
        if !self.wide.is_empty() {
            self.wide.fill(0);
        }
        let (wire, valid) =
            Self::split_wire(buf_of_mut(&mut self.wire, self.wire_at), self.wire_len, self.metadata.len());
        wire.fill(0);
        if valid.len() <= 32 {
            // A handful of headers: a loop beats a call to `memcpy`.
            for (v, m) in valid.iter_mut().zip(&self.metadata) {
                *v = *m;
            }
        } else {
            valid.copy_from_slice(&self.metadata);
        }
        // Empty vectors are skipped on purpose: glibc's AVX-512 memset of zero
        // bytes at a dangling pointer costs ~100 ns on some AMD VMs.
        for v in [&mut self.varbit_len, &mut self.stack_next, &mut self.union_stack_next] {
            if !v.is_empty() {
                v.fill(0);
            }
        }
    }

    /// Makes every header invalid and keeps the metadata (what a PSA
    /// packet's egress starts from: the ingress's metadata, no headers).
    pub fn reset_headers(&mut self) {
        let (_, valid) = Self::split_wire(buf_of_mut(&mut self.wire, self.wire_at), self.wire_len, self.metadata.len());
        valid.copy_from_slice(&self.metadata);
        // Empty vectors skipped, as in `reset`.
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
        // (Headers and valid flags: one buffer.)
        self.buf_mut().copy_from_slice(o.buf());
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
            Loc::Wire { bit } => read_bits(self.buf(), bit as usize, f.width),
        }
    }

    /// Writes a field of at most 128 bits, masking to its width.
    #[inline]
    pub fn set(&mut self, f: &FieldInfo, v: u128) {
        match f.loc {
            Loc::Slot(i) => self.slots[i as usize] = v & mask128(f.width),
            Loc::Wire { bit } => write_bits(self.buf_mut(), bit as usize, f.width, v & mask128(f.width)),
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
            Loc::Wire { bit } => {
                write_bits(self.buf_mut(), bit as usize, f.width, be_to_u128(bytes) & mask128(f.width))
            }
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
            Loc::Wire { bit } => u128_to_be(read_bits(self.buf(), bit as usize, f.width), out),
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
        match (hd.wire, hs.wire) {
            (Some((a, n)), Some((b, m))) if n == m => {
                self.buf_mut().copy_within(b as usize..(b + n) as usize, a as usize);
            }
            _ => {
                for (fd, fs) in hd.fields.iter().zip(hs.fields.iter()) {
                    let (fd, fs) = (&layout.fields[*fd as usize], &layout.fields[*fs as usize]);
                    match (fd.loc, fs.loc) {
                        (Loc::Slot(a), Loc::Slot(b)) => self.slots[a as usize] = self.slots[b as usize],
                        (Loc::Wide { off: a, len }, Loc::Wide { off: b, .. }) => {
                            self.wide.copy_within(b as usize..(b + len) as usize, a as usize)
                        }
                        _ if fd.width <= 128 && fs.width <= 128 => {
                            let v = self.get(fs);
                            self.set(fd, v);
                        }
                        _ => {}
                    }
                }
            }
        }
        let v = self.valid()[src as usize];
        self.valid_mut()[dst as usize] = v;
        self.varbit_len[dst as usize] = self.varbit_len[src as usize];
    }

    /// Zeroes every field of a header.
    pub fn zero_header(&mut self, layout: &Layout, h: u32) {
        let hi = &layout.headers[h as usize];
        if let Some((off, n)) = hi.wire {
            self.buf_mut()[off as usize..(off + n) as usize].fill(0);
        }
        for f in &hi.fields {
            match layout.fields[*f as usize].loc {
                Loc::Slot(i) => self.slots[i as usize] = 0,
                Loc::Wide { off, len } => self.wide[off as usize..(off + len) as usize].fill(0),
                Loc::Wire { .. } => {}
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
    fn mask_top_clears_excess_bits() {
        let mut b = [0xff, 0xff];
        mask_top(&mut b, 9);
        assert_eq!(b, [0x01, 0xff]);
    }
}
