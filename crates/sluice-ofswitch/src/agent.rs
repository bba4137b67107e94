//! The OpenFlow agent: the switch's side of its controller connections.
//!
//! Contract: reads OpenFlow messages from controllers (a passive listener
//! and active connections with reconnect back-off) and the data plane's
//! packet-ins; writes replies, packet-ins, flow-removed messages and
//! errors to the connections, and changes (flow, group, port, config) to
//! the worker pool. One thread runs it all, so the pool and the
//! connections need no lock.
//!
//! Invariants:
//! - a change is applied to the master copy first; only a change that
//!   succeeded there goes to the workers (`Pool::try_change`), between two
//!   of their batches, so no packet sees half of one;
//! - a BARRIER_REPLY is sent only once every change before the barrier
//!   has landed on every worker (`Pool::flush`); without a barrier, the
//!   changes a round of reading brought are sent to the workers at the
//!   end of that round, without waiting for them (`Pool::send_pending`,
//!   bounded), and land in order between their batches;
//! - every queue toward a slow peer is bounded: a connection whose output
//!   buffer passes [`MAX_OUTPUT_BYTES`] is closed (counted); the
//!   packet-ins the workers produce wait in a bounded channel whose
//!   overflow the workers count as dropped;
//! - a message that does not decode gets an OpenFlow ERROR with the type
//!   and code the specification gives, and the connection stays up; a
//!   stream that cannot be framed (a length below 8) is closed;
//! - a port's link state is asked every [`LINK_WATCH`] (when the agent is
//!   given a way to ask); a change goes to the workers like any other
//!   (fast-failover groups read it) and to the controllers as a
//!   PORT_STATUS, as does a port-mod that changes a port's configuration;
//! - small tables are compiled to native code here, once no flow has
//!   changed for [`COMPILE_AFTER`] (a storm of flow-mods is not slowed by
//!   compiling), and the code goes to the workers as a change: each copy
//!   installs it only if its entries are still the ones compiled, so
//!   lookups never run stale code, and until then the scan answers.

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use sluice_dataplane::workers::Pool;
use sluice_openflow::errors::{bad_request, error_type, hello_failed, role_request_failed};
use sluice_openflow::{
    capabilities, controller_role, decode, encode, error_reply, flow_mod_command, flow_mod_flags, negotiate,
    peek_header, port, Action, AggregateStats, AsyncConfig, Desc, ErrorMsg, Features, FlowStats, GroupDesc,
    GroupFeatures, GroupStats, HelloElement, Match, Message, MeterConfig, MeterFeatures, MeterStats, MultipartReply,
    MultipartRequest, OfError, Oxm, OxmField, PacketIn, PortDesc, PortStats, Role, TableFeatureProp, TableFeatures,
    TableStats, OFP13,
};

use crate::buffers::{NoPacket, PacketBuffers};
use crate::control::{flow_outputs_to, Removed};
use crate::switch::{encode_packet_out, Note, OfSwitch, N_TABLES, PACKET_OUT_PORT};
use crate::table::Pattern;

/// A connection's pending output beyond which the peer is deemed stuck
/// and the connection closed.
pub const MAX_OUTPUT_BYTES: usize = 16 << 20;

/// The default silence on a connection before an echo request
/// ([`AgentConfig::inactivity_probe`]); a peer silent for three such
/// intervals is disconnected.
pub const ECHO_INTERVAL: Duration = Duration::from_secs(5);

/// The default bound on connections open at once
/// ([`AgentConfig::max_connections`]).
pub const MAX_CONNECTIONS: usize = 1024;

/// How often the agent asks whether each port's link is up.
pub const LINK_WATCH: Duration = Duration::from_millis(200);

/// How long the tables must stay unchanged before the agent compiles
/// the small ones to native code.
pub const COMPILE_AFTER: Duration = Duration::from_millis(100);

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
    /// request; three of them close the connection (zero: [`ECHO_INTERVAL`]).
    pub inactivity_probe: Duration,
    /// Connections open at once (zero: [`MAX_CONNECTIONS`]); one more
    /// accepted on a listener is closed at once, counted and reported.
    pub max_connections: usize,
}

struct Conn {
    stream: TcpStream,
    peer: String,
    inbuf: Vec<u8>,
    outbuf: Vec<u8>,
    /// Negotiated version, once HELLOs crossed.
    version: Option<u8>,
    role: u32,
    async_cfg: AsyncConfig,
    last_heard: Instant,
    echo_sent: Option<Instant>,
    /// Index in the active controller list, for reconnection.
    active: Option<usize>,
    closed: bool,
}

struct Active {
    addr: SocketAddr,
    next_try: Instant,
    backoff: Duration,
    connected: bool,
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
    /// Connections closed after three inactivity probe intervals of
    /// silence (an unanswered echo request, or no HELLO at all).
    pub silent_closed: u64,
}

fn default_async() -> AsyncConfig {
    // OpenFlow 1.3.5 defaults: master/equal get every packet-in, port
    // status and flow-removed reason; slaves get port status only.
    AsyncConfig { packet_in_mask: [0x7, 0], port_status_mask: [0x7, 0x7], flow_removed_mask: [0xf, 0] }
}

/// The agent (see the module documentation).
pub struct Agent {
    pool: Pool<OfSwitch>,
    notes: Receiver<Note>,
    cfg: AgentConfig,
    listeners: Vec<TcpListener>,
    active: Vec<Active>,
    conns: Vec<Conn>,
    next_uid: u64,
    start: Instant,
    generation: Option<u64>,
    /// Flow uid → (packets last seen, when they last changed).
    idle: HashMap<u64, (u64, u64)>,
    last_expiry: Instant,
    last_link_check: Instant,
    /// When the flow tables last changed (see [`COMPILE_AFTER`]).
    last_table_change: Instant,
    /// Whether a table may want native code (set by changes).
    compile_due: bool,
    /// Packets kept for the controllers' packet-outs and flow-mods.
    buffers: PacketBuffers,
    /// When a controller was last connected (or the agent started).
    last_controller: Instant,
    /// Refused connections last reported, and when.
    refused_reported: (u64, Option<Instant>),
    pub stats: AgentStats,
}

impl Agent {
    /// An agent for `pool`, receiving the workers' packet-ins on `notes`.
    pub fn new(pool: Pool<OfSwitch>, notes: Receiver<Note>, mut cfg: AgentConfig) -> Result<Agent, String> {
        if cfg.inactivity_probe.is_zero() {
            cfg.inactivity_probe = ECHO_INTERVAL;
        }
        if cfg.max_connections == 0 {
            cfg.max_connections = MAX_CONNECTIONS;
        }
        let mut listeners = Vec::new();
        for a in &cfg.listen {
            let l = TcpListener::bind(a).map_err(|e| format!("cannot listen on {a}: {e}"))?;
            l.set_nonblocking(true).map_err(|e| e.to_string())?;
            listeners.push(l);
        }
        let now = Instant::now();
        let active = cfg
            .controllers
            .iter()
            .map(|a| Active { addr: *a, next_try: now, backoff: Duration::from_millis(100), connected: false })
            .collect();
        Ok(Agent {
            pool,
            notes,
            cfg,
            listeners,
            active,
            conns: Vec::new(),
            next_uid: 1,
            start: now,
            generation: None,
            idle: HashMap::new(),
            last_expiry: now,
            last_link_check: now,
            last_table_change: now,
            compile_due: false,
            buffers: PacketBuffers::default(),
            last_controller: now,
            refused_reported: (0, None),
            stats: AgentStats::default(),
        })
    }

    /// The addresses the listeners are bound to.
    pub fn local_addrs(&self) -> Vec<SocketAddr> {
        self.listeners.iter().filter_map(|l| l.local_addr().ok()).collect()
    }

    fn now_ns(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    /// The pool (to stop it at the end).
    pub fn into_pool(self) -> Pool<OfSwitch> {
        self.pool
    }

    /// Runs one round: accepts, connects, reads and answers, forwards
    /// packet-ins, expires flows, writes. Returns whether anything happened.
    pub fn poll(&mut self) -> bool {
        let mut busy = false;
        for li in 0..self.listeners.len() {
            while let Ok((s, peer)) = self.listeners[li].accept() {
                busy = true;
                if self.conns.len() >= self.cfg.max_connections {
                    drop(s);
                    self.stats.connections_refused += 1;
                    self.report_refused();
                    continue;
                }
                self.open(s, peer.to_string(), None);
            }
        }
        let now = Instant::now();
        for i in 0..self.active.len() {
            let a = &mut self.active[i];
            if a.connected || now < a.next_try {
                continue;
            }
            match TcpStream::connect_timeout(&a.addr, Duration::from_millis(200)) {
                Ok(s) => {
                    a.connected = true;
                    a.backoff = Duration::from_millis(100);
                    let peer = a.addr.to_string();
                    self.open(s, peer, Some(i));
                }
                Err(_) => {
                    a.next_try = now + a.backoff;
                    a.backoff = (a.backoff * 2).min(Duration::from_secs(8));
                }
            }
        }
        for ci in 0..self.conns.len() {
            busy |= self.read_conn(ci);
        }
        // What this round's messages changed leaves for the workers now,
        // not at the next barrier (a controller need not send one); they
        // apply it while this thread reads on (a barrier, a read or a
        // packet-out waits for them).
        self.pool.send_pending();
        busy |= self.forward_packet_ins();
        self.check_fail_mode();
        if self.last_link_check.elapsed() >= LINK_WATCH {
            self.last_link_check = Instant::now();
            busy |= self.watch_links();
        }
        if self.compile_due && self.last_table_change.elapsed() >= COMPILE_AFTER {
            self.compile_due = false;
            self.compile_tables();
        }
        if self.last_expiry.elapsed() >= Duration::from_millis(500) {
            self.last_expiry = Instant::now();
            self.expire_flows();
            self.keepalive();
        }
        for c in &mut self.conns {
            flush(c);
        }
        let before = self.conns.len();
        for c in self.conns.iter().filter(|c| c.closed) {
            if let Some(i) = c.active {
                self.active[i].connected = false;
                self.active[i].next_try = Instant::now() + self.active[i].backoff;
            }
            eprintln!("openflow: connection to {} closed", c.peer);
        }
        self.conns.retain(|c| !c.closed);
        busy || before != self.conns.len()
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

    fn open(&mut self, s: TcpStream, peer: String, active: Option<usize>) {
        let _ = s.set_nonblocking(true);
        let _ = s.set_nodelay(true);
        eprintln!("openflow: connected to {peer}");
        let mut c = Conn {
            stream: s,
            peer,
            inbuf: Vec::new(),
            outbuf: Vec::new(),
            version: None,
            role: controller_role::EQUAL,
            async_cfg: default_async(),
            last_heard: Instant::now(),
            echo_sent: None,
            active,
            closed: false,
        };
        let hello = Message::Hello(vec![HelloElement::VersionBitmap(vec![1 << OFP13])]);
        queue(&mut c, &hello, OFP13, 0, &mut self.stats);
        self.conns.push(c);
    }

    fn read_conn(&mut self, ci: usize) -> bool {
        let mut buf = [0u8; 65536];
        let mut busy = false;
        loop {
            let c = &mut self.conns[ci];
            if c.closed {
                return busy;
            }
            match c.stream.read(&mut buf) {
                Ok(0) => {
                    c.closed = true;
                    return true;
                }
                Ok(n) => {
                    busy = true;
                    c.inbuf.extend_from_slice(&buf[..n]);
                    c.last_heard = Instant::now();
                    c.echo_sent = None;
                    if c.inbuf.len() > MAX_OUTPUT_BYTES {
                        break;
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(_) => {
                    c.closed = true;
                    return true;
                }
            }
        }
        // Whole messages only; a length below 8 cannot be framed.
        let mut at = 0;
        loop {
            let c = &self.conns[ci];
            let Some(h) = peek_header(&c.inbuf[at..]) else { break };
            let len = usize::from(h.length);
            if len < 8 {
                let c = &mut self.conns[ci];
                let e = OfError::new(error_type::BAD_REQUEST, bad_request::BAD_LEN, "message length below 8");
                let m = Message::Error(error_reply(&c.inbuf[at..(at + 8).min(c.inbuf.len())], &e));
                queue(c, &m, c.version.unwrap_or(OFP13), h.xid, &mut self.stats);
                c.closed = true;
                break;
            }
            if c.inbuf.len() - at < len {
                break;
            }
            let msg = c.inbuf[at..at + len].to_vec();
            at += len;
            self.stats.messages_in += 1;
            self.handle(ci, &msg);
        }
        self.conns[ci].inbuf.drain(..at);
        busy
    }

    fn reply(&mut self, ci: usize, m: &Message, xid: u32) {
        let c = &mut self.conns[ci];
        let v = c.version.unwrap_or(OFP13);
        queue(c, m, v, xid, &mut self.stats);
    }

    fn error(&mut self, ci: usize, raw: &[u8], e: &OfError, xid: u32) {
        self.stats.errors_sent += 1;
        eprintln!("openflow: {}: error to {}: {}", self.cfg.datapath_id, self.conns[ci].peer, e);
        self.reply(ci, &Message::Error(error_reply(raw, e)), xid);
    }

    fn handle(&mut self, ci: usize, raw: &[u8]) {
        let (h, msg) = match decode(raw) {
            Ok(x) => x,
            Err(e) => {
                let xid = peek_header(raw).map_or(0, |h| h.xid);
                // A HELLO of a version we cannot speak fails negotiation.
                self.error(ci, raw, &e, xid);
                return;
            }
        };
        let xid = h.xid;
        if self.conns[ci].version.is_none() {
            match &msg {
                Message::Hello(elements) => match negotiate(h.version, elements, &[OFP13]) {
                    Some(v) => self.conns[ci].version = Some(v),
                    None => {
                        let e = OfError::new(
                            error_type::HELLO_FAILED,
                            hello_failed::INCOMPATIBLE,
                            format!("version {} not supported: this switch speaks OpenFlow 1.3 (0x04)", h.version),
                        );
                        let m =
                            Message::Error(ErrorMsg { typ: e.typ, code: e.code, data: e.reason.clone().into_bytes() });
                        let c = &mut self.conns[ci];
                        queue(c, &m, h.version.min(OFP13), xid, &mut self.stats);
                        c.closed = true;
                    }
                },
                _ => {
                    // Anything before HELLO: the peer skipped negotiation; speak 1.3.
                    self.conns[ci].version = Some(OFP13);
                    self.dispatch(ci, raw, xid, msg);
                }
            }
            return;
        }
        self.dispatch(ci, raw, xid, msg);
    }

    fn is_slave(&self, ci: usize) -> bool {
        self.conns[ci].role == controller_role::SLAVE
    }

    fn dispatch(&mut self, ci: usize, raw: &[u8], xid: u32, msg: Message) {
        let slave_refused = |a: &mut Agent| {
            let e = OfError::new(error_type::BAD_REQUEST, bad_request::IS_SLAVE, "this connection is a slave");
            a.error(ci, raw, &e, xid);
        };
        match msg {
            Message::Hello(_) => {}
            Message::EchoRequest(d) => self.reply(ci, &Message::EchoReply(d), xid),
            Message::EchoReply(_) | Message::Error(_) => {}
            Message::FeaturesRequest => {
                let f = Features {
                    datapath_id: self.cfg.datapath_id,
                    n_buffers: crate::buffers::N_BUFFERS as u32,
                    n_tables: N_TABLES as u8,
                    auxiliary_id: 0,
                    capabilities: capabilities::FLOW_STATS
                        | capabilities::TABLE_STATS
                        | capabilities::PORT_STATS
                        | capabilities::GROUP_STATS,
                };
                self.reply(ci, &Message::FeaturesReply(f), xid);
            }
            Message::GetConfigRequest => {
                let c = self.pool.master().config;
                self.reply(ci, &Message::GetConfigReply(c), xid);
            }
            Message::SetConfig(c) => {
                if self.is_slave(ci) {
                    return slave_refused(self);
                }
                self.pool.change(move |d: &mut OfSwitch, _| d.config = c);
            }
            Message::BarrierRequest => {
                self.pool.flush();
                self.reply(ci, &Message::BarrierReply, xid);
            }
            Message::RoleRequest(r) => self.role(ci, raw, xid, r),
            Message::GetAsyncRequest => {
                let a = self.conns[ci].async_cfg;
                self.reply(ci, &Message::GetAsyncReply(a), xid);
            }
            Message::SetAsync(a) => self.conns[ci].async_cfg = a,
            Message::FlowMod(fm) => {
                if self.is_slave(ci) {
                    return slave_refused(self);
                }
                let uid = self.next_uid;
                self.next_uid += 1;
                let now = self.now_ns();
                // A buffered packet named by an add or modify goes through
                // the tables once the change is in (deletes ignore it).
                let buffered = fm.buffer_id != sluice_openflow::NO_BUFFER
                    && matches!(
                        fm.command,
                        flow_mod_command::ADD | flow_mod_command::MODIFY | flow_mod_command::MODIFY_STRICT
                    );
                let buffer_id = fm.buffer_id;
                let prepared = crate::control::PreparedFlowMod::new(fm);
                if self.modify(ci, raw, xid, move |d: &mut OfSwitch| d.prepared_flow_mod(&prepared, uid, now))
                    && buffered
                {
                    self.release_buffer(
                        ci,
                        raw,
                        xid,
                        buffer_id,
                        None,
                        &[Action::Output { port: port::TABLE, max_len: 0 }],
                    );
                }
            }
            Message::GroupMod(gm) => {
                if self.is_slave(ci) {
                    return slave_refused(self);
                }
                self.modify(ci, raw, xid, move |d: &mut OfSwitch| d.group_mod(&gm));
            }
            Message::PortMod(pm) => {
                if self.is_slave(ci) {
                    return slave_refused(self);
                }
                if !self.pool.master().ports.contains_key(&pm.port_no) {
                    let e = OfError::new(
                        error_type::PORT_MOD_FAILED,
                        sluice_openflow::errors::port_mod_failed::BAD_PORT,
                        format!("port {}", pm.port_no),
                    );
                    return self.error(ci, raw, &e, xid);
                }
                let before = self.pool.master().ports.get(&pm.port_no).map(|p| p.config);
                self.pool.change(move |d: &mut OfSwitch, _| {
                    if let Some(p) = d.ports.get_mut(&pm.port_no) {
                        p.config = (p.config & !pm.mask) | (pm.config & pm.mask);
                    }
                });
                // Every controller hears of the new configuration, as
                // Open vSwitch tells them.
                if self.pool.master().ports.get(&pm.port_no).map(|p| p.config) != before {
                    self.port_status(pm.port_no, sluice_openflow::port_reason::MODIFY);
                }
            }
            Message::TableMod { .. } => {}
            Message::MeterMod(mm) => {
                if self.is_slave(ci) {
                    return slave_refused(self);
                }
                let now = self.now_ns();
                self.modify(ci, raw, xid, move |d: &mut OfSwitch| d.meter_mod(&mm, now));
            }
            Message::PacketOut(po) => {
                if self.is_slave(ci) {
                    return slave_refused(self);
                }
                let in_port_ok =
                    po.in_port <= port::MAX || matches!(po.in_port, port::CONTROLLER | port::LOCAL | port::ANY);
                if !in_port_ok {
                    let e = OfError::new(
                        error_type::BAD_REQUEST,
                        bad_request::BAD_PORT,
                        format!("in_port {:#x}", po.in_port),
                    );
                    return self.error(ci, raw, &e, xid);
                }
                if po.buffer_id != sluice_openflow::NO_BUFFER {
                    self.release_buffer(ci, raw, xid, po.buffer_id, Some(po.in_port), &po.actions);
                } else {
                    self.packet_out(po.in_port, &po.actions, &po.data);
                }
            }
            Message::MultipartRequest { body, .. } => self.multipart(ci, raw, xid, body),
            Message::QueueGetConfigRequest { port } => {
                self.reply(ci, &Message::QueueGetConfigReply { port, queues: vec![] }, xid)
            }
            Message::Experimenter { .. } => {
                let e =
                    OfError::new(error_type::BAD_REQUEST, bad_request::BAD_EXPERIMENTER, "no experimenter messages");
                self.error(ci, raw, &e, xid);
            }
            // Messages only a switch sends.
            Message::FeaturesReply(_)
            | Message::GetConfigReply(_)
            | Message::PacketIn(_)
            | Message::FlowRemoved(_)
            | Message::PortStatus { .. }
            | Message::MultipartReply { .. }
            | Message::BarrierReply
            | Message::QueueGetConfigReply { .. }
            | Message::RoleReply(_)
            | Message::GetAsyncReply(_) => {
                let e = OfError::new(error_type::BAD_REQUEST, bad_request::BAD_TYPE, "a message only switches send");
                self.error(ci, raw, &e, xid);
            }
        }
    }

    /// Runs `actions` on `frame` as a packet-out from `in_port`, after
    /// every change made so far.
    fn packet_out(&mut self, in_port: u32, actions: &[Action], frame: &[u8]) {
        let actions = sluice_openflow::encode_actions(actions);
        let frame = encode_packet_out(in_port, &actions, frame);
        self.pool.flush();
        self.pool.inject(PACKET_OUT_PORT, frame);
    }

    /// Runs `actions` on the packet kept under `buffer_id` (from
    /// `in_port`, else the port it came in on), or answers the request
    /// with BUFFER_EMPTY / BUFFER_UNKNOWN when there is none.
    fn release_buffer(
        &mut self,
        ci: usize,
        raw: &[u8],
        xid: u32,
        buffer_id: u32,
        in_port: Option<u32>,
        actions: &[Action],
    ) {
        match self.buffers.take(buffer_id) {
            Ok((frame, came_in)) => self.packet_out(in_port.unwrap_or(came_in), actions, &frame),
            Err(why) => {
                let (code, text) = match why {
                    NoPacket::Empty => (bad_request::BUFFER_EMPTY, "its packet was sent already"),
                    NoPacket::Unknown => (bad_request::BUFFER_UNKNOWN, "no packet is kept under it"),
                };
                let e = OfError::new(error_type::BAD_REQUEST, code, format!("buffer {buffer_id:#x}: {text}"));
                self.error(ci, raw, &e, xid);
            }
        }
    }

    /// Applies a flow, group or meter change to the master and, when it
    /// succeeded there, to the workers; reports the entries it removed, or
    /// answers the request with the change's error.
    fn modify(
        &mut self,
        ci: usize,
        raw: &[u8],
        xid: u32,
        change: impl Fn(&mut OfSwitch) -> Result<Vec<Removed>, OfError> + Send + Sync + 'static,
    ) -> bool {
        self.tables_changed();
        match self.pool.try_change(move |d: &mut OfSwitch, _| change(d)) {
            Ok(removed) => {
                self.report_removed(removed);
                true
            }
            Err(e) => {
                self.error(ci, raw, &e, xid);
                false
            }
        }
    }

    fn role(&mut self, ci: usize, raw: &[u8], xid: u32, r: Role) {
        match r.role {
            controller_role::NOCHANGE => {}
            controller_role::MASTER | controller_role::SLAVE => {
                if let Some(g) = self.generation {
                    if (r.generation_id.wrapping_sub(g) as i64) < 0 {
                        let e = OfError::new(
                            error_type::ROLE_REQUEST_FAILED,
                            role_request_failed::STALE,
                            "stale generation id",
                        );
                        return self.error(ci, raw, &e, xid);
                    }
                }
                self.generation = Some(r.generation_id);
                if r.role == controller_role::MASTER {
                    for (i, c) in self.conns.iter_mut().enumerate() {
                        if i != ci && c.role == controller_role::MASTER {
                            c.role = controller_role::SLAVE;
                        }
                    }
                }
                self.conns[ci].role = r.role;
            }
            controller_role::EQUAL => self.conns[ci].role = r.role,
            _ => {
                let e = OfError::new(error_type::ROLE_REQUEST_FAILED, role_request_failed::BAD_ROLE, "unknown role");
                return self.error(ci, raw, &e, xid);
            }
        }
        let reply = Role { role: self.conns[ci].role, generation_id: self.generation.unwrap_or(0) };
        self.reply(ci, &Message::RoleReply(reply), xid);
    }

    fn flow_counts(&mut self) -> crate::switch::IdMap<u64, (u64, u64)> {
        self.pool.merge_counters();
        self.pool.master().flow_counts()
    }

    fn multipart(&mut self, ci: usize, raw: &[u8], xid: u32, body: MultipartRequest) {
        let more = sluice_openflow::MULTIPART_MORE;
        let now = self.now_ns();
        let replies: Vec<MultipartReply> = match body {
            MultipartRequest::Desc => vec![MultipartReply::Desc(Desc {
                mfr_desc: "Sluice".into(),
                hw_desc: "Sluice software data plane".into(),
                sw_desc: format!("sluice {}", env!("CARGO_PKG_VERSION")),
                serial_num: "None".into(),
                dp_desc: self.cfg.dp_desc.clone(),
            })],
            MultipartRequest::Flow(req) => {
                let counts = self.flow_counts();
                let filter = Pattern::of(&req.matched);
                let sw = self.pool.master();
                let mut stats = Vec::new();
                for (tid, t) in sw.tables.iter().enumerate() {
                    if req.table_id != sluice_openflow::table::ALL && usize::from(req.table_id) != tid {
                        continue;
                    }
                    for f in t.flows.values() {
                        if !f.pattern.within(&filter)
                            || (f.cookie & req.cookie_mask) != (req.cookie & req.cookie_mask)
                            || !flow_outputs_to(f, req.out_port, req.out_group)
                        {
                            continue;
                        }
                        let (p, b) = counts.get(&f.uid).copied().unwrap_or((0, 0));
                        let age = now.saturating_sub(f.added_ns);
                        stats.push(FlowStats {
                            table_id: tid as u8,
                            duration_sec: (age / 1_000_000_000) as u32,
                            duration_nsec: (age % 1_000_000_000) as u32,
                            priority: f.priority,
                            idle_timeout: f.idle_timeout,
                            hard_timeout: f.hard_timeout,
                            flags: f.flags,
                            cookie: f.cookie,
                            packet_count: p,
                            byte_count: b,
                            matched: (*f.matched).clone(),
                            instructions: f.instructions.to_vec(),
                        });
                    }
                }
                chunk(stats, 100).into_iter().map(MultipartReply::Flow).collect()
            }
            MultipartRequest::Aggregate(req) => {
                let counts = self.flow_counts();
                let filter = Pattern::of(&req.matched);
                let sw = self.pool.master();
                let mut agg = AggregateStats { packet_count: 0, byte_count: 0, flow_count: 0 };
                for (tid, t) in sw.tables.iter().enumerate() {
                    if req.table_id != sluice_openflow::table::ALL && usize::from(req.table_id) != tid {
                        continue;
                    }
                    for f in t.flows.values().filter(|f| {
                        f.pattern.within(&filter)
                            && (f.cookie & req.cookie_mask) == (req.cookie & req.cookie_mask)
                            && flow_outputs_to(f, req.out_port, req.out_group)
                    }) {
                        let (p, b) = counts.get(&f.uid).copied().unwrap_or((0, 0));
                        agg.packet_count += p;
                        agg.byte_count += b;
                        agg.flow_count += 1;
                    }
                }
                vec![MultipartReply::Aggregate(agg)]
            }
            MultipartRequest::Table => {
                self.pool.merge_counters();
                let sw = self.pool.master();
                let t = (0..N_TABLES)
                    .map(|i| TableStats {
                        table_id: i as u8,
                        active_count: sw.tables[i].len() as u32,
                        lookup_count: sw.counters.tables[i].0,
                        matched_count: sw.counters.tables[i].1,
                    })
                    .collect();
                vec![MultipartReply::Table(t)]
            }
            MultipartRequest::PortStats { port_no } => {
                self.pool.merge_counters();
                let sw = self.pool.master();
                let age = now;
                let s = sw
                    .ports
                    .keys()
                    .filter(|p| port_no == port::ANY || **p == port_no)
                    .map(|p| {
                        let c = sw.counters.ports.get(p).copied().unwrap_or_default();
                        PortStats {
                            port_no: *p,
                            rx_packets: c[0],
                            rx_bytes: c[1],
                            tx_packets: c[2],
                            tx_bytes: c[3],
                            tx_dropped: c[4],
                            duration_sec: (age / 1_000_000_000) as u32,
                            duration_nsec: (age % 1_000_000_000) as u32,
                            ..PortStats::default()
                        }
                    })
                    .collect::<Vec<_>>();
                if port_no != port::ANY && s.is_empty() {
                    let e = OfError::new(error_type::BAD_REQUEST, bad_request::BAD_PORT, format!("port {port_no}"));
                    return self.error(ci, raw, &e, xid);
                }
                vec![MultipartReply::PortStats(s)]
            }
            MultipartRequest::PortDesc => vec![MultipartReply::PortDesc(self.port_descs())],
            MultipartRequest::Queue { .. } => vec![MultipartReply::Queue(vec![])],
            MultipartRequest::Group { group_id } => {
                self.pool.merge_counters();
                let sw = self.pool.master();
                let s = sw
                    .groups
                    .iter()
                    .filter(|(id, _)| group_id == sluice_openflow::group::ALL || *id == group_id)
                    .map(|(id, g)| {
                        let c = sw.counters.groups.get(&id).cloned().unwrap_or_default();
                        let refs = sw
                            .tables
                            .iter()
                            .flat_map(|t| t.flows.values())
                            .filter(|f| flow_outputs_to(f, port::ANY, id))
                            .count();
                        let mut buckets = c.2.clone();
                        buckets.resize(g.buckets.len(), (0, 0));
                        GroupStats {
                            group_id: id,
                            ref_count: refs as u32,
                            packet_count: c.0,
                            byte_count: c.1,
                            duration_sec: 0,
                            duration_nsec: 0,
                            buckets,
                        }
                    })
                    .collect();
                vec![MultipartReply::Group(s)]
            }
            MultipartRequest::GroupDesc => {
                let sw = self.pool.master();
                let d = sw
                    .groups
                    .iter()
                    .map(|(id, g)| GroupDesc { typ: g.typ, group_id: id, buckets: g.buckets.to_vec() })
                    .collect();
                vec![MultipartReply::GroupDesc(d)]
            }
            MultipartRequest::GroupFeatures => vec![MultipartReply::GroupFeatures(GroupFeatures {
                types: 0b1111,
                capabilities: 0b1111,
                max_groups: [65535; 4],
                // Every action type this switch runs in buckets.
                actions: [0x01fb_9801, 0, 0, 0],
            })],
            MultipartRequest::Meter { meter_id } => {
                self.pool.merge_counters();
                let sw = self.pool.master();
                let s = sw
                    .meters
                    .meters
                    .iter()
                    .filter(|(id, _)| meter_id == sluice_openflow::meter::ALL || **id == meter_id)
                    .map(|(id, m)| {
                        let c = sw.counters.meters.get(id).cloned().unwrap_or_default();
                        let mut bands = c.2.clone();
                        bands.resize(m.bands.len(), (0, 0));
                        let age = now.saturating_sub(m.added_ns);
                        let flows = sw
                            .tables
                            .iter()
                            .flat_map(|t| t.flows.values())
                            .filter(|f| {
                                f.instructions
                                    .iter()
                                    .any(|i| matches!(i, sluice_openflow::Instruction::Meter(x) if x == id))
                            })
                            .count();
                        MeterStats {
                            meter_id: *id,
                            flow_count: flows as u32,
                            packet_in_count: c.0,
                            byte_in_count: c.1,
                            duration_sec: (age / 1_000_000_000) as u32,
                            duration_nsec: (age % 1_000_000_000) as u32,
                            bands,
                        }
                    })
                    .collect();
                vec![MultipartReply::Meter(s)]
            }
            MultipartRequest::MeterConfig { meter_id } => {
                let sw = self.pool.master();
                let s = sw
                    .meters
                    .meters
                    .iter()
                    .filter(|(id, _)| meter_id == sluice_openflow::meter::ALL || **id == meter_id)
                    .map(|(id, m)| MeterConfig { flags: m.flags, meter_id: *id, bands: m.bands.clone() })
                    .collect();
                vec![MultipartReply::MeterConfig(s)]
            }
            MultipartRequest::MeterFeatures => vec![MultipartReply::MeterFeatures(MeterFeatures {
                max_meter: crate::meter::MAX_METERS,
                // OFPMBT_DROP (1) and OFPMBT_DSCP_REMARK (2), as bits.
                band_types: (1 << 1) | (1 << 2),
                capabilities: u32::from(
                    sluice_openflow::meter_flags::KBPS
                        | sluice_openflow::meter_flags::PKTPS
                        | sluice_openflow::meter_flags::BURST
                        | sluice_openflow::meter_flags::STATS,
                ),
                max_bands: crate::meter::MAX_BANDS as u8,
                max_color: 0,
            })],
            MultipartRequest::TableFeatures(set) if set.is_empty() => {
                let all: Vec<TableFeatures> = (0..N_TABLES).map(table_features).collect();
                chunk(all, 8).into_iter().map(MultipartReply::TableFeatures).collect()
            }
            MultipartRequest::TableFeatures(_) => {
                let e = OfError::new(
                    error_type::TABLE_FEATURES_FAILED,
                    sluice_openflow::errors::table_features_failed::EPERM,
                    "table features are fixed on this switch",
                );
                return self.error(ci, raw, &e, xid);
            }
            MultipartRequest::Experimenter { .. } => {
                let e =
                    OfError::new(error_type::BAD_REQUEST, bad_request::BAD_EXPERIMENTER, "no experimenter multiparts");
                return self.error(ci, raw, &e, xid);
            }
        };
        let n = replies.len();
        for (i, r) in replies.into_iter().enumerate() {
            let flags = if i + 1 < n { more } else { 0 };
            self.reply(ci, &Message::MultipartReply { flags, body: r }, xid);
        }
    }

    /// Notes that the flow tables change now: their small tables are
    /// compiled again once they settle (see [`COMPILE_AFTER`]).
    fn tables_changed(&mut self) {
        self.last_table_change = Instant::now();
        self.compile_due = true;
    }

    /// Compiles the tables that want native code and sends the code to
    /// every copy (see the module documentation).
    fn compile_tables(&mut self) {
        let codes = self.pool.master().compile_tables();
        let walk = match self.pool.master().compile_pipeline() {
            Some(Ok(w)) => Some(w),
            Some(Err(e)) => {
                // The walk stays interpreted; say why once per change.
                eprintln!("openflow: the walk from table to table not compiled: {e}");
                None
            }
            None => None,
        };
        if codes.is_empty() && walk.is_none() {
            return;
        }
        self.pool.change(move |d: &mut OfSwitch, _| {
            for (t, c) in &codes {
                d.install_code(*t, c.clone());
            }
            if let Some(w) = &walk {
                d.install_pipeline(w.clone());
            }
        });
    }

    fn port_descs(&self) -> Vec<PortDesc> {
        self.pool.master().ports.iter().map(|(n, p)| port_desc(*n, p)).collect()
    }

    /// Asks each port's link state; a change goes to the workers and, as
    /// a PORT_STATUS, to the controllers. Whether any changed.
    fn watch_links(&mut self) -> bool {
        let Some(link_up) = self.cfg.link_up else { return false };
        let changed: Vec<(u32, bool)> = self
            .pool
            .master()
            .ports
            .iter()
            .filter_map(|(n, p)| {
                let up = link_up(&p.name);
                (up != p.live).then_some((*n, up))
            })
            .collect();
        if changed.is_empty() {
            return false;
        }
        // One change for every port that moved (the workers' flow caches
        // are emptied once).
        let moved = changed.clone();
        self.pool.change(move |d: &mut OfSwitch, _| {
            for &(n, up) in &moved {
                if let Some(p) = d.ports.get_mut(&n) {
                    p.live = up;
                }
            }
        });
        for &(n, up) in &changed {
            let name = self.pool.master().ports.get(&n).map_or("", |p| p.name.as_str());
            eprintln!("openflow: port {n} ({name}): link {}", if up { "up" } else { "down" });
            self.port_status(n, sluice_openflow::port_reason::MODIFY);
        }
        true
    }

    /// Sends a PORT_STATUS of port `n` to every controller whose
    /// asynchronous configuration asks for `reason`.
    fn port_status(&mut self, n: u32, reason: u8) {
        let Some(p) = self.pool.master().ports.get(&n) else { return };
        let m = Message::PortStatus { reason, desc: port_desc(n, p) };
        for ci in 0..self.conns.len() {
            let c = &self.conns[ci];
            let idx = usize::from(c.role == controller_role::SLAVE);
            if c.version.is_none() || c.async_cfg.port_status_mask[idx] & (1 << reason) == 0 {
                continue;
            }
            self.reply(ci, &m, 0);
        }
    }

    /// Enters or leaves standalone forwarding (see [`FailMode`]).
    fn check_fail_mode(&mut self) {
        if self.cfg.fail_mode != FailMode::Standalone {
            return;
        }
        let now = Instant::now();
        let connected = self.conns.iter().any(|c| c.active.is_some() && c.version.is_some() && !c.closed);
        if connected {
            self.last_controller = now;
        }
        let alone = !connected
            && (self.active.is_empty() || now.duration_since(self.last_controller) >= self.cfg.inactivity_probe * 3);
        if alone != self.pool.master().fail_open {
            if alone {
                eprintln!("openflow: no controller: standalone, forwarding as a MAC-learning switch");
            } else {
                eprintln!("openflow: a controller is connected: the flow tables forward again");
            }
            self.pool.change(move |d: &mut OfSwitch, _| d.fail_open = alone);
        }
    }

    fn forward_packet_ins(&mut self) -> bool {
        let mut any = false;
        for _ in 0..4096 {
            let Ok(n) = self.notes.try_recv() else { break };
            any = true;
            let Note::PacketIn { in_port, reason, table_id, cookie, total_len, mut data, max_len, metadata } = n;
            let wanted = |c: &Conn| {
                let idx = usize::from(c.role == controller_role::SLAVE);
                c.version.is_some() && c.async_cfg.packet_in_mask[idx] & (1 << reason) != 0
            };
            if !self.conns.iter().any(wanted) {
                continue;
            }
            // Less than the whole packet asked for: the rest waits in a
            // buffer; with no buffer free, the whole packet goes.
            let mut buffer_id = sluice_openflow::NO_BUFFER;
            if max_len != sluice_openflow::CONTROLLER_MAX_LEN_NO_BUFFER && usize::from(max_len) < data.len() {
                let part = data[..usize::from(max_len)].to_vec();
                match self.buffers.store(data, in_port, Instant::now()) {
                    Ok(id) => {
                        buffer_id = id;
                        data = part;
                    }
                    Err(whole) => {
                        self.stats.packet_ins_unbuffered += 1;
                        data = whole;
                    }
                }
            }
            let mut fields = vec![Oxm { field: OxmField::InPort, value: in_port.to_be_bytes().to_vec(), mask: None }];
            if metadata != 0 {
                fields.push(Oxm { field: OxmField::Metadata, value: metadata.to_be_bytes().to_vec(), mask: None });
            }
            let matched = Match { fields };
            data.truncate(sluice_openflow::packet_in_room(&matched));
            let pi = PacketIn { buffer_id, total_len, reason, table_id, cookie, matched, data };
            let m = Message::PacketIn(pi);
            for ci in 0..self.conns.len() {
                if !wanted(&self.conns[ci]) {
                    continue;
                }
                self.stats.packet_ins_sent += 1;
                self.reply(ci, &m, 0);
            }
        }
        any
    }

    fn report_removed(&mut self, removed: Vec<Removed>) {
        if removed.iter().all(|r| r.flow.flags & flow_mod_flags::SEND_FLOW_REM == 0) {
            return;
        }
        let counts = self.flow_counts();
        let now = self.now_ns();
        for r in removed {
            if r.flow.flags & flow_mod_flags::SEND_FLOW_REM == 0 {
                continue;
            }
            let (p, b) = counts.get(&r.flow.uid).copied().unwrap_or((0, 0));
            let m = Message::FlowRemoved(r.message(p, b, now));
            for ci in 0..self.conns.len() {
                let c = &self.conns[ci];
                let idx = usize::from(c.role == controller_role::SLAVE);
                if c.version.is_none() || c.async_cfg.flow_removed_mask[idx] & (1 << r.reason) == 0 {
                    continue;
                }
                self.reply(ci, &m, 0);
            }
        }
    }

    /// Removes flows whose hard or idle timeout has passed.
    fn expire_flows(&mut self) {
        let any_timeout = self
            .pool
            .master()
            .tables
            .iter()
            .any(|t| t.flows.values().any(|f| f.idle_timeout != 0 || f.hard_timeout != 0));
        if !any_timeout {
            return;
        }
        let counts = self.flow_counts();
        let now = self.now_ns();
        let (mut hard, mut idle) = (Vec::new(), Vec::new());
        for (tid, t) in self.pool.master().tables.iter().enumerate() {
            for f in t.flows.values() {
                let p = counts.get(&f.uid).map_or(0, |c| c.0);
                let e = self.idle.entry(f.uid).or_insert((p, f.added_ns));
                if e.0 != p {
                    *e = (p, now);
                }
                if f.hard_timeout != 0 && now >= f.added_ns + u64::from(f.hard_timeout) * 1_000_000_000 {
                    hard.push((tid as u8, f.uid));
                } else if f.idle_timeout != 0 && now >= e.1 + u64::from(f.idle_timeout) * 1_000_000_000 {
                    idle.push((tid as u8, f.uid));
                }
            }
        }
        for (list, reason) in [
            (hard, sluice_openflow::flow_removed_reason::HARD_TIMEOUT),
            (idle, sluice_openflow::flow_removed_reason::IDLE_TIMEOUT),
        ] {
            if list.is_empty() {
                continue;
            }
            for (_, u) in &list {
                self.idle.remove(u);
            }
            let l2 = list.clone();
            self.tables_changed();
            let removed = self.pool.change(move |d: &mut OfSwitch, _| d.expire(&l2, reason));
            self.report_removed(removed);
        }
    }

    fn keepalive(&mut self) {
        let now = Instant::now();
        let probe = self.cfg.inactivity_probe;
        for ci in 0..self.conns.len() {
            let c = &mut self.conns[ci];
            if now.duration_since(c.last_heard) > probe * 3 {
                // Silent for three intervals: its echo request went
                // unanswered, or (before any HELLO) it never spoke.
                if !c.closed {
                    self.stats.silent_closed += 1;
                    let dpid = self.cfg.datapath_id;
                    eprintln!("openflow: {dpid}: closing the connection of {}: silent for {:?}", c.peer, probe * 3);
                }
                c.closed = true;
            } else if now.duration_since(c.last_heard) > probe && c.echo_sent.is_none() {
                // No echo before the handshake: a peer that has not sent
                // its HELLO is only timed.
                if let Some(v) = c.version {
                    c.echo_sent = Some(now);
                    queue(c, &Message::EchoRequest(vec![]), v, 0, &mut self.stats);
                }
            }
        }
    }
}

/// How port `n` is described to controllers.
fn port_desc(n: u32, p: &crate::switch::PortInfo) -> PortDesc {
    PortDesc {
        port_no: n,
        hw_addr: p.hw_addr,
        name: p.name.chars().take(15).collect(),
        config: p.config,
        state: if p.live { sluice_openflow::port_state::LIVE } else { sluice_openflow::port_state::LINK_DOWN },
        curr: 0x2820,
        advertised: 0,
        supported: 0,
        peer: 0,
        curr_speed: 10_000_000,
        max_speed: 10_000_000,
    }
}

/// The features this switch reports for table `id` (every table alike).
fn table_features(id: usize) -> TableFeatures {
    let instructions: Vec<(u16, u32)> = vec![(1, 0), (2, 0), (3, 0), (4, 0), (5, 0)];
    let actions: Vec<(u16, u32)> =
        [0u16, 11, 12, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27].iter().map(|t| (*t, 0)).collect();
    let header = |f: u8| {
        let field = OxmField::from_wire(sluice_openflow::oxm_class::OPENFLOW_BASIC, f);
        let len = field.value_len().unwrap_or(0) as u32;
        (u32::from(sluice_openflow::oxm_class::OPENFLOW_BASIC) << 16) | (u32::from(f) << 9) | len
    };
    // Every basic field matches; set-field covers the packet's fields.
    let fields: Vec<u32> = (0u8..=39).map(header).collect();
    let settable: Vec<u32> = (3u8..=38).map(header).collect();
    let next: Vec<u8> = ((id + 1)..N_TABLES).map(|t| t as u8).collect();
    TableFeatures {
        table_id: id as u8,
        // Unnamed, as Open vSwitch's (ovs-ofctl then prints table numbers).
        name: String::new(),
        metadata_match: u64::MAX,
        metadata_write: u64::MAX,
        config: 0,
        max_entries: 1_000_000,
        properties: vec![
            TableFeatureProp::Instructions(instructions.clone()),
            TableFeatureProp::InstructionsMiss(instructions),
            TableFeatureProp::NextTables(next.clone()),
            TableFeatureProp::NextTablesMiss(next),
            TableFeatureProp::WriteActions(actions.clone()),
            TableFeatureProp::WriteActionsMiss(actions.clone()),
            TableFeatureProp::ApplyActions(actions.clone()),
            TableFeatureProp::ApplyActionsMiss(actions),
            TableFeatureProp::Match(fields.clone()),
            TableFeatureProp::Wildcards(fields),
            TableFeatureProp::WriteSetfield(settable.clone()),
            TableFeatureProp::WriteSetfieldMiss(settable.clone()),
            TableFeatureProp::ApplySetfield(settable.clone()),
            TableFeatureProp::ApplySetfieldMiss(settable),
        ],
    }
}

fn chunk<T>(v: Vec<T>, n: usize) -> Vec<Vec<T>> {
    if v.is_empty() {
        return vec![vec![]];
    }
    let mut out = Vec::new();
    let mut cur = Vec::new();
    for x in v {
        cur.push(x);
        if cur.len() == n {
            out.push(std::mem::take(&mut cur));
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

fn queue(c: &mut Conn, m: &Message, version: u8, xid: u32, stats: &mut AgentStats) {
    if c.closed && !matches!(m, Message::Error(_)) {
        return;
    }
    if c.outbuf.len() > MAX_OUTPUT_BYTES {
        stats.connections_closed_stuck += 1;
        eprintln!("openflow: {} stopped reading: connection closed", c.peer);
        c.closed = true;
        return;
    }
    stats.messages_out += 1;
    c.outbuf.extend_from_slice(&encode(m, version, xid));
}

/// Writes what the peer will take now (also the last words, such as an
/// ERROR, of a connection about to close).
fn flush(c: &mut Conn) {
    while !c.outbuf.is_empty() {
        match c.stream.write(&c.outbuf) {
            Ok(0) => {
                c.closed = true;
                break;
            }
            Ok(n) => {
                c.outbuf.drain(..n);
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => {
                c.closed = true;
                break;
            }
        }
    }
}
