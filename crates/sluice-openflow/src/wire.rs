//! Bounds-checked reading and small writing helpers for the OpenFlow
//! wire format: a [`Reader`] over a byte slice whose every read returns
//! the caller's chosen [`OfError`] on a short buffer (never a panic), and
//! big-endian appends, 8-byte padding and length patching on `Vec<u8>`;
//! and what every version lays out alike, written once for 1.0 and 1.3:
//! the message envelope ([`open_message`], [`close_message`],
//! [`begin_message`], [`end_message`]) and the bodies the versions share
//! (ERROR, the switch configuration).

use crate::codec::{peek_header, Header, HEADER_LEN};
use crate::errors::{bad_request, error_type, OfError};

/// A cursor over `buf`. Short reads fail with the (type, code) given at
/// construction, so each structure reports the spec's own length error.
#[derive(Clone)]
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    err: (u16, u16),
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8], err: (u16, u16)) -> Reader<'a> {
        Reader { buf, pos: 0, err }
    }

    /// The error this reader reports for short or bad lengths.
    pub(crate) fn len_err(&self, what: &str) -> OfError {
        OfError::new(self.err.0, self.err.1, what.to_string())
    }

    pub(crate) fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    pub(crate) fn bytes(&mut self, n: usize, what: &str) -> Result<&'a [u8], OfError> {
        if n > self.remaining() {
            return Err(self.len_err(&format!("{what}: {n} bytes wanted, {} left", self.remaining())));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    /// Everything left.
    pub(crate) fn rest(&mut self) -> &'a [u8] {
        let s = &self.buf[self.pos..];
        self.pos = self.buf.len();
        s
    }

    pub(crate) fn skip(&mut self, n: usize, what: &str) -> Result<(), OfError> {
        self.bytes(n, what).map(|_| ())
    }

    pub(crate) fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], OfError> {
        let s = self.bytes(N, what)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    pub(crate) fn u8(&mut self, what: &str) -> Result<u8, OfError> {
        Ok(self.array::<1>(what)?[0])
    }

    pub(crate) fn u16(&mut self, what: &str) -> Result<u16, OfError> {
        Ok(u16::from_be_bytes(self.array(what)?))
    }

    pub(crate) fn u32(&mut self, what: &str) -> Result<u32, OfError> {
        Ok(u32::from_be_bytes(self.array(what)?))
    }

    pub(crate) fn u64(&mut self, what: &str) -> Result<u64, OfError> {
        Ok(u64::from_be_bytes(self.array(what)?))
    }

    /// A sub-reader over the next `n` bytes (same error code), advancing
    /// this one past them.
    pub(crate) fn sub(&mut self, n: usize, what: &str) -> Result<Reader<'a>, OfError> {
        let err = self.err;
        Ok(Reader::new(self.bytes(n, what)?, err))
    }

    /// A NUL-padded string field of `n` bytes: the bytes up to the first
    /// NUL, lossily as UTF-8, cut to at most `n - 1` bytes (on a character
    /// boundary) so that writing it back gives the same string.
    pub(crate) fn string(&mut self, n: usize, what: &str) -> Result<String, OfError> {
        let s = self.bytes(n, what)?;
        let end = s.iter().position(|&b| b == 0).unwrap_or(s.len());
        let text = String::from_utf8_lossy(&s[..end]);
        Ok(text[..floor_char(&text, n.saturating_sub(1))].to_string())
    }
}

/// The largest index `<= max` that is a character boundary of `s`.
pub(crate) fn floor_char(s: &str, max: usize) -> usize {
    (0..=max.min(s.len())).rev().find(|&i| s.is_char_boundary(i)).unwrap_or(0)
}

/// `n` rounded up to a multiple of 8.
pub(crate) fn round8(n: usize) -> usize {
    n.div_ceil(8) * 8
}

/// Big-endian appends and padding on an output buffer.
pub(crate) trait Put {
    fn u8(&mut self, v: u8);
    fn u16(&mut self, v: u16);
    fn u32(&mut self, v: u32);
    fn u64(&mut self, v: u64);
    fn zeros(&mut self, n: usize);
    /// Zeros until `len - start` is a multiple of 8.
    fn pad8_from(&mut self, start: usize);
    /// Writes `v` as a big-endian u16 at `at` (a length placeholder).
    fn patch_u16(&mut self, at: usize, v: usize);
    /// `s` truncated to `n - 1` bytes (on a character boundary),
    /// NUL-padded to `n`.
    fn string(&mut self, s: &str, n: usize);
}

impl Put for Vec<u8> {
    fn u8(&mut self, v: u8) {
        self.push(v);
    }
    fn u16(&mut self, v: u16) {
        self.extend_from_slice(&v.to_be_bytes());
    }
    fn u32(&mut self, v: u32) {
        self.extend_from_slice(&v.to_be_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.extend_from_slice(&v.to_be_bytes());
    }
    fn zeros(&mut self, n: usize) {
        self.resize(self.len() + n, 0);
    }
    fn pad8_from(&mut self, start: usize) {
        let n = round8(self.len() - start) - (self.len() - start);
        self.zeros(n);
    }
    fn patch_u16(&mut self, at: usize, v: usize) {
        // Lengths past 65535 cannot be expressed; callers keep messages
        // within the protocol's limit.
        let v = u16::try_from(v).unwrap_or(u16::MAX);
        self[at..at + 2].copy_from_slice(&v.to_be_bytes());
    }
    fn string(&mut self, s: &str, n: usize) {
        let k = floor_char(s, n.saturating_sub(1));
        self.extend_from_slice(&s.as_bytes()[..k]);
        self.zeros(n - k);
    }
}

fn bad_request_error(code: u16, reason: String) -> OfError {
    // OFPET_BAD_REQUEST and its BAD_VERSION / BAD_TYPE / BAD_LEN codes have
    // the same numbers in 1.0 and 1.3.
    OfError::new(error_type::BAD_REQUEST, code, reason)
}

/// Opens one whole message for decoding: its header and a reader over
/// its body (short reads: BAD_REQUEST / BAD_LEN). The header's length
/// must be `msg.len()`; `version_ok` says whether its version is one this
/// decoder takes (else BAD_REQUEST / BAD_VERSION saying `version_is`).
pub(crate) fn open_message<'a>(
    msg: &'a [u8],
    version_ok: impl FnOnce(&Header) -> bool,
    version_is: impl FnOnce(&Header) -> String,
) -> Result<(Header, Reader<'a>), OfError> {
    let h = peek_header(msg)
        .ok_or_else(|| bad_request_error(bad_request::BAD_LEN, "message shorter than its header".into()))?;
    if usize::from(h.length) != msg.len() {
        let why = format!("header length {} but {} bytes", h.length, msg.len());
        return Err(bad_request_error(bad_request::BAD_LEN, why));
    }
    if !version_ok(&h) {
        return Err(bad_request_error(bad_request::BAD_VERSION, version_is(&h)));
    }
    Ok((h, Reader::new(&msg[HEADER_LEN..], (error_type::BAD_REQUEST, bad_request::BAD_LEN))))
}

/// Ends decoding a message: nothing may be left of its body.
pub(crate) fn close_message(r: &Reader<'_>) -> Result<(), OfError> {
    if r.is_empty() {
        return Ok(());
    }
    Err(bad_request_error(bad_request::BAD_LEN, format!("{} trailing bytes", r.remaining())))
}

/// Starts a message in `out` (its length is written by [`end_message`]);
/// returns where it starts.
pub(crate) fn begin_message(out: &mut Vec<u8>, version: u8, typ: u8, xid: u32) -> usize {
    let start = out.len();
    out.u8(version);
    out.u8(typ);
    out.u16(0);
    out.u32(xid);
    start
}

/// Writes the length of the message started at `start`.
pub(crate) fn end_message(out: &mut Vec<u8>, start: usize) {
    out.patch_u16(start + 2, out.len() - start);
}

/// An ERROR body: type, code and the data (the same in every version).
pub(crate) fn put_error(out: &mut Vec<u8>, typ: u16, code: u16, data: &[u8]) {
    out.u16(typ);
    out.u16(code);
    out.extend_from_slice(data);
}

/// An ERROR body: `(type, code, data)`.
pub(crate) fn get_error(r: &mut Reader<'_>) -> Result<(u16, u16, Vec<u8>), OfError> {
    Ok((r.u16("error type")?, r.u16("error code")?, r.rest().to_vec()))
}

/// The switch configuration body (GET_CONFIG_REPLY, SET_CONFIG): flags
/// and `miss_send_len`, the same in every version.
pub(crate) fn put_switch_config(out: &mut Vec<u8>, flags: u16, miss_send_len: u16) {
    out.u16(flags);
    out.u16(miss_send_len);
}

/// The switch configuration body: `(flags, miss_send_len)`.
pub(crate) fn get_switch_config(r: &mut Reader<'_>) -> Result<(u16, u16), OfError> {
    Ok((r.u16("flags")?, r.u16("miss_send_len")?))
}
