//! The agent's connections and its event loop.
//!
//! Contract: accepts controller connections on its listeners and keeps
//! connections to the controllers it is told of (reconnecting with
//! back-off); reads their bytes into each connection's
//! `sluice_openflow::connection::Connection` (framing, HELLO, echoes,
//! inactivity) and hands each whole request to `requests.rs`; writes what
//! was queued once per round, asking for writability only while a socket
//! is full. One `mio` poll waits for sockets, the workers' packet-ins
//! ([`crate::notes`]) and the next timer: an idle agent wakes a few times
//! a second at most.
//!
//! Bounds: [`AgentConfig::max_connections`] connections (one more
//! accepted is closed at once, counted and reported at most once a
//! second); [`MAX_OUTPUT_BYTES`] of output per connection (beyond, the
//! connection is closed and counted); [`READ_ROUND`] bytes read from one
//! connection before the others get their turn.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token, Waker};
use sluice_node::{Control, Server, Session, Stop};
use sluice_ofswitch::OfSwitch;
use sluice_openflow::connection::{Closed, Connection, Frame, Full, Incoming, Settings};
use sluice_openflow::{controller_role, of10, translate10, AsyncConfig, Message, OfError, OFP10, OFP13, OFP14};

use crate::buffers::PacketBuffers;
use crate::notes::Notes;

/// A connection's pending output beyond which the peer is deemed stuck
/// and the connection closed.
pub const MAX_OUTPUT_BYTES: usize = 16 << 20;

/// The default silence on a connection before an echo request
/// ([`AgentConfig::inactivity_probe`]); three unanswered, the connection
/// is closed at the next interval.
pub const ECHO_INTERVAL: Duration = Duration::from_secs(5);

/// The default bound on connections open at once
/// ([`AgentConfig::max_connections`]).
pub const MAX_CONNECTIONS: usize = 1024;

/// Bytes read from one connection per round.
pub const READ_ROUND: usize = 64 << 10;

/// Most packet-ins forwarded per round (the rest wait for the next).
pub(crate) const PACKET_INS_PER_ROUND: usize = 4096;

const WAKE: Token = Token(usize::MAX);
/// Listener `i` is token `LISTENERS - i`.
const LISTENERS: usize = usize::MAX - 1;

/// What the switch does while no controller is connected (Open vSwitch's
/// `fail_mode`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum FailMode {
    /// The flows stay and nothing else changes.
    #[default]
    Secure,
    /// After three inactivity probe intervals without a connection to any
    /// `controllers` address (at once when none is given), the switch
    /// forwards every packet as an ordinary MAC-learning switch (the
    /// NORMAL port), ignoring its flows, until a controller connects.
    Standalone,
}

/// How the agent is set up.
#[derive(Debug, Clone, Default)]
pub struct AgentConfig {
    pub datapath_id: u64,
    /// `ptcp:PORT[:IP]` listeners.
    pub listen: Vec<SocketAddr>,
    /// `tcp:IP:PORT` controllers to connect to.
    pub controllers: Vec<SocketAddr>,
    /// Text for the description reply.
    pub dp_desc: String,
    /// Whether the interface of this name is up with a carrier; `None`:
    /// links are not watched (ports keep the state they were given).
    pub link_up: Option<fn(&str) -> bool>,
    pub fail_mode: FailMode,
    /// Silence on a connection after which the agent sends an echo
    /// request (zero: [`ECHO_INTERVAL`]).
    pub inactivity_probe: Duration,
    /// Connections open at once (zero: [`MAX_CONNECTIONS`]); one more
    /// accepted on a listener is closed at once, counted and reported.
    pub max_connections: usize,
    /// The OpenFlow versions spoken (`of10::OFP10`, `OFP13`, `OFP14`; empty: all three).
    pub versions: Vec<u8>,
}

/// Counters of the agent itself.
#[derive(Debug, Clone, Default)]
pub struct AgentStats {
    pub messages_in: u64,
    pub messages_out: u64,
    pub errors_sent: u64,
    pub connections_closed_stuck: u64,
    pub packet_ins_sent: u64,
    /// Packet-ins sent whole because every packet buffer was taken.
    pub packet_ins_unbuffered: u64,
    /// Connections accepted past the bound, and closed at once.
    pub connections_refused: u64,
    /// Connections closed for silence (echo requests unanswered, or no HELLO).
    pub silent_closed: u64,
}

/// The bit standing for [`IMPLICIT_MISS`](sluice_ofswitch::switch::IMPLICIT_MISS) packet-ins (beyond every 32-bit mask).
pub(crate) const IMPLICIT_MISS_BIT: u64 = 1 << 63;

/// One controller connection.
pub(crate) struct Conn {
    pub(crate) stream: TcpStream,
    pub(crate) peer: String,
    pub(crate) link: Connection,
    pub(crate) role: u32,
    pub(crate) async_cfg: AsyncConfig,
    /// Index in the active controller list, for reconnection.
    pub(crate) active: Option<usize>,
    /// An active connection not established yet.
    connecting: bool,
    /// Writability asked of the poll.
    writable: bool,
    /// Its open bundles (see `bundles.rs`).
    pub(crate) bundles: crate::bundles::Bundles,
    /// Its flow monitors (see `monitors.rs`).
    pub(crate) monitors: Vec<crate::monitors::Monitor>,
}

impl Conn {
    /// Whether this connection is past its HELLO.
    pub(crate) fn up(&self) -> bool {
        self.link.version().is_some() && self.link.closed().is_none()
    }

    /// Whether it wants packet-ins of the reason whose bit is `bit`
    /// (its asynchronous configuration; a 1.0 peer, which has no word for
    /// an expired TTL, never gets those; [`IMPLICIT_MISS_BIT`], a table
    /// miss, goes to 1.0 peers that want NO_MATCH packet-ins only).
    pub(crate) fn wants_packet_in(&self, bit: u64) -> bool {
        use sluice_openflow::packet_in_reason::{for_version, INVALID_TTL, NO_MATCH};
        let v10 = self.link.version() == Some(OFP10);
        // Before 1.4, the ACTION bit stands for 1.4's refinements of it.
        let bit = match (bit.trailing_zeros(), self.link.version()) {
            (r @ 0..=7, Some(v)) => 1 << for_version(r as u8, v),
            _ => bit,
        };
        let (bit, ok) = match bit {
            IMPLICIT_MISS_BIT => (1 << NO_MATCH, v10),
            b if b == 1 << INVALID_TTL => (b, !v10),
            b => (b, true),
        };
        self.up() && ok && u64::from(self.async_cfg.packet_in_mask[self.mask_index()]) & bit != 0
    }

    /// The index (master/equal 0, slave 1) of its asynchronous configuration's masks.
    pub(crate) fn mask_index(&self) -> usize {
        usize::from(self.role == controller_role::SLAVE)
    }
}

struct Active {
    addr: SocketAddr,
    next_try: Instant,
    backoff: Duration,
    connected: bool,
}

/// OpenFlow 1.4's defaults: 1.3's, with the refined packet-in reasons
/// (action set, group, packet-out) and the flow-removed reasons of
/// meter deletion and eviction for the master.
fn default_async_14() -> AsyncConfig {
    let mut a = default_async();
    a.packet_in_mask[0] |= 0x38;
    a.flow_removed_mask[0] = 0x3f;
    a
}

fn default_async() -> AsyncConfig {
    // OpenFlow 1.3.5 defaults: master/equal get every packet-in, port
    // status and flow-removed reason; slaves get port status only.
    AsyncConfig {
        packet_in_mask: [0x7, 0],
        port_status_mask: [0x7, 0x7],
        flow_removed_mask: [0xf, 0],
        ..AsyncConfig::default()
    }
}

/// The agent (see the crate documentation).
pub struct Agent {
    pub(crate) control: Control<OfSwitch>,
    pub(crate) notes: Notes,
    pub(crate) cfg: AgentConfig,
    poll: Option<Poll>,
    listeners: Vec<TcpListener>,
    active: Vec<Active>,
    pub(crate) conns: Vec<Option<Conn>>,
    free: Vec<usize>,
    /// Connections whose last read stopped at [`READ_ROUND`].
    more: Vec<usize>,
    /// Packet-ins were left for the next round.
    notes_more: bool,
    scratch: Vec<u8>,
    pub(crate) next_uid: u64,
    pub(crate) start: Instant,
    pub(crate) generation: Option<u64>,
    /// Whether the workers send INVALID_TTL packet-ins (some connection
    /// up asks for them), as last told to them.
    invalid_ttl_wanted: bool,
    /// Whether the workers send table misses up ([`IMPLICIT_MISS`](sluice_ofswitch::switch::IMPLICIT_MISS)), as last told.
    miss_wanted: bool,
    /// Flow monitors on every connection (none: flow changes skip them).
    pub(crate) monitors: usize,
    pub(crate) upkeep: crate::upkeep::Upkeep,
    /// Packets kept for the controllers' packet-outs and flow-mods.
    pub(crate) buffers: PacketBuffers,
    /// Refused connections last reported, and when.
    refused_reported: (u64, Option<Instant>),
    pub stats: AgentStats,
}

impl Agent {
    /// An agent for the switch `control` runs, receiving the workers'
    /// packet-ins on `notes` (see [`crate::packet_in_channel`]); it
    /// listens and connects once started.
    pub fn new(control: Control<OfSwitch>, notes: Notes, mut cfg: AgentConfig) -> Agent {
        if cfg.inactivity_probe.is_zero() {
            cfg.inactivity_probe = ECHO_INTERVAL;
        }
        if cfg.max_connections == 0 {
            cfg.max_connections = MAX_CONNECTIONS;
        }
        let now = Instant::now();
        let active = cfg
            .controllers
            .iter()
            .map(|a| Active { addr: *a, next_try: now, backoff: Duration::from_millis(100), connected: false })
            .collect();
        Agent {
            control,
            notes,
            cfg,
            poll: None,
            listeners: Vec::new(),
            active,
            conns: Vec::new(),
            free: Vec::new(),
            more: Vec::new(),
            notes_more: false,
            scratch: vec![0; READ_ROUND],
            next_uid: 1,
            start: now,
            generation: None,
            invalid_ttl_wanted: false,
            miss_wanted: false,
            monitors: 0,
            upkeep: crate::upkeep::Upkeep::new(now),
            buffers: PacketBuffers::default(),
            refused_reported: (0, None),
            stats: AgentStats::default(),
        }
    }

    /// The addresses the listeners are bound to.
    pub fn local_addrs(&self) -> Vec<SocketAddr> {
        self.listeners.iter().filter_map(|l| l.local_addr().ok()).collect()
    }

    /// Nanoseconds since the agent started (flows' ages).
    pub(crate) fn now_ns(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    /// The switch, locked for one step (never held across another call
    /// of this agent's that locks it).
    pub(crate) fn pool(&self) -> Session<'_, OfSwitch> {
        self.control.lock()
    }

    /// Whether a controller connection made by the agent is up (standalone mode).
    pub(crate) fn controller_connected(&self) -> bool {
        self.conns.iter().flatten().any(|c| c.active.is_some() && c.up())
    }

    /// Whether any controller was given to connect to.
    pub(crate) fn has_controllers(&self) -> bool {
        !self.active.is_empty()
    }

    /// Queues `m` on connection `ci` in its version.
    pub(crate) fn reply(&mut self, ci: usize, m: &Message, xid: u32) {
        let Some(c) = self.conns.get_mut(ci).and_then(Option::as_mut) else { return };
        let v = c.link.version().unwrap_or(OFP13);
        let sent = if v == OFP10 {
            // What 1.0 has no form of is not sent to a 1.0 peer.
            let Some(m10) = translate10::message_to_10(m) else { return };
            c.link.send(|out| of10::encode10_into(&m10, xid, out))
        } else {
            c.link.send(|out| sluice_openflow::encode_into(m, v, xid, out))
        };
        if sent {
            self.stats.messages_out += 1;
        }
    }

    /// Queues the OpenFlow 1.0 message `m` on connection `ci`.
    pub(crate) fn reply10(&mut self, ci: usize, m: &of10::Message10, xid: u32) {
        let Some(c) = self.conns.get_mut(ci).and_then(Option::as_mut) else { return };
        if c.link.send(|out| of10::encode10_into(m, xid, out)) {
            self.stats.messages_out += 1;
        }
    }

    /// Answers request `raw` of connection `ci` with the error `e`.
    pub(crate) fn error(&mut self, ci: usize, raw: &[u8], e: &OfError, xid: u32) {
        self.stats.errors_sent += 1;
        let Some(c) = self.conns.get_mut(ci).and_then(Option::as_mut) else { return };
        eprintln!("openflow: {}: error to {}: {}", self.cfg.datapath_id, c.peer, e);
        let v = c.link.version().unwrap_or(OFP13);
        let (typ, code) = if v == OFP10 { translate10::error_to_10(e.typ, e.code) } else { (e.typ, e.code) };
        if c.link.error(v, xid, typ, code, raw) {
            self.stats.messages_out += 1;
        }
    }

    /// Queues `m` on every connection past its HELLO for which `wanted`
    /// says so; how many got it.
    pub(crate) fn broadcast(&mut self, m: &Message, wanted: impl Fn(&Conn) -> bool) -> u64 {
        let mut n = 0;
        for ci in 0..self.conns.len() {
            if self.conns[ci].as_ref().is_some_and(|c| c.up() && wanted(c)) {
                self.reply(ci, m, 0);
                n += 1;
            }
        }
        n
    }

    fn settings(&self) -> Settings {
        Settings {
            // OpenFlow 1.0 for the peers that speak nothing newer
            // (ovs-ofctl without -O), 1.3 and 1.4 for the others, unless
            // told (Open vSwitch's bridges speak 1.0 to 1.4 by default).
            versions: if self.cfg.versions.is_empty() { vec![OFP10, OFP13, OFP14] } else { self.cfg.versions.clone() },
            echo_interval: self.cfg.inactivity_probe,
            max_output: MAX_OUTPUT_BYTES,
            when_full: Full::Close,
            // A controller that skips HELLO is spoken to in 1.3, as Open vSwitch does.
            hello_required: false,
        }
    }

    /// Takes connection `s` (from `peer`) into a free slot; false when it could not be registered.
    fn open(&mut self, mut stream: TcpStream, peer: String, active: Option<usize>, connecting: bool) -> bool {
        let Some(poll) = &self.poll else { return false };
        let i = self.free.pop().unwrap_or_else(|| {
            self.conns.push(None);
            self.conns.len() - 1
        });
        let interest = if connecting { Interest::READABLE | Interest::WRITABLE } else { Interest::READABLE };
        if poll.registry().register(&mut stream, Token(i), interest).is_err() {
            self.free.push(i);
            return false;
        }
        let _ = stream.set_nodelay(true);
        if !connecting {
            eprintln!("openflow: connected to {peer}");
        }
        let link = Connection::new(self.settings(), Instant::now());
        self.stats.messages_out += 1;
        self.conns[i] = Some(Conn {
            stream,
            peer,
            link,
            role: controller_role::EQUAL,
            async_cfg: default_async(),
            active,
            connecting,
            writable: connecting,
            bundles: crate::bundles::Bundles::new(),
            monitors: Vec::new(),
        });
        true
    }

    /// Accepts what listener `li` has waiting.
    fn accept(&mut self, li: usize) {
        loop {
            let Some(l) = self.listeners.get(li) else { return };
            let Ok((s, peer)) = l.accept() else { return };
            let open = self.conns.iter().flatten().count();
            if open >= self.cfg.max_connections {
                drop(s);
                self.stats.connections_refused += 1;
                self.report_refused();
                continue;
            }
            self.open(s, peer.to_string(), None, false);
        }
    }

    /// Reports refused connections on standard error, at most once a second.
    fn report_refused(&mut self) {
        let (reported, at) = self.refused_reported;
        let n = self.stats.connections_refused;
        if n == reported || at.is_some_and(|t| t.elapsed() < Duration::from_secs(1)) {
            return;
        }
        eprintln!(
            "openflow: {n} connection(s) refused so far ({} connections open, the bound)",
            self.cfg.max_connections
        );
        self.refused_reported = (n, Some(Instant::now()));
    }

    /// Starts connections to the controllers that are due.
    fn connect(&mut self) {
        let now = Instant::now();
        for i in 0..self.active.len() {
            let a = &mut self.active[i];
            if a.connected || now < a.next_try {
                continue;
            }
            a.connected = true;
            let addr = a.addr;
            let opened = match TcpStream::connect(addr) {
                Ok(s) => self.open(s, addr.to_string(), Some(i), true),
                Err(_) => false,
            };
            if !opened {
                self.retry_later(i);
            }
        }
    }

    fn retry_later(&mut self, i: usize) {
        let a = &mut self.active[i];
        a.connected = false;
        a.next_try = Instant::now() + a.backoff;
        a.backoff = (a.backoff * 2).min(Duration::from_secs(8));
    }

    /// An active connection's socket became writable: connected, or not.
    fn connected(&mut self, ci: usize) {
        let Some(c) = self.conns.get_mut(ci).and_then(Option::as_mut) else { return };
        match (c.stream.take_error(), c.stream.peer_addr()) {
            (Ok(None), Ok(_)) => {
                c.connecting = false;
                eprintln!("openflow: connected to {}", c.peer);
                if let Some(i) = c.active {
                    self.active[i].backoff = Duration::from_millis(100);
                }
            }
            _ => c.link.close(Closed::Other("cannot connect".into())),
        }
    }

    /// Reads connection `ci` and handles every whole message it brought.
    fn read(&mut self, ci: usize) {
        let now = Instant::now();
        let Some(c) = self.conns.get_mut(ci).and_then(Option::as_mut) else { return };
        if c.connecting {
            return;
        }
        match c.link.read_from(&mut c.stream, &mut self.scratch, READ_ROUND, now) {
            Ok(true) if !self.more.contains(&ci) => self.more.push(ci),
            Ok(_) => {}
            Err(e) => c.link.close(Closed::Other(format!("read error: {e}"))),
        }
        loop {
            let Some(c) = self.conns.get_mut(ci).and_then(Option::as_mut) else { return };
            match c.link.next_incoming() {
                None => break,
                Some(Incoming::Negotiated(v)) => {
                    self.stats.messages_in += 1;
                    if v >= OFP14 {
                        if let Some(c) = self.conns.get_mut(ci).and_then(Option::as_mut) {
                            c.async_cfg = default_async_14();
                        }
                    }
                }
                Some(Incoming::Message(frame)) => {
                    self.stats.messages_in += 1;
                    self.request(ci, &frame);
                }
            }
        }
    }

    /// Decodes message `frame` of connection `ci` and handles it.
    fn request(&mut self, ci: usize, frame: &Frame) {
        let Some(c) = self.conns.get_mut(ci).and_then(Option::as_mut) else { return };
        // A copy: the request is quoted in errors while the connection answers.
        let raw = c.link.bytes(frame).to_vec();
        let decoded = if c.link.version() == Some(OFP10) {
            translate10::request_from_10(&raw)
        } else {
            sluice_openflow::decode(&raw).map(|(h, m)| (h.xid, m))
        };
        match decoded {
            Ok((_, msg)) => self.dispatch(ci, &raw, frame.xid, msg),
            Err(e) => self.error(ci, &raw, &e, frame.xid),
        }
    }

    /// Writes what connection `ci` has queued; asks for writability while the socket is full.
    fn write(&mut self, ci: usize) {
        let Some(poll) = &self.poll else { return };
        let Some(c) = self.conns.get_mut(ci).and_then(Option::as_mut) else { return };
        if c.connecting {
            return;
        }
        if let Err(e) = c.link.write_to(&mut c.stream) {
            c.link.close(Closed::Other(format!("write error: {e}")));
        }
        let want = c.link.wants_write();
        if want != c.writable {
            c.writable = want;
            let interest = if want { Interest::READABLE | Interest::WRITABLE } else { Interest::READABLE };
            let _ = poll.registry().reregister(&mut c.stream, Token(ci), interest);
        }
    }

    /// Closes the connections whose link closed, with their last words written.
    fn reap(&mut self) {
        for ci in 0..self.conns.len() {
            let Some(why) = self.conns[ci].as_ref().and_then(|c| c.link.closed().cloned()) else { continue };
            self.write(ci);
            let Some(mut c) = self.conns[ci].take() else { continue };
            if let Some(p) = &self.poll {
                let _ = p.registry().deregister(&mut c.stream);
            }
            self.free.push(ci);
            self.more.retain(|m| *m != ci);
            if !c.monitors.is_empty() {
                self.count_monitors();
            }
            match why {
                Closed::Silent => {
                    self.stats.silent_closed += 1;
                    let probe = self.cfg.inactivity_probe;
                    eprintln!(
                        "openflow: {}: closing the connection of {}: no answer in {:?}",
                        self.cfg.datapath_id,
                        c.peer,
                        probe * 4
                    );
                }
                Closed::Stuck => {
                    self.stats.connections_closed_stuck += 1;
                    eprintln!("openflow: {} stopped reading: connection closed", c.peer);
                }
                _ => {}
            }
            // A connection that never was (a refused connect) is not reported.
            if !c.connecting {
                eprintln!("openflow: connection to {} closed", c.peer);
            }
            if let Some(i) = c.active {
                self.retry_later(i);
            }
        }
    }

    /// Tells the workers whether packets whose TTL runs out go to the
    /// controllers: while a connection up asks for INVALID_TTL packet-ins
    /// (its asynchronous configuration), so that no one's flood of
    /// expiring packets fills the packet-in queue for nothing; and whether
    /// table misses do (while an OpenFlow 1.0 connection wants NO_MATCH
    /// packet-ins).
    fn sync_invalid_ttl(&mut self) {
        let bit = 1 << sluice_openflow::packet_in_reason::INVALID_TTL;
        let wanted = self.conns.iter().flatten().any(|c| c.wants_packet_in(bit));
        if wanted != self.invalid_ttl_wanted {
            self.invalid_ttl_wanted = wanted;
            self.pool().change(move |d: &mut OfSwitch, _| d.set_invalid_ttl_packet_ins(wanted));
        }
        // Table misses go to OpenFlow 1.0 controllers, as 1.0 switches send them.
        let miss = self.conns.iter().flatten().any(|c| c.wants_packet_in(IMPLICIT_MISS_BIT));
        if miss != self.miss_wanted {
            self.miss_wanted = miss;
            self.pool().change(move |d: &mut OfSwitch, _| d.set_miss_packet_ins(miss));
        }
    }

    /// How long the poll may wait: until the next timer, a second at most,
    /// not at all while a connection has more to read.
    fn wait(&self) -> Duration {
        if !self.more.is_empty() || self.notes_more {
            return Duration::ZERO;
        }
        let now = Instant::now();
        let mut next = self.upkeep.next_due(self.cfg.link_up.is_some());
        for a in self.active.iter().filter(|a| !a.connected) {
            next = next.min(a.next_try);
        }
        next.saturating_duration_since(now).min(Duration::from_secs(1))
    }

    /// One round after the poll: the packet-ins go up, the timers run,
    /// what the round changed goes to the workers, the output goes out.
    fn round(&mut self) {
        for ci in std::mem::take(&mut self.more) {
            self.read(ci);
        }
        // More may wait past the round's share: the next poll does not sleep.
        self.notes_more = self.forward_packet_ins() >= PACKET_INS_PER_ROUND;
        self.upkeep();
        self.connect();
        self.sync_invalid_ttl();
        // What this round changed leaves for the workers now, not at the
        // next barrier (a controller need not send one); they apply it
        // while this thread goes on (a barrier, a read or a packet-out
        // waits for them).
        self.pool().send_pending();
        for ci in 0..self.conns.len() {
            if self.conns[ci].as_ref().is_some_and(|c| c.link.wants_write()) {
                self.write(ci);
            }
        }
        self.reap();
    }
}

impl Server<OfSwitch> for Agent {
    fn name(&self) -> &'static str {
        "OpenFlow agent"
    }

    fn start(&mut self, control: &Control<OfSwitch>) -> Result<String, String> {
        let poll = Poll::new().map_err(|e| format!("openflow: poll: {e}"))?;
        let waker = Waker::new(poll.registry(), WAKE).map_err(|e| format!("openflow: waker: {e}"))?;
        self.notes.wake_with(waker);
        for (i, a) in self.cfg.listen.iter().enumerate() {
            let mut l = TcpListener::bind(*a).map_err(|e| format!("cannot listen on {a}: {e}"))?;
            poll.registry()
                .register(&mut l, Token(LISTENERS - i), Interest::READABLE)
                .map_err(|e| format!("cannot listen on {a}: {e}"))?;
            self.listeners.push(l);
        }
        self.poll = Some(poll);
        let addrs: Vec<String> = self.local_addrs().iter().map(|a| format!("ptcp:{}:{}", a.port(), a.ip())).collect();
        let s = control.lock();
        let controllers: Vec<String> = self.cfg.controllers.iter().map(|a| format!("tcp:{a}")).collect();
        Ok(format!(
            "openflow: datapath {:016x}, {} port(s), {} worker(s); listening on {}; controllers: {}; fail mode {}",
            self.cfg.datapath_id,
            s.view().ports().len(),
            s.workers(),
            if addrs.is_empty() { "-".to_string() } else { addrs.join(" ") },
            if controllers.is_empty() { "-".to_string() } else { controllers.join(" ") },
            match self.cfg.fail_mode {
                FailMode::Secure => "secure",
                FailMode::Standalone => "standalone",
            },
        ))
    }

    fn run(&mut self, _: &Control<OfSwitch>, stop: &Stop) {
        let mut events = Events::with_capacity(256);
        while !stop.is_set() {
            let wait = self.wait();
            if let Some(Err(e)) = self.poll.as_mut().map(|p| p.poll(&mut events, Some(wait))) {
                if e.kind() != std::io::ErrorKind::Interrupted {
                    eprintln!("openflow: poll: {e}");
                }
            }
            for ev in events.iter() {
                match ev.token() {
                    WAKE => {}
                    Token(t) if t > LISTENERS - self.listeners.len() && t <= LISTENERS => self.accept(LISTENERS - t),
                    Token(ci) => {
                        let connecting = self.conns.get(ci).and_then(Option::as_ref).is_some_and(|c| c.connecting);
                        if ev.is_writable() && connecting {
                            self.connected(ci);
                        }
                        if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                            self.read(ci);
                        }
                        if ev.is_writable() {
                            self.write(ci);
                        }
                    }
                }
            }
            self.round();
        }
    }

    fn finish(&mut self, control: &Control<OfSwitch>) -> Vec<String> {
        let s = &self.stats;
        let dropped = control.read(|d| d.counts().packet_ins_dropped);
        vec![format!(
            "openflow: {} messages in, {} out, {} errors sent, {} packet-ins sent ({} whole for want of a free \
             buffer, {dropped} dropped by the workers with {} waiting), {} connections closed for not reading, {} \
             for silence, {} refused",
            s.messages_in,
            s.messages_out,
            s.errors_sent,
            s.packet_ins_sent,
            s.packet_ins_unbuffered,
            sluice_ofswitch::switch::MAX_PENDING_PACKET_INS,
            s.connections_closed_stuck,
            s.silent_closed,
            s.connections_refused,
        )]
    }
}
