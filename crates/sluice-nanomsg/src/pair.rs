//! A nanomsg PAIR socket, bound: the two-way, one-peer pattern of the
//! Scalability Protocols, as bmv2 binds one for its packet I/O
//! (`--packet-in ADDR`). The peer is any SP PAIR socket that connects
//! (nanomsg's, nng's `pair0`, pynng's `Pair0`, as PTF's `nn` platform).
//!
//! Wire protocol: the PUB's (see the crate documentation) with endpoint
//! type PAIR (0x0010) on both sides, and messages in both directions.
//! One peer at a time: a connection that arrives while a peer is
//! connected is closed (nanomsg's PAIR talks to one peer too).
//!
//! Concurrency invariants (this file owns them):
//! - one thread owns the listener and the peer's connection; it sleeps in
//!   `poll` without a timeout while no handshake is pending;
//! - messages received wait in an inbox of [`INBOX`] messages (and what
//!   one read of the socket brought beyond that);
//!   while it is full the thread stops reading, so the sender is slowed by
//!   its socket's buffers (nothing received is dropped); [`Pair::recv`]
//!   wakes the thread when it makes room;
//! - the inbox's readiness is an eventfd ([`Pair::fd`]): readable exactly
//!   while the inbox holds a message (set by the thread when it puts the
//!   first one, reset by `recv` when it takes the last, both under the
//!   inbox's lock), so a consumer can poll it with its other descriptors;
//! - [`Pair::send`] never blocks: a message goes into an outbox of at most
//!   [`OUTBOX`] bytes toward the thread, or is dropped and counted when the
//!   outbox is full or no peer is connected.

use std::collections::VecDeque;
use std::io::{ErrorKind, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mio::{Events, Interest, Poll, Token, Waker};

use crate::{header, listen, Endpoint, Listener, Stream, HANDSHAKE};

/// Messages received and not yet taken, at most.
pub const INBOX: usize = 4096;
/// Bytes waiting to be sent to the peer, at most.
pub const OUTBOX: usize = 4 << 20;
/// The largest message a peer may send (larger: the peer is cut off, as a
/// protocol error).
pub const MAX_MESSAGE: usize = 1 << 20;

const SP_PAIR: u16 = 0x10;
const LISTENER: Token = Token(0);
const WAKER: Token = Token(1);
const PEER: Token = Token(2);

/// What a PAIR socket counted.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct PairStats {
    /// A peer is connected now (header exchanged).
    pub connected: bool,
    /// Messages received from peers.
    pub received: u64,
    /// Messages handed to [`Pair::send`] and queued.
    pub sent: u64,
    /// Messages dropped: the outbox was full, or no peer was connected.
    pub send_dropped: u64,
    /// Connections cut for a protocol error (a bad header, message type or
    /// length) or refused because a peer was already connected.
    pub refused: u64,
}

#[derive(Default)]
struct Shared {
    inbox: Mutex<VecDeque<Vec<u8>>>,
    /// Framed bytes toward the thread.
    outbox: Mutex<Vec<u8>>,
    connected: AtomicBool,
    received: AtomicU64,
    sent: AtomicU64,
    send_dropped: AtomicU64,
    refused: AtomicU64,
    stop: AtomicBool,
}

/// A bound PAIR socket (see the module documentation).
pub struct Pair {
    endpoint: Endpoint,
    address: String,
    shared: Arc<Shared>,
    waker: Arc<Waker>,
    ready: Arc<OwnedFd>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Pair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pair").field("address", &self.address).field("stats", &self.stats()).finish()
    }
}

fn eventfd_write(fd: RawFd) {
    let one: u64 = 1;
    // SAFETY: writes 8 bytes from a live u64 to an eventfd we own.
    unsafe { libc::write(fd, (&one as *const u64).cast(), 8) };
}

fn eventfd_reset(fd: RawFd) {
    let mut v: u64 = 0;
    // SAFETY: reads 8 bytes into a live u64 from a non-blocking eventfd we own.
    unsafe { libc::read(fd, (&mut v as *mut u64).cast(), 8) };
}

impl Pair {
    /// Binds `addr` (`ipc://PATH` or `tcp://HOST:PORT`) and starts the
    /// socket's thread.
    pub fn bind(addr: &str) -> Result<Pair, String> {
        let (endpoint, listener, address) = listen(addr)?;
        // SAFETY: plain system call; the descriptor is owned right away.
        let efd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if efd < 0 {
            return Err(format!("{addr}: eventfd: {}", std::io::Error::last_os_error()));
        }
        // SAFETY: `efd` is a fresh descriptor nobody else owns.
        let ready = Arc::new(unsafe { OwnedFd::from_raw_fd(efd) });
        let poll = Poll::new().map_err(|e| format!("{addr}: poll: {e}"))?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKER).map_err(|e| format!("{addr}: waker: {e}"))?);
        let shared = Arc::new(Shared::default());
        let mut thread =
            Thread { poll, listener, ipc: endpoint.is_ipc(), shared: shared.clone(), ready: ready.clone(), peer: None };
        let handle = std::thread::Builder::new()
            .name("sluice-nn-pair".into())
            .spawn(move || thread.run())
            .map_err(|e| format!("{addr}: cannot start its thread: {e}"))?;
        Ok(Pair { endpoint, address, shared, waker, ready, thread: Some(handle) })
    }

    /// The address it is bound on.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// Readable while a received message waits (poll it for `POLLIN`).
    pub fn fd(&self) -> RawFd {
        self.ready.as_raw_fd()
    }

    /// The next message received, if one waits; never blocks.
    pub fn recv(&self) -> Option<Vec<u8>> {
        let mut inbox = self.shared.inbox.lock().unwrap_or_else(|e| e.into_inner());
        let was_full = inbox.len() >= INBOX;
        let m = inbox.pop_front();
        if inbox.is_empty() {
            eventfd_reset(self.fd());
        }
        drop(inbox);
        if was_full {
            // The thread stopped reading at the bound: it may go on.
            let _ = self.waker.wake();
        }
        m
    }

    /// Queues `message` for the peer; false when it was dropped (no peer,
    /// or the outbox is full). Never blocks.
    pub fn send(&self, message: &[u8]) -> bool {
        self.send_parts(&[message])
    }

    /// Queues one message made of `parts` (a header and a frame, without
    /// joining them first).
    pub fn send_parts(&self, parts: &[&[u8]]) -> bool {
        let s = &self.shared;
        let len: usize = parts.iter().map(|p| p.len()).sum();
        if !s.connected.load(Ordering::Relaxed) {
            s.send_dropped.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        let mut out = s.outbox.lock().unwrap_or_else(|e| e.into_inner());
        if out.len() + len + 9 > OUTBOX {
            s.send_dropped.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        let was_empty = out.is_empty();
        frame_header(&mut out, len, self.endpoint.is_ipc());
        for p in parts {
            out.extend_from_slice(p);
        }
        drop(out);
        s.sent.fetch_add(1, Ordering::Relaxed);
        if was_empty {
            let _ = self.waker.wake();
        }
        true
    }

    /// What it counted so far.
    pub fn stats(&self) -> PairStats {
        let s = &self.shared;
        PairStats {
            connected: s.connected.load(Ordering::Relaxed),
            received: s.received.load(Ordering::Relaxed),
            sent: s.sent.load(Ordering::Relaxed),
            send_dropped: s.send_dropped.load(Ordering::Relaxed),
            refused: s.refused.load(Ordering::Relaxed),
        }
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        let _ = self.waker.wake();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        if let Endpoint::Ipc(path) = &self.endpoint {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// A message's SP framing without its bytes (see [`crate::frame`]).
fn frame_header(out: &mut Vec<u8>, len: usize, ipc: bool) {
    if ipc {
        out.push(1);
    }
    out.extend_from_slice(&(len as u64).to_be_bytes());
}

/// A peer's bytes that are not SP messages (see [`next_message`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FramingError;

/// Where the first whole message of `buf` (the bytes after the SP
/// header) lies: `Ok(Some((start, end)))`, its bytes being
/// `buf[start..end]` and the next message starting at `end`; `Ok(None)`
/// while it is not whole yet; `Err` for a protocol error (over IPC a
/// message type other than 1, or a length past [`MAX_MESSAGE`]).
pub fn next_message(buf: &[u8], ipc: bool) -> Result<Option<(usize, usize)>, FramingError> {
    let head = if ipc { 9 } else { 8 };
    if buf.len() < head {
        return Ok(None);
    }
    if ipc && buf[0] != 1 {
        return Err(FramingError);
    }
    let mut len = [0u8; 8];
    len.copy_from_slice(&buf[head - 8..head]);
    let len = u64::from_be_bytes(len);
    if len > MAX_MESSAGE as u64 {
        return Err(FramingError);
    }
    let end = head + len as usize;
    Ok((buf.len() >= end).then_some((head, end)))
}

/// The connected (or connecting) peer.
struct Peer {
    stream: Stream,
    /// Its header, then the bytes of a message not yet whole.
    got: Vec<u8>,
    handshaken: bool,
    since: Instant,
    /// Bytes to write (our header first), from `sent` on.
    out: Vec<u8>,
    sent: usize,
}

impl Peer {
    /// Writes what it can; `Err` when the connection is gone.
    fn write_out(&mut self) -> Result<(), ()> {
        self.stream.write_pending(&self.out, &mut self.sent)?;
        if self.sent == self.out.len() {
            self.out.clear();
            self.sent = 0;
        }
        Ok(())
    }
}

/// Why a peer's connection ends.
enum Cut {
    /// It closed, or the socket failed.
    Closed,
    /// It broke the protocol.
    Protocol,
}

struct Thread {
    poll: Poll,
    listener: Listener,
    ipc: bool,
    shared: Arc<Shared>,
    ready: Arc<OwnedFd>,
    peer: Option<Peer>,
}

impl Thread {
    fn run(&mut self) {
        let reg = match self.poll.registry().try_clone() {
            Ok(r) => r,
            Err(_) => return,
        };
        if self.listener.register(&reg, LISTENER).is_err() {
            return;
        }
        let mut events = Events::with_capacity(16);
        while !self.shared.stop.load(Ordering::Relaxed) {
            let timeout: Option<Duration> =
                self.peer.as_ref().filter(|p| !p.handshaken).map(|p| HANDSHAKE.saturating_sub(p.since.elapsed()));
            if let Err(e) = self.poll.poll(&mut events, timeout) {
                if e.kind() == ErrorKind::Interrupted {
                    continue;
                }
                return;
            }
            if events.iter().any(|e| e.token() == LISTENER) {
                self.accept(&reg);
            }
            // Read while the inbox has room (also after `recv` made room:
            // its wake-up carries no event of the peer's), then write.
            let r = self.read_peer().and_then(|_| self.write_peer());
            match r {
                Ok(()) => {}
                Err(cut) => {
                    if matches!(cut, Cut::Protocol) {
                        self.shared.refused.fetch_add(1, Ordering::Relaxed);
                    }
                    self.drop_peer(&reg);
                }
            }
            if self.peer.as_ref().is_some_and(|p| !p.handshaken && p.since.elapsed() >= HANDSHAKE) {
                self.shared.refused.fetch_add(1, Ordering::Relaxed);
                self.drop_peer(&reg);
            }
        }
    }

    fn accept(&mut self, reg: &mio::Registry) {
        loop {
            let mut stream = match self.listener.accept() {
                Ok(s) => s,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                // WouldBlock, or out of descriptors: the next connection tries again.
                Err(_) => return,
            };
            if self.peer.is_some() {
                // One peer at a time.
                self.shared.refused.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            if reg.register(stream.source(), PEER, Interest::READABLE | Interest::WRITABLE).is_err() {
                continue;
            }
            let mut p = Peer {
                stream,
                got: Vec::new(),
                handshaken: false,
                since: Instant::now(),
                out: header(SP_PAIR).to_vec(),
                sent: 0,
            };
            if p.write_out().is_ok() {
                self.peer = Some(p);
            }
        }
    }

    fn drop_peer(&mut self, reg: &mio::Registry) {
        if let Some(mut p) = self.peer.take() {
            let _ = reg.deregister(p.stream.source());
        }
        self.shared.connected.store(false, Ordering::Relaxed);
        // What was queued for it has nobody to go to.
        self.shared.outbox.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }

    /// Reads the peer's bytes and puts its whole messages in the inbox,
    /// until the socket is drained or the inbox is full.
    fn read_peer(&mut self) -> Result<(), Cut> {
        let Some(p) = self.peer.as_mut() else { return Ok(()) };
        let mut buf = [0u8; 16384];
        loop {
            if self.shared.inbox.lock().unwrap_or_else(|e| e.into_inner()).len() >= INBOX {
                return Ok(());
            }
            let n = match p.stream.read(&mut buf) {
                Ok(0) => return Err(Cut::Closed),
                Ok(n) => n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => return Err(Cut::Closed),
            };
            p.got.extend_from_slice(&buf[..n]);
            if !p.handshaken {
                if p.got.len() < 8 {
                    continue;
                }
                if p.got[..8] != header(SP_PAIR) {
                    return Err(Cut::Protocol);
                }
                p.got.drain(..8);
                p.handshaken = true;
                self.shared.connected.store(true, Ordering::Relaxed);
            }
            // Whole messages out of `got`.
            let mut at = 0;
            let mut messages = Vec::new();
            loop {
                match next_message(&p.got[at..], self.ipc) {
                    Ok(Some((start, end))) => {
                        messages.push(p.got[at + start..at + end].to_vec());
                        at += end;
                    }
                    Ok(None) => break,
                    Err(FramingError) => return Err(Cut::Protocol),
                }
            }
            p.got.drain(..at);
            if !messages.is_empty() {
                self.shared.received.fetch_add(messages.len() as u64, Ordering::Relaxed);
                let mut inbox = self.shared.inbox.lock().unwrap_or_else(|e| e.into_inner());
                if inbox.is_empty() {
                    eventfd_write(self.ready.as_raw_fd());
                }
                inbox.extend(messages);
            }
        }
    }

    /// Moves the outbox to the peer's buffer (once that is written) and writes.
    fn write_peer(&mut self) -> Result<(), Cut> {
        let Some(p) = self.peer.as_mut() else { return Ok(()) };
        if !p.handshaken && p.out.is_empty() {
            return Ok(());
        }
        if p.out.is_empty() && p.handshaken {
            let mut out = self.shared.outbox.lock().unwrap_or_else(|e| e.into_inner());
            std::mem::swap(&mut *out, &mut p.out);
        }
        p.write_out().map_err(|_| Cut::Closed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame;
    use std::io::Write;
    use std::os::unix::net::UnixStream;

    fn wait_for(what: &str, mut f: impl FnMut() -> bool) {
        let end = Instant::now() + Duration::from_secs(60);
        while !f() {
            assert!(Instant::now() < end, "gave up waiting for {what}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn read_exact(s: &mut UnixStream, n: usize) -> Vec<u8> {
        let mut b = vec![0; n];
        s.read_exact(&mut b).expect("read");
        b
    }

    #[test]
    fn a_peer_exchanges_messages_both_ways_and_a_full_inbox_holds_back_the_sender() {
        let dir = std::env::temp_dir().join(format!("sluice-pair-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let addr = format!("ipc://{}/p.ipc", dir.display());
        let pair = Pair::bind(&addr).expect("bind");
        assert!(!pair.send(b"nobody"), "a message with no peer was taken");
        let mut c = UnixStream::connect(dir.join("p.ipc")).expect("connect");
        c.write_all(&header(SP_PAIR)).unwrap();
        assert_eq!(read_exact(&mut c, 8), header(SP_PAIR));
        // More messages than the inbox holds: none is lost, the rest waits.
        let total = INBOX + 100;
        let writer = {
            let mut c = c.try_clone().unwrap();
            std::thread::spawn(move || {
                let mut bytes = Vec::new();
                for i in 0..total as u32 {
                    frame(&mut bytes, &i.to_le_bytes(), true);
                }
                c.write_all(&bytes).unwrap();
            })
        };
        wait_for("a full inbox", || pair.shared.inbox.lock().unwrap().len() >= INBOX);
        let mut next = 0u32;
        let mut pfd = libc::pollfd { fd: pair.fd(), events: libc::POLLIN, revents: 0 };
        while next < total as u32 {
            // SAFETY: one live pollfd.
            unsafe { libc::poll(&mut pfd, 1, 60_000) };
            assert!(pfd.revents & libc::POLLIN != 0, "the inbox descriptor never became readable");
            while let Some(m) = pair.recv() {
                assert_eq!(m, next.to_le_bytes(), "message {next} out of order");
                next += 1;
            }
        }
        writer.join().unwrap();
        assert_eq!(pair.stats().received, total as u64);
        // SAFETY: one live pollfd.
        let r = unsafe { libc::poll(&mut pfd, 1, 0) };
        assert_eq!(r, 0, "the descriptor stays readable with an empty inbox");
        // And back.
        assert!(pair.send_parts(&[b"ab", b"cd"]));
        assert_eq!(read_exact(&mut c, 13), [&[1u8, 0, 0, 0, 0, 0, 0, 0, 4][..], b"abcd"].concat());
        // A second peer is refused while the first is connected.
        let mut d = UnixStream::connect(dir.join("p.ipc")).expect("connect");
        let mut b = [0u8; 8];
        assert_eq!(d.read(&mut b).unwrap_or(0), 0, "a second peer was answered");
        drop(pair);
        assert!(!dir.join("p.ipc").exists(), "the socket file stayed");
    }

    #[test]
    fn a_peer_that_breaks_the_protocol_is_cut_off_and_another_may_connect() {
        let pair = Pair::bind("tcp://127.0.0.1:0").expect("bind");
        let port = pair.address().rsplit(':').next().unwrap().to_string();
        let mut bad = std::net::TcpStream::connect(format!("127.0.0.1:{port}")).unwrap();
        bad.write_all(&header(SP_PAIR)).unwrap();
        // A length past the bound.
        bad.write_all(&(MAX_MESSAGE as u64 + 1).to_be_bytes()).unwrap();
        wait_for("the cut", || pair.stats().refused == 1);
        let mut good = std::net::TcpStream::connect(format!("127.0.0.1:{port}")).unwrap();
        good.write_all(&header(SP_PAIR)).unwrap();
        let mut m = Vec::new();
        frame(&mut m, b"hello", false);
        good.write_all(&m).unwrap();
        wait_for("the message", || pair.stats().received == 1);
        assert_eq!(pair.recv().as_deref(), Some(&b"hello"[..]));
    }
}
