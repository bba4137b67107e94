//! nanomsg sockets, bound: a PUB socket (this file) and a PAIR socket
//! ([`pair`]).
//!
//! The PUB socket: the publishing end of the Scalability Protocols'
//! publish/subscribe pattern, bound on an `ipc://PATH` or `tcp://HOST:PORT`
//! address, as bmv2 binds its event logger (`--nanolog`) and its
//! notifications (`--notifications-addr`). Subscribers are any SP SUB
//! socket (nanomsg, nng, pynng, nnpy) that connects.
//!
//! Why our own: the SP wire protocol of a PUB is small (below), the C
//! libraries would add a C build to ours, and the one pure-Rust
//! implementation is unmaintained.
//!
//! Wire protocol (SP over TCP and IPC): on connecting, each side sends 8
//! bytes, `00 'S' 'P' 00`, its endpoint type as a big-endian u16 (PUB
//! 0x0020, SUB 0x0021) and two zero bytes; a peer whose header is not a
//! SUB's is closed. Then every message is its length as a big-endian u64
//! and its bytes (over IPC, preceded by a byte 0x01). A PUB sends every
//! message to every subscriber; subscribers filter by prefix themselves
//! and send nothing after their header (what they send is read and
//! ignored).
//!
//! Concurrency invariants (this file owns them):
//! - [`Publisher::publish`] never blocks: a chunk of messages goes into a
//!   queue of [`QUEUE`] chunks toward the publisher's thread, or is dropped
//!   and counted when the queue is full;
//! - one thread owns the listener and the subscribers; it sleeps in `poll`
//!   without a timeout while no handshake is pending (an idle publisher
//!   takes no CPU) and wakes on a connection, a subscriber's bytes, room to
//!   write, or a published chunk;
//! - every subscriber's unsent bytes are bounded by [`BACKLOG`]; a chunk
//!   that does not fit is dropped for that subscriber alone and counted
//!   (as nanomsg, a slow subscriber loses messages; the others do not
//!   wait for it), and chunks are whole messages, so what a subscriber
//!   gets is always a sequence of whole messages;
//! - messages published while nobody is subscribed are dropped (counted
//!   as unheard), as nanomsg drops them;
//! - dropping the `Publisher` stops the thread and removes the IPC socket
//!   file.

pub mod pair;

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::ToSocketAddrs;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use mio::{Events, Interest, Poll, Token, Waker};

/// Chunks waiting for the publisher's thread.
pub const QUEUE: usize = 1024;
/// Bytes a subscriber may have waiting to be written.
pub const BACKLOG: usize = 4 << 20;
/// How long a connection may take to send its SP header (nanomsg: 1 s).
pub const HANDSHAKE: Duration = Duration::from_secs(1);

const SP_PUB: u16 = 0x20;
const SP_SUB: u16 = 0x21;

const LISTENER: Token = Token(0);
const WAKER: Token = Token(1);

/// Where a publisher is bound.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// `ipc://PATH`: a Unix stream socket at PATH.
    Ipc(PathBuf),
    /// `tcp://HOST:PORT` (`*` for HOST: every interface).
    Tcp(String),
}

impl Endpoint {
    /// Parses a nanomsg address.
    pub fn parse(addr: &str) -> Result<Endpoint, String> {
        if let Some(path) = addr.strip_prefix("ipc://") {
            if path.is_empty() {
                return Err(format!("{addr}: no path after ipc://"));
            }
            return Ok(Endpoint::Ipc(PathBuf::from(path)));
        }
        if let Some(hp) = addr.strip_prefix("tcp://") {
            let Some((host, port)) = hp.rsplit_once(':') else {
                return Err(format!("{addr}: expected tcp://HOST:PORT"));
            };
            port.parse::<u16>().map_err(|_| format!("{addr}: \"{port}\" is not a port number"))?;
            let host = if host == "*" || host.is_empty() { "0.0.0.0" } else { host };
            return Ok(Endpoint::Tcp(format!("{host}:{port}")));
        }
        Err(format!("{addr}: not a nanomsg address this publisher binds (ipc://PATH or tcp://HOST:PORT)"))
    }

    fn is_ipc(&self) -> bool {
        matches!(self, Endpoint::Ipc(_))
    }
}

/// What the publisher counted.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct PublisherStats {
    /// Subscribers connected now (header exchanged).
    pub subscribers: usize,
    /// Messages handed to [`Publisher::publish`].
    pub published: u64,
    /// Messages dropped because the queue toward the thread was full.
    pub queue_dropped: u64,
    /// Messages dropped for one subscriber that had no room (one count per subscriber).
    pub backlog_dropped: u64,
    /// Messages published while no subscriber was connected.
    pub unheard: u64,
}

#[derive(Default)]
struct Shared {
    subscribers: AtomicUsize,
    published: AtomicU64,
    queue_dropped: AtomicU64,
    backlog_dropped: AtomicU64,
    unheard: AtomicU64,
    stop: AtomicBool,
}

/// A chunk of framed messages and how many messages it holds.
struct Chunk {
    bytes: Vec<u8>,
    messages: u64,
}

/// A bound PUB socket (see the module documentation).
pub struct Publisher {
    endpoint: Endpoint,
    address: String,
    tx: SyncSender<Chunk>,
    waker: Arc<Waker>,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Publisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Publisher").field("address", &self.address).field("stats", &self.stats()).finish()
    }
}

enum Listener {
    Unix(UnixListener),
    Tcp(TcpListener),
}

enum Stream {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl Stream {
    fn source(&mut self) -> &mut dyn mio::event::Source {
        match self {
            Stream::Unix(s) => s,
            Stream::Tcp(s) => s,
        }
    }

    /// Writes `out[*sent..]` until the socket would block, advancing
    /// `sent`; `Err` when the connection is gone.
    fn write_pending(&mut self, out: &[u8], sent: &mut usize) -> Result<(), ()> {
        while *sent < out.len() {
            match self.write(&out[*sent..]) {
                Ok(0) => return Err(()),
                Ok(n) => *sent += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return Err(()),
            }
        }
        Ok(())
    }
}

impl Read for Stream {
    fn read(&mut self, b: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Stream::Unix(s) => s.read(b),
            Stream::Tcp(s) => s.read(b),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        match self {
            Stream::Unix(s) => s.write(b),
            Stream::Tcp(s) => s.write(b),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Publisher {
    /// Binds `addr` (`ipc://PATH` or `tcp://HOST:PORT`) and starts the
    /// publisher's thread. A stale IPC socket file (nobody accepts on it)
    /// is replaced, as nanomsg does; one somebody listens on is an error.
    pub fn bind(addr: &str) -> Result<Publisher, String> {
        let (endpoint, listener, address) = listen(addr)?;
        let poll = Poll::new().map_err(|e| format!("{addr}: poll: {e}"))?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKER).map_err(|e| format!("{addr}: waker: {e}"))?);
        let (tx, rx) = sync_channel(QUEUE);
        let shared = Arc::new(Shared::default());
        let mut thread = Thread { poll, listener, rx, shared: shared.clone(), subs: HashMap::new(), next: 2 };
        let handle = std::thread::Builder::new()
            .name("sluice-nanomsg".into())
            .spawn(move || thread.run())
            .map_err(|e| format!("{addr}: cannot start its thread: {e}"))?;
        Ok(Publisher { endpoint, address, tx, waker, shared, thread: Some(handle) })
    }

    /// The address it is bound on (for `tcp://HOST:0`, with the port the
    /// system chose).
    pub fn address(&self) -> &str {
        &self.address
    }

    /// Whether a subscriber is connected now (a relaxed load: cheap enough
    /// to ask once per batch of packets).
    pub fn has_subscribers(&self) -> bool {
        self.shared.subscribers.load(Ordering::Relaxed) > 0
    }

    /// Publishes `messages` (in order, as one chunk) to every subscriber;
    /// never blocks (see the module documentation for what is dropped).
    pub fn publish<'a>(&self, messages: impl IntoIterator<Item = &'a [u8]>) {
        let mut messages = messages.into_iter().peekable();
        if messages.peek().is_none() {
            return;
        }
        if !self.has_subscribers() {
            // Nobody to frame them for.
            let n = messages.count() as u64;
            self.shared.published.fetch_add(n, Ordering::Relaxed);
            self.shared.unheard.fetch_add(n, Ordering::Relaxed);
            return;
        }
        let mut bytes = Vec::new();
        let mut n = 0u64;
        for m in messages {
            frame(&mut bytes, m, self.endpoint.is_ipc());
            n += 1;
        }
        self.shared.published.fetch_add(n, Ordering::Relaxed);
        match self.tx.try_send(Chunk { bytes, messages: n }) {
            Ok(()) => {
                let _ = self.waker.wake();
            }
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                self.shared.queue_dropped.fetch_add(n, Ordering::Relaxed);
            }
        }
    }

    /// What it counted so far.
    pub fn stats(&self) -> PublisherStats {
        let s = &self.shared;
        PublisherStats {
            subscribers: s.subscribers.load(Ordering::Relaxed),
            published: s.published.load(Ordering::Relaxed),
            queue_dropped: s.queue_dropped.load(Ordering::Relaxed),
            backlog_dropped: s.backlog_dropped.load(Ordering::Relaxed),
            unheard: s.unheard.load(Ordering::Relaxed),
        }
    }
}

impl Drop for Publisher {
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

/// Binds `addr` (`ipc://PATH` or `tcp://HOST:PORT`): the endpoint, its
/// listener, and the address bound (for `tcp://HOST:0`, with the port the
/// system chose). A stale IPC socket file (nobody accepts on it) is
/// replaced, as nanomsg does; one somebody listens on is an error.
fn listen(addr: &str) -> Result<(Endpoint, Listener, String), String> {
    let endpoint = Endpoint::parse(addr)?;
    let (listener, address) = match &endpoint {
        Endpoint::Ipc(path) => {
            if path.exists() {
                if std::os::unix::net::UnixStream::connect(path).is_ok() {
                    return Err(format!("{addr}: another process listens on this socket"));
                }
                std::fs::remove_file(path).map_err(|e| format!("{addr}: cannot replace {}: {e}", path.display()))?;
            }
            let l = UnixListener::bind(path).map_err(|e| format!("{addr}: cannot bind: {e}"))?;
            (Listener::Unix(l), addr.to_string())
        }
        Endpoint::Tcp(hp) => {
            let sa = hp
                .to_socket_addrs()
                .map_err(|e| format!("{addr}: {e}"))?
                .next()
                .ok_or_else(|| format!("{addr}: no address"))?;
            let l = TcpListener::bind(sa).map_err(|e| format!("{addr}: cannot bind: {e}"))?;
            let bound = l.local_addr().map_err(|e| format!("{addr}: {e}"))?;
            (Listener::Tcp(l), format!("tcp://{bound}"))
        }
    };
    Ok((endpoint, listener, address))
}

impl Listener {
    fn register(&mut self, reg: &mio::Registry, t: Token) -> std::io::Result<()> {
        match self {
            Listener::Unix(l) => reg.register(l, t, Interest::READABLE),
            Listener::Tcp(l) => reg.register(l, t, Interest::READABLE),
        }
    }

    /// Accepts one connection (`WouldBlock` when none is waiting).
    fn accept(&self) -> std::io::Result<Stream> {
        match self {
            Listener::Unix(l) => l.accept().map(|(s, _)| Stream::Unix(s)),
            Listener::Tcp(l) => l.accept().map(|(s, _)| {
                let _ = s.set_nodelay(true);
                Stream::Tcp(s)
            }),
        }
    }
}

/// Appends message `m` to `out` as SP frames it (IPC: type byte 1 first).
pub fn frame(out: &mut Vec<u8>, m: &[u8], ipc: bool) {
    if ipc {
        out.push(1);
    }
    out.extend_from_slice(&(m.len() as u64).to_be_bytes());
    out.extend_from_slice(m);
}

/// The SP header an endpoint of type `kind` sends first.
pub fn header(kind: u16) -> [u8; 8] {
    let k = kind.to_be_bytes();
    [0, b'S', b'P', 0, k[0], k[1], 0, 0]
}

/// One connection: its header exchange, then its unsent bytes.
struct Sub {
    stream: Stream,
    /// Bytes of the peer's header received so far (8 once exchanged).
    got: Vec<u8>,
    /// When the connection was accepted (the header must come within [`HANDSHAKE`]).
    since: Instant,
    /// Unsent bytes (our header first), from `sent` on.
    out: Vec<u8>,
    sent: usize,
    /// Counted among the subscribers (its header came and was a SUB's).
    counted: bool,
}

impl Sub {
    fn ready(&self) -> bool {
        self.got.len() == 8
    }

    /// Writes what it can; `Err` when the connection is gone.
    fn write_out(&mut self) -> Result<(), ()> {
        self.stream.write_pending(&self.out, &mut self.sent)?;
        if self.sent == self.out.len() {
            self.out.clear();
            self.sent = 0;
        } else if self.sent > BACKLOG {
            self.out.drain(..self.sent);
            self.sent = 0;
        }
        Ok(())
    }

    /// Reads the peer's header, then reads and ignores; `Err` when the
    /// connection is gone or its header is not a SUB's.
    fn read_in(&mut self) -> Result<(), ()> {
        let mut buf = [0u8; 4096];
        loop {
            match self.stream.read(&mut buf) {
                Ok(0) => return Err(()),
                Ok(n) => {
                    let want = 8 - self.got.len();
                    let take = want.min(n);
                    self.got.extend_from_slice(&buf[..take]);
                    if take > 0 && self.got.len() == 8 && self.got != header(SP_SUB) {
                        return Err(());
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return Err(()),
            }
        }
    }
}

struct Thread {
    poll: Poll,
    listener: Listener,
    rx: Receiver<Chunk>,
    shared: Arc<Shared>,
    subs: HashMap<Token, Sub>,
    next: usize,
}

impl Thread {
    fn run(&mut self) {
        let reg = self.poll.registry().try_clone().expect("registry");
        if self.listener.register(&reg, LISTENER).is_err() {
            return;
        }
        let mut events = Events::with_capacity(64);
        while !self.shared.stop.load(Ordering::Relaxed) {
            // A timeout only while a header is awaited.
            let timeout =
                self.subs.values().filter(|s| !s.ready()).map(|s| HANDSHAKE.saturating_sub(s.since.elapsed())).min();
            if let Err(e) = self.poll.poll(&mut events, timeout) {
                if e.kind() == ErrorKind::Interrupted {
                    continue;
                }
                return;
            }
            for ev in events.iter() {
                match ev.token() {
                    LISTENER => self.accept(&reg),
                    WAKER => {}
                    t => {
                        let gone = match self.subs.get_mut(&t) {
                            Some(s) => {
                                let r = (if ev.is_readable() || ev.is_read_closed() { s.read_in() } else { Ok(()) })
                                    .and_then(|_| s.write_out());
                                if r.is_ok() && !s.counted && s.ready() {
                                    s.counted = true;
                                    self.shared.subscribers.fetch_add(1, Ordering::Relaxed);
                                }
                                r.is_err()
                            }
                            None => false,
                        };
                        if gone {
                            self.close(&reg, t);
                        }
                    }
                }
            }
            self.expire_handshakes(&reg);
            self.deliver(&reg);
        }
    }

    fn accept(&mut self, reg: &mio::Registry) {
        loop {
            let mut stream = match self.listener.accept() {
                Ok(s) => s,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                // Out of descriptors and the like: try again at the next connection.
                Err(_) => return,
            };
            let t = Token(self.next);
            self.next += 1;
            if reg.register(stream.source(), t, Interest::READABLE | Interest::WRITABLE).is_err() {
                continue;
            }
            let mut sub = Sub {
                stream,
                got: Vec::with_capacity(8),
                since: Instant::now(),
                out: header(SP_PUB).to_vec(),
                sent: 0,
                counted: false,
            };
            if sub.write_out().is_ok() {
                self.subs.insert(t, sub);
            }
        }
    }

    fn close(&mut self, reg: &mio::Registry, t: Token) {
        if let Some(mut s) = self.subs.remove(&t) {
            if s.counted {
                self.shared.subscribers.fetch_sub(1, Ordering::Relaxed);
            }
            let _ = reg.deregister(s.stream.source());
        }
    }

    fn expire_handshakes(&mut self, reg: &mio::Registry) {
        let late: Vec<Token> =
            self.subs.iter().filter(|(_, s)| !s.ready() && s.since.elapsed() >= HANDSHAKE).map(|(t, _)| *t).collect();
        for t in late {
            self.close(reg, t);
        }
    }

    /// Hands every queued chunk to every subscriber with room, and writes.
    fn deliver(&mut self, reg: &mio::Registry) {
        let mut any = false;
        while let Ok(chunk) = self.rx.try_recv() {
            any = true;
            let mut heard = false;
            for s in self.subs.values_mut().filter(|s| s.counted) {
                heard = true;
                if s.out.len() - s.sent + chunk.bytes.len() > BACKLOG {
                    self.shared.backlog_dropped.fetch_add(chunk.messages, Ordering::Relaxed);
                } else {
                    s.out.extend_from_slice(&chunk.bytes);
                }
            }
            if !heard {
                self.shared.unheard.fetch_add(chunk.messages, Ordering::Relaxed);
            }
        }
        if !any {
            return;
        }
        let mut gone = Vec::new();
        for (t, s) in self.subs.iter_mut() {
            if s.counted && s.write_out().is_err() {
                gone.push(*t);
            }
        }
        for t in gone {
            self.close(reg, t);
        }
    }
}
