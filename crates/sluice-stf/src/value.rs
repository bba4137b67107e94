//! Numbers and table-key values as they are written in STF files, and their
//! conversion to the big-endian byte strings a switch needs.
//!
//! Values are kept as written (base, digits, `*` wildcards) because their
//! meaning depends on the width and match kind of the field they are applied
//! to, which only a later stage (one that has read the BMv2 JSON) knows.

use std::fmt;
use std::str::FromStr;

/// The base a number was written in.
///
/// Exists because the base changes meaning for table keys: one hexadecimal
/// digit covers 4 bits of mask/prefix, one binary digit covers 1 bit, and
/// decimal numbers cannot carry wildcards at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Radix {
    /// Plain decimal, e.g. `10`.
    Decimal,
    /// `0x`/`0X` prefix, e.g. `0x0a`.
    Hex,
    /// `0b`/`0B` prefix, e.g. `0b1010`.
    Binary,
}

impl Radix {
    /// Number of bits one written digit stands for (4 for hex, 1 for binary),
    /// or `None` for decimal, where digits do not map to whole bits.
    pub fn bits_per_digit(self) -> Option<u32> {
        match self {
            Radix::Decimal => None,
            Radix::Hex => Some(4),
            Radix::Binary => Some(1),
        }
    }

    /// The numeric base (10, 16 or 2); needed to turn digits into a value.
    pub fn base(self) -> u32 {
        match self {
            Radix::Decimal => 10,
            Radix::Hex => 16,
            Radix::Binary => 2,
        }
    }
}

/// Error from parsing a number/key/pattern on its own or from converting a
/// value to a field of a given width.
///
/// Exists separately from [`crate::StfError`] because these operations have no
/// line number of their own; callers attach context (line, table, field).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValueError {
    message: String,
}

impl ValueError {
    pub(crate) fn new(message: impl Into<String>) -> Self {
        ValueError { message: message.into() }
    }

    /// The human-readable description of the problem.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for ValueError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ValueError {}

/// Split a literal into sign, base and per-digit values (`None` = `*`).
fn split_literal(text: &str, allow_wildcards: bool) -> Result<(bool, Radix, Vec<Option<u8>>), ValueError> {
    let (negative, body) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (radix, digits) = if let Some(r) = body.strip_prefix("0x").or(body.strip_prefix("0X")) {
        (Radix::Hex, r)
    } else if let Some(r) = body.strip_prefix("0b").or(body.strip_prefix("0B")) {
        (Radix::Binary, r)
    } else {
        (Radix::Decimal, body)
    };
    if digits.is_empty() {
        return Err(ValueError::new(format!("number '{text}' has no digits")));
    }
    let mut out = Vec::with_capacity(digits.len());
    for c in digits.chars() {
        if c == '*' {
            if radix == Radix::Decimal {
                return Err(ValueError::new(format!(
                    "'{text}': wildcard '*' is only allowed in hex (0x) or binary (0b) numbers"
                )));
            }
            if !allow_wildcards {
                return Err(ValueError::new(format!("'{text}': wildcard '*' is not allowed here")));
            }
            if negative {
                return Err(ValueError::new(format!("'{text}': a negative number cannot contain '*'")));
            }
            out.push(None);
        } else {
            match c.to_digit(radix.base()) {
                Some(d) => out.push(Some(d as u8)),
                None => {
                    return Err(ValueError::new(format!(
                        "'{text}': invalid digit '{c}' for a {} number",
                        match radix {
                            Radix::Decimal => "decimal",
                            Radix::Hex => "hexadecimal",
                            Radix::Binary => "binary",
                        }
                    )))
                }
            }
        }
    }
    Ok((negative, radix, out))
}

/// Accumulate digits into a minimal big-endian magnitude (empty for zero).
fn magnitude_of(base: u32, digits: impl IntoIterator<Item = u8>) -> Vec<u8> {
    let mut mag: Vec<u8> = Vec::new();
    for d in digits {
        let mut carry = u32::from(d);
        for byte in mag.iter_mut().rev() {
            let v = u32::from(*byte) * base + carry;
            *byte = v as u8;
            carry = v >> 8;
        }
        while carry > 0 {
            mag.insert(0, carry as u8);
            carry >>= 8;
        }
    }
    mag
}

/// Number of significant bits in a minimal big-endian magnitude.
fn bit_len(mag: &[u8]) -> u64 {
    match mag.iter().position(|&b| b != 0) {
        None => 0,
        Some(i) => (mag.len() - i) as u64 * 8 - u64::from(mag[i].leading_zeros()),
    }
}

/// Bytes needed for a field of `width_bits` bits.
fn byte_len(width_bits: u32) -> usize {
    (width_bits as usize).div_ceil(8)
}

/// Right-align `mag` into a `width_bits` wide big-endian buffer, dropping any
/// bits at or above `width_bits`.
fn place_truncating(mag: &[u8], width_bits: u32) -> Vec<u8> {
    let n = byte_len(width_bits);
    let mut out = vec![0u8; n];
    for (dst, src) in out.iter_mut().rev().zip(mag.iter().rev()) {
        *dst = *src;
    }
    if let Some(first) = out.first_mut() {
        let excess = n * 8 - width_bits as usize;
        *first &= 0xffu8 >> excess;
    }
    out
}

/// Right-align `mag` into a `width_bits` wide buffer, or `None` if it has a
/// set bit at or above `width_bits`.
fn place(mag: &[u8], width_bits: u32) -> Option<Vec<u8>> {
    if bit_len(mag) > u64::from(width_bits) {
        None
    } else {
        Some(place_truncating(mag, width_bits))
    }
}

/// Two's complement negation inside a `width_bits` wide buffer.
fn negate_in_place(buf: &mut [u8], width_bits: u32) {
    let mut carry = 1u16;
    for b in buf.iter_mut().rev() {
        let v = u16::from(!*b) + carry;
        *b = v as u8;
        carry = v >> 8;
    }
    let excess = buf.len() * 8 - width_bits as usize;
    if let Some(first) = buf.first_mut() {
        *first &= 0xffu8 >> excess;
    }
}

/// Clear the `count` least significant bits of a big-endian buffer.
fn clear_low_bits(buf: &mut [u8], count: u32) {
    let n = buf.len();
    for pos in 0..count as usize {
        if pos / 8 >= n {
            break;
        }
        buf[n - 1 - pos / 8] &= !(1u8 << (pos % 8));
    }
}

/// A plain number (action parameter, counter index, check value) as written:
/// decimal, `0x` hex or `0b` binary, optionally negative, of any size.
///
/// Exists so that parameters wider than 128 bits survive parsing and so that
/// the conversion to a field of known width (which needs the JSON) can happen
/// later, via [`Number::to_bytes`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Number {
    text: String,
    negative: bool,
    radix: Radix,
    magnitude: Vec<u8>,
}

impl Number {
    /// Parse a number such as `10`, `-3`, `0x0A`, `0b101`; `*` is rejected.
    pub fn parse(text: &str) -> Result<Number, ValueError> {
        let (negative, radix, digits) = split_literal(text, false)?;
        let magnitude = magnitude_of(radix.base(), digits.into_iter().flatten());
        Ok(Number { text: text.to_string(), negative: negative && !magnitude.is_empty(), radix, magnitude })
    }

    /// The number exactly as written in the file (for messages and CLI text).
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The base it was written in.
    pub fn radix(&self) -> Radix {
        self.radix
    }

    /// True for a negative number (`-0` is not negative).
    pub fn is_negative(&self) -> bool {
        self.negative
    }

    /// Absolute value as minimal big-endian bytes (empty for zero); lets
    /// callers handle arbitrarily large values themselves.
    pub fn magnitude(&self) -> &[u8] {
        &self.magnitude
    }

    /// The value as `u128` if it is non-negative and fits.
    pub fn to_u128(&self) -> Option<u128> {
        if self.negative || self.magnitude.len() > 16 {
            return None;
        }
        Some(self.magnitude.iter().fold(0u128, |acc, &b| (acc << 8) | u128::from(b)))
    }

    /// The value as `u64` if it is non-negative and fits (ports, indices).
    pub fn to_u64(&self) -> Option<u64> {
        self.to_u128().and_then(|v| u64::try_from(v).ok())
    }

    /// The value as `i64` if it fits (priorities, signed comparisons).
    pub fn to_i64(&self) -> Option<i64> {
        if self.magnitude.len() > 16 {
            return None;
        }
        let m = self.magnitude.iter().fold(0u128, |acc, &b| (acc << 8) | u128::from(b));
        let v = if self.negative { -(i128::try_from(m).ok()?) } else { i128::try_from(m).ok()? };
        i64::try_from(v).ok()
    }

    /// Big-endian bytes (`ceil(width_bits / 8)` of them) of the value in a
    /// field of `width_bits` bits. Negative values become two's complement.
    /// Errors when the absolute value needs more than `width_bits` bits, so a
    /// typo in a test does not silently lose bits.
    pub fn to_bytes(&self, width_bits: u32) -> Result<Vec<u8>, ValueError> {
        let mut out = place(&self.magnitude, width_bits)
            .ok_or_else(|| ValueError::new(format!("value {} does not fit in {width_bits} bits", self.text)))?;
        if self.negative {
            negate_in_place(&mut out, width_bits);
        }
        Ok(out)
    }

    /// Like [`Number::to_bytes`] but keeps only the low `width_bits` bits
    /// (value modulo 2^width), the lenient behaviour of assigning a too-wide
    /// constant to a P4 `bit<W>`.
    pub fn to_bytes_wrapping(&self, width_bits: u32) -> Vec<u8> {
        let mut out = place_truncating(&self.magnitude, width_bits);
        if self.negative {
            negate_in_place(&mut out, width_bits);
        }
        out
    }
}

impl FromStr for Number {
    type Err = ValueError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Number::parse(s)
    }
}

impl fmt::Display for Number {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// A table-key value from an `add` line, kept as written: base, digits with
/// `*` wildcards, and an optional `/len` suffix.
///
/// Exists because the same text means different things per match kind; the
/// stage that knows the field's width and kind calls [`KeyValue::to_exact`],
/// [`KeyValue::to_ternary`] or [`KeyValue::to_lpm`]. All conversions treat the
/// written number as right-aligned in the field (like any integer constant)
/// and return big-endian byte vectors of `ceil(width_bits / 8)` bytes, so
/// fields wider than 128 bits work.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct KeyValue {
    text: String,
    negative: bool,
    radix: Radix,
    digits: Vec<Option<u8>>,
    prefix_len: Option<u32>,
}

impl KeyValue {
    /// Parse `value` or `value/len` (e.g. `0x****0101`, `0b10**`, `17`,
    /// `0x0a000000/8`). Whitespace around `/` is not accepted here (the line
    /// parser handles it and calls [`KeyValue::from_parts`]).
    pub fn parse(text: &str) -> Result<KeyValue, ValueError> {
        match text.split_once('/') {
            Some((v, l)) => KeyValue::from_parts(v, Some(l)),
            None => KeyValue::from_parts(text, None),
        }
    }

    /// Build from the value text and optional prefix-length text of a
    /// `value/len` key; exists so the tokenizing line parser can hand over
    /// the two pieces separately.
    pub fn from_parts(value: &str, prefix_len: Option<&str>) -> Result<KeyValue, ValueError> {
        let (negative, radix, digits) = split_literal(value, true)?;
        let (prefix_len, text) = match prefix_len {
            None => (None, value.to_string()),
            Some(l) => {
                let n = Number::parse(l)?;
                let len = n
                    .to_u64()
                    .and_then(|v| u32::try_from(v).ok())
                    .ok_or_else(|| ValueError::new(format!("invalid prefix length '{l}' in '{value}/{l}'")))?;
                if digits.iter().any(Option::is_none) {
                    return Err(ValueError::new(format!(
                        "'{value}/{l}': '*' cannot be combined with an explicit prefix length"
                    )));
                }
                (Some(len), format!("{value}/{l}"))
            }
        };
        Ok(KeyValue { text, negative, radix, digits, prefix_len })
    }

    /// The value exactly as written (including any `/len`).
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The base the digits were written in.
    pub fn radix(&self) -> Radix {
        self.radix
    }

    /// The written digits, most significant first; `None` is a `*`. For
    /// decimal values these are decimal digits (never `None`).
    pub fn digits(&self) -> &[Option<u8>] {
        &self.digits
    }

    /// True if the value was written with a leading `-`.
    pub fn is_negative(&self) -> bool {
        self.negative
    }

    /// The explicit prefix length of a `value/len` key, if one was written.
    pub fn prefix_len(&self) -> Option<u32> {
        self.prefix_len
    }

    /// True if any digit is `*`.
    pub fn has_wildcards(&self) -> bool {
        self.digits.iter().any(Option::is_none)
    }

    /// Bits covered by the written digits (digits x 4 for hex, x 1 for
    /// binary); `None` for decimal.
    pub fn written_bits(&self) -> Option<u64> {
        self.radix.bits_per_digit().map(|b| self.digits.len() as u64 * u64::from(b))
    }

    /// Magnitude of the digits with every `*` read as `fill`.
    fn magnitude_with(&self, fill: u8) -> Vec<u8> {
        magnitude_of(self.radix.base(), self.digits.iter().map(|d| d.unwrap_or(fill)))
    }

    fn too_wide(&self, width_bits: u32) -> ValueError {
        ValueError::new(format!("key value {} does not fit in a {width_bits}-bit field", self.text))
    }

    /// Value for an `exact` (or `valid`) key in a field of `width_bits` bits.
    ///
    /// Errors on `*`, on `/len`, and when the value needs more than
    /// `width_bits` bits (leading zero digits beyond the width are fine).
    /// Negative values become two's complement.
    pub fn to_exact(&self, width_bits: u32) -> Result<Vec<u8>, ValueError> {
        if self.has_wildcards() {
            return Err(ValueError::new(format!("'*' is not allowed in an exact key value ({})", self.text)));
        }
        if self.prefix_len.is_some() {
            return Err(ValueError::new(format!("'value/len' is only meaningful for lpm keys ({})", self.text)));
        }
        let mut out = place(&self.magnitude_with(0), width_bits).ok_or_else(|| self.too_wide(width_bits))?;
        if self.negative && out.iter().any(|&b| b != 0) {
            negate_in_place(&mut out, width_bits);
        }
        Ok(out)
    }

    /// `(value, mask)` for a `ternary` (or `optional`) key of `width_bits`.
    ///
    /// p4c semantics: every written digit is a value digit (mask all ones over
    /// its 4 or 1 bits) or `*` (mask zero); bits above the written digits have
    /// mask zero, so `0x1` on a 32-bit field matches only the low nibble.
    /// Digits written beyond the field width: `*` and zero bits there are
    /// dropped (the field has no such bits), but a one bit there would make
    /// the entry unmatchable and is an error. Decimal values (rejected by
    /// p4c's runner), negative values and `/len` are errors.
    pub fn to_ternary(&self, width_bits: u32) -> Result<(Vec<u8>, Vec<u8>), ValueError> {
        let bits = self.radix.bits_per_digit().ok_or_else(|| {
            ValueError::new(format!("ternary key value {} must be hex (0x) or binary (0b), not decimal", self.text))
        })?;
        if self.negative {
            return Err(ValueError::new(format!("negative ternary key value {} is not supported", self.text)));
        }
        if self.prefix_len.is_some() {
            return Err(ValueError::new(format!("'value/len' is only meaningful for lpm keys ({})", self.text)));
        }
        let value = place(&self.magnitude_with(0), width_bits).ok_or_else(|| self.too_wide(width_bits))?;
        let full = ((1u16 << bits) - 1) as u8;
        let mask_mag = magnitude_of(self.radix.base(), self.digits.iter().map(|d| if d.is_some() { full } else { 0 }));
        let mask = place_truncating(&mask_mag, width_bits);
        Ok((value, mask))
    }

    /// `(value, prefix_len)` for an `lpm` key of `width_bits` bits.
    ///
    /// * `value/len`: the value (must fit) with bits below the prefix
    ///   cleared; `len` must not exceed the width. (p4c's runner cannot
    ///   execute this form; this is the obvious meaning.)
    /// * hex/binary with trailing `*` digits: the `*` digits are the
    ///   don't-care low bits, so `prefix_len = width - 4*stars` (hex) or
    ///   `width - stars` (binary), saturating at 0; `*` read as 0 in the value.
    ///   When the written digits exactly cover the field (the only case in the
    ///   corpus) this equals p4c's rule "non-`*` digits times 4 (or 1)":
    ///   `0x0a0000**` on 32 bits is `0x0a000000/24`, `0x0a000001` is /32.
    ///   When fewer digits are written, the missing leading digits are zeros
    ///   that belong to the prefix (the value is a right-aligned number, as
    ///   for exact and ternary keys); p4c's runner would instead give
    ///   `non-* digits * 4` measured from the top of the field, which
    ///   contradicts the right-aligned value (use [`KeyValue::to_lpm_p4c`]
    ///   for that). Extra leading digits beyond the width must be zero (or
    ///   `*`); e.g. `0x1**` on a 9-bit field is `0x100/1`.
    /// * `*` followed by a value digit is not a prefix and is an error.
    /// * decimal without `/len` (mis-translated by p4c's runner) is a
    ///   full-width prefix: `prefix_len = width`.
    pub fn to_lpm(&self, width_bits: u32) -> Result<(Vec<u8>, u32), ValueError> {
        if self.negative {
            return Err(ValueError::new(format!("negative lpm key value {} is not supported", self.text)));
        }
        if let Some(len) = self.prefix_len {
            if len > width_bits {
                return Err(ValueError::new(format!(
                    "prefix length {len} of {} exceeds the {width_bits}-bit field",
                    self.text
                )));
            }
            let mut value = place(&self.magnitude_with(0), width_bits).ok_or_else(|| self.too_wide(width_bits))?;
            clear_low_bits(&mut value, width_bits - len);
            return Ok((value, len));
        }
        let Some(bits) = self.radix.bits_per_digit() else {
            let value = place(&self.magnitude_with(0), width_bits).ok_or_else(|| self.too_wide(width_bits))?;
            return Ok((value, width_bits));
        };
        let first_star = self.digits.iter().position(Option::is_none).unwrap_or(self.digits.len());
        if self.digits[first_star..].iter().any(Option::is_some) {
            return Err(ValueError::new(format!("lpm key value {}: '*' digits must all be at the end", self.text)));
        }
        let star_bits = (self.digits.len() - first_star) as u64 * u64::from(bits);
        let value = place(&self.magnitude_with(0), width_bits).ok_or_else(|| self.too_wide(width_bits))?;
        let prefix = u64::from(width_bits).saturating_sub(star_bits) as u32;
        Ok((value, prefix))
    }

    /// `(value, prefix_len)` exactly as p4c's bmv2 runner would compute them
    /// for an `lpm` key, for callers that want bit-for-bit runner behaviour
    /// rather than the [`KeyValue::to_lpm`] reading: `*` read as 0, the value
    /// right-aligned, and `prefix_len` = number of non-`*` digits times 4
    /// (hex) or 1 (binary), wherever they are. Equals `to_lpm` whenever the
    /// written digits exactly cover the field and `*` only trails. Bits
    /// below the prefix are *not* cleared (the runner does not clear them).
    /// Errors where the runner fails: decimal values (mis-translated),
    /// `value/len` (raises), a prefix longer than the field, or a value that
    /// does not fit.
    pub fn to_lpm_p4c(&self, width_bits: u32) -> Result<(Vec<u8>, u32), ValueError> {
        if self.prefix_len.is_some() {
            return Err(ValueError::new(format!(
                "p4c's bmv2 runner cannot execute 'value/len' lpm keys ({})",
                self.text
            )));
        }
        let bits = self.radix.bits_per_digit().ok_or_else(|| {
            ValueError::new(format!("p4c's bmv2 runner mis-translates decimal lpm key values ({})", self.text))
        })?;
        if self.negative {
            return Err(ValueError::new(format!("negative lpm key value {} is not supported", self.text)));
        }
        let prefix = self.digits.iter().filter(|d| d.is_some()).count() as u64 * u64::from(bits);
        if prefix > u64::from(width_bits) {
            return Err(ValueError::new(format!(
                "lpm key value {} gives prefix length {prefix}, longer than the {width_bits}-bit field",
                self.text
            )));
        }
        let value = place(&self.magnitude_with(0), width_bits).ok_or_else(|| self.too_wide(width_bits))?;
        Ok((value, prefix as u32))
    }
}

impl FromStr for KeyValue {
    type Err = ValueError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        KeyValue::parse(s)
    }
}

impl fmt::Display for KeyValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}
