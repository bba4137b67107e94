//! OpenFlow 1.0 on the wire (OpenFlow 1.0.0, wire version 0x01): the
//! messages a controller exchanges with a 1.0 switch ([`Message10`]), the
//! 40-byte `ofp_match` ([`Match10`]), the 1.0 actions ([`Action10`]) and
//! ports ([`PhyPort10`]). [`decode10`] reads exactly one whole message,
//! with the 1.0 error type and code for anything malformed and never a
//! panic; [`encode10`] / [`encode10_into`] write one with all padding;
//! [`error10`] writes the ERROR answering a bad request. Statistics
//! bodies and queue descriptions are kept as raw bytes.

use crate::errors::{OfError, ERROR_DATA_LEN};
use crate::wire::{
    begin_message, close_message, end_message, get_error, get_switch_config, open_message, put_error,
    put_switch_config, Put, Reader,
};

pub use crate::types::OFP10;

/// `OFP_NO_BUFFER`: the packet is not buffered on the switch.
pub const NO_BUFFER10: u32 = 0xffff_ffff;

/// Size of `ofp_match`.
pub const MATCH10_LEN: usize = 40;
/// Size of `ofp_phy_port`.
pub const PHY_PORT10_LEN: usize = 48;
/// Size of a port name field (`OFP_MAX_PORT_NAME_LEN`), NUL included.
pub const PORT_NAME10_LEN: usize = 16;

/// `ofp_type` of OpenFlow 1.0: the header's message type.
pub mod msg_type10 {
    pub const HELLO: u8 = 0;
    pub const ERROR: u8 = 1;
    pub const ECHO_REQUEST: u8 = 2;
    pub const ECHO_REPLY: u8 = 3;
    pub const VENDOR: u8 = 4;
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
    pub const PORT_MOD: u8 = 15;
    pub const STATS_REQUEST: u8 = 16;
    pub const STATS_REPLY: u8 = 17;
    pub const BARRIER_REQUEST: u8 = 18;
    pub const BARRIER_REPLY: u8 = 19;
    pub const QUEUE_GET_CONFIG_REQUEST: u8 = 20;
    pub const QUEUE_GET_CONFIG_REPLY: u8 = 21;
}

/// Port numbers of OpenFlow 1.0 (`ofp_port`): the highest physical port
/// and the reserved ports.
pub mod port10 {
    /// Highest number of a physical port.
    pub const MAX: u16 = 0xff00;
    pub const IN_PORT: u16 = 0xfff8;
    pub const TABLE: u16 = 0xfff9;
    pub const NORMAL: u16 = 0xfffa;
    pub const FLOOD: u16 = 0xfffb;
    pub const ALL: u16 = 0xfffc;
    pub const CONTROLLER: u16 = 0xfffd;
    pub const LOCAL: u16 = 0xfffe;
    /// Not a port: "any port" in flow deletions and statistics requests.
    pub const NONE: u16 = 0xffff;
}

/// `ofp_flow_wildcards`: the bits of [`Match10::wildcards`]. A set bit
/// makes the field match anything. The IP addresses have a 6-bit count
/// each of low bits to ignore instead (32 and above: the whole address).
pub mod wildcards {
    pub const IN_PORT: u32 = 1 << 0;
    pub const DL_VLAN: u32 = 1 << 1;
    pub const DL_SRC: u32 = 1 << 2;
    pub const DL_DST: u32 = 1 << 3;
    pub const DL_TYPE: u32 = 1 << 4;
    pub const NW_PROTO: u32 = 1 << 5;
    pub const TP_SRC: u32 = 1 << 6;
    pub const TP_DST: u32 = 1 << 7;
    /// Where the count of ignored low bits of `nw_src` starts.
    pub const NW_SRC_SHIFT: u32 = 8;
    /// The bits holding that count.
    pub const NW_SRC_MASK: u32 = 0x3f << NW_SRC_SHIFT;
    /// `nw_src` wholly wildcarded.
    pub const NW_SRC_ALL: u32 = 32 << NW_SRC_SHIFT;
    /// Where the count of ignored low bits of `nw_dst` starts.
    pub const NW_DST_SHIFT: u32 = 14;
    /// The bits holding that count.
    pub const NW_DST_MASK: u32 = 0x3f << NW_DST_SHIFT;
    /// `nw_dst` wholly wildcarded.
    pub const NW_DST_ALL: u32 = 32 << NW_DST_SHIFT;
    pub const DL_VLAN_PCP: u32 = 1 << 20;
    pub const NW_TOS: u32 = 1 << 21;
    /// Every field wildcarded.
    pub const ALL: u32 = (1 << 22) - 1;
}

/// `ofp_action_type` of OpenFlow 1.0.
pub mod action_type10 {
    pub const OUTPUT: u16 = 0;
    pub const SET_VLAN_VID: u16 = 1;
    pub const SET_VLAN_PCP: u16 = 2;
    pub const STRIP_VLAN: u16 = 3;
    pub const SET_DL_SRC: u16 = 4;
    pub const SET_DL_DST: u16 = 5;
    pub const SET_NW_SRC: u16 = 6;
    pub const SET_NW_DST: u16 = 7;
    pub const SET_NW_TOS: u16 = 8;
    pub const SET_TP_SRC: u16 = 9;
    pub const SET_TP_DST: u16 = 10;
    pub const ENQUEUE: u16 = 11;
    pub const VENDOR: u16 = 0xffff;
}

/// `ofp_flow_mod_command`.
pub mod flow_mod_command10 {
    pub const ADD: u16 = 0;
    pub const MODIFY: u16 = 1;
    pub const MODIFY_STRICT: u16 = 2;
    pub const DELETE: u16 = 3;
    pub const DELETE_STRICT: u16 = 4;
}

/// `ofp_flow_mod_flags`.
pub mod flow_mod_flags10 {
    pub const SEND_FLOW_REM: u16 = 1 << 0;
    pub const CHECK_OVERLAP: u16 = 1 << 1;
    pub const EMERG: u16 = 1 << 2;
}

/// `ofp_stats_types`: the `typ` of a statistics request or reply.
pub mod stats_type10 {
    pub const DESC: u16 = 0;
    pub const FLOW: u16 = 1;
    pub const AGGREGATE: u16 = 2;
    pub const TABLE: u16 = 3;
    pub const PORT: u16 = 4;
    pub const QUEUE: u16 = 5;
    pub const VENDOR: u16 = 0xffff;
}

/// `ofp_packet_in_reason`.
pub mod packet_in_reason10 {
    pub const NO_MATCH: u8 = 0;
    pub const ACTION: u8 = 1;
}

/// `ofp_flow_removed_reason`.
pub mod flow_removed_reason10 {
    pub const IDLE_TIMEOUT: u8 = 0;
    pub const HARD_TIMEOUT: u8 = 1;
    pub const DELETE: u8 = 2;
}

/// `ofp_port_reason`: why a PORT_STATUS was sent.
pub mod port_reason10 {
    pub const ADD: u8 = 0;
    pub const DELETE: u8 = 1;
    pub const MODIFY: u8 = 2;
}

/// `ofp_error_type` of OpenFlow 1.0. The codes of each type are in the
/// modules beside it (`bad_request10`, ...), also reachable from here
/// under the spec's names (`error_type10::bad_request::BAD_LEN`).
pub mod error_type10 {
    pub const HELLO_FAILED: u16 = 0;
    pub const BAD_REQUEST: u16 = 1;
    pub const BAD_ACTION: u16 = 2;
    pub const FLOW_MOD_FAILED: u16 = 3;
    pub const PORT_MOD_FAILED: u16 = 4;
    pub const QUEUE_OP_FAILED: u16 = 5;

    pub use super::bad_action10 as bad_action;
    pub use super::bad_request10 as bad_request;
    pub use super::flow_mod_failed10 as flow_mod_failed;
    pub use super::hello_failed10 as hello_failed;
    pub use super::port_mod_failed10 as port_mod_failed;
    pub use super::queue_op_failed10 as queue_op_failed;
}

/// `ofp_hello_failed_code` of OpenFlow 1.0.
pub mod hello_failed10 {
    pub const INCOMPATIBLE: u16 = 0;
    pub const EPERM: u16 = 1;
}

/// `ofp_bad_request_code` of OpenFlow 1.0.
pub mod bad_request10 {
    pub const BAD_VERSION: u16 = 0;
    pub const BAD_TYPE: u16 = 1;
    pub const BAD_STAT: u16 = 2;
    pub const BAD_VENDOR: u16 = 3;
    pub const BAD_SUBTYPE: u16 = 4;
    pub const EPERM: u16 = 5;
    pub const BAD_LEN: u16 = 6;
    pub const BUFFER_EMPTY: u16 = 7;
    pub const BUFFER_UNKNOWN: u16 = 8;
}

/// `ofp_bad_action_code` of OpenFlow 1.0.
pub mod bad_action10 {
    pub const BAD_TYPE: u16 = 0;
    pub const BAD_LEN: u16 = 1;
    pub const BAD_VENDOR: u16 = 2;
    pub const BAD_VENDOR_TYPE: u16 = 3;
    pub const BAD_OUT_PORT: u16 = 4;
    pub const BAD_ARGUMENT: u16 = 5;
    pub const EPERM: u16 = 6;
    pub const TOO_MANY: u16 = 7;
    pub const BAD_QUEUE: u16 = 8;
}

/// `ofp_flow_mod_failed_code` of OpenFlow 1.0.
pub mod flow_mod_failed10 {
    pub const ALL_TABLES_FULL: u16 = 0;
    pub const OVERLAP: u16 = 1;
    pub const EPERM: u16 = 2;
    pub const BAD_EMERG_TIMEOUT: u16 = 3;
    pub const BAD_COMMAND: u16 = 4;
    pub const UNSUPPORTED: u16 = 5;
}

/// `ofp_port_mod_failed_code` of OpenFlow 1.0.
pub mod port_mod_failed10 {
    pub const BAD_PORT: u16 = 0;
    pub const BAD_HW_ADDR: u16 = 1;
}

/// `ofp_queue_op_failed_code` of OpenFlow 1.0.
pub mod queue_op_failed10 {
    pub const BAD_PORT: u16 = 0;
    pub const BAD_QUEUE: u16 = 1;
    pub const EPERM: u16 = 2;
}

/// `ofp_match` (40 bytes): the fields of a 1.0 flow, each ignored when
/// its bit in `wildcards` is set (see [`wildcards`]). Numbers are
/// host-order; the pad bytes are not kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Match10 {
    pub wildcards: u32,
    pub in_port: u16,
    pub dl_src: [u8; 6],
    pub dl_dst: [u8; 6],
    pub dl_vlan: u16,
    pub dl_vlan_pcp: u8,
    pub dl_type: u16,
    pub nw_tos: u8,
    pub nw_proto: u8,
    pub nw_src: u32,
    pub nw_dst: u32,
    pub tp_src: u16,
    pub tp_dst: u16,
}

impl Match10 {
    /// A match with every field wildcarded (all values zero): matches
    /// every packet.
    pub fn all() -> Match10 {
        Match10 { wildcards: wildcards::ALL, ..Match10::default() }
    }
}

/// A 1.0 action (`ofp_action_*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action10 {
    /// Send out `port`; to the controller, at most `max_len` bytes.
    Output {
        port: u16,
        max_len: u16,
    },
    SetVlanVid(u16),
    SetVlanPcp(u8),
    StripVlan,
    SetDlSrc([u8; 6]),
    SetDlDst([u8; 6]),
    SetNwSrc(u32),
    SetNwDst(u32),
    SetNwTos(u8),
    SetTpSrc(u16),
    SetTpDst(u16),
    /// Send out `port` through its queue `queue_id`.
    Enqueue {
        port: u16,
        queue_id: u32,
    },
    /// A vendor action: the vendor id and the bytes after it. Encoding
    /// zero-pads `data` to make the action a multiple of 8 bytes long;
    /// decoding keeps that padding in `data`.
    Vendor {
        vendor: u32,
        data: Vec<u8>,
    },
}

impl Action10 {
    /// The action's `ofp_action_type`.
    pub fn type_code(&self) -> u16 {
        use action_type10 as t;
        match self {
            Action10::Output { .. } => t::OUTPUT,
            Action10::SetVlanVid(_) => t::SET_VLAN_VID,
            Action10::SetVlanPcp(_) => t::SET_VLAN_PCP,
            Action10::StripVlan => t::STRIP_VLAN,
            Action10::SetDlSrc(_) => t::SET_DL_SRC,
            Action10::SetDlDst(_) => t::SET_DL_DST,
            Action10::SetNwSrc(_) => t::SET_NW_SRC,
            Action10::SetNwDst(_) => t::SET_NW_DST,
            Action10::SetNwTos(_) => t::SET_NW_TOS,
            Action10::SetTpSrc(_) => t::SET_TP_SRC,
            Action10::SetTpDst(_) => t::SET_TP_DST,
            Action10::Enqueue { .. } => t::ENQUEUE,
            Action10::Vendor { .. } => t::VENDOR,
        }
    }
}

/// `ofp_phy_port` (48 bytes): a port's number, address, name (at most 15
/// bytes on the wire; a longer one is cut when encoded) and its config,
/// state and feature bitmaps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PhyPort10 {
    pub port_no: u16,
    pub hw_addr: [u8; 6],
    pub name: String,
    pub config: u32,
    pub state: u32,
    pub curr: u32,
    pub advertised: u32,
    pub supported: u32,
    pub peer: u32,
}

/// `ofp_switch_features`: the switch's datapath id, buffers, tables,
/// capability and action bitmaps, and its ports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeaturesReply10 {
    pub datapath_id: u64,
    pub n_buffers: u32,
    pub n_tables: u8,
    pub capabilities: u32,
    pub actions: u32,
    pub ports: Vec<PhyPort10>,
}

/// `ofp_packet_in`: a packet (or its first bytes, `total_len` long in
/// all) sent to the controller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PacketIn10 {
    pub buffer_id: u32,
    pub total_len: u16,
    pub in_port: u16,
    pub reason: u8,
    pub data: Vec<u8>,
}

/// `ofp_packet_out`: actions to apply to a buffered packet
/// (`buffer_id`) or to `data` (with `buffer_id` [`NO_BUFFER10`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PacketOut10 {
    pub buffer_id: u32,
    pub in_port: u16,
    pub actions: Vec<Action10>,
    pub data: Vec<u8>,
}

/// `ofp_flow_mod`: add, change or delete flows (`command`, see
/// [`flow_mod_command10`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FlowMod10 {
    pub matched: Match10,
    pub cookie: u64,
    pub command: u16,
    pub idle_timeout: u16,
    pub hard_timeout: u16,
    pub priority: u16,
    pub buffer_id: u32,
    pub out_port: u16,
    pub flags: u16,
    pub actions: Vec<Action10>,
}

/// `ofp_flow_removed`: a flow that expired or was deleted, with its
/// counters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowRemoved10 {
    pub matched: Match10,
    pub cookie: u64,
    pub priority: u16,
    pub reason: u8,
    pub duration_sec: u32,
    pub duration_nsec: u32,
    pub idle_timeout: u16,
    pub packet_count: u64,
    pub byte_count: u64,
}

/// `ofp_port_status`: a port was added, deleted or changed
/// (`reason`, see [`port_reason10`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortStatus10 {
    pub reason: u8,
    pub desc: PhyPort10,
}

/// `ofp_port_mod`: change the `config` bits selected by `mask` of the
/// port with this number and hardware address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortMod10 {
    pub port_no: u16,
    pub hw_addr: [u8; 6],
    pub config: u32,
    pub mask: u32,
    pub advertise: u32,
}

/// An OpenFlow 1.0 message (the body after the header).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message10 {
    /// HELLO, with whatever bytes follow the header.
    Hello(Vec<u8>),
    /// ERROR: type, code and data (usually the start of the request).
    Error {
        typ: u16,
        code: u16,
        data: Vec<u8>,
    },
    EchoRequest(Vec<u8>),
    EchoReply(Vec<u8>),
    Vendor {
        vendor: u32,
        data: Vec<u8>,
    },
    FeaturesRequest,
    FeaturesReply(FeaturesReply10),
    GetConfigRequest,
    GetConfigReply {
        flags: u16,
        miss_send_len: u16,
    },
    SetConfig {
        flags: u16,
        miss_send_len: u16,
    },
    PacketIn(PacketIn10),
    FlowRemoved(FlowRemoved10),
    PortStatus(PortStatus10),
    PacketOut(PacketOut10),
    FlowMod(FlowMod10),
    PortMod(PortMod10),
    /// A statistics request: its type (see [`stats_type10`]), flags and
    /// raw body.
    StatsRequest {
        typ: u16,
        flags: u16,
        body: Vec<u8>,
    },
    /// A statistics reply: its type, flags (`OFPSF_REPLY_MORE` = 1) and
    /// raw body.
    StatsReply {
        typ: u16,
        flags: u16,
        body: Vec<u8>,
    },
    BarrierRequest,
    BarrierReply,
    QueueGetConfigRequest {
        port: u16,
    },
    /// The port's queues as raw `ofp_packet_queue` bytes.
    QueueGetConfigReply {
        port: u16,
        queues: Vec<u8>,
    },
}

impl Message10 {
    /// The message's `ofp_type` (see [`msg_type10`]).
    pub fn type_code(&self) -> u8 {
        use msg_type10 as t;
        match self {
            Message10::Hello(_) => t::HELLO,
            Message10::Error { .. } => t::ERROR,
            Message10::EchoRequest(_) => t::ECHO_REQUEST,
            Message10::EchoReply(_) => t::ECHO_REPLY,
            Message10::Vendor { .. } => t::VENDOR,
            Message10::FeaturesRequest => t::FEATURES_REQUEST,
            Message10::FeaturesReply(_) => t::FEATURES_REPLY,
            Message10::GetConfigRequest => t::GET_CONFIG_REQUEST,
            Message10::GetConfigReply { .. } => t::GET_CONFIG_REPLY,
            Message10::SetConfig { .. } => t::SET_CONFIG,
            Message10::PacketIn(_) => t::PACKET_IN,
            Message10::FlowRemoved(_) => t::FLOW_REMOVED,
            Message10::PortStatus(_) => t::PORT_STATUS,
            Message10::PacketOut(_) => t::PACKET_OUT,
            Message10::FlowMod(_) => t::FLOW_MOD,
            Message10::PortMod(_) => t::PORT_MOD,
            Message10::StatsRequest { .. } => t::STATS_REQUEST,
            Message10::StatsReply { .. } => t::STATS_REPLY,
            Message10::BarrierRequest => t::BARRIER_REQUEST,
            Message10::BarrierReply => t::BARRIER_REPLY,
            Message10::QueueGetConfigRequest { .. } => t::QUEUE_GET_CONFIG_REQUEST,
            Message10::QueueGetConfigReply { .. } => t::QUEUE_GET_CONFIG_REPLY,
        }
    }
}

fn req_err(code: u16, reason: String) -> OfError {
    OfError::new(error_type10::BAD_REQUEST, code, reason)
}

fn act_err(code: u16, reason: String) -> OfError {
    OfError::new(error_type10::BAD_ACTION, code, reason)
}

/// Decodes exactly one whole OpenFlow 1.0 message into its xid and
/// value. The header's version must be [`OFP10`] (`BAD_REQUEST /
/// BAD_VERSION` otherwise) and its length `msg.len()`; a body shorter or
/// longer than its message's layout is `BAD_REQUEST / BAD_LEN`, an
/// unknown type `BAD_REQUEST / BAD_TYPE`, a malformed action
/// `BAD_ACTION / BAD_LEN` or `BAD_TYPE`. Never panics.
pub fn decode10(msg: &[u8]) -> Result<(u32, Message10), OfError> {
    let (h, mut r) = open_message(msg, |h| h.version == OFP10, |h| format!("version {}, not OpenFlow 1.0", h.version))?;
    let m = decode_body(h.typ, &mut r)?;
    close_message(&r)?;
    Ok((h.xid, m))
}

pub(crate) fn get_match(r: &mut Reader<'_>) -> Result<Match10, OfError> {
    let wildcards = r.u32("wildcards")?;
    let in_port = r.u16("in_port")?;
    let dl_src = r.array("dl_src")?;
    let dl_dst = r.array("dl_dst")?;
    let dl_vlan = r.u16("dl_vlan")?;
    let dl_vlan_pcp = r.u8("dl_vlan_pcp")?;
    r.skip(1, "pad")?;
    let dl_type = r.u16("dl_type")?;
    let nw_tos = r.u8("nw_tos")?;
    let nw_proto = r.u8("nw_proto")?;
    r.skip(2, "pad")?;
    Ok(Match10 {
        wildcards,
        in_port,
        dl_src,
        dl_dst,
        dl_vlan,
        dl_vlan_pcp,
        dl_type,
        nw_tos,
        nw_proto,
        nw_src: r.u32("nw_src")?,
        nw_dst: r.u32("nw_dst")?,
        tp_src: r.u16("tp_src")?,
        tp_dst: r.u16("tp_dst")?,
    })
}

fn get_port(r: &mut Reader<'_>) -> Result<PhyPort10, OfError> {
    Ok(PhyPort10 {
        port_no: r.u16("port_no")?,
        hw_addr: r.array("hw_addr")?,
        name: r.string(PORT_NAME10_LEN, "port name")?,
        config: r.u32("config")?,
        state: r.u32("state")?,
        curr: r.u32("curr")?,
        advertised: r.u32("advertised")?,
        supported: r.u32("supported")?,
        peer: r.u32("peer")?,
    })
}

/// Reads a whole action list (all of `buf`).
pub(crate) fn get_actions(buf: &[u8]) -> Result<Vec<Action10>, OfError> {
    let mut r = Reader::new(buf, (error_type10::BAD_ACTION, bad_action10::BAD_LEN));
    let mut v = Vec::new();
    while !r.is_empty() {
        v.push(get_action(&mut r)?);
    }
    Ok(v)
}

fn get_action(r: &mut Reader<'_>) -> Result<Action10, OfError> {
    use action_type10 as t;
    let typ = r.u16("action type")?;
    let len = usize::from(r.u16("action length")?);
    if len < 8 || !len.is_multiple_of(8) {
        return Err(act_err(bad_action10::BAD_LEN, format!("action {typ}: length {len}")));
    }
    let mut b = r.sub(len - 4, "action body")?;
    let want = match typ {
        t::SET_DL_SRC | t::SET_DL_DST | t::ENQUEUE => 16,
        t::VENDOR => len,
        t::OUTPUT..=t::SET_TP_DST => 8,
        _ => return Err(act_err(bad_action10::BAD_TYPE, format!("unknown action type {typ}"))),
    };
    if len != want {
        return Err(act_err(bad_action10::BAD_LEN, format!("action {typ}: length {len}, not {want}")));
    }
    Ok(match typ {
        t::OUTPUT => Action10::Output { port: b.u16("port")?, max_len: b.u16("max_len")? },
        t::SET_VLAN_VID => Action10::SetVlanVid(b.u16("vlan_vid")?),
        t::SET_VLAN_PCP => Action10::SetVlanPcp(b.u8("vlan_pcp")?),
        t::STRIP_VLAN => Action10::StripVlan,
        t::SET_DL_SRC => Action10::SetDlSrc(b.array("dl_addr")?),
        t::SET_DL_DST => Action10::SetDlDst(b.array("dl_addr")?),
        t::SET_NW_SRC => Action10::SetNwSrc(b.u32("nw_addr")?),
        t::SET_NW_DST => Action10::SetNwDst(b.u32("nw_addr")?),
        t::SET_NW_TOS => Action10::SetNwTos(b.u8("nw_tos")?),
        t::SET_TP_SRC => Action10::SetTpSrc(b.u16("tp_port")?),
        t::SET_TP_DST => Action10::SetTpDst(b.u16("tp_port")?),
        t::ENQUEUE => {
            let port = b.u16("port")?;
            b.skip(6, "pad")?;
            Action10::Enqueue { port, queue_id: b.u32("queue_id")? }
        }
        _ => Action10::Vendor { vendor: b.u32("vendor")?, data: b.rest().to_vec() },
    })
}

fn decode_body(typ: u8, r: &mut Reader<'_>) -> Result<Message10, OfError> {
    use msg_type10 as t;
    Ok(match typ {
        t::HELLO => Message10::Hello(r.rest().to_vec()),
        t::ERROR => {
            let (typ, code, data) = get_error(r)?;
            Message10::Error { typ, code, data }
        }
        t::ECHO_REQUEST => Message10::EchoRequest(r.rest().to_vec()),
        t::ECHO_REPLY => Message10::EchoReply(r.rest().to_vec()),
        t::VENDOR => Message10::Vendor { vendor: r.u32("vendor")?, data: r.rest().to_vec() },
        t::FEATURES_REQUEST => Message10::FeaturesRequest,
        t::FEATURES_REPLY => {
            let datapath_id = r.u64("datapath_id")?;
            let n_buffers = r.u32("n_buffers")?;
            let n_tables = r.u8("n_tables")?;
            r.skip(3, "pad")?;
            let capabilities = r.u32("capabilities")?;
            let actions = r.u32("actions")?;
            if !r.remaining().is_multiple_of(PHY_PORT10_LEN) {
                return Err(r.len_err(&format!("{} bytes of ports, not a multiple of 48", r.remaining())));
            }
            let mut ports = Vec::with_capacity(r.remaining() / PHY_PORT10_LEN);
            while !r.is_empty() {
                ports.push(get_port(r)?);
            }
            Message10::FeaturesReply(FeaturesReply10 { datapath_id, n_buffers, n_tables, capabilities, actions, ports })
        }
        t::GET_CONFIG_REQUEST => Message10::GetConfigRequest,
        t::GET_CONFIG_REPLY => {
            let (flags, miss_send_len) = get_switch_config(r)?;
            Message10::GetConfigReply { flags, miss_send_len }
        }
        t::SET_CONFIG => {
            let (flags, miss_send_len) = get_switch_config(r)?;
            Message10::SetConfig { flags, miss_send_len }
        }
        t::PACKET_IN => {
            let buffer_id = r.u32("buffer_id")?;
            let total_len = r.u16("total_len")?;
            let in_port = r.u16("in_port")?;
            let reason = r.u8("reason")?;
            r.skip(1, "pad")?;
            Message10::PacketIn(PacketIn10 { buffer_id, total_len, in_port, reason, data: r.rest().to_vec() })
        }
        t::FLOW_REMOVED => {
            let matched = get_match(r)?;
            let cookie = r.u64("cookie")?;
            let priority = r.u16("priority")?;
            let reason = r.u8("reason")?;
            r.skip(1, "pad")?;
            let duration_sec = r.u32("duration_sec")?;
            let duration_nsec = r.u32("duration_nsec")?;
            let idle_timeout = r.u16("idle_timeout")?;
            r.skip(2, "pad")?;
            Message10::FlowRemoved(FlowRemoved10 {
                matched,
                cookie,
                priority,
                reason,
                duration_sec,
                duration_nsec,
                idle_timeout,
                packet_count: r.u64("packet_count")?,
                byte_count: r.u64("byte_count")?,
            })
        }
        t::PORT_STATUS => {
            let reason = r.u8("reason")?;
            r.skip(7, "pad")?;
            Message10::PortStatus(PortStatus10 { reason, desc: get_port(r)? })
        }
        t::PACKET_OUT => {
            let buffer_id = r.u32("buffer_id")?;
            let in_port = r.u16("in_port")?;
            let actions_len = usize::from(r.u16("actions_len")?);
            let actions = get_actions(r.bytes(actions_len, "actions")?)?;
            Message10::PacketOut(PacketOut10 { buffer_id, in_port, actions, data: r.rest().to_vec() })
        }
        t::FLOW_MOD => {
            let matched = get_match(r)?;
            let cookie = r.u64("cookie")?;
            let command = r.u16("command")?;
            let idle_timeout = r.u16("idle_timeout")?;
            let hard_timeout = r.u16("hard_timeout")?;
            let priority = r.u16("priority")?;
            let buffer_id = r.u32("buffer_id")?;
            let out_port = r.u16("out_port")?;
            let flags = r.u16("flags")?;
            let actions = get_actions(r.rest())?;
            Message10::FlowMod(FlowMod10 {
                matched,
                cookie,
                command,
                idle_timeout,
                hard_timeout,
                priority,
                buffer_id,
                out_port,
                flags,
                actions,
            })
        }
        t::PORT_MOD => {
            let port_no = r.u16("port_no")?;
            let hw_addr = r.array("hw_addr")?;
            let config = r.u32("config")?;
            let mask = r.u32("mask")?;
            let advertise = r.u32("advertise")?;
            r.skip(4, "pad")?;
            Message10::PortMod(PortMod10 { port_no, hw_addr, config, mask, advertise })
        }
        t::STATS_REQUEST | t::STATS_REPLY => {
            let styp = r.u16("stats type")?;
            let flags = r.u16("flags")?;
            let body = r.rest().to_vec();
            if typ == t::STATS_REQUEST {
                Message10::StatsRequest { typ: styp, flags, body }
            } else {
                Message10::StatsReply { typ: styp, flags, body }
            }
        }
        t::BARRIER_REQUEST => Message10::BarrierRequest,
        t::BARRIER_REPLY => Message10::BarrierReply,
        t::QUEUE_GET_CONFIG_REQUEST => {
            let port = r.u16("port")?;
            r.skip(2, "pad")?;
            Message10::QueueGetConfigRequest { port }
        }
        t::QUEUE_GET_CONFIG_REPLY => {
            let port = r.u16("port")?;
            r.skip(6, "pad")?;
            Message10::QueueGetConfigReply { port, queues: r.rest().to_vec() }
        }
        other => return Err(req_err(bad_request10::BAD_TYPE, format!("unknown OpenFlow 1.0 message type {other}"))),
    })
}

pub(crate) fn put_match(out: &mut Vec<u8>, m: &Match10) {
    out.u32(m.wildcards);
    out.u16(m.in_port);
    out.extend_from_slice(&m.dl_src);
    out.extend_from_slice(&m.dl_dst);
    out.u16(m.dl_vlan);
    out.u8(m.dl_vlan_pcp);
    out.zeros(1);
    out.u16(m.dl_type);
    out.u8(m.nw_tos);
    out.u8(m.nw_proto);
    out.zeros(2);
    out.u32(m.nw_src);
    out.u32(m.nw_dst);
    out.u16(m.tp_src);
    out.u16(m.tp_dst);
}

pub(crate) fn put_port(out: &mut Vec<u8>, p: &PhyPort10) {
    out.u16(p.port_no);
    out.extend_from_slice(&p.hw_addr);
    out.string(&p.name, PORT_NAME10_LEN);
    for v in [p.config, p.state, p.curr, p.advertised, p.supported, p.peer] {
        out.u32(v);
    }
}

pub(crate) fn put_action(out: &mut Vec<u8>, a: &Action10) {
    let start = out.len();
    out.u16(a.type_code());
    out.u16(0);
    match a {
        Action10::Output { port, max_len } => {
            out.u16(*port);
            out.u16(*max_len);
        }
        Action10::SetVlanVid(v) | Action10::SetTpSrc(v) | Action10::SetTpDst(v) => {
            out.u16(*v);
            out.zeros(2);
        }
        Action10::SetVlanPcp(v) | Action10::SetNwTos(v) => {
            out.u8(*v);
            out.zeros(3);
        }
        Action10::StripVlan => out.zeros(4),
        Action10::SetDlSrc(mac) | Action10::SetDlDst(mac) => {
            out.extend_from_slice(mac);
            out.zeros(6);
        }
        Action10::SetNwSrc(a) | Action10::SetNwDst(a) => out.u32(*a),
        Action10::Enqueue { port, queue_id } => {
            out.u16(*port);
            out.zeros(6);
            out.u32(*queue_id);
        }
        Action10::Vendor { vendor, data } => {
            out.u32(*vendor);
            out.extend_from_slice(data);
        }
    }
    out.pad8_from(start);
    out.patch_u16(start + 2, out.len() - start);
}

fn put_packet_out(out: &mut Vec<u8>, p: &PacketOut10) {
    out.u32(p.buffer_id);
    out.u16(p.in_port);
    let at = out.len();
    out.u16(0);
    let actions_start = out.len();
    for a in &p.actions {
        put_action(out, a);
    }
    out.patch_u16(at, out.len() - actions_start);
    out.extend_from_slice(&p.data);
}

fn put_flow_mod(out: &mut Vec<u8>, f: &FlowMod10) {
    put_match(out, &f.matched);
    out.u64(f.cookie);
    out.u16(f.command);
    out.u16(f.idle_timeout);
    out.u16(f.hard_timeout);
    out.u16(f.priority);
    out.u32(f.buffer_id);
    out.u16(f.out_port);
    out.u16(f.flags);
    for a in &f.actions {
        put_action(out, a);
    }
}

/// Appends a FLOW_MOD of `f`, as [`encode10_into`] writes
/// `Message10::FlowMod(f)` (for a sender that reuses one flow-mod).
pub fn encode_flow_mod10_into(f: &FlowMod10, xid: u32, out: &mut Vec<u8>) {
    let start = begin_message(out, OFP10, msg_type10::FLOW_MOD, xid);
    put_flow_mod(out, f);
    end_message(out, start);
}

/// Appends a PACKET_OUT of `p`, as [`encode10_into`] writes
/// `Message10::PacketOut(p)`.
pub fn encode_packet_out10_into(p: &PacketOut10, xid: u32, out: &mut Vec<u8>) {
    let start = begin_message(out, OFP10, msg_type10::PACKET_OUT, xid);
    put_packet_out(out, p);
    end_message(out, start);
}

/// Encodes one OpenFlow 1.0 message into a new buffer (see
/// [`encode10_into`]).
pub fn encode10(msg: &Message10, xid: u32) -> Vec<u8> {
    let mut out = Vec::new();
    encode10_into(msg, xid, &mut out);
    out
}

/// Appends one OpenFlow 1.0 message to `out`: the header (version
/// [`OFP10`], the message's type, its length covering exactly the
/// appended bytes, `xid`) and the body with all the spec's padding.
/// Messages are expected to fit in 65535 bytes.
pub fn encode10_into(msg: &Message10, xid: u32, out: &mut Vec<u8>) {
    let start = begin_message(out, OFP10, msg.type_code(), xid);
    match msg {
        Message10::Hello(d) | Message10::EchoRequest(d) | Message10::EchoReply(d) => out.extend_from_slice(d),
        Message10::Error { typ, code, data } => put_error(out, *typ, *code, data),
        Message10::Vendor { vendor, data } => {
            out.u32(*vendor);
            out.extend_from_slice(data);
        }
        Message10::FeaturesRequest
        | Message10::GetConfigRequest
        | Message10::BarrierRequest
        | Message10::BarrierReply => {}
        Message10::FeaturesReply(f) => {
            out.u64(f.datapath_id);
            out.u32(f.n_buffers);
            out.u8(f.n_tables);
            out.zeros(3);
            out.u32(f.capabilities);
            out.u32(f.actions);
            for p in &f.ports {
                put_port(out, p);
            }
        }
        Message10::GetConfigReply { flags, miss_send_len } | Message10::SetConfig { flags, miss_send_len } => {
            put_switch_config(out, *flags, *miss_send_len)
        }
        Message10::PacketIn(p) => {
            out.u32(p.buffer_id);
            out.u16(p.total_len);
            out.u16(p.in_port);
            out.u8(p.reason);
            out.zeros(1);
            out.extend_from_slice(&p.data);
        }
        Message10::FlowRemoved(f) => {
            put_match(out, &f.matched);
            out.u64(f.cookie);
            out.u16(f.priority);
            out.u8(f.reason);
            out.zeros(1);
            out.u32(f.duration_sec);
            out.u32(f.duration_nsec);
            out.u16(f.idle_timeout);
            out.zeros(2);
            out.u64(f.packet_count);
            out.u64(f.byte_count);
        }
        Message10::PortStatus(p) => {
            out.u8(p.reason);
            out.zeros(7);
            put_port(out, &p.desc);
        }
        Message10::PacketOut(p) => put_packet_out(out, p),
        Message10::FlowMod(f) => put_flow_mod(out, f),
        Message10::PortMod(p) => {
            out.u16(p.port_no);
            out.extend_from_slice(&p.hw_addr);
            out.u32(p.config);
            out.u32(p.mask);
            out.u32(p.advertise);
            out.zeros(4);
        }
        Message10::StatsRequest { typ, flags, body } | Message10::StatsReply { typ, flags, body } => {
            out.u16(*typ);
            out.u16(*flags);
            out.extend_from_slice(body);
        }
        Message10::QueueGetConfigRequest { port } => {
            out.u16(*port);
            out.zeros(2);
        }
        Message10::QueueGetConfigReply { port, queues } => {
            out.u16(*port);
            out.zeros(6);
            out.extend_from_slice(queues);
        }
    }
    end_message(out, start);
}

/// The whole OpenFlow 1.0 ERROR message (header included, with `xid`)
/// answering `request` (the offending message as received) with `e`'s
/// type and code, quoting the request's first 64 bytes (all of it when
/// shorter). `e` should carry 1.0 numbers, as [`decode10`]'s errors do.
pub fn error10(e: &OfError, request: &[u8], xid: u32) -> Vec<u8> {
    let n = request.len().min(ERROR_DATA_LEN);
    encode10(&Message10::Error { typ: e.typ, code: e.code, data: request[..n].to_vec() }, xid)
}
