//! OpenFlow 1.0 and 1.3 said in each other's terms: matches, actions and
//! port numbers both ways; for a switch speaking 1.0, a 1.0 request as the
//! 1.3 message it means and a 1.3 answer in 1.0 bytes.
//!
//! Contract: pure functions. A 1.3 match translates to 1.0 when every
//! field has a 1.0 place (in_port, Ethernet addresses unmasked, VLAN id
//! and priority, ethertype, IP ToS from DSCP, IP protocol, IPv4 or ARP
//! addresses with prefix masks, ARP opcode, transport ports, ICMP type and
//! code); a 1.0 match translates to 1.3 field by field, a field whose
//! prerequisites the match does not give (an IP address without the IPv4
//! ethertype, a port without a transport protocol) being dropped, as Open
//! vSwitch normalises such matches (an IPv6 match keeps its ToS, protocol
//! and ports, as Open vSwitch reads them; a VLAN priority without an id
//! matches any tagged frame of that priority). Actions translate where the other
//! version has them (1.0's set-transport-port needs the match's protocol);
//! anything else is an error naming it. Port numbers map between the two
//! numbering spaces (1.0's reserved ports 0xfff8..0xffff are 1.3's
//! 0xfffffff8..0xffffffff). Errors map to 1.0's types and codes where 1.0
//! has them, else to the nearest 1.0 error of the same request.

use crate::errors::{bad_action, bad_request, error_type, flow_mod_failed};
use crate::of10::{
    self, bad_request10, error_type10, stats_type10, wildcards as w, Action10, FlowRemoved10, Match10, Message10,
    PacketIn10, PhyPort10, PortStatus10,
};
use crate::wire::{Put, Reader};
use crate::{
    flow_mod_command, packet_in_reason, Action, FlowMod, FlowStatsRequest, Instruction, Match, Message, MultipartReply,
    MultipartRequest, OfError, Oxm, OxmField, PacketOut, PortDesc, PortMod, SwitchConfig,
};

/// A 1.3 port number in 1.0's 16 bits.
pub fn port32_to_10(p: u32) -> Result<u16, String> {
    if p >= 0xffff_fff8 {
        return Ok((p & 0xffff) as u16);
    }
    if p < u32::from(of10::port10::MAX) {
        return Ok(p as u16);
    }
    Err(format!("port {p} has no OpenFlow 1.0 number"))
}

/// A 1.0 port number as 1.3 numbers it.
pub fn port10_to_32(p: u16) -> u32 {
    if p >= 0xfff8 {
        0xffff_0000 | u32::from(p)
    } else {
        u32::from(p)
    }
}

fn be(v: &[u8]) -> u64 {
    v.iter().fold(0, |a, b| (a << 8) | u64::from(*b))
}

/// The 1.0 wildcard bits of an IPv4 prefix mask (how many low bits are
/// wildcarded), or an error for a mask that is not a prefix.
fn prefix_wild(mask: Option<&[u8]>) -> Result<u32, String> {
    let Some(m) = mask else { return Ok(0) };
    let m = be(m) as u32;
    let ones = m.leading_ones();
    if m.checked_shl(ones).unwrap_or(0) != 0 {
        return Err(format!("IPv4 mask {m:#x} is not a prefix"));
    }
    Ok(32 - ones)
}

/// A 1.3 match as a 1.0 `ofp_match`.
pub fn match_to_10(m: &Match) -> Result<Match10, String> {
    let mut o = Match10 { wildcards: w::ALL, ..Match10::default() };
    for f in &m.fields {
        let v = &f.value;
        let unmasked = |name: &str| -> Result<(), String> {
            if f.mask.is_some() {
                return Err(format!("OpenFlow 1.0 cannot mask {name}"));
            }
            Ok(())
        };
        match f.field {
            OxmField::InPort => {
                unmasked("in_port")?;
                o.in_port = port32_to_10(be(v) as u32)?;
                o.wildcards &= !w::IN_PORT;
            }
            OxmField::EthDst | OxmField::EthSrc if v.len() == 6 => {
                unmasked("Ethernet addresses")?;
                let mac: [u8; 6] = v[..6].try_into().expect("6 bytes");
                if f.field == OxmField::EthDst {
                    o.dl_dst = mac;
                    o.wildcards &= !w::DL_DST;
                } else {
                    o.dl_src = mac;
                    o.wildcards &= !w::DL_SRC;
                }
            }
            OxmField::EthType => {
                o.dl_type = be(v) as u16;
                o.wildcards &= !w::DL_TYPE;
            }
            // Any tagged frame (the present bit alone): 1.0 leaves dl_vlan wildcarded.
            OxmField::VlanVid if f.mask.as_deref() == Some(&[0x10, 0][..]) && be(v) & 0x1000 != 0 => {}
            OxmField::VlanVid => {
                unmasked("the VLAN id")?;
                let vid = be(v) as u16;
                o.dl_vlan = if vid & 0x1000 != 0 { vid & 0x0fff } else { 0xffff };
                o.wildcards &= !w::DL_VLAN;
            }
            OxmField::VlanPcp => {
                o.dl_vlan_pcp = be(v) as u8;
                o.wildcards &= !w::DL_VLAN_PCP;
            }
            OxmField::IpDscp => {
                o.nw_tos = (be(v) as u8) << 2;
                o.wildcards &= !w::NW_TOS;
            }
            OxmField::IpProto | OxmField::ArpOp => {
                o.nw_proto = be(v) as u8;
                o.wildcards &= !w::NW_PROTO;
            }
            OxmField::Ipv4Src | OxmField::ArpSpa => {
                o.nw_src = be(v) as u32;
                let bits = prefix_wild(f.mask.as_deref())?;
                o.wildcards = (o.wildcards & !(0x3f << w::NW_SRC_SHIFT)) | (bits << w::NW_SRC_SHIFT);
            }
            OxmField::Ipv4Dst | OxmField::ArpTpa => {
                o.nw_dst = be(v) as u32;
                let bits = prefix_wild(f.mask.as_deref())?;
                o.wildcards = (o.wildcards & !(0x3f << w::NW_DST_SHIFT)) | (bits << w::NW_DST_SHIFT);
            }
            OxmField::TcpSrc | OxmField::UdpSrc | OxmField::SctpSrc | OxmField::Icmpv4Type | OxmField::Icmpv6Type => {
                unmasked("transport ports")?;
                o.tp_src = be(v) as u16;
                o.wildcards &= !w::TP_SRC;
            }
            OxmField::TcpDst | OxmField::UdpDst | OxmField::SctpDst | OxmField::Icmpv4Code | OxmField::Icmpv6Code => {
                unmasked("transport ports")?;
                o.tp_dst = be(v) as u16;
                o.wildcards &= !w::TP_DST;
            }
            other => return Err(format!("OpenFlow 1.0 has no match field {other:?}")),
        }
    }
    Ok(o)
}

fn oxm(field: OxmField, value: &[u8]) -> Oxm {
    Oxm { field, value: value.to_vec(), mask: None }
}

/// An IPv4 address field of a 1.0 match with `wild` low bits wildcarded
/// (32 or more: not matched).
fn prefix_oxm(field: OxmField, addr: u32, wild: u32) -> Option<Oxm> {
    if wild >= 32 {
        return None;
    }
    let mask = u32::MAX << wild;
    Some(Oxm {
        field,
        value: (addr & mask).to_be_bytes().to_vec(),
        mask: (wild > 0).then(|| mask.to_be_bytes().to_vec()),
    })
}

/// A 1.0 match as a 1.3 match (fields without their prerequisites dropped).
pub fn match_from_10(m: &Match10) -> Match {
    let has = |bit: u32| m.wildcards & bit == 0;
    let mut f = Vec::new();
    if has(w::IN_PORT) {
        f.push(oxm(OxmField::InPort, &port10_to_32(m.in_port).to_be_bytes()));
    }
    if has(w::DL_SRC) {
        f.push(oxm(OxmField::EthSrc, &m.dl_src));
    }
    if has(w::DL_DST) {
        f.push(oxm(OxmField::EthDst, &m.dl_dst));
    }
    if has(w::DL_VLAN) {
        // OFP_VLAN_NONE (0xffff): no tag.
        let vid = if m.dl_vlan == 0xffff { 0 } else { 0x1000 | (m.dl_vlan & 0x0fff) };
        f.push(oxm(OxmField::VlanVid, &vid.to_be_bytes()));
        if has(w::DL_VLAN_PCP) && vid != 0 {
            f.push(oxm(OxmField::VlanPcp, &[m.dl_vlan_pcp & 7]));
        }
    } else if has(w::DL_VLAN_PCP) {
        // A priority without an id: any tagged frame of that priority.
        f.push(Oxm { field: OxmField::VlanVid, value: vec![0x10, 0], mask: Some(vec![0x10, 0]) });
        f.push(oxm(OxmField::VlanPcp, &[m.dl_vlan_pcp & 7]));
    }
    if !has(w::DL_TYPE) {
        return Match { fields: f };
    }
    f.push(oxm(OxmField::EthType, &m.dl_type.to_be_bytes()));
    let src_wild = (m.wildcards >> w::NW_SRC_SHIFT) & 0x3f;
    let dst_wild = (m.wildcards >> w::NW_DST_SHIFT) & 0x3f;
    match m.dl_type {
        0x0806 => {
            if has(w::NW_PROTO) {
                f.push(oxm(OxmField::ArpOp, &u16::from(m.nw_proto).to_be_bytes()));
            }
            f.extend(prefix_oxm(OxmField::ArpSpa, m.nw_src, src_wild));
            f.extend(prefix_oxm(OxmField::ArpTpa, m.nw_dst, dst_wild));
        }
        // IPv4, and IPv6 as Open vSwitch reads a 1.0 match (its ToS,
        // protocol and ports; its addresses have no place in 1.0).
        0x0800 | 0x86dd => {
            let v4 = m.dl_type == 0x0800;
            if has(w::NW_TOS) {
                f.push(oxm(OxmField::IpDscp, &[m.nw_tos >> 2]));
            }
            if v4 {
                f.extend(prefix_oxm(OxmField::Ipv4Src, m.nw_src, src_wild));
                f.extend(prefix_oxm(OxmField::Ipv4Dst, m.nw_dst, dst_wild));
            }
            if has(w::NW_PROTO) {
                f.push(oxm(OxmField::IpProto, &[m.nw_proto]));
                let ports = match m.nw_proto {
                    6 => Some((OxmField::TcpSrc, OxmField::TcpDst)),
                    17 => Some((OxmField::UdpSrc, OxmField::UdpDst)),
                    132 => Some((OxmField::SctpSrc, OxmField::SctpDst)),
                    _ => None,
                };
                if let Some((src, dst)) = ports {
                    if has(w::TP_SRC) {
                        f.push(oxm(src, &m.tp_src.to_be_bytes()));
                    }
                    if has(w::TP_DST) {
                        f.push(oxm(dst, &m.tp_dst.to_be_bytes()));
                    }
                } else if (m.nw_proto == 1 && v4) || (m.nw_proto == 58 && !v4) {
                    let (typ, code) = if v4 {
                        (OxmField::Icmpv4Type, OxmField::Icmpv4Code)
                    } else {
                        (OxmField::Icmpv6Type, OxmField::Icmpv6Code)
                    };
                    if has(w::TP_SRC) {
                        f.push(oxm(typ, &[m.tp_src as u8]));
                    }
                    if has(w::TP_DST) {
                        f.push(oxm(code, &[m.tp_dst as u8]));
                    }
                }
            }
        }
        _ => {}
    }
    Match { fields: f }
}

/// 1.3 actions as 1.0 actions.
pub fn actions_to_10(actions: &[Action]) -> Result<Vec<Action10>, String> {
    let mut out = Vec::with_capacity(actions.len());
    actions_to_10_into(actions, &mut out)?;
    Ok(out)
}

/// 1.3 actions as 1.0 actions, appended to `out` (on an error, those
/// before the action 1.0 cannot say have been appended).
pub fn actions_to_10_into(actions: &[Action], out: &mut Vec<Action10>) -> Result<(), String> {
    for a in actions {
        out.push(match a {
            Action::Output { port, max_len } => Action10::Output { port: port32_to_10(*port)?, max_len: *max_len },
            Action::PopVlan => Action10::StripVlan,
            Action::SetField(f) => {
                let v = &f.value;
                match f.field {
                    OxmField::EthSrc if v.len() == 6 => Action10::SetDlSrc(v[..6].try_into().expect("6 bytes")),
                    OxmField::EthDst if v.len() == 6 => Action10::SetDlDst(v[..6].try_into().expect("6 bytes")),
                    OxmField::VlanVid => Action10::SetVlanVid(be(v) as u16 & 0x0fff),
                    OxmField::VlanPcp => Action10::SetVlanPcp(be(v) as u8),
                    OxmField::Ipv4Src => Action10::SetNwSrc(be(v) as u32),
                    OxmField::Ipv4Dst => Action10::SetNwDst(be(v) as u32),
                    OxmField::IpDscp => Action10::SetNwTos((be(v) as u8) << 2),
                    OxmField::TcpSrc | OxmField::UdpSrc => Action10::SetTpSrc(be(v) as u16),
                    OxmField::TcpDst | OxmField::UdpDst => Action10::SetTpDst(be(v) as u16),
                    other => return Err(format!("OpenFlow 1.0 cannot set {other:?}")),
                }
            }
            other => return Err(format!("OpenFlow 1.0 has no action {other:?}")),
        });
    }
    Ok(())
}

fn act_err(code: u16, reason: String) -> OfError {
    OfError::new(error_type::BAD_ACTION, code, reason)
}

/// 1.0 actions as 1.3 actions; `matched` gives the transport protocol a
/// set-transport-port action writes (1.0 leaves it to the packet).
pub fn actions_from_10(actions: &[Action10], matched: &Match) -> Result<Vec<Action>, OfError> {
    let proto = matched.fields.iter().find(|f| f.field == OxmField::IpProto).map(|f| be(&f.value) as u8);
    let set = |field: OxmField, v: &[u8]| Action::SetField(oxm(field, v));
    let mut out = Vec::with_capacity(actions.len());
    for a in actions {
        match a {
            Action10::Output { port, max_len } => {
                out.push(Action::Output { port: port10_to_32(*port), max_len: *max_len })
            }
            Action10::SetVlanVid(v) => out.push(set(OxmField::VlanVid, &(0x1000 | (v & 0x0fff)).to_be_bytes())),
            Action10::SetVlanPcp(p) => out.push(set(OxmField::VlanPcp, &[p & 7])),
            Action10::StripVlan => out.push(Action::PopVlan),
            Action10::SetDlSrc(mac) => out.push(set(OxmField::EthSrc, mac)),
            Action10::SetDlDst(mac) => out.push(set(OxmField::EthDst, mac)),
            Action10::SetNwSrc(a) => out.push(set(OxmField::Ipv4Src, &a.to_be_bytes())),
            Action10::SetNwDst(a) => out.push(set(OxmField::Ipv4Dst, &a.to_be_bytes())),
            Action10::SetNwTos(t) => out.push(set(OxmField::IpDscp, &[t >> 2])),
            Action10::SetTpSrc(p) | Action10::SetTpDst(p) => {
                let src = matches!(a, Action10::SetTpSrc(_));
                let field = match (proto, src) {
                    (Some(6), true) => OxmField::TcpSrc,
                    (Some(6), false) => OxmField::TcpDst,
                    (Some(17), true) => OxmField::UdpSrc,
                    (Some(17), false) => OxmField::UdpDst,
                    _ => {
                        return Err(act_err(
                            bad_action::BAD_ARGUMENT,
                            "a transport port set without TCP or UDP in the match".into(),
                        ))
                    }
                };
                out.push(set(field, &p.to_be_bytes()));
            }
            Action10::Enqueue { port, queue_id } => {
                out.push(Action::SetQueue(*queue_id));
                out.push(Action::Output { port: port10_to_32(*port), max_len: 0 });
            }
            Action10::Vendor { .. } => {
                return Err(act_err(bad_action::BAD_EXPERIMENTER, "no vendor actions".into()));
            }
        }
    }
    Ok(out)
}

fn stats_err(reason: String) -> OfError {
    OfError::new(error_type::BAD_REQUEST, bad_request::BAD_LEN, reason)
}

/// A 1.0 flow or aggregate statistics request body as 1.3's.
fn flow_stats_request(body: &[u8]) -> Result<FlowStatsRequest, OfError> {
    let mut r = Reader::new(body, (error_type::BAD_REQUEST, bad_request::BAD_LEN));
    let m = of10::get_match(&mut r)?;
    let table_id = r.u8("table_id")?;
    r.skip(1, "pad")?;
    let out_port = port10_to_32(r.u16("out_port")?);
    if !r.is_empty() {
        return Err(stats_err("flow statistics request longer than its layout".into()));
    }
    Ok(FlowStatsRequest {
        table_id,
        out_port,
        out_group: crate::group::ANY,
        cookie: 0,
        cookie_mask: 0,
        matched: match_from_10(&m),
    })
}

/// A 1.0 request to a switch as the 1.3 message it means (errors in 1.3's
/// terms: see [`error_to_10`] for the answer's).
pub fn request_from_10(raw: &[u8]) -> Result<(u32, Message), OfError> {
    let (xid, m) = of10::decode10(raw).map_err(|e| error_from_10(&e))?;
    let msg = match m {
        Message10::Hello(_) => Message::Hello(Vec::new()),
        Message10::Error { typ, code, data } => Message::Error(crate::ErrorMsg { typ, code, data }),
        Message10::EchoRequest(d) => Message::EchoRequest(d),
        Message10::EchoReply(d) => Message::EchoReply(d),
        Message10::Vendor { vendor, .. } => {
            return Err(OfError::new(
                error_type::BAD_REQUEST,
                bad_request::BAD_EXPERIMENTER,
                format!("vendor {vendor:#x} messages are not supported"),
            ))
        }
        Message10::FeaturesRequest => Message::FeaturesRequest,
        Message10::GetConfigRequest => Message::GetConfigRequest,
        Message10::SetConfig { flags, miss_send_len } => Message::SetConfig(SwitchConfig { flags, miss_send_len }),
        Message10::PacketOut(po) => {
            let in_port = port10_to_32(po.in_port);
            let matched = Match { fields: vec![oxm(OxmField::InPort, &in_port.to_be_bytes())] };
            Message::PacketOut(PacketOut {
                buffer_id: po.buffer_id,
                in_port,
                actions: actions_from_10(&po.actions, &matched)?,
                data: po.data,
            })
        }
        Message10::FlowMod(fm) => {
            let matched = match_from_10(&fm.matched);
            let actions = actions_from_10(&fm.actions, &matched)?;
            let command = u8::try_from(fm.command).map_err(|_| {
                OfError::new(error_type::FLOW_MOD_FAILED, flow_mod_failed::BAD_COMMAND, "unknown command")
            })?;
            Message::FlowMod(FlowMod {
                cookie: fm.cookie,
                cookie_mask: 0,
                // 1.0 adds to its one table; changes and deletions reach every table.
                table_id: if command == flow_mod_command::ADD { 0 } else { 0xff },
                command,
                idle_timeout: fm.idle_timeout,
                hard_timeout: fm.hard_timeout,
                priority: fm.priority,
                buffer_id: fm.buffer_id,
                out_port: port10_to_32(fm.out_port),
                out_group: crate::group::ANY,
                // SEND_FLOW_REM and CHECK_OVERLAP; 1.0's EMERG has no meaning here.
                flags: fm.flags & 0x3,
                matched,
                instructions: if actions.is_empty() { Vec::new() } else { vec![Instruction::ApplyActions(actions)] },
            })
        }
        Message10::PortMod(pm) => Message::PortMod(PortMod {
            port_no: port10_to_32(pm.port_no),
            hw_addr: pm.hw_addr,
            config: pm.config,
            mask: pm.mask,
            advertise: pm.advertise,
        }),
        Message10::StatsRequest { typ, flags, body } => {
            let body = match typ {
                stats_type10::DESC => MultipartRequest::Desc,
                stats_type10::FLOW => MultipartRequest::Flow(flow_stats_request(&body)?),
                stats_type10::AGGREGATE => MultipartRequest::Aggregate(flow_stats_request(&body)?),
                stats_type10::TABLE => MultipartRequest::Table,
                stats_type10::PORT => {
                    let p = body.get(..2).map(be).ok_or_else(|| stats_err("port statistics request".into()))?;
                    MultipartRequest::PortStats { port_no: port10_to_32(p as u16) }
                }
                stats_type10::QUEUE => {
                    let (Some(p), Some(q)) = (body.get(..2), body.get(4..8)) else {
                        return Err(stats_err("queue statistics request".into()));
                    };
                    MultipartRequest::Queue { port_no: port10_to_32(be(p) as u16), queue_id: be(q) as u32 }
                }
                other => {
                    return Err(OfError::new(
                        error_type::BAD_REQUEST,
                        bad_request::BAD_MULTIPART,
                        format!("statistics type {other}"),
                    ))
                }
            };
            Message::MultipartRequest { flags, body }
        }
        Message10::BarrierRequest => Message::BarrierRequest,
        Message10::QueueGetConfigRequest { port } => Message::QueueGetConfigRequest { port: port10_to_32(port) },
        other => {
            return Err(OfError::new(
                error_type::BAD_REQUEST,
                bad_request::BAD_TYPE,
                format!("a switch is not sent message type {}", other.type_code()),
            ))
        }
    };
    Ok((xid, msg))
}

/// A 1.0 decoding error (1.0 types and codes) in 1.3's terms.
fn error_from_10(e: &OfError) -> OfError {
    let (typ, code) = match (e.typ, e.code) {
        (error_type10::BAD_REQUEST, c) => (error_type::BAD_REQUEST, c.min(bad_request10::BUFFER_UNKNOWN)),
        (error_type10::BAD_ACTION, c) => (error_type::BAD_ACTION, c),
        _ => (error_type::BAD_REQUEST, bad_request::BAD_LEN),
    };
    OfError::new(typ, code, e.reason.clone())
}

/// A 1.3 error type and code as 1.0 says them: BAD_REQUEST's and
/// BAD_ACTION's first nine codes are the same in both; the flow-mod and
/// port-mod and queue failures map code by code; a match or instruction 1.0 cannot
/// take is an unsupported flow-mod; what 1.0 has no word for is EPERM.
pub fn error_to_10(typ: u16, code: u16) -> (u16, u16) {
    use crate::errors::port_mod_failed;
    match typ {
        error_type::HELLO_FAILED => (error_type10::HELLO_FAILED, code.min(1)),
        error_type::BAD_REQUEST if code <= bad_request10::BUFFER_UNKNOWN => (error_type10::BAD_REQUEST, code),
        error_type::BAD_ACTION if code <= 8 => (error_type10::BAD_ACTION, code),
        error_type::BAD_ACTION => (error_type10::BAD_ACTION, of10::bad_action10::BAD_ARGUMENT),
        error_type::FLOW_MOD_FAILED => {
            let c = match code {
                flow_mod_failed::TABLE_FULL => 0,
                flow_mod_failed::OVERLAP => 1,
                flow_mod_failed::EPERM => 2,
                flow_mod_failed::BAD_TIMEOUT => 3,
                flow_mod_failed::BAD_COMMAND => 4,
                _ => 5,
            };
            (error_type10::FLOW_MOD_FAILED, c)
        }
        error_type::BAD_MATCH | error_type::BAD_INSTRUCTION => (error_type10::FLOW_MOD_FAILED, 5),
        error_type::PORT_MOD_FAILED => {
            (error_type10::PORT_MOD_FAILED, if code == port_mod_failed::BAD_HW_ADDR { 1 } else { 0 })
        }
        // BAD_PORT, BAD_QUEUE and EPERM in both.
        error_type::QUEUE_OP_FAILED if code <= 2 => (error_type10::QUEUE_OP_FAILED, code),
        _ => (error_type10::BAD_REQUEST, bad_request10::EPERM),
    }
}

/// A port as 1.0 describes it (`None` for a port 1.0 cannot number).
pub fn phy_port_10(p: &PortDesc) -> Option<PhyPort10> {
    Some(PhyPort10 {
        port_no: port32_to_10(p.port_no).ok()?,
        hw_addr: p.hw_addr,
        name: p.name.clone(),
        config: p.config,
        // LINK_DOWN is the one state bit both versions share (1.3's BLOCKED
        // and LIVE are STP bits in 1.0).
        state: p.state & crate::port_state::LINK_DOWN,
        curr: p.curr,
        advertised: p.advertised,
        supported: p.supported,
        peer: p.peer,
    })
}

/// The 1.3 `ofp_flow_stats` body of a 1.0 statistics reply, or the 1.3
/// reply as 1.0's (`None` for a reply 1.0 has no statistics type for).
/// Queues as 1.0's `ofp_packet_queue` list: 1.0 knows the minimum rate
/// only (`ofp_queue_prop_min_rate`); other properties are left out.
fn packet_queues_10(queues: &[crate::PacketQueue]) -> Vec<u8> {
    let mut out = Vec::new();
    for q in queues {
        let mins: Vec<u16> = q
            .properties
            .iter()
            .filter_map(|p| match p {
                crate::QueueProp::MinRate(r) => Some(*r),
                _ => None,
            })
            .collect();
        out.u32(q.queue_id);
        out.u16((8 + 16 * mins.len()) as u16);
        out.zeros(2);
        for rate in mins {
            out.u16(crate::codec::queue_prop_type::MIN_RATE);
            out.u16(16);
            out.zeros(4);
            out.u16(rate);
            out.zeros(6);
        }
    }
    out
}

fn stats_reply_10(body: &MultipartReply) -> Option<(u16, Vec<u8>)> {
    let mut out = Vec::new();
    let typ = match body {
        MultipartReply::Desc(d) => {
            out.string(&d.mfr_desc, 256);
            out.string(&d.hw_desc, 256);
            out.string(&d.sw_desc, 256);
            out.string(&d.serial_num, 32);
            out.string(&d.dp_desc, 256);
            stats_type10::DESC
        }
        MultipartReply::Flow(flows) => {
            for f in flows {
                // A flow 1.0 cannot say (a match or instruction it has no
                // word for) is left out of a 1.0 dump.
                let Ok(m) = match_to_10(&f.matched) else { continue };
                let mut actions = Vec::new();
                let mut ok = true;
                for i in &f.instructions {
                    match i {
                        Instruction::ApplyActions(a) => match actions_to_10(a) {
                            Ok(a) => actions.extend(a),
                            Err(_) => ok = false,
                        },
                        _ => ok = false,
                    }
                }
                if !ok {
                    continue;
                }
                let start = out.len();
                out.u16(0);
                out.u8(f.table_id);
                out.zeros(1);
                of10::put_match(&mut out, &m);
                out.u32(f.duration_sec);
                out.u32(f.duration_nsec);
                out.u16(f.priority);
                out.u16(f.idle_timeout);
                out.u16(f.hard_timeout);
                out.zeros(6);
                out.u64(f.cookie);
                out.u64(f.packet_count);
                out.u64(f.byte_count);
                for a in &actions {
                    of10::put_action(&mut out, a);
                }
                out.patch_u16(start, out.len() - start);
            }
            stats_type10::FLOW
        }
        MultipartReply::Aggregate(a) => {
            out.u64(a.packet_count);
            out.u64(a.byte_count);
            out.u32(a.flow_count);
            out.zeros(4);
            stats_type10::AGGREGATE
        }
        MultipartReply::Table(tables) => {
            for t in tables {
                out.u8(t.table_id);
                out.zeros(3);
                out.string(&format!("table{}", t.table_id), 32);
                out.u32(w::ALL);
                out.u32(1_000_000);
                out.u32(t.active_count);
                out.u64(t.lookup_count);
                out.u64(t.matched_count);
            }
            stats_type10::TABLE
        }
        MultipartReply::PortStats(ports) => {
            for p in ports {
                let Ok(n) = port32_to_10(p.port_no) else { continue };
                out.u16(n);
                out.zeros(6);
                p.counters().iter().for_each(|v| out.u64(*v));
            }
            stats_type10::PORT
        }
        MultipartReply::Queue(qs) => {
            for q in qs {
                let Ok(n) = port32_to_10(q.port_no) else { continue };
                out.u16(n);
                out.zeros(2);
                out.u32(q.queue_id);
                out.u64(q.tx_bytes);
                out.u64(q.tx_packets);
                out.u64(q.tx_errors);
            }
            stats_type10::QUEUE
        }
        _ => return None,
    };
    Some((typ, out))
}

/// A switch's 1.3 message to a controller as its 1.0 message; `None` for
/// one 1.0 has no form of (the caller sends nothing). A FEATURES_REPLY
/// carries the ports in 1.0: the switch builds that one itself
/// ([`of10::FeaturesReply10`]).
pub fn message_to_10(m: &Message) -> Option<Message10> {
    Some(match m {
        Message::Hello(_) => Message10::Hello(Vec::new()),
        Message::EchoRequest(d) => Message10::EchoRequest(d.clone()),
        Message::EchoReply(d) => Message10::EchoReply(d.clone()),
        Message::GetConfigReply(c) => Message10::GetConfigReply { flags: c.flags, miss_send_len: c.miss_send_len },
        Message::BarrierReply => Message10::BarrierReply,
        Message::PacketIn(p) => {
            let in_port = p
                .matched
                .fields
                .iter()
                .find(|f| f.field == OxmField::InPort)
                .map_or(0, |f| port32_to_10(be(&f.value) as u32).unwrap_or(0));
            // 1.0 knows table misses and actions; an expired TTL (1.3's
            // own reason) is said as an action's.
            let reason = if p.reason == packet_in_reason::NO_MATCH {
                of10::packet_in_reason10::NO_MATCH
            } else {
                of10::packet_in_reason10::ACTION
            };
            Message10::PacketIn(PacketIn10 {
                buffer_id: p.buffer_id,
                total_len: p.total_len,
                in_port,
                reason,
                data: p.data.clone(),
            })
        }
        Message::FlowRemoved(f) => Message10::FlowRemoved(FlowRemoved10 {
            matched: match_to_10(&f.matched).ok()?,
            cookie: f.cookie,
            priority: f.priority,
            reason: f.reason.min(of10::flow_removed_reason10::DELETE),
            duration_sec: f.duration_sec,
            duration_nsec: f.duration_nsec,
            idle_timeout: f.idle_timeout,
            packet_count: f.packet_count,
            byte_count: f.byte_count,
        }),
        Message::PortStatus { reason, desc } => {
            Message10::PortStatus(PortStatus10 { reason: *reason, desc: phy_port_10(desc)? })
        }
        Message::MultipartReply { flags, body } => {
            let (typ, body) = stats_reply_10(body)?;
            Message10::StatsReply { typ, flags: *flags, body }
        }
        Message::QueueGetConfigReply { port, queues } => {
            Message10::QueueGetConfigReply { port: port32_to_10(*port).ok()?, queues: packet_queues_10(queues) }
        }
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_go_both_ways_and_fields_without_prerequisites_are_dropped() {
        let mut m = Match10 { wildcards: w::ALL, ..Match10::default() };
        m.wildcards &= !(w::IN_PORT | w::DL_TYPE | w::NW_PROTO | w::TP_DST);
        m.wildcards = (m.wildcards & !(0x3f << w::NW_DST_SHIFT)) | (8 << w::NW_DST_SHIFT);
        m.in_port = 3;
        m.dl_type = 0x0800;
        m.nw_proto = 6;
        m.nw_dst = 0x0a00_0205;
        m.tp_dst = 80;
        let m13 = match_from_10(&m);
        let fields: Vec<OxmField> = m13.fields.iter().map(|f| f.field).collect();
        assert_eq!(
            fields,
            vec![OxmField::InPort, OxmField::EthType, OxmField::Ipv4Dst, OxmField::IpProto, OxmField::TcpDst]
        );
        let dst = &m13.fields[2];
        assert_eq!((dst.value.as_slice(), dst.mask.as_deref()), (&[10, 0, 2, 0][..], Some(&[255, 255, 255, 0][..])));
        let back = match_to_10(&m13).unwrap();
        assert_eq!(match_from_10(&back), m13);
        // An IP address with no IPv4 ethertype: dropped.
        let mut bare = Match10 { wildcards: w::ALL & !(0x3f << w::NW_SRC_SHIFT), ..Match10::default() };
        bare.nw_src = 1;
        assert!(match_from_10(&bare).fields.is_empty());
        // IPv6: ToS, protocol and ports kept; a priority without an id.
        let mut v6 = Match10 {
            wildcards: w::ALL & !(w::DL_TYPE | w::NW_PROTO | w::TP_SRC | w::DL_VLAN_PCP),
            ..Match10::default()
        };
        (v6.dl_type, v6.nw_proto, v6.tp_src, v6.dl_vlan_pcp) = (0x86dd, 17, 53, 3);
        let m13 = match_from_10(&v6);
        let fields: Vec<OxmField> = m13.fields.iter().map(|f| f.field).collect();
        assert_eq!(
            fields,
            vec![OxmField::VlanVid, OxmField::VlanPcp, OxmField::EthType, OxmField::IpProto, OxmField::UdpSrc]
        );
        let back = match_to_10(&m13).unwrap();
        assert_eq!(back.wildcards & (w::DL_VLAN | w::DL_VLAN_PCP), w::DL_VLAN);
        assert_eq!(match_from_10(&back), m13);
    }

    #[test]
    fn transport_port_rewrites_need_the_protocol_and_errors_map_to_1_0() {
        let tcp = Match { fields: vec![oxm(OxmField::EthType, &[8, 0]), oxm(OxmField::IpProto, &[6])] };
        let a = actions_from_10(&[Action10::SetTpDst(8080)], &tcp).unwrap();
        assert_eq!(a, vec![Action::SetField(oxm(OxmField::TcpDst, &[0x1f, 0x90]))]);
        assert!(actions_from_10(&[Action10::SetTpDst(1)], &Match::default()).is_err());
        assert_eq!(error_to_10(error_type::BAD_REQUEST, bad_request::BUFFER_UNKNOWN), (1, 8));
        assert_eq!(error_to_10(error_type::FLOW_MOD_FAILED, flow_mod_failed::OVERLAP), (3, 1));
        assert_eq!(error_to_10(error_type::BAD_MATCH, 0), (3, 5));
    }
}
