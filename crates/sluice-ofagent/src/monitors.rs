//! Flow monitors: connections that asked (`sluice_openflow::monitor`:
//! OpenFlow 1.4's FLOW_MONITOR multipart, or the ONF extension of
//! OpenFlow 1.3) to hear of flows as they are added, changed and deleted.
//!
//! Contract: a monitor belongs to its connection (at most 64 each; it goes
//! with the connection). Its request is answered with the flows it
//! matches now (when it asked for them), as INITIAL updates (ADDED in the
//! ONF form) in multipart replies under the request's xid. Afterwards
//! every flow change the agent makes is reported to each monitor it
//! matches (table, out_port, out_group, match: the flow's match within the
//! monitor's) as an unsolicited multipart reply (xid 0), in the form of
//! the connection's version: an added flow as ADDED, a modify flow-mod as
//! MODIFIED with the flow-mod's match and new instructions, a removed
//! flow (deleted, expired, its group or meter deleted) as REMOVED with its
//! reason. A connection's own changes come abbreviated (the change's xid)
//! unless its monitor asked for them in full. 1.4 monitors are added, modified and deleted by
//! command (FLOW_MONITOR_FAILED for an id in use or unknown). Updates go
//! through the connection's bounded outbox like every message: a monitor
//! that stops reading is closed as any stuck connection.

use std::sync::Arc;

use sluice_ofswitch::control::{flow_outputs_to, Removed};
use sluice_ofswitch::table::{Flow, Pattern};
use sluice_openflow::errors::flow_monitor_failed;
use sluice_openflow::errors::{bad_request, error_type};
use sluice_openflow::monitor::{
    self, monitor_command, monitor_flags as mf, FlowMonitorRequest, FlowUpdate, UpdateEvent, ONF_EXPERIMENTER,
    ONF_FLOW_MONITOR,
};
use sluice_openflow::{FlowMod, Instruction, Match, Message, MultipartReply, OfError};

use crate::agent::Agent;

/// Monitors one connection may hold.
const MAX_MONITORS: usize = 64;
/// Bytes of updates per multipart reply.
const REPLY_BYTES: usize = 60_000;

/// A monitor and the pattern its match makes.
pub(crate) struct Monitor {
    req: FlowMonitorRequest,
    pattern: Pattern,
}

/// A flow change as monitors are told of it.
pub(crate) struct Change<'a> {
    pub event: UpdateEvent,
    pub reason: u16,
    pub table_id: u8,
    pub priority: u16,
    pub idle_timeout: u16,
    pub hard_timeout: u16,
    pub cookie: u64,
    pub matched: &'a Match,
    pub instructions: &'a [Instruction],
    /// A flow as the switch holds it, for out_port filtering (`None` for a
    /// modify flow-mod, filtered on its new instructions).
    pub flow: Option<&'a Flow>,
}

impl Change<'_> {
    fn update<'b>(&'b self, actions: bool) -> FlowUpdate<'b> {
        FlowUpdate {
            event: self.event,
            reason: self.reason,
            priority: self.priority,
            idle_timeout: self.idle_timeout,
            hard_timeout: self.hard_timeout,
            table_id: self.table_id,
            cookie: self.cookie,
            matched: self.matched,
            instructions: (actions && self.event != UpdateEvent::Removed).then_some(self.instructions),
        }
    }
}

impl Monitor {
    /// Whether the monitor's table, out_port and match cover the changed flow.
    fn covers(&self, c: &Change<'_>) -> bool {
        use sluice_openflow::{group, port, Action};
        let (out_port, out_group) = (self.req.out_port, self.req.out_group);
        let port_ok = match c.flow {
            Some(f) => flow_outputs_to(f, out_port, out_group),
            None => {
                let any = |ok: &dyn Fn(&Action) -> bool| {
                    c.instructions.iter().any(|i| match i {
                        Instruction::ApplyActions(a) | Instruction::WriteActions(a) => a.iter().any(ok),
                        _ => false,
                    })
                };
                (out_port == port::ANY || any(&|x| matches!(x, Action::Output { port, .. } if *port == out_port)))
                    && (out_group == group::ANY || any(&|x| matches!(x, Action::Group(g) if *g == out_group)))
            }
        };
        (self.req.table_id == sluice_openflow::table::ALL || self.req.table_id == c.table_id)
            && port_ok
            && Pattern::of(c.matched).within(&self.pattern)
    }

    /// Whether the monitor asked to hear of this change.
    fn wants(&self, c: &Change<'_>) -> bool {
        let want = match c.event {
            UpdateEvent::Initial | UpdateEvent::Added => mf::ADD,
            UpdateEvent::Removed => mf::DELETE,
            UpdateEvent::Modified => mf::MODIFY,
        };
        self.req.flags & want != 0 && self.covers(c)
    }
}

impl Agent {
    /// An ONF flow monitor request of connection `ci`.
    pub(crate) fn monitor_request(&mut self, ci: usize, raw: &[u8], xid: u32, body: &[u8]) {
        let req = match monitor::decode_monitor_request(body) {
            Ok(r) => r,
            Err(e) => return self.error(ci, raw, &e, xid),
        };
        let Some(c) = self.conns.get_mut(ci).and_then(Option::as_mut) else { return };
        if c.monitors.len() >= MAX_MONITORS && !c.monitors.iter().any(|m| m.req.id == req.id) {
            let e = OfError::new(error_type::BAD_REQUEST, bad_request::EPERM, "64 flow monitors on this connection");
            return self.error(ci, raw, &e, xid);
        }
        let parts = self.install_monitor(ci, req, false);
        let n = parts.len();
        for (i, data) in parts.into_iter().enumerate() {
            let flags = if i + 1 < n { sluice_openflow::MULTIPART_MORE } else { 0 };
            let body =
                MultipartReply::Experimenter { experimenter: ONF_EXPERIMENTER, exp_type: ONF_FLOW_MONITOR, data };
            self.reply(ci, &Message::MultipartReply { flags, body }, xid);
        }
    }

    /// An OpenFlow 1.4 FLOW_MONITOR request of connection `ci`: each
    /// monitor added, modified or deleted in turn; the first that cannot
    /// be is answered with its error, and the rest left undone.
    pub(crate) fn monitor_request14(&mut self, ci: usize, raw: &[u8], xid: u32, reqs: Vec<FlowMonitorRequest>) {
        let mut updates = vec![Vec::new()];
        for req in reqs {
            let Some(c) = self.conns.get_mut(ci).and_then(Option::as_mut) else { return };
            let exists = c.monitors.iter().any(|m| m.req.id == req.id);
            let refused = match req.command {
                monitor_command::ADD if exists => Some((flow_monitor_failed::MONITOR_EXISTS, "monitor id in use")),
                monitor_command::ADD if c.monitors.len() >= MAX_MONITORS => {
                    Some((flow_monitor_failed::UNKNOWN, "64 flow monitors on this connection"))
                }
                monitor_command::MODIFY | monitor_command::DELETE if !exists => {
                    Some((flow_monitor_failed::UNKNOWN_MONITOR, "no monitor of that id"))
                }
                monitor_command::ADD | monitor_command::MODIFY | monitor_command::DELETE => None,
                _ => Some((flow_monitor_failed::BAD_COMMAND, "flow monitor command")),
            };
            if let Some((code, why)) = refused {
                let e = OfError::new(error_type::FLOW_MONITOR_FAILED, code, why);
                return self.error(ci, raw, &e, xid);
            }
            if req.command == monitor_command::DELETE {
                c.monitors.retain(|m| m.req.id != req.id);
                self.count_monitors();
                continue;
            }
            for part in self.install_monitor(ci, req, true) {
                let last = updates.last_mut().expect("one part");
                if !last.is_empty() && last.len() + part.len() > REPLY_BYTES {
                    updates.push(part);
                } else {
                    last.extend_from_slice(&part);
                }
            }
        }
        let n = updates.len();
        for (i, data) in updates.into_iter().enumerate() {
            let flags = if i + 1 < n { sluice_openflow::MULTIPART_MORE } else { 0 };
            self.reply(ci, &Message::MultipartReply { flags, body: MultipartReply::FlowMonitor(data) }, xid);
        }
    }

    /// Keeps monitor `req` on connection `ci` (replacing one of its id)
    /// and returns the updates for the flows it matches now, if it asked
    /// for them, in parts of at most about `REPLY_BYTES` (at least one).
    fn install_monitor(&mut self, ci: usize, req: FlowMonitorRequest, of14: bool) -> Vec<Vec<u8>> {
        let monitor = Monitor { pattern: Pattern::of(&req.matched), req };
        let mut parts = vec![Vec::new()];
        if monitor.req.flags & mf::INITIAL != 0 {
            let actions = monitor.req.flags & mf::ACTIONS != 0;
            let control = self.control.clone();
            let pool = control.lock();
            let sw = pool.view();
            for (tid, t) in sw.tables().iter().enumerate() {
                for f in t.flows.values() {
                    let change = Change {
                        event: UpdateEvent::Initial,
                        reason: 0,
                        table_id: tid as u8,
                        priority: f.priority,
                        idle_timeout: f.idle_timeout,
                        hard_timeout: f.hard_timeout,
                        cookie: f.cookie,
                        matched: &f.matched,
                        instructions: &f.instructions,
                        flow: Some(f),
                    };
                    if !monitor.covers(&change) {
                        continue;
                    }
                    let out = parts.last_mut().expect("one part");
                    monitor::put_flow_update(out, &change.update(actions), of14);
                    if out.len() > REPLY_BYTES {
                        parts.push(Vec::new());
                    }
                }
            }
        }
        if parts.len() > 1 && parts.last().is_some_and(Vec::is_empty) {
            parts.pop();
        }
        if let Some(c) = self.conns.get_mut(ci).and_then(Option::as_mut) {
            let id = monitor.req.id;
            c.monitors.retain(|m| m.req.id != id);
            c.monitors.push(monitor);
        }
        self.count_monitors();
        parts
    }

    /// Counts the monitors of every connection (after one is added or a
    /// connection closed).
    pub(crate) fn count_monitors(&mut self) {
        self.monitors = self.conns.iter().flatten().map(|c| c.monitors.len()).sum();
    }

    /// Tells every monitor that matches `change` of it; `origin` is the
    /// connection and xid that made it, if a controller did.
    pub(crate) fn tell_monitors(&mut self, change: &Change<'_>, origin: Option<(usize, u32)>) {
        if self.monitors == 0 {
            return;
        }
        for ci in 0..self.conns.len() {
            let Some(c) = self.conns[ci].as_ref().filter(|c| c.up()) else { continue };
            let own = origin.is_some_and(|(oc, _)| oc == ci);
            let Some(m) = c.monitors.iter().find(|m| m.wants(change)) else { continue };
            let of14 = c.link.version().is_some_and(|v| v >= sluice_openflow::OFP14);
            let mut data = Vec::new();
            match origin {
                Some((_, xid)) if own && m.req.flags & mf::OWN == 0 => monitor::put_abbrev_update(&mut data, xid, of14),
                _ => monitor::put_flow_update(&mut data, &change.update(m.req.flags & mf::ACTIONS != 0), of14),
            }
            let body = if of14 {
                MultipartReply::FlowMonitor(data)
            } else {
                MultipartReply::Experimenter { experimenter: ONF_EXPERIMENTER, exp_type: ONF_FLOW_MONITOR, data }
            };
            self.reply(ci, &Message::MultipartReply { flags: 0, body }, 0);
        }
    }

    /// Tells the monitors of a flow-mod that succeeded (its additions and
    /// modifications; its deletions come as removed flows).
    pub(crate) fn monitor_flow_mod(&mut self, fm: &FlowMod, origin: Option<(usize, u32)>) {
        use sluice_openflow::flow_mod_command as c;
        if self.monitors == 0 {
            return;
        }
        let event = match fm.command {
            c::ADD => UpdateEvent::Added,
            c::MODIFY | c::MODIFY_STRICT => UpdateEvent::Modified,
            _ => return,
        };
        let change = Change {
            event,
            reason: 0,
            table_id: fm.table_id,
            priority: fm.priority,
            idle_timeout: fm.idle_timeout,
            hard_timeout: fm.hard_timeout,
            cookie: fm.cookie,
            matched: &fm.matched,
            instructions: &fm.instructions,
            flow: None,
        };
        self.tell_monitors(&change, origin);
    }

    /// Tells the monitors of removed flows.
    pub(crate) fn monitor_removed(&mut self, removed: &[Removed], origin: Option<(usize, u32)>) {
        if self.monitors == 0 {
            return;
        }
        for r in removed {
            let f: &Flow = &r.flow;
            let instructions: Arc<[Instruction]> = f.instructions.clone();
            let change = Change {
                event: UpdateEvent::Removed,
                reason: u16::from(r.reason),
                table_id: r.table_id,
                priority: f.priority,
                idle_timeout: f.idle_timeout,
                hard_timeout: f.hard_timeout,
                cookie: f.cookie,
                matched: &f.matched,
                instructions: &instructions,
                flow: Some(f),
            };
            self.tell_monitors(&change, origin);
        }
    }
}
