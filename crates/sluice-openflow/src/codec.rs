//! OpenFlow 1.3 and 1.4 messages on the wire (OpenFlow 1.3.5 and 1.4.1,
//! section 7): the 8-byte header ([`peek_header`] for stream framing),
//! [`decode`] of exactly one whole message into a [`Message`] (with the
//! spec's error type and code for anything malformed, never a panic),
//! [`encode`] / [`encode_into`] of a [`Message`] with all padding in the
//! version asked for, and HELLO version negotiation ([`negotiate`]).
//!
//! The two versions share every message but these: 1.4 puts the speeds
//! and feature bits of a port, the error counters of port statistics and
//! a port mod's advertised features in properties, gives port and queue
//! statistics a length, sets the asynchronous configuration by
//! properties ([`Message::SetAsyncProps`]; its reply carries all twelve),
//! lets a table mod carry properties, and adds ROLE_STATUS, the bundle
//! messages and the table description, queue description and flow
//! monitor multiparts.

use crate::action::{get_actions, get_instructions, put_actions, put_instructions};
use crate::errors::{bad_request, error_type, OfError};
use crate::multipart::{
    get_bands, get_buckets, get_port, get_props, get_reply, get_request, put_bands, put_buckets, put_port, put_reply,
    put_request, reply_type, request_type,
};
use crate::oxm::{get_match, put_match};
use crate::types::*;
use crate::wire::{
    begin_message, close_message, end_message, open_message, put_error, put_switch_config, round8, Put, Reader,
};

/// `ofp_type`: the header's message type.
pub mod msg_type {
    pub const HELLO: u8 = 0;
    pub const ERROR: u8 = 1;
    pub const ECHO_REQUEST: u8 = 2;
    pub const ECHO_REPLY: u8 = 3;
    pub const EXPERIMENTER: u8 = 4;
    pub const FEATURES_REQUEST: u8 = 5;
    pub const FEATURES_REPLY: u8 = 6;
    pub const GET_CONFIG_REQUEST: u8 = 7;
    pub const GET_CONFIG_REPLY: u8 = 8;
    pub const SET_CONFIG: u8 = 9;
    pub const PACKET_IN: u8 = 10;
    pub const FLOW_REMOVED: u8 = 11;
    pub const PORT_STATUS: u8 = 12;
    pub const PACKET_OUT: u8 = 13;
    pub const FLOW_MOD: u8 = 14;
    pub const GROUP_MOD: u8 = 15;
    pub const PORT_MOD: u8 = 16;
    pub const TABLE_MOD: u8 = 17;
    pub const MULTIPART_REQUEST: u8 = 18;
    pub const MULTIPART_REPLY: u8 = 19;
    pub const BARRIER_REQUEST: u8 = 20;
    pub const BARRIER_REPLY: u8 = 21;
    pub const QUEUE_GET_CONFIG_REQUEST: u8 = 22;
    pub const QUEUE_GET_CONFIG_REPLY: u8 = 23;
    pub const ROLE_REQUEST: u8 = 24;
    pub const ROLE_REPLY: u8 = 25;
    pub const GET_ASYNC_REQUEST: u8 = 26;
    pub const GET_ASYNC_REPLY: u8 = 27;
    pub const SET_ASYNC: u8 = 28;
    pub const METER_MOD: u8 = 29;
    /// OpenFlow 1.4+.
    pub const ROLE_STATUS: u8 = 30;
    pub const TABLE_STATUS: u8 = 31;
    pub const REQUESTFORWARD: u8 = 32;
    pub const BUNDLE_CONTROL: u8 = 33;
    pub const BUNDLE_ADD_MESSAGE: u8 = 34;
}

/// `OFPHET_VERSIONBITMAP`.
pub const HELLO_ELEM_VERSIONBITMAP: u16 = 1;
/// Size of the OpenFlow header.
pub const HEADER_LEN: usize = 8;

/// `ofp_queue_properties`.
pub mod queue_prop_type {
    pub const MIN_RATE: u16 = 1;
    pub const MAX_RATE: u16 = 2;
    pub const EXPERIMENTER: u16 = 0xffff;
}

/// The OpenFlow header (`ofp_header`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub version: u8,
    pub typ: u8,
    pub length: u16,
    pub xid: u32,
}

/// The header at the start of `buf`, if it holds 8 bytes (for framing a
/// stream: a whole message is `length` bytes from there).
pub fn peek_header(buf: &[u8]) -> Option<Header> {
    let h = buf.get(..HEADER_LEN)?;
    Some(Header {
        version: h[0],
        typ: h[1],
        length: u16::from_be_bytes([h[2], h[3]]),
        xid: u32::from_be_bytes([h[4], h[5], h[6], h[7]]),
    })
}

impl Message {
    /// The message's `ofp_type`.
    pub fn type_code(&self) -> u8 {
        use msg_type as t;
        match self {
            Message::Hello(_) => t::HELLO,
            Message::Error(_) => t::ERROR,
            Message::EchoRequest(_) => t::ECHO_REQUEST,
            Message::EchoReply(_) => t::ECHO_REPLY,
            Message::Experimenter { .. } => t::EXPERIMENTER,
            Message::FeaturesRequest => t::FEATURES_REQUEST,
            Message::FeaturesReply(_) => t::FEATURES_REPLY,
            Message::GetConfigRequest => t::GET_CONFIG_REQUEST,
            Message::GetConfigReply(_) => t::GET_CONFIG_REPLY,
            Message::SetConfig(_) => t::SET_CONFIG,
            Message::PacketIn(_) => t::PACKET_IN,
            Message::FlowRemoved(_) => t::FLOW_REMOVED,
            Message::PortStatus { .. } => t::PORT_STATUS,
            Message::PacketOut(_) => t::PACKET_OUT,
            Message::FlowMod(_) => t::FLOW_MOD,
            Message::GroupMod(_) => t::GROUP_MOD,
            Message::PortMod(_) => t::PORT_MOD,
            Message::TableMod { .. } => t::TABLE_MOD,
            Message::MultipartRequest { .. } => t::MULTIPART_REQUEST,
            Message::MultipartReply { .. } => t::MULTIPART_REPLY,
            Message::BarrierRequest => t::BARRIER_REQUEST,
            Message::BarrierReply => t::BARRIER_REPLY,
            Message::QueueGetConfigRequest { .. } => t::QUEUE_GET_CONFIG_REQUEST,
            Message::QueueGetConfigReply { .. } => t::QUEUE_GET_CONFIG_REPLY,
            Message::RoleRequest(_) => t::ROLE_REQUEST,
            Message::RoleReply(_) => t::ROLE_REPLY,
            Message::GetAsyncRequest => t::GET_ASYNC_REQUEST,
            Message::GetAsyncReply(_) => t::GET_ASYNC_REPLY,
            Message::SetAsync(_) | Message::SetAsyncProps(_) => t::SET_ASYNC,
            Message::MeterMod(_) => t::METER_MOD,
            Message::RoleStatus { .. } => t::ROLE_STATUS,
            Message::BundleControl(_) => t::BUNDLE_CONTROL,
            Message::BundleAdd(_) => t::BUNDLE_ADD_MESSAGE,
        }
    }
}

fn req_err(code: u16, reason: String) -> OfError {
    OfError::new(error_type::BAD_REQUEST, code, reason)
}

/// Decodes exactly one whole message. `msg.len()` must equal the
/// header's length (`BAD_REQUEST / BAD_LEN` otherwise). Versions other
/// than 1.3 and 1.4 are accepted only for HELLO (a pre-1.3 HELLO has no
/// elements) and ERROR; anything else is `BAD_REQUEST / BAD_VERSION`.
pub fn decode(msg: &[u8]) -> Result<(Header, Message), OfError> {
    let (h, mut r) = open_message(
        msg,
        |h| h.version == OFP13 || h.version == OFP14 || h.typ == msg_type::HELLO || h.typ == msg_type::ERROR,
        |h| format!("version {}", h.version),
    )?;
    let m = decode_body(&h, &mut r)?;
    close_message(&r)?;
    Ok((h, m))
}

fn get_switch_config(r: &mut Reader<'_>) -> Result<SwitchConfig, OfError> {
    let (flags, miss_send_len) = crate::wire::get_switch_config(r)?;
    Ok(SwitchConfig { flags, miss_send_len })
}

fn get_role(r: &mut Reader<'_>) -> Result<Role, OfError> {
    let role = r.u32("role")?;
    r.skip(4, "pad")?;
    Ok(Role { role, generation_id: r.u64("generation_id")? })
}

fn get_async(r: &mut Reader<'_>) -> Result<AsyncConfig, OfError> {
    let mut w = [0u32; 6];
    for v in &mut w {
        *v = r.u32("async mask")?;
    }
    Ok(AsyncConfig {
        packet_in_mask: [w[0], w[1]],
        port_status_mask: [w[2], w[3]],
        flow_removed_mask: [w[4], w[5]],
        ..AsyncConfig::default()
    })
}

/// OpenFlow 1.4's asynchronous configuration properties: each 8 bytes
/// (type, length 8, mask); an experimenter one is refused.
fn get_async_props(r: &mut Reader<'_>) -> Result<Vec<AsyncProp>, OfError> {
    use crate::errors::bad_property as bp;
    let mut v = Vec::new();
    while !r.is_empty() {
        let typ = r.u16("property type")?;
        let len = r.u16("property length")?;
        if typ >= async_prop_type::EXPERIMENTER_SLAVE {
            return Err(OfError::new(error_type::BAD_PROPERTY, bp::BAD_EXPERIMENTER, "experimenter async property"));
        }
        if typ > async_prop_type::REQUESTFORWARD_MASTER {
            return Err(OfError::new(error_type::BAD_PROPERTY, bp::BAD_TYPE, format!("async property type {typ}")));
        }
        if len != 8 {
            return Err(OfError::new(error_type::BAD_PROPERTY, bp::BAD_LEN, format!("async property length {len}")));
        }
        v.push(AsyncProp { typ, mask: r.u32("mask")? });
    }
    Ok(v)
}

fn put_async_props(out: &mut Vec<u8>, props: &[AsyncProp]) {
    for p in props {
        out.u16(p.typ);
        out.u16(8);
        out.u32(p.mask);
    }
}

/// Properties of a 1.4 structure kept as their bytes: each a type and a
/// length of at least 4, padded to 8 bytes (the padding may end the
/// message short).
fn get_raw_props(r: &mut Reader<'_>) -> Result<Vec<u8>, OfError> {
    let all = r.rest();
    let mut p = Reader::new(all, (error_type::BAD_PROPERTY, crate::errors::bad_property::BAD_LEN));
    get_props(&mut p)?;
    Ok(all.to_vec())
}

fn get_hello(r: &mut Reader<'_>) -> Result<Vec<HelloElement>, OfError> {
    let mut v = Vec::new();
    while !r.is_empty() {
        let typ = r.u16("hello element type")?;
        let len = usize::from(r.u16("hello element length")?);
        if len < 4 {
            return Err(r.len_err(&format!("hello element length {len}")));
        }
        let mut b = r.sub(len - 4, "hello element")?;
        // The last element's padding may be left out.
        let pad = round8(len) - len;
        r.skip(pad.min(r.remaining()), "hello element padding")?;
        if typ == HELLO_ELEM_VERSIONBITMAP {
            if !b.remaining().is_multiple_of(4) {
                return Err(b.len_err("version bitmap not a multiple of 4 bytes"));
            }
            let mut words = Vec::with_capacity(b.remaining() / 4);
            while !b.is_empty() {
                words.push(b.u32("bitmap")?);
            }
            v.push(HelloElement::VersionBitmap(words));
        } else {
            v.push(HelloElement::Unknown { typ, data: b.rest().to_vec() });
        }
    }
    Ok(v)
}

fn get_queues(r: &mut Reader<'_>) -> Result<Vec<PacketQueue>, OfError> {
    let mut queues = Vec::new();
    while !r.is_empty() {
        let queue_id = r.u32("queue_id")?;
        let port = r.u32("port")?;
        let len = usize::from(r.u16("queue length")?);
        if len < 16 {
            return Err(r.len_err(&format!("queue length {len}")));
        }
        let mut b = r.sub(len - 10, "queue")?;
        b.skip(6, "pad")?;
        let mut properties = Vec::new();
        while !b.is_empty() {
            let typ = b.u16("queue property type")?;
            let plen = usize::from(b.u16("queue property length")?);
            if plen < 8 || !plen.is_multiple_of(8) {
                return Err(b.len_err(&format!("queue property length {plen}")));
            }
            let mut pb = b.sub(plen - 4, "queue property")?;
            pb.skip(4, "pad")?;
            properties.push(match typ {
                queue_prop_type::MIN_RATE | queue_prop_type::MAX_RATE => {
                    if plen != 16 {
                        return Err(pb.len_err(&format!("rate property length {plen}")));
                    }
                    let rate = pb.u16("rate")?;
                    if typ == queue_prop_type::MIN_RATE {
                        QueueProp::MinRate(rate)
                    } else {
                        QueueProp::MaxRate(rate)
                    }
                }
                queue_prop_type::EXPERIMENTER => {
                    let experimenter = pb.u32("experimenter")?;
                    pb.skip(4, "pad")?;
                    QueueProp::Experimenter { experimenter, data: pb.rest().to_vec() }
                }
                _ => return Err(req_err(bad_request::BAD_TYPE, format!("unknown queue property {typ}"))),
            });
        }
        queues.push(PacketQueue { queue_id, port, properties });
    }
    Ok(queues)
}

fn decode_body(h: &Header, r: &mut Reader<'_>) -> Result<Message, OfError> {
    use msg_type as t;
    Ok(match h.typ {
        t::HELLO => {
            if h.version < OFP13 {
                r.rest();
                Message::Hello(vec![])
            } else {
                Message::Hello(get_hello(r)?)
            }
        }
        t::ERROR => {
            let (typ, code, data) = crate::wire::get_error(r)?;
            Message::Error(ErrorMsg { typ, code, data })
        }
        t::ECHO_REQUEST => Message::EchoRequest(r.rest().to_vec()),
        t::ECHO_REPLY => Message::EchoReply(r.rest().to_vec()),
        t::EXPERIMENTER => Message::Experimenter {
            experimenter: r.u32("experimenter")?,
            exp_type: r.u32("exp_type")?,
            data: r.rest().to_vec(),
        },
        t::FEATURES_REQUEST => Message::FeaturesRequest,
        t::FEATURES_REPLY => {
            let datapath_id = r.u64("datapath_id")?;
            let n_buffers = r.u32("n_buffers")?;
            let n_tables = r.u8("n_tables")?;
            let auxiliary_id = r.u8("auxiliary_id")?;
            r.skip(2, "pad")?;
            let capabilities = r.u32("capabilities")?;
            r.skip(4, "reserved")?;
            Message::FeaturesReply(Features { datapath_id, n_buffers, n_tables, auxiliary_id, capabilities })
        }
        t::GET_CONFIG_REQUEST => Message::GetConfigRequest,
        t::GET_CONFIG_REPLY => Message::GetConfigReply(get_switch_config(r)?),
        t::SET_CONFIG => Message::SetConfig(get_switch_config(r)?),
        t::PACKET_IN => {
            let buffer_id = r.u32("buffer_id")?;
            let total_len = r.u16("total_len")?;
            let reason = r.u8("reason")?;
            let table_id = r.u8("table_id")?;
            let cookie = r.u64("cookie")?;
            let matched = get_match(r)?;
            r.skip(2, "pad")?;
            let data = r.rest().to_vec();
            Message::PacketIn(PacketIn { buffer_id, total_len, reason, table_id, cookie, matched, data })
        }
        t::FLOW_REMOVED => Message::FlowRemoved(FlowRemoved {
            cookie: r.u64("cookie")?,
            priority: r.u16("priority")?,
            reason: r.u8("reason")?,
            table_id: r.u8("table_id")?,
            duration_sec: r.u32("duration_sec")?,
            duration_nsec: r.u32("duration_nsec")?,
            idle_timeout: r.u16("idle_timeout")?,
            hard_timeout: r.u16("hard_timeout")?,
            packet_count: r.u64("packet_count")?,
            byte_count: r.u64("byte_count")?,
            matched: get_match(r)?,
        }),
        t::PORT_STATUS => {
            let reason = r.u8("reason")?;
            r.skip(7, "pad")?;
            Message::PortStatus { reason, desc: get_port(r, h.version)? }
        }
        t::PACKET_OUT => {
            let buffer_id = r.u32("buffer_id")?;
            let in_port = r.u32("in_port")?;
            let actions_len = usize::from(r.u16("actions_len")?);
            r.skip(6, "pad")?;
            let actions = get_actions(r.bytes(actions_len, "actions")?)?;
            Message::PacketOut(PacketOut { buffer_id, in_port, actions, data: r.rest().to_vec() })
        }
        t::FLOW_MOD => {
            let cookie = r.u64("cookie")?;
            let cookie_mask = r.u64("cookie_mask")?;
            let table_id = r.u8("table_id")?;
            let command = r.u8("command")?;
            let idle_timeout = r.u16("idle_timeout")?;
            let hard_timeout = r.u16("hard_timeout")?;
            let priority = r.u16("priority")?;
            let buffer_id = r.u32("buffer_id")?;
            let out_port = r.u32("out_port")?;
            let out_group = r.u32("out_group")?;
            let flags = r.u16("flags")?;
            r.skip(2, "pad")?;
            let matched = get_match(r)?;
            let instructions = get_instructions(r.rest())?;
            Message::FlowMod(FlowMod {
                cookie,
                cookie_mask,
                table_id,
                command,
                idle_timeout,
                hard_timeout,
                priority,
                buffer_id,
                out_port,
                out_group,
                flags,
                matched,
                instructions,
            })
        }
        t::GROUP_MOD => {
            let command = r.u16("command")?;
            let typ = r.u8("type")?;
            r.skip(1, "pad")?;
            let group_id = r.u32("group_id")?;
            Message::GroupMod(GroupMod { command, typ, group_id, buckets: get_buckets(r)? })
        }
        t::PORT_MOD => {
            let port_no = r.u32("port_no")?;
            r.skip(4, "pad")?;
            let hw_addr = r.array("hw_addr")?;
            r.skip(2, "pad")?;
            let config = r.u32("config")?;
            let mask = r.u32("mask")?;
            let advertise = if h.version >= OFP14 { get_port_mod_props(r)? } else { r.u32("advertise")? };
            if h.version < OFP14 {
                r.skip(4, "pad")?;
            }
            Message::PortMod(PortMod { port_no, hw_addr, config, mask, advertise })
        }
        t::TABLE_MOD => {
            let table_id = r.u8("table_id")?;
            r.skip(3, "pad")?;
            let config = r.u32("config")?;
            if h.version >= OFP14 {
                // Eviction and vacancy properties: framing checked; the
                // config bits that would turn them on are refused.
                get_raw_props(r)?;
            }
            Message::TableMod { table_id, config }
        }
        t::MULTIPART_REQUEST | t::MULTIPART_REPLY => {
            let typ = r.u16("multipart type")?;
            let flags = r.u16("flags")?;
            r.skip(4, "pad")?;
            if h.typ == t::MULTIPART_REQUEST {
                Message::MultipartRequest { flags, body: get_request(typ, r, h.version)? }
            } else {
                Message::MultipartReply { flags, body: get_reply(typ, r, h.version)? }
            }
        }
        t::BARRIER_REQUEST => Message::BarrierRequest,
        t::BARRIER_REPLY => Message::BarrierReply,
        t::QUEUE_GET_CONFIG_REQUEST => {
            let port = r.u32("port")?;
            r.skip(4, "pad")?;
            Message::QueueGetConfigRequest { port }
        }
        t::QUEUE_GET_CONFIG_REPLY => {
            let port = r.u32("port")?;
            r.skip(4, "pad")?;
            Message::QueueGetConfigReply { port, queues: get_queues(r)? }
        }
        t::ROLE_REQUEST => Message::RoleRequest(get_role(r)?),
        t::ROLE_REPLY => Message::RoleReply(get_role(r)?),
        t::GET_ASYNC_REQUEST => Message::GetAsyncRequest,
        t::GET_ASYNC_REPLY if h.version >= OFP14 => {
            let mut a = AsyncConfig::default();
            for p in get_async_props(r)? {
                a.apply(p);
            }
            Message::GetAsyncReply(a)
        }
        t::SET_ASYNC if h.version >= OFP14 => Message::SetAsyncProps(get_async_props(r)?),
        t::GET_ASYNC_REPLY => Message::GetAsyncReply(get_async(r)?),
        t::SET_ASYNC => Message::SetAsync(get_async(r)?),
        t::METER_MOD => {
            let command = r.u16("command")?;
            let flags = r.u16("flags")?;
            let meter_id = r.u32("meter_id")?;
            Message::MeterMod(MeterMod { command, flags, meter_id, bands: get_bands(r)? })
        }
        t::ROLE_STATUS if h.version >= OFP14 => {
            let role = r.u32("role")?;
            let reason = r.u8("reason")?;
            r.skip(3, "pad")?;
            let generation_id = r.u64("generation_id")?;
            get_raw_props(r)?;
            Message::RoleStatus { role, reason, generation_id }
        }
        t::BUNDLE_CONTROL if h.version >= OFP14 => {
            let bundle_id = r.u32("bundle_id")?;
            let typ = r.u16("type")?;
            let flags = r.u16("flags")?;
            Message::BundleControl(BundleControl { bundle_id, typ, flags, properties: get_raw_props(r)? })
        }
        t::BUNDLE_ADD_MESSAGE if h.version >= OFP14 => {
            let bundle_id = r.u32("bundle_id")?;
            r.skip(2, "pad")?;
            let flags = r.u16("flags")?;
            let rest = r.rest();
            let inner = peek_header(rest).ok_or_else(|| r.len_err("bundle add: no message"))?;
            let len = usize::from(inner.length);
            if len < HEADER_LEN || len > rest.len() {
                return Err(r.len_err(&format!("bundle add: message length {len} of {}", rest.len())));
            }
            let message = rest[..len].to_vec();
            let mut r = Reader::new(&rest[len..], (error_type::BAD_REQUEST, bad_request::BAD_LEN));
            let r = &mut r;
            // The message is padded to 8 bytes before any property.
            let pad = round8(message.len()) - message.len();
            r.skip(pad.min(r.remaining()), "bundle add: padding")?;
            Message::BundleAdd(BundleAdd { bundle_id, flags, message, properties: get_raw_props(r)? })
        }
        other => return Err(req_err(bad_request::BAD_TYPE, format!("unknown message type {other}"))),
    })
}

/// OpenFlow 1.4's port mod properties: the advertised features of the
/// ethernet one (0 without); optical or experimenter ones are refused.
fn get_port_mod_props(r: &mut Reader<'_>) -> Result<u32, OfError> {
    use crate::errors::bad_property as bp;
    let mut advertise = 0;
    while !r.is_empty() {
        let typ = r.u16("property type")?;
        let len = r.u16("property length")?;
        match (typ, len) {
            (0, 8) => advertise = r.u32("advertise")?,
            (0, _) => return Err(OfError::new(error_type::BAD_PROPERTY, bp::BAD_LEN, "ethernet property length")),
            _ => return Err(OfError::new(error_type::BAD_PROPERTY, bp::BAD_TYPE, format!("port mod property {typ}"))),
        }
    }
    Ok(advertise)
}

/// How many bytes of a packet a `PACKET_IN` with `matched` carries at
/// most: a message's length is 16 bits (a longer packet, a 64 KB
/// offloaded segment, goes cut to this, `total_len` saying how long it
/// was).
pub fn packet_in_room(matched: &Match) -> usize {
    let mut m = Vec::new();
    put_match(&mut m, matched);
    // Header 8, buffer_id 4, total_len 2, reason 1, table_id 1, cookie 8,
    // the match, 2 bytes of padding.
    usize::from(u16::MAX) - 24 - m.len() - 2
}

/// Encodes one message into a new buffer.
pub fn encode(msg: &Message, version: u8, xid: u32) -> Vec<u8> {
    let mut out = Vec::new();
    encode_into(msg, version, xid, &mut out);
    out
}

fn put_role(out: &mut Vec<u8>, r: &Role) {
    out.u32(r.role);
    out.zeros(4);
    out.u64(r.generation_id);
}

fn put_async(out: &mut Vec<u8>, a: &AsyncConfig) {
    for v in a.packet_in_mask.iter().chain(&a.port_status_mask).chain(&a.flow_removed_mask) {
        out.u32(*v);
    }
}

fn put_packet_out(out: &mut Vec<u8>, p: &PacketOut) {
    out.u32(p.buffer_id);
    out.u32(p.in_port);
    let at = out.len();
    out.u16(0);
    out.zeros(6);
    let as_ = out.len();
    put_actions(out, &p.actions);
    out.patch_u16(at, out.len() - as_);
    out.extend_from_slice(&p.data);
}

fn put_flow_mod(out: &mut Vec<u8>, f: &FlowMod) {
    out.u64(f.cookie);
    out.u64(f.cookie_mask);
    out.u8(f.table_id);
    out.u8(f.command);
    out.u16(f.idle_timeout);
    out.u16(f.hard_timeout);
    out.u16(f.priority);
    out.u32(f.buffer_id);
    out.u32(f.out_port);
    out.u32(f.out_group);
    out.u16(f.flags);
    out.zeros(2);
    put_match(out, &f.matched);
    put_instructions(out, &f.instructions);
}

/// Appends a FLOW_MOD of `f`, as [`encode_into`] writes
/// `Message::FlowMod(f)`, without the message around it (a sender that
/// keeps one flow-mod and changes a few fields between sends).
pub fn encode_flow_mod_into(f: &FlowMod, version: u8, xid: u32, out: &mut Vec<u8>) {
    let start = begin_message(out, version, msg_type::FLOW_MOD, xid);
    put_flow_mod(out, f);
    end_message(out, start);
}

/// Appends a PACKET_OUT of `p`, as [`encode_into`] writes
/// `Message::PacketOut(p)`.
pub fn encode_packet_out_into(p: &PacketOut, version: u8, xid: u32, out: &mut Vec<u8>) {
    let start = begin_message(out, version, msg_type::PACKET_OUT, xid);
    put_packet_out(out, p);
    end_message(out, start);
}

/// Appends one message to `out` (the header's length covers exactly the
/// appended bytes). `version` is [`OFP13`] or [`OFP14`] (the 1.4-only
/// messages are written as they are whatever it says), or older for
/// HELLO and ERROR to an older peer. Messages are expected to fit in
/// 65535 bytes.
pub fn encode_into(msg: &Message, version: u8, xid: u32, out: &mut Vec<u8>) {
    let start = begin_message(out, version, msg.type_code(), xid);
    match msg {
        Message::Hello(elems) => {
            for e in elems {
                let es = out.len();
                match e {
                    HelloElement::VersionBitmap(words) => {
                        out.u16(HELLO_ELEM_VERSIONBITMAP);
                        out.u16(0);
                        words.iter().for_each(|w| out.u32(*w));
                    }
                    HelloElement::Unknown { typ, data } => {
                        out.u16(*typ);
                        out.u16(0);
                        out.extend_from_slice(data);
                    }
                }
                out.patch_u16(es + 2, out.len() - es);
                out.pad8_from(es);
            }
        }
        Message::Error(e) => put_error(out, e.typ, e.code, &e.data),
        Message::EchoRequest(d) | Message::EchoReply(d) => out.extend_from_slice(d),
        Message::Experimenter { experimenter, exp_type, data } => {
            out.u32(*experimenter);
            out.u32(*exp_type);
            out.extend_from_slice(data);
        }
        Message::FeaturesRequest
        | Message::GetConfigRequest
        | Message::BarrierRequest
        | Message::BarrierReply
        | Message::GetAsyncRequest => {}
        Message::FeaturesReply(f) => {
            out.u64(f.datapath_id);
            out.u32(f.n_buffers);
            out.u8(f.n_tables);
            out.u8(f.auxiliary_id);
            out.zeros(2);
            out.u32(f.capabilities);
            out.zeros(4);
        }
        Message::GetConfigReply(c) | Message::SetConfig(c) => put_switch_config(out, c.flags, c.miss_send_len),
        Message::PacketIn(p) => {
            out.u32(p.buffer_id);
            out.u16(p.total_len);
            out.u8(p.reason);
            out.u8(p.table_id);
            out.u64(p.cookie);
            put_match(out, &p.matched);
            out.zeros(2);
            out.extend_from_slice(&p.data);
        }
        Message::FlowRemoved(f) => {
            out.u64(f.cookie);
            out.u16(f.priority);
            out.u8(f.reason);
            out.u8(f.table_id);
            out.u32(f.duration_sec);
            out.u32(f.duration_nsec);
            out.u16(f.idle_timeout);
            out.u16(f.hard_timeout);
            out.u64(f.packet_count);
            out.u64(f.byte_count);
            put_match(out, &f.matched);
        }
        Message::PortStatus { reason, desc } => {
            out.u8(*reason);
            out.zeros(7);
            put_port(out, desc, version);
        }
        Message::PacketOut(p) => put_packet_out(out, p),
        Message::FlowMod(f) => put_flow_mod(out, f),
        Message::GroupMod(g) => {
            out.u16(g.command);
            out.u8(g.typ);
            out.zeros(1);
            out.u32(g.group_id);
            put_buckets(out, &g.buckets);
        }
        Message::PortMod(p) => {
            out.u32(p.port_no);
            out.zeros(4);
            out.extend_from_slice(&p.hw_addr);
            out.zeros(2);
            out.u32(p.config);
            out.u32(p.mask);
            if version >= OFP14 {
                out.u16(0);
                out.u16(8);
            }
            out.u32(p.advertise);
            if version < OFP14 {
                out.zeros(4);
            }
        }
        Message::TableMod { table_id, config } => {
            out.u8(*table_id);
            out.zeros(3);
            out.u32(*config);
        }
        Message::MultipartRequest { flags, body } => {
            out.u16(request_type(body));
            out.u16(*flags);
            out.zeros(4);
            put_request(out, body);
        }
        Message::MultipartReply { flags, body } => {
            out.u16(reply_type(body));
            out.u16(*flags);
            out.zeros(4);
            put_reply(out, body, version);
        }
        Message::QueueGetConfigRequest { port } => {
            out.u32(*port);
            out.zeros(4);
        }
        Message::QueueGetConfigReply { port, queues } => {
            out.u32(*port);
            out.zeros(4);
            for q in queues {
                let qs = out.len();
                out.u32(q.queue_id);
                out.u32(q.port);
                out.u16(0);
                out.zeros(6);
                for p in &q.properties {
                    let ps = out.len();
                    match p {
                        QueueProp::MinRate(rate) | QueueProp::MaxRate(rate) => {
                            let typ = if matches!(p, QueueProp::MinRate(_)) {
                                queue_prop_type::MIN_RATE
                            } else {
                                queue_prop_type::MAX_RATE
                            };
                            out.u16(typ);
                            out.u16(16);
                            out.zeros(4);
                            out.u16(*rate);
                            out.zeros(6);
                        }
                        QueueProp::Experimenter { experimenter, data } => {
                            out.u16(queue_prop_type::EXPERIMENTER);
                            out.u16(0);
                            out.zeros(4);
                            out.u32(*experimenter);
                            out.zeros(4);
                            out.extend_from_slice(data);
                            out.pad8_from(ps);
                            out.patch_u16(ps + 2, out.len() - ps);
                        }
                    }
                }
                out.patch_u16(qs + 8, out.len() - qs);
            }
        }
        Message::RoleRequest(r) | Message::RoleReply(r) => put_role(out, r),
        Message::GetAsyncReply(a) | Message::SetAsync(a) if version >= OFP14 => put_async_props(out, &a.props()),
        Message::GetAsyncReply(a) | Message::SetAsync(a) => put_async(out, a),
        Message::SetAsyncProps(props) => put_async_props(out, props),
        Message::MeterMod(m) => {
            out.u16(m.command);
            out.u16(m.flags);
            out.u32(m.meter_id);
            put_bands(out, &m.bands);
        }
        Message::RoleStatus { role, reason, generation_id } => {
            out.u32(*role);
            out.u8(*reason);
            out.zeros(3);
            out.u64(*generation_id);
        }
        Message::BundleControl(b) => {
            out.u32(b.bundle_id);
            out.u16(b.typ);
            out.u16(b.flags);
            out.extend_from_slice(&b.properties);
        }
        Message::BundleAdd(b) => {
            out.u32(b.bundle_id);
            out.zeros(2);
            out.u16(b.flags);
            out.extend_from_slice(&b.message);
            if !b.properties.is_empty() {
                let pad = round8(b.message.len()) - b.message.len();
                out.zeros(pad);
                out.extend_from_slice(&b.properties);
            }
        }
    }
    end_message(out, start);
}

/// Whether a HELLO's version bitmap (the first one among `elements`)
/// has bit `version` set. `false` without a bitmap.
pub fn version_bitmap_supports(elements: &[HelloElement], version: u8) -> bool {
    elements
        .iter()
        .find_map(|e| match e {
            HelloElement::VersionBitmap(words) => Some(words),
            HelloElement::Unknown { .. } => None,
        })
        .is_some_and(|words| words.get(usize::from(version / 32)).is_some_and(|w| w >> (version % 32) & 1 == 1))
}

/// The version to speak with a peer (OpenFlow 1.3.5, 6.3.1): with a
/// version bitmap in the peer's HELLO, the highest version set both
/// there and in `ours`; without, the lower of the peer's header version
/// and our highest, if we support it. `None`: no common version (answer
/// with HELLO_FAILED / INCOMPATIBLE).
pub fn negotiate(peer_header_version: u8, elements: &[HelloElement], ours: &[u8]) -> Option<u8> {
    let has_bitmap = elements.iter().any(|e| matches!(e, HelloElement::VersionBitmap(_)));
    if has_bitmap {
        ours.iter().copied().filter(|&v| version_bitmap_supports(elements, v)).max()
    } else {
        let highest = ours.iter().copied().max()?;
        let v = peer_header_version.min(highest);
        ours.contains(&v).then_some(v)
    }
}
