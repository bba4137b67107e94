//! The requests of controllers, as typed changes of the switch.
//!
//! Contract: reads one decoded OpenFlow 1.3 or 1.4 request of a connection
//! (1.0 ones arrive translated to 1.3);
//! a change (flow, group, meter, port, switch config) is made on the
//! master copy through the node's `Control` and, only when it succeeded
//! there, queued for the workers (`Session::try_change`): the reply is
//! the master's answer, an error the specification's type and code; a
//! BARRIER_REPLY leaves only once every change before it reached every
//! worker (`Session::flush`); a packet-out runs after every change made
//! before it. Slaves get `IS_SLAVE` for what would change the switch.
//! Reads go to `replies.rs`.

use sluice_ofswitch::control::Removed;
use sluice_ofswitch::switch::{encode_packet_out, N_TABLES, PACKET_OUT_PORT};
use sluice_ofswitch::OfSwitch;
use sluice_openflow::errors::{bad_request, error_type, role_request_failed, switch_config_failed};
use sluice_openflow::{
    capabilities, config_flags, controller_role, flow_mod_command, port, Action, Features, Message, OfError, Role,
};

use sluice_openflow::{of10, translate10, OFP10};

use crate::agent::Agent;
use crate::buffers::NoPacket;

/// The ONF extension's ROLE_STATUS for OpenFlow 1.3.
const ONF_ROLE_STATUS: u32 = 1911;

impl Agent {
    fn version(&self, ci: usize) -> Option<u8> {
        self.conns.get(ci).and_then(Option::as_ref).and_then(|c| c.link.version())
    }

    fn is_slave(&self, ci: usize) -> bool {
        self.conns.get(ci).and_then(Option::as_ref).is_some_and(|c| c.role == controller_role::SLAVE)
    }

    pub(crate) fn dispatch(&mut self, ci: usize, raw: &[u8], xid: u32, msg: Message) {
        let slave_refused = |a: &mut Agent| {
            let e = OfError::new(error_type::BAD_REQUEST, bad_request::IS_SLAVE, "this connection is a slave");
            a.error(ci, raw, &e, xid);
        };
        match msg {
            // HELLO and echoes are the connection's own business.
            Message::Hello(_) | Message::EchoRequest(_) | Message::EchoReply(_) | Message::Error(_) => {}
            Message::FeaturesRequest if self.version(ci) == Some(OFP10) => {
                // 1.0's reply lists the ports, and the action types.
                let ports = self.port_descs().iter().filter_map(translate10::phy_port_10).collect();
                let f = of10::FeaturesReply10 {
                    datapath_id: self.cfg.datapath_id,
                    n_buffers: crate::buffers::N_BUFFERS as u32,
                    n_tables: N_TABLES as u8,
                    // Flow, table and port statistics; ARP addresses matched as nw_src/nw_dst.
                    capabilities: 0x1 | 0x2 | 0x4 | 0x80,
                    // OUTPUT to ENQUEUE: every 1.0 action.
                    actions: 0xfff,
                    ports,
                };
                self.reply10(ci, &of10::Message10::FeaturesReply(f), xid);
            }
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
                let c = self.pool().view().config();
                self.reply(ci, &Message::GetConfigReply(c), xid);
            }
            Message::SetConfig(c) => {
                if self.is_slave(ci) {
                    return slave_refused(self);
                }
                // Fragments are passed (NORMAL) or dropped (DROP); the
                // switch does not reassemble them, and says so as Open
                // vSwitch does.
                if c.flags & config_flags::FRAG_MASK > config_flags::FRAG_DROP {
                    let e = OfError::new(
                        error_type::SWITCH_CONFIG_FAILED,
                        switch_config_failed::BAD_FLAGS,
                        "fragment reassembly is not supported",
                    );
                    return self.error(ci, raw, &e, xid);
                }
                self.pool().change(move |d: &mut OfSwitch, _| d.set_config(c));
            }
            Message::BarrierRequest => {
                self.pool().flush();
                self.reply(ci, &Message::BarrierReply, xid);
            }
            Message::RoleRequest(r) => self.role(ci, raw, xid, r),
            Message::GetAsyncRequest => {
                let Some(a) = self.conns.get(ci).and_then(Option::as_ref).map(|c| c.async_cfg) else { return };
                self.reply(ci, &Message::GetAsyncReply(a), xid);
            }
            Message::SetAsync(a) => {
                if let Some(c) = self.conns.get_mut(ci).and_then(Option::as_mut) {
                    // 1.3 sets three pairs of masks; the others stay.
                    c.async_cfg.packet_in_mask = a.packet_in_mask;
                    c.async_cfg.port_status_mask = a.port_status_mask;
                    c.async_cfg.flow_removed_mask = a.flow_removed_mask;
                }
            }
            Message::SetAsyncProps(props) => {
                if let Some(c) = self.conns.get_mut(ci).and_then(Option::as_mut) {
                    for p in props {
                        c.async_cfg.apply(p);
                    }
                }
            }
            Message::BundleControl(_) => self.bundle_control14(ci, raw, xid),
            Message::BundleAdd(_) => self.bundle_add14(ci, raw, xid),
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
                let for_monitors = (self.monitors > 0).then(|| fm.clone());
                let prepared = sluice_ofswitch::control::PreparedFlowMod::new(fm);
                let done = self.modify(ci, raw, xid, move |d: &mut OfSwitch| d.prepared_flow_mod(&prepared, uid, now));
                if let Some(fm) = for_monitors.filter(|_| done) {
                    self.monitor_flow_mod(&fm, Some((ci, xid)));
                }
                if done && buffered {
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
                let port_no = pm.port_no;
                let changed = self.pool().try_change(move |d: &mut OfSwitch, _| d.port_mod(&pm));
                match changed {
                    Err(e) => self.error(ci, raw, &e, xid),
                    // Every controller hears of the new configuration, as
                    // Open vSwitch tells them.
                    Ok(true) => self.port_status(port_no, sluice_openflow::port_reason::MODIFY),
                    Ok(false) => {}
                }
            }
            Message::TableMod { table_id, config } => {
                // 1.3's deprecated bits are ignored, as the specification
                // says; eviction and vacancy events (1.4) are not done.
                let e = if table_id as usize >= N_TABLES && table_id != sluice_openflow::table::ALL {
                    Some(OfError::new(error_type::TABLE_MOD_FAILED, 0, format!("no table {table_id}")))
                } else if config & !0x3 != 0 {
                    Some(OfError::new(
                        error_type::TABLE_MOD_FAILED,
                        1,
                        format!("table config {config:#x}: eviction and vacancy events are not supported"),
                    ))
                } else {
                    None
                };
                if let Some(e) = e {
                    self.error(ci, raw, &e, xid);
                }
            }
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
            Message::QueueGetConfigRequest { port } => match self.packet_queues(port) {
                Ok(queues) => self.reply(ci, &Message::QueueGetConfigReply { port, queues }, xid),
                Err(e) => self.error(ci, raw, &e, xid),
            },
            Message::Experimenter { experimenter, exp_type, data } => {
                self.experimenter(ci, raw, xid, experimenter, exp_type, &data)
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
            | Message::RoleStatus { .. }
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
        self.pool().flush();
        self.pool().inject(PACKET_OUT_PORT, frame);
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
        let changed = self.pool().try_change(move |d: &mut OfSwitch, _| change(d));
        match changed {
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
                    // The master before is a slave now, and told so (1.4's
                    // ROLE_STATUS, the ONF extension's for 1.3), as Open
                    // vSwitch tells it.
                    let generation_id = r.generation_id;
                    for i in 0..self.conns.len() {
                        let Some(c) = self.conns[i].as_mut() else { continue };
                        if i == ci || c.role != controller_role::MASTER {
                            continue;
                        }
                        c.role = controller_role::SLAVE;
                        self.role_status(i, controller_role::SLAVE, generation_id);
                    }
                }
                self.set_role(ci, r.role);
            }
            controller_role::EQUAL => self.set_role(ci, r.role),
            _ => {
                let e = OfError::new(error_type::ROLE_REQUEST_FAILED, role_request_failed::BAD_ROLE, "unknown role");
                return self.error(ci, raw, &e, xid);
            }
        }
        let Some(role) = self.conns.get(ci).and_then(Option::as_ref).map(|c| c.role) else { return };
        // No generation id yet: Open vSwitch answers 2^64-1, as the
        // specification's "undefined" generation.
        let reply = Role { role, generation_id: self.generation.unwrap_or(u64::MAX) };
        self.reply(ci, &Message::RoleReply(reply), xid);
    }

    /// Tells connection `ci` its role changed at another's request.
    fn role_status(&mut self, ci: usize, role: u32, generation_id: u64) {
        let reason = sluice_openflow::role_reason::MASTER_REQUEST;
        match self.version(ci) {
            Some(v) if v >= sluice_openflow::OFP14 => {
                self.reply(ci, &Message::RoleStatus { role, reason, generation_id }, 0);
            }
            Some(sluice_openflow::OFP13) => {
                let mut data = role.to_be_bytes().to_vec();
                data.extend_from_slice(&[reason, 0, 0, 0]);
                data.extend_from_slice(&generation_id.to_be_bytes());
                let m = Message::Experimenter { experimenter: crate::bundles::ONF, exp_type: ONF_ROLE_STATUS, data };
                self.reply(ci, &m, 0);
            }
            _ => {}
        }
    }

    fn set_role(&mut self, ci: usize, role: u32) {
        if let Some(c) = self.conns.get_mut(ci).and_then(Option::as_mut) {
            c.role = role;
        }
    }
}
