//! The data of an `expect` line: hex nibbles with `*` wildcards and an
//! optional trailing `$`, and the comparison p4c's runner performs.

use std::fmt;
use std::str::FromStr;

use crate::value::ValueError;

/// Expected packet contents from an `expect` line.
///
/// Exists because STF compares packets nibble by nibble (not byte by byte),
/// with per-nibble wildcards and prefix-vs-exact length semantics; keeping the
/// pattern typed lets the test harness both decide and explain a failure.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct ExpectPattern {
    /// One entry per written hex digit, first digit = high nibble of byte 0.
    /// `Some(0..=15)` must match exactly; `None` (`*`) matches any nibble.
    pub nibbles: Vec<Option<u8>>,
    /// A trailing `$` was written: the packet must be exactly as long as the
    /// pattern. Without it the pattern only has to match a prefix.
    pub exact_len: bool,
}

/// The `i`-th nibble (0 = high nibble of byte 0) of a packet.
fn nibble_at(packet: &[u8], i: usize) -> u8 {
    let b = packet[i / 2];
    if i & 1 == 0 {
        b >> 4
    } else {
        b & 0x0f
    }
}

fn hex_char(n: u8) -> char {
    char::from_digit(u32::from(n), 16).unwrap_or('?')
}

impl ExpectPattern {
    /// Parse expect data as it follows the port on an `expect` line, e.g.
    /// `01 **** ** $` or `00$`. Spaces and tabs are ignored; `$` must come
    /// last. An empty string gives an empty pattern that matches any packet.
    /// An odd number of digits is allowed (only the high nibble of the last
    /// byte is compared) unless `$` is present, since then no packet could
    /// ever match.
    pub fn parse(data: &str) -> Result<ExpectPattern, ValueError> {
        let mut nibbles = Vec::new();
        let mut exact_len = false;
        for c in data.chars() {
            if exact_len {
                if c.is_whitespace() {
                    continue;
                }
                return Err(ValueError::new(format!(
                    "unexpected '{c}' after '$' (the '$' must be the last thing in expect data)"
                )));
            }
            match c {
                '*' => nibbles.push(None),
                '$' => exact_len = true,
                c if c.is_whitespace() => {}
                c => match c.to_digit(16) {
                    Some(d) => nibbles.push(Some(d as u8)),
                    None => {
                        return Err(ValueError::new(format!(
                            "invalid character '{c}' in expect data (hex digits, '*' and '$' only)"
                        )))
                    }
                },
            }
        }
        if exact_len && nibbles.len() & 1 == 1 {
            return Err(ValueError::new(format!(
                "expect data ending in '$' has an odd number of hex digits ({}); no packet can match",
                nibbles.len()
            )));
        }
        Ok(ExpectPattern { nibbles, exact_len })
    }

    /// True if `packet` satisfies the pattern (p4c `testutils.compare_pkt`
    /// semantics): every non-`*` nibble equals the packet's nibble at the same
    /// position, the packet is at least as long as the pattern, and with
    /// `exact_len` not longer either.
    pub fn matches(&self, packet: &[u8]) -> bool {
        self.describe_mismatch(packet).is_none()
    }

    /// `None` if `packet` matches; otherwise a human-readable description of
    /// the first difference (nibble index, byte offset, expected vs. received
    /// digit) and/or the length problem, for test failure reports.
    pub fn describe_mismatch(&self, packet: &[u8]) -> Option<String> {
        let have = packet.len() * 2;
        let want = self.nibbles.len();
        let mut problems = Vec::new();
        let first_diff = self
            .nibbles
            .iter()
            .take(have)
            .enumerate()
            .find(|(i, n)| matches!(n, Some(v) if *v != nibble_at(packet, *i)));
        if let Some((i, Some(expected))) = first_diff {
            let byte = i / 2;
            let pat_hi = self.nibbles[byte * 2];
            let pat_lo = self.nibbles.get(byte * 2 + 1).copied().flatten();
            let show = |n: Option<u8>| n.map_or('*', hex_char);
            let pat_byte = if byte * 2 + 1 < want {
                format!("{}{}", show(pat_hi), show(pat_lo))
            } else {
                format!("{}*", show(pat_hi))
            };
            problems.push(format!(
                "first difference at nibble {i} (byte offset {byte}, {} nibble): expected {}, got {} (expected byte {pat_byte}, got {:02x})",
                if i & 1 == 0 { "high" } else { "low" },
                hex_char(*expected),
                hex_char(nibble_at(packet, i)),
                packet[byte],
            ));
        }
        if have < want {
            problems.push(format!(
                "packet too short: got {} bytes ({have} hex digits), expected {} {} ({want} hex digits)",
                packet.len(),
                if self.exact_len { "exactly" } else { "at least" },
                plural_bytes(want.div_ceil(2)),
            ));
        } else if self.exact_len && have > want {
            problems.push(format!(
                "packet too long: got {} bytes, expected exactly {}",
                packet.len(),
                plural_bytes(want / 2),
            ));
        }
        if problems.is_empty() {
            None
        } else {
            Some(problems.join("; "))
        }
    }
}

fn plural_bytes(n: usize) -> String {
    if n == 1 {
        "1 byte".to_string()
    } else {
        format!("{n} bytes")
    }
}

impl FromStr for ExpectPattern {
    type Err = ValueError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ExpectPattern::parse(s)
    }
}

/// Prints the pattern as lowercase hex with `*` wildcards and a trailing `$`
/// when the length is exact (re-parseable by [`ExpectPattern::parse`]). The
/// alternate form (`{:#}`) puts a space between bytes for reports.
impl fmt::Display for ExpectPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, n) in self.nibbles.iter().enumerate() {
            if f.alternate() && i > 0 && i & 1 == 0 {
                f.write_str(" ")?;
            }
            let c = n.map_or('*', hex_char);
            write!(f, "{c}")?;
        }
        if self.exact_len {
            if f.alternate() && !self.nibbles.is_empty() {
                f.write_str(" ")?;
            }
            f.write_str("$")?;
        }
        Ok(())
    }
}
