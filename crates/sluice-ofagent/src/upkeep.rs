//! What the agent does without a request: the workers' packet-ins and
//! the switch's own messages (FLOW_REMOVED, PORT_STATUS) to the
//! controllers, and what the clock brings: flow expiry (idle and hard
//! timeouts), link watching, compiling small tables once they settle,
//! standalone mode.
//!
//! Contract: each timer runs from the agent's round when due
//! ([`Upkeep::next_due`] tells the poll how long it may sleep); a change
//! it makes (flows expired, a link's state, native code, standalone
//! forwarding) goes to the workers through the node's `Control` like any
//! controller's change, and the controllers hear of it as the
//! specification says (FLOW_REMOVED when the flow asked, PORT_STATUS per
//! their asynchronous configuration).
//!
//! Invariants: small tables are compiled only once no flow has changed
//! for [`COMPILE_AFTER`] (a storm of flow-mods is not slowed by
//! compiling); the code is installed by each copy only if its entries are
//! still the ones compiled, so lookups never run stale code.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use sluice_ofswitch::control::Removed;
use sluice_ofswitch::switch::IMPLICIT_MISS;
use sluice_ofswitch::{Note, OfSwitch};
use sluice_openflow::{flow_mod_flags, packet_in_reason, Match, Message, Oxm, OxmField, PacketIn, OFP13, OFP14};

use crate::agent::{Agent, Conn, FailMode, PACKET_INS_PER_ROUND};
use crate::replies::port_desc;

/// How often the agent asks whether each port's link is up.
pub const LINK_WATCH: Duration = Duration::from_millis(200);

/// How long the flow tables must stay unchanged before the agent compiles
/// the small ones to native code.
pub const COMPILE_AFTER: Duration = Duration::from_millis(100);

/// How often flows are checked for expiry and connections for silence.
pub const EXPIRY: Duration = Duration::from_millis(500);

/// The timers' state.
pub(crate) struct Upkeep {
    /// Flow uid -> (packets last seen, when they last changed).
    idle: HashMap<u64, (u64, u64)>,
    last_expiry: Instant,
    last_link_check: Instant,
    /// When the flow tables last changed (see [`COMPILE_AFTER`]).
    last_table_change: Instant,
    /// Whether a table may want native code (set by changes).
    compile_due: bool,
    /// When a controller was last connected (or the agent started).
    last_controller: Instant,
}

impl Upkeep {
    pub(crate) fn new(now: Instant) -> Upkeep {
        Upkeep {
            idle: HashMap::new(),
            last_expiry: now,
            last_link_check: now,
            last_table_change: now,
            compile_due: false,
            last_controller: now,
        }
    }

    /// When the next timer is due (`links`: whether links are watched).
    pub(crate) fn next_due(&self, links: bool) -> Instant {
        let mut next = self.last_expiry + EXPIRY;
        if links {
            next = next.min(self.last_link_check + LINK_WATCH);
        }
        if self.compile_due {
            next = next.min(self.last_table_change + COMPILE_AFTER);
        }
        next
    }
}

impl Agent {
    /// Runs the timers that are due (see the module documentation).
    pub(crate) fn upkeep(&mut self) {
        self.check_fail_mode();
        let now = Instant::now();
        if self.cfg.link_up.is_some() && now >= self.upkeep.last_link_check + LINK_WATCH {
            self.upkeep.last_link_check = now;
            self.watch_links();
        }
        if self.upkeep.compile_due && now >= self.upkeep.last_table_change + COMPILE_AFTER {
            self.upkeep.compile_due = false;
            self.compile_tables();
        }
        if now >= self.upkeep.last_expiry + EXPIRY {
            self.upkeep.last_expiry = now;
            self.expire_flows();
            for c in self.conns.iter_mut().flatten() {
                c.link.tick(now);
            }
        }
    }

    /// Notes that the flow tables change now: their small tables are
    /// compiled again once they settle (see [`COMPILE_AFTER`]).
    pub(crate) fn tables_changed(&mut self) {
        self.upkeep.last_table_change = Instant::now();
        self.upkeep.compile_due = true;
    }

    /// Compiles the tables that want native code and sends the code to
    /// every copy (see the module documentation).
    fn compile_tables(&mut self) {
        let codes = self.pool().view().compile_tables();
        let walk = match self.pool().view().compile_pipeline() {
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
        self.pool().change(move |d: &mut OfSwitch, _| {
            for (t, c) in &codes {
                d.install_code(*t, c.clone());
            }
            if let Some(w) = &walk {
                d.install_pipeline(w.clone());
            }
        });
    }

    /// Asks each port's link state; a change goes to the workers and, as
    /// a PORT_STATUS, to the controllers. Whether any changed.
    fn watch_links(&mut self) -> bool {
        let Some(link_up) = self.cfg.link_up else { return false };
        let changed: Vec<(u32, bool)> = self
            .pool()
            .view()
            .ports()
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
        self.pool().change(move |d: &mut OfSwitch, _| {
            for &(n, up) in &moved {
                d.set_port_live(n, up);
            }
        });
        for &(n, up) in &changed {
            let name = self.pool().view().port(n).map_or(String::new(), |p| p.name.clone());
            eprintln!("openflow: port {n} ({name}): link {}", if up { "up" } else { "down" });
            self.port_status(n, sluice_openflow::port_reason::MODIFY);
        }
        true
    }

    /// Sends a PORT_STATUS of port `n` to every controller whose
    /// asynchronous configuration asks for `reason`.
    pub(crate) fn port_status(&mut self, n: u32, reason: u8) {
        let Some(desc) = self.pool().view().port(n).map(|p| port_desc(n, p)) else { return };
        let m = Message::PortStatus { reason, desc };
        self.broadcast(&m, |c| c.async_cfg.port_status_mask[c.mask_index()] & (1 << reason) != 0);
    }

    /// Enters or leaves standalone forwarding (see [`FailMode`]).
    fn check_fail_mode(&mut self) {
        if self.cfg.fail_mode != FailMode::Standalone {
            return;
        }
        let now = Instant::now();
        let connected = self.controller_connected();
        if connected {
            self.upkeep.last_controller = now;
        }
        let alone = !connected
            && (!self.has_controllers()
                || now.duration_since(self.upkeep.last_controller) >= self.cfg.inactivity_probe * 3);
        if alone != self.pool().view().fail_open() {
            if alone {
                eprintln!("openflow: no controller: standalone, forwarding as a MAC-learning switch");
            } else {
                eprintln!("openflow: a controller is connected: the flow tables forward again");
            }
            self.pool().change(move |d: &mut OfSwitch, _| d.set_fail_open(alone));
        }
    }

    /// Sends the workers' packet-ins to the controllers that want them
    /// (a round's share at most); how many were taken.
    pub(crate) fn forward_packet_ins(&mut self) -> usize {
        self.notes.arm();
        let mut taken = 0;
        while taken < PACKET_INS_PER_ROUND {
            let Some(n) = self.notes.next() else { break };
            taken += 1;
            let Note::PacketIn { in_port, reason, table_id, cookie, total_len, mut data, max_len, metadata } = n;
            let bit = if reason == IMPLICIT_MISS { crate::agent::IMPLICIT_MISS_BIT } else { 1 << reason };
            let wanted = |c: &Conn| c.wants_packet_in(bit);
            // Said as a table miss (to the 1.0 peers that get it).
            let reason = if reason == IMPLICIT_MISS { sluice_openflow::packet_in_reason::NO_MATCH } else { reason };
            if !self.conns.iter().flatten().any(wanted) {
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
            // 1.4's refined reasons are ACTION to older peers.
            let reason13 = packet_in_reason::for_version(reason, OFP13);
            let of14 = |c: &Conn| c.link.version().is_some_and(|v| v >= OFP14);
            let pi = PacketIn { buffer_id, total_len, reason, table_id, cookie, matched, data };
            if reason13 != reason {
                let m = Message::PacketIn(PacketIn { reason: reason13, ..pi.clone() });
                self.stats.packet_ins_sent += self.broadcast(&m, |c| !of14(c) && wanted(c));
            }
            let m = Message::PacketIn(pi);
            self.stats.packet_ins_sent += self.broadcast(&m, |c| (reason13 == reason || of14(c)) && wanted(c));
        }
        taken
    }

    /// Sends FLOW_REMOVED for the removed flows that asked for it.
    pub(crate) fn report_removed(&mut self, removed: Vec<Removed>) {
        self.monitor_removed(&removed, None);
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
            let reason = r.reason;
            self.broadcast(&m, |c| c.async_cfg.flow_removed_mask[c.mask_index()] & (1 << reason) != 0);
        }
    }

    /// Removes flows whose hard or idle timeout has passed.
    fn expire_flows(&mut self) {
        let any_timeout = self
            .pool()
            .view()
            .tables()
            .iter()
            .any(|t| t.flows.values().any(|f| f.idle_timeout != 0 || f.hard_timeout != 0));
        if !any_timeout {
            return;
        }
        let counts = self.flow_counts();
        let now = self.now_ns();
        let (mut hard, mut idle) = (Vec::new(), Vec::new());
        {
            let control = self.control.clone();
            let pool = control.lock();
            for (tid, t) in pool.view().tables().iter().enumerate() {
                for f in t.flows.values() {
                    let p = counts.get(&f.uid).map_or(0, |c| c.0);
                    let e = self.upkeep.idle.entry(f.uid).or_insert((p, f.added_ns));
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
        }
        for (list, reason) in [
            (hard, sluice_openflow::flow_removed_reason::HARD_TIMEOUT),
            (idle, sluice_openflow::flow_removed_reason::IDLE_TIMEOUT),
        ] {
            if list.is_empty() {
                continue;
            }
            for (_, u) in &list {
                self.upkeep.idle.remove(u);
            }
            let l2 = list.clone();
            self.tables_changed();
            let removed = self.pool().change(move |d: &mut OfSwitch, _| d.expire(&l2, reason));
            self.report_removed(removed);
        }
    }
}
