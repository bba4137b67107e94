//! One OpenFlow connection, either end, without I/O: the byte stream cut
//! into whole messages, HELLO and version negotiation, echo replies and
//! inactivity probes, a bounded outbox. The switch's agent and the
//! controller own the sockets (plain TCP or TLS) and hand this the bytes
//! they read ([`Connection::received`], or [`Connection::read_from`] over
//! any `Read`); what they get back are the messages past the handshake,
//! whole and in order ([`Connection::next_incoming`]); what they send waits in the
//! outbox until they write it ([`Connection::output`],
//! [`Connection::write_to`]).
//!
//! Contract:
//! - our HELLO (a version bitmap of every version spoken, in the highest)
//!   is queued at once; the peer's HELLO fixes the version
//!   ([`crate::negotiate`]), or, with none in common, a HELLO_FAILED /
//!   INCOMPATIBLE error is queued and the connection closed; a first
//!   message that is not HELLO closes it when HELLO is required, else the
//!   highest version is spoken (as Open vSwitch does);
//! - ECHO_REQUEST is answered here, ECHO_REPLY taken here: neither reaches
//!   the caller;
//! - a length below 8 cannot be framed: a BAD_REQUEST / BAD_LEN error is
//!   queued (quoting the header) and the connection closed;
//! - silence: after each echo interval without a byte, an echo request
//!   (only once the version is known), three at most; a fourth interval
//!   of silence closes the connection (a peer that never sent its HELLO
//!   too);
//! - the outbox holds [`Settings::max_output`] bytes at most: a message
//!   beyond is dropped and counted, or closes the connection, as the
//!   settings say ([`Full`]).
//!
//! Whatever closed the connection is kept ([`Connection::closed`]); the
//! caller writes the last words still queued (an ERROR) and drops it.

use std::io::{self, ErrorKind, Read, Write};
use std::ops::Range;
use std::time::{Duration, Instant};

use crate::codec::{negotiate, peek_header, HEADER_LEN};
use crate::errors::{bad_request, error_type, hello_failed};
use crate::types::{HelloElement, Message as Msg13};
use crate::wire::{begin_message, end_message, put_error};

/// `ofp_type` values the same in every version.
pub mod msg_type {
    pub const HELLO: u8 = 0;
    pub const ERROR: u8 = 1;
    pub const ECHO_REQUEST: u8 = 2;
    pub const ECHO_REPLY: u8 = 3;
}

/// What a full outbox does to one more message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Full {
    /// The message is dropped (and counted): the controller toward a slow switch.
    Drop,
    /// The connection is closed: the switch toward a controller that stopped reading.
    Close,
}

/// How a connection behaves.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Versions spoken (`of10::OFP10` = 1, [`crate::OFP13`] = 4...).
    pub versions: Vec<u8>,
    /// Silence before an echo request; three unanswered, the next interval closes the connection.
    pub echo_interval: Duration,
    /// Bytes that may wait in the outbox.
    pub max_output: usize,
    pub when_full: Full,
    /// A peer whose first message is not HELLO is refused (else spoken to
    /// in the highest version).
    pub hello_required: bool,
}

/// Why a connection closed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Closed {
    /// A message length below 8: the stream cannot be framed.
    BadFraming,
    /// No version in common.
    Incompatible(String),
    /// The first message was not HELLO.
    NoHello,
    /// Three echo requests unanswered (or no HELLO in four echo intervals).
    Silent,
    /// The outbox overflowed: the peer stopped reading.
    Stuck,
    /// The peer closed its side.
    Eof,
    /// The caller closed it, for this reason.
    Other(String),
}

impl std::fmt::Display for Closed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Closed::BadFraming => f.write_str("a message shorter than its header"),
            Closed::Incompatible(why) => f.write_str(why),
            Closed::NoHello => f.write_str("the first message was not HELLO"),
            Closed::Silent => f.write_str("no answer to three echo requests"),
            Closed::Stuck => f.write_str("it stopped reading"),
            Closed::Eof => f.write_str("the peer closed it"),
            Closed::Other(why) => f.write_str(why),
        }
    }
}

/// A whole message from the peer, past the handshake; its bytes are
/// [`Connection::bytes`] until the next [`Connection::received`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub version: u8,
    pub typ: u8,
    pub xid: u32,
    range: Range<usize>,
}

/// What [`Connection::next_incoming`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Incoming {
    /// The HELLOs crossed: this version is spoken from now on.
    Negotiated(u8),
    /// A message for the caller.
    Message(Frame),
}

/// One connection (see the module documentation).
#[derive(Debug)]
pub struct Connection {
    settings: Settings,
    input: Vec<u8>,
    /// Bytes of `input` already handed out.
    read: usize,
    output: Vec<u8>,
    /// Bytes of `output` already written.
    written: usize,
    version: Option<u8>,
    last_heard: Instant,
    /// Echo requests sent since the peer was last heard.
    echoes: u32,
    closed: Option<Closed>,
    next_xid: u32,
    /// Messages dropped for a full outbox.
    dropped: u64,
}

impl Connection {
    /// A connection opened at `now`, our HELLO queued.
    pub fn new(settings: Settings, now: Instant) -> Connection {
        let top = settings.versions.iter().copied().max().unwrap_or(crate::OFP13);
        let bitmap = settings.versions.iter().fold(0u32, |b, v| b | 1 << v);
        let mut c = Connection {
            settings,
            input: Vec::new(),
            read: 0,
            output: Vec::new(),
            written: 0,
            version: None,
            last_heard: now,
            echoes: 0,
            closed: None,
            next_xid: 0,
            dropped: 0,
        };
        let hello = Msg13::Hello(vec![HelloElement::VersionBitmap(vec![bitmap])]);
        c.send(|out| crate::encode_into(&hello, top, 0, out));
        c
    }

    /// The version spoken, once negotiated.
    pub fn version(&self) -> Option<u8> {
        self.version
    }

    /// Why the connection closed, once it did.
    pub fn closed(&self) -> Option<&Closed> {
        self.closed.as_ref()
    }

    /// Closes the connection (what is queued may still be written).
    pub fn close(&mut self, why: Closed) {
        self.closed.get_or_insert(why);
    }

    /// Messages dropped for a full outbox so far.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// A fresh transaction id.
    pub fn xid(&mut self) -> u32 {
        self.next_xid = self.next_xid.wrapping_add(1);
        self.next_xid
    }

    /// Bytes read from the peer at `now`.
    pub fn received(&mut self, bytes: &[u8], now: Instant) {
        if bytes.is_empty() {
            return;
        }
        if self.read > 0 {
            self.input.drain(..self.read);
            self.read = 0;
        }
        self.input.extend_from_slice(bytes);
        self.last_heard = now;
        self.echoes = 0;
    }

    /// Bytes read and not handed out yet.
    pub fn unread(&self) -> usize {
        self.input.len() - self.read
    }

    /// The bytes of `frame`, header included.
    pub fn bytes(&self, frame: &Frame) -> &[u8] {
        &self.input[frame.range.clone()]
    }

    /// The next whole message for the caller (HELLO, echoes handled here);
    /// `None` when no whole message waits or the connection closed.
    pub fn next_incoming(&mut self) -> Option<Incoming> {
        loop {
            if self.closed.is_some() {
                return None;
            }
            let h = peek_header(&self.input[self.read..])?;
            let len = usize::from(h.length);
            if len < HEADER_LEN {
                let header = self.input[self.read..self.read + HEADER_LEN].to_vec();
                let v = self.version.unwrap_or(h.version);
                self.error(v, h.xid, error_type::BAD_REQUEST, bad_request::BAD_LEN, &header);
                self.close(Closed::BadFraming);
                return None;
            }
            if self.unread() < len {
                return None;
            }
            let range = self.read..self.read + len;
            self.read += len;
            let Some(version) = self.version else {
                if h.typ != msg_type::HELLO {
                    if self.settings.hello_required {
                        self.close(Closed::NoHello);
                        return None;
                    }
                    // The peer skipped negotiation: our highest version.
                    let top = self.settings.versions.iter().copied().max().unwrap_or(crate::OFP13);
                    self.version = Some(top);
                    self.read = range.start;
                    return Some(Incoming::Negotiated(top));
                }
                let elements = match crate::decode(&self.input[range.clone()]) {
                    Ok((_, Msg13::Hello(e))) => e,
                    _ => Vec::new(),
                };
                match negotiate(h.version, &elements, &self.settings.versions) {
                    Some(v) => {
                        self.version = Some(v);
                        return Some(Incoming::Negotiated(v));
                    }
                    None => {
                        let why = format!(
                            "no common version: the peer speaks {}, we speak {}",
                            h.version,
                            self.settings.versions.iter().map(|v| v.to_string()).collect::<Vec<_>>().join(", ")
                        );
                        let v = h.version.min(self.settings.versions.iter().copied().max().unwrap_or(crate::OFP13));
                        let data = why.clone().into_bytes();
                        self.error(v, h.xid, error_type::HELLO_FAILED, hello_failed::INCOMPATIBLE, &data);
                        self.close(Closed::Incompatible(why));
                        return None;
                    }
                }
            };
            match h.typ {
                msg_type::ECHO_REQUEST => {
                    let body = self.input[range.start + HEADER_LEN..range.end].to_vec();
                    self.send(|out| {
                        let start = begin_message(out, version, msg_type::ECHO_REPLY, h.xid);
                        out.extend_from_slice(&body);
                        end_message(out, start);
                    });
                }
                msg_type::ECHO_REPLY | msg_type::HELLO => {}
                _ => return Some(Incoming::Message(Frame { version: h.version, typ: h.typ, xid: h.xid, range })),
            }
        }
    }

    /// Queues an ERROR of `typ`/`code` quoting `data` (the layout is the
    /// same in every version).
    pub fn error(&mut self, version: u8, xid: u32, typ: u16, code: u16, data: &[u8]) -> bool {
        self.send(|out| {
            let start = begin_message(out, version, msg_type::ERROR, xid);
            put_error(out, typ, code, &data[..data.len().min(crate::errors::ERROR_DATA_LEN)]);
            end_message(out, start);
        })
    }

    /// Queues what `encode` appends (whole messages); false when it was
    /// not queued (the outbox full, or the connection closed).
    pub fn send(&mut self, encode: impl FnOnce(&mut Vec<u8>)) -> bool {
        if self.closed.is_some() {
            return false;
        }
        if self.output.len() - self.written >= self.settings.max_output {
            self.dropped += 1;
            if self.settings.when_full == Full::Close {
                self.close(Closed::Stuck);
            }
            return false;
        }
        encode(&mut self.output);
        true
    }

    /// What waits to be written.
    pub fn output(&self) -> &[u8] {
        &self.output[self.written..]
    }

    /// Whether anything waits to be written.
    pub fn wants_write(&self) -> bool {
        self.written < self.output.len()
    }

    /// `n` bytes of [`Connection::output`] were written.
    pub fn wrote(&mut self, n: usize) {
        self.written = (self.written + n).min(self.output.len());
        if self.written == self.output.len() {
            self.output.clear();
            self.written = 0;
        } else if self.written > self.settings.max_output {
            self.output.drain(..self.written);
            self.written = 0;
        }
    }

    /// Sends echo requests after silence and closes a connection silent
    /// for four intervals (see the module documentation).
    pub fn tick(&mut self, now: Instant) {
        if self.closed.is_some() {
            return;
        }
        let silent = now.saturating_duration_since(self.last_heard);
        let interval = self.settings.echo_interval.max(Duration::from_millis(1));
        let Some(v) = self.version else {
            // No HELLO yet: no echo, only the clock.
            if silent >= interval * 4 {
                self.close(Closed::Silent);
            }
            return;
        };
        if silent < interval * (self.echoes + 1) {
            return;
        }
        if self.echoes >= 3 {
            self.close(Closed::Silent);
            return;
        }
        self.echoes += 1;
        let xid = self.xid();
        self.send(|out| {
            let start = begin_message(out, v, msg_type::ECHO_REQUEST, xid);
            end_message(out, start);
        });
    }

    /// Reads what `r` has now (up to about `limit` bytes this round) into
    /// the connection through `scratch`; `Ok(true)` when `r` may have more
    /// (the round's limit was reached). The end of the stream closes the
    /// connection ([`Closed::Eof`]).
    pub fn read_from(&mut self, r: &mut impl Read, scratch: &mut [u8], limit: usize, now: Instant) -> io::Result<bool> {
        let mut got = 0;
        while got < limit {
            match r.read(scratch) {
                Ok(0) => {
                    self.close(Closed::Eof);
                    return Ok(false);
                }
                Ok(n) => {
                    self.received(&scratch[..n], now);
                    got += n;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }

    /// Writes what waits to `w` until it would block.
    pub fn write_to(&mut self, w: &mut impl Write) -> io::Result<()> {
        while self.wants_write() {
            match w.write(self.output()) {
                Ok(0) => return Err(io::Error::new(ErrorKind::WriteZero, "the peer takes no more")),
                Ok(n) => self.wrote(n),
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::of10::OFP10;
    use crate::OFP13;

    fn settings(versions: &[u8]) -> Settings {
        Settings {
            versions: versions.to_vec(),
            echo_interval: Duration::from_secs(5),
            max_output: 1 << 16,
            when_full: Full::Drop,
            hello_required: true,
        }
    }

    fn header(version: u8, typ: u8, len: u16, xid: u32) -> Vec<u8> {
        let mut h = vec![version, typ];
        h.extend_from_slice(&len.to_be_bytes());
        h.extend_from_slice(&xid.to_be_bytes());
        h
    }

    #[test]
    fn hellos_cross_echoes_are_answered_and_messages_come_whole() {
        let t0 = Instant::now();
        let mut c = Connection::new(settings(&[OFP10, OFP13]), t0);
        let hello = c.output().to_vec();
        assert_eq!((hello[0], hello[1]), (OFP13, msg_type::HELLO), "our HELLO in the highest version");
        c.wrote(hello.len());
        // A 1.0 peer's HELLO (no bitmap), an echo request, and a features
        // request cut in two reads.
        let mut bytes = header(OFP10, 0, 8, 1);
        bytes.extend(header(OFP10, 2, 12, 7));
        bytes.extend([1, 2, 3, 4]);
        bytes.extend(header(OFP10, 5, 8, 9));
        c.received(&bytes[..20], t0);
        assert_eq!(c.next_incoming(), Some(Incoming::Negotiated(OFP10)));
        assert_eq!(c.next_incoming(), None, "the echo answered, the features request not whole yet");
        assert_eq!(c.output(), [header(OFP10, 3, 12, 7), vec![1, 2, 3, 4]].concat());
        c.received(&bytes[20..], t0);
        let Some(Incoming::Message(f)) = c.next_incoming() else { panic!("a message") };
        assert_eq!((f.version, f.typ, f.xid), (OFP10, 5, 9));
        assert_eq!(c.bytes(&f), header(OFP10, 5, 8, 9));
        assert_eq!(c.next_incoming(), None);
    }

    #[test]
    fn no_common_version_a_bad_length_and_a_missing_hello_close_it() {
        let t0 = Instant::now();
        let mut c = Connection::new(settings(&[OFP13]), t0);
        c.wrote(c.output().len());
        c.received(&header(OFP10, 0, 8, 3), t0);
        assert_eq!(c.next_incoming(), None);
        assert!(matches!(c.closed(), Some(Closed::Incompatible(_))));
        assert_eq!(&c.output()[..2], [OFP10, msg_type::ERROR], "HELLO_FAILED in the peer's version");
        assert_eq!(&c.output()[8..12], [0, 0, 0, 0], "type HELLO_FAILED, code INCOMPATIBLE");

        let mut c = Connection::new(settings(&[OFP13]), t0);
        c.received(&header(OFP13, 0, 8, 1), t0);
        assert_eq!(c.next_incoming(), Some(Incoming::Negotiated(OFP13)));
        c.wrote(c.output().len());
        c.received(&header(OFP13, 5, 4, 2), t0);
        assert_eq!(c.next_incoming(), None);
        assert_eq!(c.closed(), Some(&Closed::BadFraming));
        assert_eq!(&c.output()[8..12], [0, 1, 0, 6], "BAD_REQUEST / BAD_LEN");

        let mut c = Connection::new(settings(&[OFP13]), t0);
        c.received(&header(OFP13, 5, 8, 2), t0);
        assert_eq!(c.next_incoming(), None);
        assert_eq!(c.closed(), Some(&Closed::NoHello));
        // Without HELLO required, the highest version is spoken and the message kept.
        let mut c = Connection::new(Settings { hello_required: false, ..settings(&[OFP13]) }, t0);
        c.received(&header(OFP13, 5, 8, 2), t0);
        assert_eq!(c.next_incoming(), Some(Incoming::Negotiated(OFP13)));
        assert!(matches!(c.next_incoming(), Some(Incoming::Message(Frame { typ: 5, xid: 2, .. }))));
    }

    #[test]
    fn silence_brings_echo_requests_then_the_end_and_a_full_outbox_drops_or_closes() {
        let t0 = Instant::now();
        let mut c = Connection::new(settings(&[OFP13]), t0);
        c.wrote(c.output().len());
        c.tick(t0 + Duration::from_secs(6));
        assert!(!c.wants_write(), "no echo before the version is known");
        c.received(&header(OFP13, 0, 8, 1), t0 + Duration::from_secs(6));
        assert_eq!(c.next_incoming(), Some(Incoming::Negotiated(OFP13)));
        c.tick(t0 + Duration::from_secs(12));
        assert_eq!(&c.output()[..2], [OFP13, msg_type::ECHO_REQUEST]);
        c.tick(t0 + Duration::from_secs(13));
        assert_eq!(c.output().len(), 8, "one echo per interval");
        c.tick(t0 + Duration::from_secs(17));
        c.tick(t0 + Duration::from_secs(22));
        assert_eq!(c.output().len(), 24, "three echo requests");
        assert_eq!(c.closed(), None);
        c.tick(t0 + Duration::from_secs(26));
        assert_eq!(c.closed(), Some(&Closed::Silent));

        let mut c = Connection::new(Settings { max_output: 100, ..settings(&[OFP13]) }, t0);
        let queued = (0..20).filter(|_| c.send(|o| o.extend_from_slice(&header(OFP13, 10, 8, 0)))).count();
        assert!(queued < 20 && c.dropped() == 20 - queued as u64 && c.closed().is_none());
        let mut c = Connection::new(Settings { max_output: 100, when_full: Full::Close, ..settings(&[OFP13]) }, t0);
        while c.send(|o| o.extend_from_slice(&header(OFP13, 10, 8, 0))) {}
        assert_eq!(c.closed(), Some(&Closed::Stuck));
    }
}
