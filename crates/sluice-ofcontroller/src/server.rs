//! The controller's threads: an acceptor and N workers, each worker with
//! its own `mio` poll, its connections and its application instance.
//!
//! Contract: reads OpenFlow messages from switch connections (framed by
//! the header's length; a length under 8 closes the connection),
//! answers what the protocol asks (HELLO, ECHO, the handshake) itself,
//! hands everything else to the application as an [`Event`], and writes
//! what the application sends through its [`Switch`]. A malformed
//! message gets an ERROR reply in the connection's version (the
//! connection stays); a wrong first message, an incompatible HELLO, a
//! stalled handshake or a silent peer closes the connection, counted.
//!
//! Concurrency invariants: see the crate documentation. A connection and
//! its buffers are touched by its worker only; [`Counters`] are relaxed
//! atomics read by anyone; the datapath-id table is a mutex held for one
//! lookup and insert or remove.

use std::collections::HashMap;
use std::io::{self, ErrorKind};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token, Waker};
use sluice_openflow::connection::{Closed, Connection, Full, Incoming, Settings};
use sluice_openflow::of10::{self, FlowMod10, Message10, PacketOut10};
use sluice_openflow::{errors, FlowMod, Message, MultipartReply, MultipartRequest, PacketOut, PortDesc, OFP13};

use crate::translate::{
    flow_mod_to_10_into, packet_in_from_10, packet_in_from_13, packet_out_to_10_into, port10_to_32,
};
use crate::App;

/// How the controller runs.
#[derive(Clone)]
pub struct Config {
    pub listen: SocketAddr,
    /// Worker threads (connections are spread over them).
    pub threads: usize,
    /// OpenFlow versions spoken: 1 (1.0) and/or 4 (1.3).
    pub versions: Vec<u8>,
    /// Silence after which a switch gets an echo request; three close it.
    pub echo_interval: Duration,
    /// Time a switch has to finish the handshake (HELLO to features).
    pub handshake_timeout: Duration,
    /// Bytes of unsent messages a connection may hold; beyond, messages
    /// to it are dropped and counted.
    pub max_pending: usize,
    /// Where connection news goes (a switch up or down, a connection
    /// closed and why); none by default.
    pub log: Option<Log>,
    /// OpenFlow 1.3 role to ask of every switch once it is up (before the
    /// application hears of it): `(role, generation_id)` with the role
    /// from `sluice_openflow::controller_role`. The switch's ROLE_REPLY
    /// (or its error, for a stale generation) reaches the application.
    pub role: Option<(u32, u64)>,
    /// TLS on every connection (see [`tls_config`]); plain TCP without.
    pub tls: Option<Arc<rustls::ServerConfig>>,
    /// Connections open at once; one more is closed as soon as it is
    /// accepted, counted (`refused`) and logged at most once a second.
    pub max_connections: usize,
}

/// A TLS configuration from PEM files: the controller's certificate
/// chain and private key, and, with `ca`, the authority whose
/// certificates switches must present (without, switches are not asked
/// for one).
pub fn tls_config(cert: &Path, key: &Path, ca: Option<&Path>) -> Result<Arc<rustls::ServerConfig>, String> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .and_then(|i| i.collect::<Result<_, _>>())
        .map_err(|e| format!("certificate {}: {e}", cert.display()))?;
    if certs.is_empty() {
        return Err(format!("certificate {}: no certificate in it", cert.display()));
    }
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| format!("private key {}: {e}", key.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?;
    let builder = match ca {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let mut roots = rustls::RootCertStore::empty();
            for c in CertificateDer::pem_file_iter(ca).map_err(|e| format!("CA certificate {}: {e}", ca.display()))? {
                let c = c.map_err(|e| format!("CA certificate {}: {e}", ca.display()))?;
                roots.add(c).map_err(|e| format!("CA certificate {}: {e}", ca.display()))?;
            }
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| format!("CA certificate {}: {e}", ca.display()))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    builder.with_single_cert(certs, key).map(Arc::new).map_err(|e| format!("certificate and key: {e}"))
}

/// Where a controller's news goes.
pub type Log = Arc<dyn Fn(&str) + Send + Sync>;

impl Default for Config {
    fn default() -> Config {
        Config {
            listen: SocketAddr::from(([0, 0, 0, 0], 6653)),
            threads: 1,
            versions: vec![of10::OFP10, OFP13],
            echo_interval: Duration::from_secs(5),
            handshake_timeout: Duration::from_secs(10),
            max_pending: 4 << 20,
            log: None,
            role: None,
            tls: None,
            max_connections: 16_384,
        }
    }
}

/// What the controller has done so far, summed over its threads.
#[derive(Debug, Default)]
pub struct Counters {
    pub accepted: AtomicU64,
    /// Accepted connections closed since (any cause).
    pub closed: AtomicU64,
    /// Connections past [`Config::max_connections`], closed at once.
    pub refused: AtomicU64,
    pub switches_up: AtomicU64,
    pub switches_down: AtomicU64,
    pub messages_in: AtomicU64,
    pub messages_out: AtomicU64,
    pub packet_ins: AtomicU64,
    /// Malformed messages answered with an ERROR.
    pub malformed: AtomicU64,
    /// Connections closed for a protocol violation, a stalled handshake
    /// or silence.
    pub closed_bad: AtomicU64,
    /// Messages not sent because the switch's buffer was full.
    pub dropped_out: AtomicU64,
    /// Asynchronous messages (packet-ins...) a 1.3 switch sent before its
    /// handshake finished beyond the 64 kept for the application.
    pub dropped_in: AtomicU64,
    /// Requests an application made that the switch's version cannot say.
    pub untranslatable: AtomicU64,
}

fn add(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

/// A packet-in, whichever the version.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PacketIn {
    pub buffer_id: u32,
    /// In 1.3 numbering (1.0's reserved ports mapped).
    pub in_port: u32,
    pub total_len: u16,
    pub reason: u8,
    pub table_id: u8,
    pub cookie: u64,
    pub data: Vec<u8>,
}

/// What an application is told about a switch.
#[derive(Debug)]
pub enum Event<'a> {
    /// The handshake is done: features (and 1.3 port descriptions) known.
    SwitchUp {
        ports: &'a [PortDesc],
    },
    /// The connection closed.
    SwitchDown,
    PacketIn(&'a PacketIn),
    PortStatus {
        reason: u8,
        desc: &'a PortDesc,
    },
    Error {
        typ: u16,
        code: u16,
        data: &'a [u8],
    },
    /// Any other message from a 1.3 switch (multipart replies, flow
    /// removed, role replies...).
    Message13 {
        xid: u32,
        msg: &'a Message,
    },
    /// Any other message from a 1.0 switch.
    Message10 {
        xid: u32,
        msg: &'a Message10,
    },
}

type BarrierFn = Box<dyn FnOnce(&mut Switch<'_>) + Send>;

/// Asynchronous messages kept per switch while its 1.3 handshake finishes.
pub const MAX_EARLY: usize = 64;

/// Most barrier callbacks waiting on one switch; beyond, new ones are
/// dropped (counted as dropped messages).
const MAX_BARRIERS: usize = 1 << 16;

/// The switch an application is called for: who it is and how to send
/// to it.
pub struct Switch<'a> {
    pub dpid: u64,
    /// The negotiated version: 1 (1.0) or 4 (1.3).
    pub version: u8,
    link: &'a mut Connection,
    barriers: &'a mut HashMap<u32, BarrierFn>,
    counters: &'a Counters,
    scratch: &'a mut Scratch10,
}

/// The worker's 1.0 messages that requests are translated into, reused
/// so that a translated send allocates nothing once their lists have
/// grown.
#[derive(Default)]
struct Scratch10 {
    flow_mod: FlowMod10,
    packet_out: PacketOut10,
}

/// Appends one message to `link`'s outbox, counted as sent or dropped.
fn push(link: &mut Connection, counters: &Counters, encode: impl FnOnce(&mut Vec<u8>)) -> bool {
    if !link.send(encode) {
        add(&counters.dropped_out, 1);
        return false;
    }
    add(&counters.messages_out, 1);
    true
}

impl Switch<'_> {
    /// A fresh transaction id.
    pub fn xid(&mut self) -> u32 {
        self.link.xid()
    }

    fn push(&mut self, encode: impl FnOnce(&mut Vec<u8>)) -> bool {
        push(self.link, self.counters, encode)
    }

    /// Sends a 1.3 message as is (to a 1.3 switch).
    pub fn send13(&mut self, msg: &Message, xid: u32) -> bool {
        self.push(|b| sluice_openflow::encode_into(msg, OFP13, xid, b))
    }

    /// Sends a 1.0 message as is (to a 1.0 switch).
    pub fn send10(&mut self, msg: &Message10, xid: u32) -> bool {
        self.push(|b| of10::encode10_into(msg, xid, b))
    }

    /// Sends a request the two versions say each their own way, `m13` or
    /// `m10` by the switch's version, with a fresh transaction id:
    /// whether it went, and the id.
    fn request(&mut self, m13: &Message, m10: &Message10) -> (bool, u32) {
        let xid = self.xid();
        let sent = if self.version == OFP13 { self.send13(m13, xid) } else { self.send10(m10, xid) };
        (sent, xid)
    }

    /// Sends a flow-mod, translated for a 1.0 switch; an error (counted)
    /// when 1.0 cannot say it. Written straight into the connection's
    /// outbox (nothing allocated per call).
    pub fn flow_mod(&mut self, fm: &FlowMod) -> Result<(), String> {
        let xid = self.xid();
        if self.version == OFP13 {
            self.push(|b| sluice_openflow::encode_flow_mod_into(fm, OFP13, xid, b));
            return Ok(());
        }
        flow_mod_to_10_into(fm, &mut self.scratch.flow_mod).inspect_err(|_| add(&self.counters.untranslatable, 1))?;
        let f = &self.scratch.flow_mod;
        push(self.link, self.counters, |b| of10::encode_flow_mod10_into(f, xid, b));
        Ok(())
    }

    /// Sends a packet-out, translated for a 1.0 switch.
    pub fn packet_out(&mut self, po: &PacketOut) -> Result<(), String> {
        let xid = self.xid();
        if self.version == OFP13 {
            self.push(|b| sluice_openflow::encode_packet_out_into(po, OFP13, xid, b));
            return Ok(());
        }
        packet_out_to_10_into(po, &mut self.scratch.packet_out)
            .inspect_err(|_| add(&self.counters.untranslatable, 1))?;
        let p = &self.scratch.packet_out;
        push(self.link, self.counters, |b| of10::encode_packet_out10_into(p, xid, b));
        Ok(())
    }

    /// Sends a barrier request; `then` runs when its reply comes (not at
    /// all if the connection closes first).
    pub fn barrier(&mut self, then: impl FnOnce(&mut Switch<'_>) + Send + 'static) {
        let (sent, xid) = self.request(&Message::BarrierRequest, &Message10::BarrierRequest);
        if sent && self.barriers.len() < MAX_BARRIERS {
            self.barriers.insert(xid, Box::new(then));
        }
    }
}

enum Stage {
    /// Our HELLO sent, theirs awaited.
    Hello,
    /// FEATURES_REQUEST sent.
    Features,
    /// 1.3: PORT_DESC requested; the parts so far, and what the switch
    /// sent meanwhile (packet-ins...), handed over once it is up.
    PortDesc(Vec<PortDesc>, Vec<(u32, Message)>),
    Up,
}

struct Conn {
    stream: TcpStream,
    peer: SocketAddr,
    /// Bumped each time the slot is reused, so a close aimed at an old
    /// connection misses a new one.
    generation: u64,
    stage: Stage,
    /// Framing, HELLO, echoes and the bounded outbox (plaintext when TLS).
    link: Connection,
    dpid: u64,
    since: Instant,
    barriers: HashMap<u32, BarrierFn>,
    writable_wanted: bool,
    /// The TLS session when the listener is `ssl:`; bytes pass through it
    /// both ways (`link` holds plaintext).
    tls: Option<rustls::ServerConnection>,
}

impl Conn {
    /// The application's view of this connection.
    fn switch<'a>(&'a mut self, counters: &'a Counters, scratch: &'a mut Scratch10) -> Switch<'a> {
        let version = self.link.version().unwrap_or(0);
        Switch { dpid: self.dpid, version, link: &mut self.link, barriers: &mut self.barriers, counters, scratch }
    }
}

enum Cmd {
    New(TcpStream, SocketAddr),
    /// Close slot `.0` if its generation is still `.1` (its datapath id
    /// connected again elsewhere).
    Close(usize, u64),
}

/// Which connection holds each datapath id: (worker, slot, generation).
type Dpids = Arc<Mutex<HashMap<u64, (usize, usize, u64)>>>;

struct Worker {
    id: usize,
    cfg: Config,
    poll: Poll,
    rx: Receiver<Cmd>,
    peers: Vec<(Sender<Cmd>, Arc<Waker>)>,
    conns: Vec<Option<Conn>>,
    free: Vec<usize>,
    next_generation: u64,
    app: Box<dyn App>,
    counters: Arc<Counters>,
    dpids: Dpids,
    /// Connections whose last read stopped at [`READ_ROUND`] with data
    /// left in the socket.
    more: Vec<usize>,
    /// Where reads land first.
    read_buf: Vec<u8>,
    scratch: Scratch10,
    /// Packet-ins of one connection read together, handed to the
    /// application as one batch: the first `batch_len` are current, the
    /// rest keep their buffers for reuse.
    batch: Vec<PacketIn>,
    batch_len: usize,
}

const WAKER: Token = Token(usize::MAX);
/// Bytes read from one connection per round before the others get theirs
/// (a connection that had more is read again in the next round, without
/// waiting for new readiness: readiness is edge-triggered).
const READ_ROUND: usize = 64 << 10;

/// Most packet-ins handed to the application at once: enough for the
/// lookups of one batch to overlap, few enough that what they loaded is
/// still in the first-level cache when they are used.
const BATCH: usize = 32;

fn be16(m: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([m[at], m[at + 1]])
}

fn be32(m: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(m[at..at + 4].try_into().expect("4 bytes"))
}

/// Reads PACKET_IN `m` (a whole message of `version`) into `out`, reusing
/// its data buffer, when it has the layout every switch sends: 1.0's, or
/// 1.3's with a match of pipeline fields only (in_port, in_phy_port,
/// metadata, tunnel id, unmasked). False otherwise (`out` then holds
/// nothing of use): the codec decodes it, or says what is wrong with it.
fn parse_packet_in(m: &[u8], version: u8, out: &mut PacketIn) -> bool {
    if version == of10::OFP10 {
        if m.len() < 18 {
            return false;
        }
        out.buffer_id = be32(m, 8);
        out.total_len = be16(m, 12);
        out.in_port = port10_to_32(be16(m, 14));
        out.reason = m[16];
        out.table_id = 0;
        out.cookie = 0;
        out.data.clear();
        out.data.extend_from_slice(&m[18..]);
        return true;
    }
    // header, buffer_id, total_len, reason, table_id, cookie; then the match.
    if version != OFP13 || m.len() < 32 || be16(m, 24) != 1 {
        return false;
    }
    let end = 24 + usize::from(be16(m, 26));
    let data = 24 + usize::from(be16(m, 26)).div_ceil(8) * 8 + 2;
    if end < 28 || data > m.len() {
        return false;
    }
    let mut in_port = 0;
    let mut at = 28;
    while at < end {
        if at + 4 > end {
            return false;
        }
        let (class, field_and_mask, len) = (be16(m, at), m[at + 2], usize::from(m[at + 3]));
        // OpenFlow basic class, unmasked (the byte is field << 1 | has-mask):
        // IN_PORT 0 and IN_PHY_PORT 1 of 4 bytes, METADATA 2 and TUNNEL_ID 38 of 8.
        let known = class == 0x8000 && matches!((field_and_mask, len), (0 | 2, 4) | (4, 8) | (76, 8));
        if !known || at + 4 + len > end {
            return false;
        }
        if field_and_mask == 0 {
            in_port = be32(m, at + 4);
        }
        at += 4 + len;
    }
    out.buffer_id = be32(m, 8);
    out.total_len = be16(m, 12);
    out.reason = m[14];
    out.table_id = m[15];
    out.cookie = u64::from_be_bytes(m[16..24].try_into().expect("8 bytes"));
    out.in_port = in_port;
    out.data.clear();
    out.data.extend_from_slice(&m[data..]);
    true
}

/// A running controller.
pub struct Controller {
    pub counters: Arc<Counters>,
    /// The address it listens on (the port chosen when 0 was asked).
    pub local_addr: SocketAddr,
    stop: Arc<AtomicBool>,
    wakers: Vec<Arc<Waker>>,
    threads: Vec<JoinHandle<()>>,
}

impl Controller {
    /// Listens on `cfg.listen` and starts the threads; `make_app` makes
    /// one application instance per worker.
    pub fn start(cfg: Config, make_app: impl Fn() -> Box<dyn App>) -> io::Result<Controller> {
        if cfg.versions.iter().any(|v| *v != of10::OFP10 && *v != OFP13) || cfg.versions.is_empty() {
            return Err(io::Error::new(ErrorKind::InvalidInput, "versions: 1 (OpenFlow 1.0) and/or 4 (1.3)"));
        }
        let mut listener = TcpListener::bind(cfg.listen)?;
        let local_addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let counters = Arc::new(Counters::default());
        let dpids: Dpids = Arc::default();
        let n = cfg.threads.max(1);
        let mut polls = Vec::new();
        let mut peers = Vec::new();
        let mut rxs = Vec::new();
        for _ in 0..n {
            let poll = Poll::new()?;
            let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
            let (tx, rx) = channel();
            polls.push(poll);
            peers.push((tx, waker));
            rxs.push(rx);
        }
        let wakers: Vec<Arc<Waker>> = peers.iter().map(|(_, w)| Arc::clone(w)).collect();
        let mut threads = Vec::new();
        for (id, (poll, rx)) in polls.into_iter().zip(rxs).enumerate() {
            let mut w = Worker {
                id,
                cfg: cfg.clone(),
                poll,
                rx,
                peers: peers.clone(),
                conns: Vec::new(),
                free: Vec::new(),
                next_generation: 0,
                app: make_app(),
                counters: Arc::clone(&counters),
                dpids: Arc::clone(&dpids),
                more: Vec::new(),
                read_buf: vec![0; 64 << 10],
                scratch: Scratch10::default(),
                batch: Vec::new(),
                batch_len: 0,
            };
            let stop = Arc::clone(&stop);
            threads.push(std::thread::Builder::new().name(format!("of-ctl-{id}")).spawn(move || w.run(&stop))?);
        }
        let accept_poll = Poll::new()?;
        accept_poll.registry().register(&mut listener, Token(0), Interest::READABLE)?;
        let accept_waker = Arc::new(Waker::new(accept_poll.registry(), WAKER)?);
        let stop2 = Arc::clone(&stop);
        let counters2 = Arc::clone(&counters);
        let (max, log) = (cfg.max_connections, cfg.log.clone());
        threads.push(std::thread::Builder::new().name("of-ctl-accept".into()).spawn(move || {
            accept_loop(accept_poll, listener, peers, &stop2, &counters2, (max, log));
        })?);
        let mut wakers = wakers;
        wakers.push(accept_waker);
        Ok(Controller { counters, local_addr, stop, wakers, threads })
    }

    /// Stops every thread and closes every connection.
    pub fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        for w in &self.wakers {
            let _ = w.wake();
        }
        for t in self.threads {
            let _ = t.join();
        }
    }
}

fn accept_loop(
    mut poll: Poll,
    listener: TcpListener,
    peers: Vec<(Sender<Cmd>, Arc<Waker>)>,
    stop: &AtomicBool,
    counters: &Counters,
    (max_connections, log): (usize, Option<Log>),
) {
    let mut events = Events::with_capacity(64);
    let mut next = 0;
    let mut reported: (u64, Option<Instant>) = (0, None);
    while !stop.load(Ordering::Relaxed) {
        if poll.poll(&mut events, Some(Duration::from_millis(200))).is_err() {
            continue;
        }
        loop {
            match listener.accept() {
                Ok((s, peer)) => {
                    let open = counters.accepted.load(Ordering::Relaxed) - counters.closed.load(Ordering::Relaxed);
                    if open >= max_connections as u64 {
                        drop(s);
                        add(&counters.refused, 1);
                        let n = counters.refused.load(Ordering::Relaxed);
                        if reported.1.is_none_or(|t| t.elapsed() >= Duration::from_secs(1)) && n != reported.0 {
                            if let Some(log) = &log {
                                log(&format!(
                                    "{n} connection(s) refused so far ({max_connections} connections open, the bound)"
                                ));
                            }
                            reported = (n, Some(Instant::now()));
                        }
                        continue;
                    }
                    add(&counters.accepted, 1);
                    let _ = s.set_nodelay(true);
                    let (tx, waker) = &peers[next % peers.len()];
                    next += 1;
                    if tx.send(Cmd::New(s, peer)).is_ok() {
                        let _ = waker.wake();
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                // Out of descriptors or a connection reset before accept:
                // try again at the next readiness.
                Err(_) => break,
            }
        }
    }
}

impl Worker {
    fn log(&self, msg: &str) {
        if let Some(l) = &self.cfg.log {
            l(msg);
        }
    }

    fn run(&mut self, stop: &AtomicBool) {
        let mut events = Events::with_capacity(1024);
        let mut last_tick = Instant::now();
        while !stop.load(Ordering::Relaxed) {
            let wait = if self.more.is_empty() { Duration::from_millis(100) } else { Duration::ZERO };
            if let Err(e) = self.poll.poll(&mut events, Some(wait)) {
                if e.kind() != ErrorKind::Interrupted {
                    self.log(&format!("worker {}: poll: {e}", self.id));
                }
                continue;
            }
            for ev in events.iter() {
                if ev.token() == WAKER {
                    self.commands();
                    continue;
                }
                let i = ev.token().0;
                if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                    self.read(i);
                }
                if ev.is_writable() {
                    self.flush(i);
                }
            }
            for i in std::mem::take(&mut self.more) {
                self.read(i);
            }
            if last_tick.elapsed() >= Duration::from_millis(250) {
                last_tick = Instant::now();
                self.timers();
            }
        }
        for i in 0..self.conns.len() {
            self.close(i, None);
        }
    }

    fn commands(&mut self) {
        while let Ok(cmd) = self.rx.try_recv() {
            match cmd {
                Cmd::New(stream, peer) => self.open(stream, peer),
                Cmd::Close(i, generation) => {
                    if self.conns.get(i).and_then(Option::as_ref).is_some_and(|c| c.generation == generation) {
                        self.close(i, Some("its datapath id connected again"));
                    }
                }
            }
        }
    }

    fn open(&mut self, mut stream: TcpStream, peer: SocketAddr) {
        let i = self.free.pop().unwrap_or_else(|| {
            self.conns.push(None);
            self.conns.len() - 1
        });
        if self.poll.registry().register(&mut stream, Token(i), Interest::READABLE).is_err() {
            self.free.push(i);
            return;
        }
        self.next_generation += 1;
        let now = Instant::now();
        let settings = Settings {
            versions: self.cfg.versions.clone(),
            echo_interval: self.cfg.echo_interval,
            max_output: self.cfg.max_pending,
            when_full: Full::Drop,
            hello_required: true,
        };
        let mut c = Conn {
            stream,
            peer,
            generation: self.next_generation,
            stage: Stage::Hello,
            // Our HELLO (a version bitmap, in the highest version we speak) is queued.
            link: Connection::new(settings, now),
            dpid: 0,
            since: now,
            barriers: HashMap::new(),
            writable_wanted: false,
            tls: None,
        };
        add(&self.counters.messages_out, 1);
        if let Some(cfg) = &self.cfg.tls {
            match rustls::ServerConnection::new(Arc::clone(cfg)) {
                Ok(t) => c.tls = Some(t),
                Err(e) => {
                    let _ = self.poll.registry().deregister(&mut c.stream);
                    self.free.push(i);
                    self.log(&format!("connection from {peer}: TLS: {e}"));
                    return;
                }
            }
        }
        self.conns[i] = Some(c);
        self.flush(i);
    }

    fn close(&mut self, i: usize, why: Option<&str>) {
        let Some(mut c) = self.conns.get_mut(i).and_then(Option::take) else { return };
        let _ = self.poll.registry().deregister(&mut c.stream);
        self.free.push(i);
        add(&self.counters.closed, 1);
        if let Some(why) = why {
            self.log(&format!("connection from {} closed: {why}", c.peer));
        }
        if matches!(c.stage, Stage::Up) {
            add(&self.counters.switches_down, 1);
            {
                let mut d = self.dpids.lock().unwrap_or_else(|e| e.into_inner());
                if d.get(&c.dpid) == Some(&(self.id, i, c.generation)) {
                    d.remove(&c.dpid);
                }
            }
            self.log(&format!("switch {:#018x} down", c.dpid));
            let mut sw = c.switch(&self.counters, &mut self.scratch);
            self.app.event(&mut sw, &Event::SwitchDown);
        }
    }

    fn bad(&mut self, i: usize, why: &str) {
        add(&self.counters.closed_bad, 1);
        self.close(i, Some(why));
    }

    /// Ends connection `i` for what its link says closed it (its last
    /// words, an ERROR, written first).
    fn closed_by_link(&mut self, i: usize, why: Closed) {
        self.flush(i);
        match why {
            Closed::Eof => self.close(i, Some("the switch closed it")),
            why => self.bad(i, &why.to_string()),
        }
    }

    fn read(&mut self, i: usize) {
        let now = Instant::now();
        let mut failed: Option<String> = None;
        {
            let Some(c) = self.conns.get_mut(i).and_then(Option::as_mut) else { return };
            let before = c.link.unread();
            let more = if let Some(tls) = &mut c.tls {
                // Records from the socket into the session, plaintext out.
                let mut more = false;
                loop {
                    let (blocked, eof) = match tls.read_tls(&mut c.stream) {
                        Ok(0) => (true, true),
                        Ok(_) => match tls.process_new_packets() {
                            Ok(_) => (false, false),
                            Err(e) => {
                                failed = Some(format!("TLS: {e}"));
                                (true, false)
                            }
                        },
                        Err(e) if e.kind() == ErrorKind::WouldBlock => (true, false),
                        Err(e) if e.kind() == ErrorKind::Interrupted => (false, false),
                        Err(_) => {
                            failed = Some("read error".into());
                            (true, false)
                        }
                    };
                    if c.link.read_from(&mut tls.reader(), &mut self.read_buf, READ_ROUND, now).is_err() {
                        // The session has nothing more now (plaintext drained).
                    }
                    if eof {
                        c.link.close(Closed::Eof);
                    }
                    if c.link.unread() - before >= READ_ROUND {
                        more = !blocked;
                        break;
                    }
                    if blocked {
                        break;
                    }
                }
                more
            } else {
                match c.link.read_from(&mut c.stream, &mut self.read_buf, READ_ROUND, now) {
                    Ok(more) => more,
                    Err(_) => {
                        failed = Some("read error".into());
                        false
                    }
                }
            };
            // Stopped with data maybe left: read again next round.
            if more && !self.more.contains(&i) {
                self.more.push(i);
            }
        }
        if let Some(e) = failed {
            // The alert the session wants to send goes first.
            self.flush(i);
            self.bad(i, &e);
            return;
        }
        // Whole messages, in order.
        let mut n = 0;
        loop {
            let Some(c) = self.conns.get_mut(i).and_then(Option::as_mut) else { return };
            let Some(incoming) = c.link.next_incoming() else { break };
            n += 1;
            let alive = match incoming {
                Incoming::Negotiated(_) => {
                    c.stage = Stage::Features;
                    c.switch(&self.counters, &mut self.scratch)
                        .request(&Message::FeaturesRequest, &Message10::FeaturesRequest);
                    true
                }
                Incoming::Message(frame) => {
                    // A packet-in of a switch that is up joins the batch;
                    // anything else goes after the batch so far.
                    let packet_in = matches!(c.stage, Stage::Up)
                        && frame.typ == sluice_openflow::msg_type::PACKET_IN
                        && c.link.version() == Some(frame.version);
                    if packet_in {
                        if self.batch_len == self.batch.len() {
                            self.batch.push(PacketIn::default());
                        }
                        if parse_packet_in(c.link.bytes(&frame), frame.version, &mut self.batch[self.batch_len]) {
                            self.batch_len += 1;
                            if self.batch_len == BATCH {
                                self.deliver(i);
                            }
                            continue;
                        }
                    }
                    self.deliver(i);
                    self.handle(i, &frame)
                }
            };
            if !alive {
                add(&self.counters.messages_in, n);
                return;
            }
        }
        self.deliver(i);
        add(&self.counters.messages_in, n);
        if let Some(why) = self.conns.get(i).and_then(Option::as_ref).and_then(|c| c.link.closed().cloned()) {
            return self.closed_by_link(i, why);
        }
        self.flush(i);
    }

    /// Hands the batched packet-ins of connection `i` to the application.
    fn deliver(&mut self, i: usize) {
        let n = std::mem::take(&mut self.batch_len);
        if n == 0 {
            return;
        }
        add(&self.counters.packet_ins, n as u64);
        let Some(c) = self.conns.get_mut(i).and_then(Option::as_mut) else { return };
        let mut sw = c.switch(&self.counters, &mut self.scratch);
        self.app.packet_ins(&mut sw, &self.batch[..n]);
    }

    /// Writes what waits; asks for writability when the socket is full.
    fn flush(&mut self, i: usize) {
        let Some(c) = self.conns.get_mut(i).and_then(Option::as_mut) else { return };
        let mut failed = false;
        if let Some(tls) = &mut c.tls {
            // Plaintext into the session (it takes what its buffer limit
            // allows), records out to the socket.
            loop {
                let before = c.link.output().len();
                if c.link.write_to(&mut tls.writer()).is_err() {
                    failed = true;
                }
                let (mut blocked, mut wrote) = (false, false);
                while tls.wants_write() {
                    match tls.write_tls(&mut c.stream) {
                        Ok(0) => {
                            failed = true;
                            break;
                        }
                        Ok(_) => wrote = true,
                        Err(e) if e.kind() == ErrorKind::WouldBlock => {
                            blocked = true;
                            break;
                        }
                        Err(e) if e.kind() == ErrorKind::Interrupted => {}
                        Err(_) => {
                            failed = true;
                            break;
                        }
                    }
                }
                // Done, stuck on the socket, or the session takes no more
                // plaintext yet (its handshake is not finished).
                let left = c.link.output().len();
                if failed || blocked || left == 0 || (left == before && !wrote) {
                    break;
                }
            }
        } else if c.link.write_to(&mut c.stream).is_err() {
            failed = true;
        }
        let want = c.link.wants_write() || c.tls.as_ref().is_some_and(|t| t.wants_write());
        if want != c.writable_wanted {
            c.writable_wanted = want;
            let interest = if want { Interest::READABLE | Interest::WRITABLE } else { Interest::READABLE };
            let _ = self.poll.registry().reregister(&mut c.stream, Token(i), interest);
        }
        if failed {
            self.close(i, Some("write error"));
        }
    }

    fn timers(&mut self) {
        let now = Instant::now();
        for i in 0..self.conns.len() {
            let Some(c) = self.conns[i].as_mut() else { continue };
            if !matches!(c.stage, Stage::Up) && now.duration_since(c.since) > self.cfg.handshake_timeout {
                self.bad(i, "no handshake in time");
                continue;
            }
            let queued = c.link.output().len();
            c.link.tick(now);
            if let Some(why) = c.link.closed().cloned() {
                self.closed_by_link(i, why);
                continue;
            }
            if c.link.output().len() > queued {
                add(&self.counters.messages_out, 1);
                self.flush(i);
            }
        }
    }

    /// One whole message from connection `i`, past the HELLO; false when
    /// the connection was closed.
    fn handle(&mut self, i: usize, frame: &sluice_openflow::connection::Frame) -> bool {
        let Some(c) = self.conns[i].as_mut() else { return false };
        let version = c.link.version().unwrap_or(0);
        if frame.version != version {
            let e = sluice_openflow::OfError::new(
                errors::error_type::BAD_REQUEST,
                errors::bad_request::BAD_VERSION,
                format!("version {} on a connection speaking {version}", frame.version),
            );
            self.reply_error(i, &e, frame);
            return true;
        }
        let decoded = {
            let msg = c.link.bytes(frame);
            if version == OFP13 {
                sluice_openflow::decode(msg).map(|(_, m)| Ok(m))
            } else {
                of10::decode10(msg).map(|(_, m)| Err(m))
            }
        };
        match decoded {
            Ok(Ok(m)) => self.on13(i, frame.xid, m),
            Ok(Err(m)) => self.on10(i, frame.xid, m),
            Err(e) => {
                self.reply_error(i, &e, frame);
                true
            }
        }
    }

    fn reply_error(&mut self, i: usize, e: &sluice_openflow::OfError, frame: &sluice_openflow::connection::Frame) {
        add(&self.counters.malformed, 1);
        let Some(c) = self.conns[i].as_mut() else { return };
        let version = c.link.version().unwrap_or(frame.version);
        let request = c.link.bytes(frame).to_vec();
        if c.link.error(version, frame.xid, e.typ, e.code, &request) {
            add(&self.counters.messages_out, 1);
        }
    }

    /// The switch finished its handshake.
    fn up(&mut self, i: usize, ports: Vec<PortDesc>) {
        let Some(c) = self.conns[i].as_mut() else { return };
        c.stage = Stage::Up;
        let (dpid, generation, version) = (c.dpid, c.generation, c.link.version().unwrap_or(0));
        let earlier = self.dpids.lock().unwrap_or_else(|e| e.into_inner()).insert(dpid, (self.id, i, generation));
        add(&self.counters.switches_up, 1);
        let v = if version == OFP13 { "1.3" } else { "1.0" };
        let peer = c.peer;
        self.log(&format!("switch {dpid:#018x} up (OpenFlow {v}, {} ports) from {peer}", ports.len()));
        if let Some((w, slot, g)) = earlier {
            if (w, slot) != (self.id, i) {
                if w == self.id {
                    if self.conns[slot].as_ref().is_some_and(|c| c.generation == g) {
                        self.close(slot, Some("its datapath id connected again"));
                    }
                } else if let Some((tx, waker)) = self.peers.get(w) {
                    if tx.send(Cmd::Close(slot, g)).is_ok() {
                        let _ = waker.wake();
                    }
                }
            }
        }
        let Some(c) = self.conns[i].as_mut() else { return };
        let mut sw = c.switch(&self.counters, &mut self.scratch);
        if let (Some((role, generation_id)), OFP13) = (self.cfg.role, version) {
            let xid = sw.xid();
            sw.send13(&Message::RoleRequest(sluice_openflow::Role { role, generation_id }), xid);
        }
        self.app.event(&mut sw, &Event::SwitchUp { ports: &ports });
    }

    fn on13(&mut self, i: usize, xid: u32, m: Message) -> bool {
        let Some(c) = self.conns[i].as_mut() else { return false };
        match (&mut c.stage, m) {
            // Echo requests are answered by the connection itself.
            (_, Message::EchoRequest(_)) | (_, Message::EchoReply(_)) | (_, Message::Hello(_)) => {}
            (Stage::Features, Message::FeaturesReply(f)) => {
                c.dpid = f.datapath_id;
                c.stage = Stage::PortDesc(Vec::new(), Vec::new());
                let mut sw = c.switch(&self.counters, &mut self.scratch);
                let xid = sw.xid();
                sw.send13(&Message::MultipartRequest { flags: 0, body: MultipartRequest::PortDesc }, xid);
            }
            (Stage::PortDesc(parts, early), Message::MultipartReply { flags, body: MultipartReply::PortDesc(p) }) => {
                parts.extend(p);
                if flags & sluice_openflow::MULTIPART_MORE == 0 {
                    let ports = std::mem::take(parts);
                    let early = std::mem::take(early);
                    self.up(i, ports);
                    for (xid, m) in early {
                        if !self.on13(i, xid, m) {
                            return false;
                        }
                    }
                }
            }
            (
                Stage::PortDesc(_, early),
                m @ (Message::PacketIn(_) | Message::PortStatus { .. } | Message::FlowRemoved(_)),
            ) => {
                if early.len() < MAX_EARLY {
                    early.push((xid, m));
                } else {
                    add(&self.counters.dropped_in, 1);
                }
            }
            (Stage::Up, m) => {
                let mut sw = c.switch(&self.counters, &mut self.scratch);
                match m {
                    Message::PacketIn(p) => {
                        add(&self.counters.packet_ins, 1);
                        self.app.event(&mut sw, &Event::PacketIn(&packet_in_from_13(p)));
                    }
                    Message::BarrierReply => {
                        if let Some(then) = sw.barriers.remove(&xid) {
                            then(&mut sw);
                        }
                    }
                    Message::PortStatus { reason, desc } => {
                        self.app.event(&mut sw, &Event::PortStatus { reason, desc: &desc });
                    }
                    Message::Error(e) => {
                        self.app.event(&mut sw, &Event::Error { typ: e.typ, code: e.code, data: &e.data });
                    }
                    m => self.app.event(&mut sw, &Event::Message13 { xid, msg: &m }),
                }
            }
            (_, Message::Error(e)) => {
                let why = format!("error {}/{} during the handshake", e.typ, e.code);
                self.bad(i, &why);
                return false;
            }
            // Anything else before the handshake is done: not for us yet.
            _ => {}
        }
        true
    }

    fn on10(&mut self, i: usize, xid: u32, m: Message10) -> bool {
        let Some(c) = self.conns[i].as_mut() else { return false };
        match (&c.stage, m) {
            // Echo requests are answered by the connection itself.
            (_, Message10::EchoRequest(_)) | (_, Message10::EchoReply(_)) | (_, Message10::Hello(_)) => {}
            (Stage::Features, Message10::FeaturesReply(f)) => {
                c.dpid = f.datapath_id;
                let ports = f.ports.iter().map(port_desc_from_10).collect();
                self.up(i, ports);
            }
            (Stage::Up, m) => {
                let mut sw = c.switch(&self.counters, &mut self.scratch);
                match m {
                    Message10::PacketIn(p) => {
                        add(&self.counters.packet_ins, 1);
                        let pi = packet_in_from_10(p);
                        self.app.event(&mut sw, &Event::PacketIn(&pi));
                    }
                    Message10::BarrierReply => {
                        if let Some(then) = sw.barriers.remove(&xid) {
                            then(&mut sw);
                        }
                    }
                    Message10::PortStatus(s) => {
                        let desc = port_desc_from_10(&s.desc);
                        self.app.event(&mut sw, &Event::PortStatus { reason: s.reason, desc: &desc });
                    }
                    Message10::Error { typ, code, data } => {
                        self.app.event(&mut sw, &Event::Error { typ, code, data: &data });
                    }
                    m => self.app.event(&mut sw, &Event::Message10 { xid, msg: &m }),
                }
            }
            (_, Message10::Error { typ, code, .. }) => {
                let why = format!("error {typ}/{code} during the handshake");
                self.bad(i, &why);
                return false;
            }
            _ => {}
        }
        true
    }
}

/// A 1.0 port description in 1.3's form (speeds unknown: 0).
fn port_desc_from_10(p: &of10::PhyPort10) -> PortDesc {
    PortDesc {
        port_no: port10_to_32(p.port_no),
        hw_addr: p.hw_addr,
        name: p.name.clone(),
        config: p.config,
        state: p.state,
        curr: p.curr,
        advertised: p.advertised,
        supported: p.supported,
        peer: p.peer,
        curr_speed: 0,
        max_speed: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_openflow::{Match, Oxm, OxmField};

    fn oxm(field: OxmField, value: &[u8]) -> Oxm {
        Oxm { field, value: value.to_vec(), mask: None }
    }

    fn packet_in10(data: &[u8]) -> of10::PacketIn10 {
        of10::PacketIn10 { buffer_id: 7, total_len: 64, in_port: 0xfffe, reason: 1, data: data.to_vec() }
    }

    fn packet_in13(fields: Vec<Oxm>, data: &[u8]) -> sluice_openflow::PacketIn {
        sluice_openflow::PacketIn {
            buffer_id: 0xffff_ffff,
            total_len: 64,
            reason: 0,
            table_id: 3,
            cookie: 0x0102_0304_0506_0708,
            matched: Match { fields },
            data: data.to_vec(),
        }
    }

    fn encode13(p: &sluice_openflow::PacketIn) -> Vec<u8> {
        let mut m = Vec::new();
        sluice_openflow::encode_into(&Message::PacketIn(p.clone()), OFP13, 4, &mut m);
        m
    }

    /// The fast parse reads what the codec decodes, and leaves to the codec
    /// what it does not know.
    #[test]
    fn packet_ins_parse_as_the_codec_decodes_them() {
        let data: Vec<u8> = (0..64).collect();
        let mut out = PacketIn { data: vec![9; 200], ..PacketIn::default() };
        let p10 = packet_in10(&data);
        let m = of10::encode10(&Message10::PacketIn(p10.clone()), 3);
        assert!(parse_packet_in(&m, of10::OFP10, &mut out));
        assert_eq!(out, packet_in_from_10(p10));
        assert!(!parse_packet_in(&m[..17], of10::OFP10, &mut out), "shorter than 1.0's header");

        for fields in [
            vec![oxm(OxmField::InPort, &[0, 0, 0, 5])],
            vec![],
            vec![oxm(OxmField::InPort, &[0, 0, 0, 6]), oxm(OxmField::Metadata, &[1; 8])],
        ] {
            let p13 = packet_in13(fields, &data);
            assert!(parse_packet_in(&encode13(&p13), OFP13, &mut out));
            assert_eq!(out, packet_in_from_13(p13));
        }
        // A field a packet-in does not carry: the codec's.
        let mut m = encode13(&packet_in13(vec![oxm(OxmField::EthType, &[8, 0])], &data));
        assert!(!parse_packet_in(&m, OFP13, &mut out));
        // A match length past the message.
        m[27] = 200;
        assert!(!parse_packet_in(&m, OFP13, &mut out));
    }

    /// Bytes from the network: every truncation and every single-byte
    /// corruption of both versions' packet-ins parses or is refused, never
    /// panics.
    #[test]
    fn packet_in_parse_never_panics() {
        let mut out = PacketIn::default();
        let data = [0xab; 64];
        let m10 = of10::encode10(&Message10::PacketIn(packet_in10(&data)), 1);
        let m13 = encode13(&packet_in13(vec![oxm(OxmField::InPort, &[0, 0, 0, 1])], &data));
        for (m, version) in [(m10, of10::OFP10), (m13, OFP13)] {
            for n in 0..=m.len() {
                parse_packet_in(&m[..n], version, &mut out);
            }
            for at in 0..m.len() {
                for v in [0u8, 1, 0x7f, 0x80, 0xff] {
                    let mut c = m.clone();
                    c[at] = v;
                    parse_packet_in(&c, version, &mut out);
                }
            }
        }
    }
}
