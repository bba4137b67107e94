//! The OpenFlow 1.3 messages and structures as Rust values (OpenFlow
//! 1.3.5, section 7). Numbers (ports, ids, flags) are host-order integers;
//! OXM values and masks are the wire's big-endian bytes. Lists keep their
//! wire order.

/// OpenFlow 1.3's version byte.
pub const OFP13: u8 = 4;
/// OpenFlow 1.4's version byte: the same messages with properties in
/// ports, port and queue statistics, port and table mods and the
/// asynchronous configuration, and bundles, flow monitors, role status,
/// table and queue descriptions (OpenFlow 1.4.1, section 7).
pub const OFP14: u8 = 5;
/// OpenFlow 1.0's version byte (the 1.0 messages are in [`crate::of10`]).
pub const OFP10: u8 = 1;

/// Reserved port numbers (`ofp_port_no`).
pub mod port {
    /// Highest number of a physical or logical port.
    pub const MAX: u32 = 0xffff_ff00;
    pub const IN_PORT: u32 = 0xffff_fff8;
    pub const TABLE: u32 = 0xffff_fff9;
    pub const NORMAL: u32 = 0xffff_fffa;
    pub const FLOOD: u32 = 0xffff_fffb;
    pub const ALL: u32 = 0xffff_fffc;
    pub const CONTROLLER: u32 = 0xffff_fffd;
    pub const LOCAL: u32 = 0xffff_fffe;
    /// "Any port": a wildcard in requests (`OFPP_ANY`).
    pub const ANY: u32 = 0xffff_ffff;
}

/// Reserved group numbers.
pub mod group {
    pub const MAX: u32 = 0xffff_ff00;
    pub const ALL: u32 = 0xffff_fffc;
    pub const ANY: u32 = 0xffff_ffff;
}

/// Reserved meter numbers.
pub mod meter {
    pub const MAX: u32 = 0xffff_0000;
    pub const SLOWPATH: u32 = 0xffff_fffd;
    pub const CONTROLLER: u32 = 0xffff_fffe;
    pub const ALL: u32 = 0xffff_ffff;
}

/// Table ids: the highest and "all tables".
pub mod table {
    pub const MAX: u8 = 0xfe;
    pub const ALL: u8 = 0xff;
}

/// `OFP_NO_BUFFER`.
pub const NO_BUFFER: u32 = 0xffff_ffff;
/// `OFPCML_NO_BUFFER`: send the whole packet to the controller.
pub const CONTROLLER_MAX_LEN_NO_BUFFER: u16 = 0xffff;

/// An OXM TLV class.
pub mod oxm_class {
    pub const NXM_0: u16 = 0x0000;
    pub const NXM_1: u16 = 0x0001;
    pub const OPENFLOW_BASIC: u16 = 0x8000;
    pub const EXPERIMENTER: u16 = 0xffff;
}

/// An OXM field: a field of the OpenFlow basic class (`OFPXMT_OFB_*`), or
/// one of another class kept as its class and field number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OxmField {
    InPort,
    InPhyPort,
    Metadata,
    EthDst,
    EthSrc,
    EthType,
    VlanVid,
    VlanPcp,
    IpDscp,
    IpEcn,
    IpProto,
    Ipv4Src,
    Ipv4Dst,
    TcpSrc,
    TcpDst,
    UdpSrc,
    UdpDst,
    SctpSrc,
    SctpDst,
    Icmpv4Type,
    Icmpv4Code,
    ArpOp,
    ArpSpa,
    ArpTpa,
    ArpSha,
    ArpTha,
    Ipv6Src,
    Ipv6Dst,
    Ipv6Flabel,
    Icmpv6Type,
    Icmpv6Code,
    Ipv6NdTarget,
    Ipv6NdSll,
    Ipv6NdTll,
    MplsLabel,
    MplsTc,
    MplsBos,
    PbbIsid,
    TunnelId,
    Ipv6Exthdr,
    /// A field of another class (NXM, or an experimenter's when `class`
    /// is `0xffff`, whose experimenter id is then the first 4 bytes of
    /// the value).
    Other {
        class: u16,
        field: u8,
    },
}

/// One OXM TLV: a field, its value and, when masked, its mask (both as
/// big-endian bytes of the field's length).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Oxm {
    pub field: OxmField,
    pub value: Vec<u8>,
    pub mask: Option<Vec<u8>>,
}

/// A flow match (`ofp_match` of type `OFPMT_OXM`): its OXM TLVs in order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Match {
    pub fields: Vec<Oxm>,
}

/// An action (`ofp_action_*`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Action {
    Output { port: u32, max_len: u16 },
    CopyTtlOut,
    CopyTtlIn,
    SetMplsTtl(u8),
    DecMplsTtl,
    PushVlan(u16),
    PopVlan,
    PushMpls(u16),
    PopMpls(u16),
    SetQueue(u32),
    Group(u32),
    SetNwTtl(u8),
    DecNwTtl,
    SetField(Oxm),
    PushPbb(u16),
    PopPbb,
    Experimenter { experimenter: u32, data: Vec<u8> },
}

/// An instruction (`ofp_instruction_*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Instruction {
    GotoTable(u8),
    WriteMetadata { metadata: u64, mask: u64 },
    WriteActions(Vec<Action>),
    ApplyActions(Vec<Action>),
    ClearActions,
    Meter(u32),
    Experimenter { experimenter: u32, data: Vec<u8> },
}

/// A port's description (`ofp_port`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PortDesc {
    pub port_no: u32,
    pub hw_addr: [u8; 6],
    /// Up to 15 bytes on the wire (NUL-padded to 16).
    pub name: String,
    pub config: u32,
    pub state: u32,
    pub curr: u32,
    pub advertised: u32,
    pub supported: u32,
    pub peer: u32,
    pub curr_speed: u32,
    pub max_speed: u32,
}

/// `ofp_port_config` bits.
pub mod port_config {
    pub const PORT_DOWN: u32 = 1 << 0;
    pub const NO_RECV: u32 = 1 << 2;
    pub const NO_FWD: u32 = 1 << 5;
    pub const NO_PACKET_IN: u32 = 1 << 6;
}

/// `ofp_port_state` bits.
pub mod port_state {
    pub const LINK_DOWN: u32 = 1 << 0;
    pub const BLOCKED: u32 = 1 << 1;
    pub const LIVE: u32 = 1 << 2;
}

/// The switch configuration (`ofp_switch_config`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SwitchConfig {
    pub flags: u16,
    pub miss_send_len: u16,
}

/// `FEATURES_REPLY` (`ofp_switch_features`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Features {
    pub datapath_id: u64,
    pub n_buffers: u32,
    pub n_tables: u8,
    pub auxiliary_id: u8,
    pub capabilities: u32,
}

/// `OFPIEH_*` bits of the IPV6_EXTHDR pseudo-field (`ofp_ipv6exthdr_flags`).
pub mod ipv6_exthdr {
    pub const NONEXT: u16 = 1 << 0;
    pub const ESP: u16 = 1 << 1;
    pub const AUTH: u16 = 1 << 2;
    pub const DEST: u16 = 1 << 3;
    pub const FRAG: u16 = 1 << 4;
    pub const ROUTER: u16 = 1 << 5;
    pub const HOP: u16 = 1 << 6;
    pub const UNREP: u16 = 1 << 7;
    pub const UNSEQ: u16 = 1 << 8;
}

/// `ofp_config_flags`: what the switch does with IP fragments.
pub mod config_flags {
    /// No special handling: fragments go through the tables.
    pub const FRAG_NORMAL: u16 = 0;
    /// Fragments are dropped.
    pub const FRAG_DROP: u16 = 1;
    /// Fragments are reassembled (not supported by Sluice).
    pub const FRAG_REASM: u16 = 2;
    pub const FRAG_MASK: u16 = 3;
}

/// `ofp_capabilities` bits.
pub mod capabilities {
    pub const FLOW_STATS: u32 = 1 << 0;
    pub const TABLE_STATS: u32 = 1 << 1;
    pub const PORT_STATS: u32 = 1 << 2;
    pub const GROUP_STATS: u32 = 1 << 3;
    pub const IP_REASM: u32 = 1 << 5;
    pub const QUEUE_STATS: u32 = 1 << 6;
    pub const PORT_BLOCKED: u32 = 1 << 8;
}

/// A HELLO element (`ofp_hello_elem_*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HelloElement {
    /// The versions the sender supports: bit `v` of word `v / 32`.
    VersionBitmap(Vec<u32>),
    /// An element of an unknown type, kept (and ignored).
    Unknown { typ: u16, data: Vec<u8> },
}

/// An `ERROR` message's body (`ofp_error_msg`); experimenter errors carry
/// `typ` 0xffff, their `exp_type` as `code` and the experimenter id as the
/// first 4 bytes of `data`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorMsg {
    pub typ: u16,
    pub code: u16,
    /// At least the first 64 bytes of the failed request (or text for
    /// HELLO_FAILED).
    pub data: Vec<u8>,
}

/// `PACKET_IN` (`ofp_packet_in`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PacketIn {
    pub buffer_id: u32,
    pub total_len: u16,
    pub reason: u8,
    pub table_id: u8,
    pub cookie: u64,
    pub matched: Match,
    pub data: Vec<u8>,
}

/// `ofp_packet_in_reason`.
pub mod packet_in_reason {
    pub const NO_MATCH: u8 = 0;
    /// 1.4's APPLY_ACTION.
    pub const ACTION: u8 = 1;
    pub const INVALID_TTL: u8 = 2;
    /// OpenFlow 1.4+ (ACTION to older peers): output to the controller
    /// from the action set, a group's bucket, a packet-out.
    pub const ACTION_SET: u8 = 3;
    pub const GROUP: u8 = 4;
    pub const PACKET_OUT: u8 = 5;

    /// The reason as a peer of `version` knows it: 1.4's refinements of
    /// ACTION are ACTION before 1.4.
    pub fn for_version(reason: u8, version: u8) -> u8 {
        if version < crate::OFP14 && (ACTION_SET..=PACKET_OUT).contains(&reason) {
            ACTION
        } else {
            reason
        }
    }
}

/// `FLOW_REMOVED` (`ofp_flow_removed`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowRemoved {
    pub cookie: u64,
    pub priority: u16,
    pub reason: u8,
    pub table_id: u8,
    pub duration_sec: u32,
    pub duration_nsec: u32,
    pub idle_timeout: u16,
    pub hard_timeout: u16,
    pub packet_count: u64,
    pub byte_count: u64,
    pub matched: Match,
}

/// `ofp_flow_removed_reason`.
pub mod flow_removed_reason {
    pub const IDLE_TIMEOUT: u8 = 0;
    pub const HARD_TIMEOUT: u8 = 1;
    pub const DELETE: u8 = 2;
    pub const GROUP_DELETE: u8 = 3;
    pub const METER_DELETE: u8 = 4;
}

/// `ofp_port_reason`.
pub mod port_reason {
    pub const ADD: u8 = 0;
    pub const DELETE: u8 = 1;
    pub const MODIFY: u8 = 2;
}

/// `PACKET_OUT` (`ofp_packet_out`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PacketOut {
    pub buffer_id: u32,
    pub in_port: u32,
    pub actions: Vec<Action>,
    pub data: Vec<u8>,
}

/// `FLOW_MOD` (`ofp_flow_mod`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowMod {
    pub cookie: u64,
    pub cookie_mask: u64,
    pub table_id: u8,
    pub command: u8,
    pub idle_timeout: u16,
    pub hard_timeout: u16,
    pub priority: u16,
    pub buffer_id: u32,
    pub out_port: u32,
    pub out_group: u32,
    pub flags: u16,
    pub matched: Match,
    pub instructions: Vec<Instruction>,
}

/// `ofp_flow_mod_command`.
pub mod flow_mod_command {
    pub const ADD: u8 = 0;
    pub const MODIFY: u8 = 1;
    pub const MODIFY_STRICT: u8 = 2;
    pub const DELETE: u8 = 3;
    pub const DELETE_STRICT: u8 = 4;
}

/// `ofp_flow_mod_flags`.
pub mod flow_mod_flags {
    pub const SEND_FLOW_REM: u16 = 1 << 0;
    pub const CHECK_OVERLAP: u16 = 1 << 1;
    pub const RESET_COUNTS: u16 = 1 << 2;
    pub const NO_PKT_COUNTS: u16 = 1 << 3;
    pub const NO_BYT_COUNTS: u16 = 1 << 4;
}

/// A group bucket (`ofp_bucket`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bucket {
    pub weight: u16,
    pub watch_port: u32,
    pub watch_group: u32,
    pub actions: Vec<Action>,
}

/// `GROUP_MOD` (`ofp_group_mod`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMod {
    pub command: u16,
    pub typ: u8,
    pub group_id: u32,
    pub buckets: Vec<Bucket>,
}

/// `ofp_group_mod_command`.
pub mod group_mod_command {
    pub const ADD: u16 = 0;
    pub const MODIFY: u16 = 1;
    pub const DELETE: u16 = 2;
}

/// `ofp_group_type`.
pub mod group_type {
    pub const ALL: u8 = 0;
    pub const SELECT: u8 = 1;
    pub const INDIRECT: u8 = 2;
    pub const FF: u8 = 3;
}

/// `PORT_MOD` (`ofp_port_mod`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortMod {
    pub port_no: u32,
    pub hw_addr: [u8; 6],
    pub config: u32,
    pub mask: u32,
    pub advertise: u32,
}

/// A meter band (`ofp_meter_band_*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MeterBand {
    Drop { rate: u32, burst_size: u32 },
    DscpRemark { rate: u32, burst_size: u32, prec_level: u8 },
    Experimenter { rate: u32, burst_size: u32, experimenter: u32, data: Vec<u8> },
}

/// `METER_MOD` (`ofp_meter_mod`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MeterMod {
    pub command: u16,
    pub flags: u16,
    pub meter_id: u32,
    pub bands: Vec<MeterBand>,
}

/// `ofp_meter_mod_command`.
pub mod meter_mod_command {
    pub const ADD: u16 = 0;
    pub const MODIFY: u16 = 1;
    pub const DELETE: u16 = 2;
}

/// `ofp_meter_flags`.
pub mod meter_flags {
    pub const KBPS: u16 = 1 << 0;
    pub const PKTPS: u16 = 1 << 1;
    pub const BURST: u16 = 1 << 2;
    pub const STATS: u16 = 1 << 3;
}

/// `ROLE_REQUEST` / `ROLE_REPLY` (`ofp_role_request`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Role {
    pub role: u32,
    pub generation_id: u64,
}

/// `ofp_controller_role`.
pub mod controller_role {
    pub const NOCHANGE: u32 = 0;
    pub const EQUAL: u32 = 1;
    pub const MASTER: u32 = 2;
    pub const SLAVE: u32 = 3;
}

/// `GET_ASYNC_REPLY` / `SET_ASYNC` (`ofp_async_config`): index 0 is for
/// the master or equal role, 1 for slave. OpenFlow 1.3 carries the first
/// three pairs; 1.4 carries each mask as a property (`async_prop_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AsyncConfig {
    pub packet_in_mask: [u32; 2],
    pub port_status_mask: [u32; 2],
    pub flow_removed_mask: [u32; 2],
    /// OpenFlow 1.4+: ROLE_STATUS, TABLE_STATUS and REQUESTFORWARD.
    pub role_status_mask: [u32; 2],
    pub table_status_mask: [u32; 2],
    pub requestforward_mask: [u32; 2],
}

/// `ofp_async_config_prop_type` (OpenFlow 1.4): even types set the slave
/// mask, odd ones the master's.
pub mod async_prop_type {
    pub const PACKET_IN_SLAVE: u16 = 0;
    pub const PACKET_IN_MASTER: u16 = 1;
    pub const PORT_STATUS_SLAVE: u16 = 2;
    pub const PORT_STATUS_MASTER: u16 = 3;
    pub const FLOW_REMOVED_SLAVE: u16 = 4;
    pub const FLOW_REMOVED_MASTER: u16 = 5;
    pub const ROLE_STATUS_SLAVE: u16 = 6;
    pub const ROLE_STATUS_MASTER: u16 = 7;
    pub const TABLE_STATUS_SLAVE: u16 = 8;
    pub const TABLE_STATUS_MASTER: u16 = 9;
    pub const REQUESTFORWARD_SLAVE: u16 = 10;
    pub const REQUESTFORWARD_MASTER: u16 = 11;
    pub const EXPERIMENTER_SLAVE: u16 = 0xfffe;
    pub const EXPERIMENTER_MASTER: u16 = 0xffff;
}

/// One OpenFlow 1.4 asynchronous configuration property: a mask.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AsyncProp {
    /// An `async_prop_type` from 0 to 11.
    pub typ: u16,
    pub mask: u32,
}

impl AsyncConfig {
    /// The mask pair a property type sets (`None` beyond REQUESTFORWARD).
    fn pair(&mut self, typ: u16) -> Option<&mut [u32; 2]> {
        Some(match typ / 2 {
            0 => &mut self.packet_in_mask,
            1 => &mut self.port_status_mask,
            2 => &mut self.flow_removed_mask,
            3 => &mut self.role_status_mask,
            4 => &mut self.table_status_mask,
            5 => &mut self.requestforward_mask,
            _ => return None,
        })
    }

    /// Sets the mask a property stands for; false for an unknown type.
    pub fn apply(&mut self, p: AsyncProp) -> bool {
        // Odd types are the master's (index 0), even ones the slave's (1).
        let i = usize::from(p.typ.is_multiple_of(2));
        match self.pair(p.typ) {
            Some(pair) => {
                pair[i] = p.mask;
                true
            }
            None => false,
        }
    }

    /// Every mask as an OpenFlow 1.4 property, in type order.
    pub fn props(&self) -> Vec<AsyncProp> {
        let mut me = *self;
        (0..12u16)
            .map(|typ| {
                let i = usize::from(typ.is_multiple_of(2));
                AsyncProp { typ, mask: me.pair(typ).map_or(0, |p| p[i]) }
            })
            .collect()
    }
}

/// `ofp_controller_role_reason` (ROLE_STATUS, OpenFlow 1.4).
pub mod role_reason {
    pub const MASTER_REQUEST: u8 = 0;
    pub const CONFIG: u8 = 1;
    pub const EXPERIMENTER: u8 = 2;
}

/// `ofp_bundle_ctrl_msg` (OpenFlow 1.4 BUNDLE_CONTROL; the ONF extension
/// for 1.3 carries the same body). Properties are kept as their bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BundleControl {
    pub bundle_id: u32,
    /// `ofp_bundle_ctrl_type`.
    pub typ: u16,
    /// `ofp_bundle_flags`: ATOMIC 1, ORDERED 2.
    pub flags: u16,
    pub properties: Vec<u8>,
}

/// `ofp_bundle_add_msg` (OpenFlow 1.4 BUNDLE_ADD_MESSAGE): the added
/// message whole (its own header's length says where it ends), then the
/// properties as their bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BundleAdd {
    pub bundle_id: u32,
    pub flags: u16,
    pub message: Vec<u8>,
    pub properties: Vec<u8>,
}

/// `ofp_table_desc` (OpenFlow 1.4 table description; properties left out).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableDesc {
    pub table_id: u8,
    pub config: u32,
}

/// `ofp_queue_desc` (OpenFlow 1.4 queue description): rates in tenths of
/// a percent, as queue configuration has them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueDesc {
    pub port_no: u32,
    pub queue_id: u32,
    pub properties: Vec<QueueProp>,
}

/// A queue property (`ofp_queue_prop_*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueueProp {
    MinRate(u16),
    MaxRate(u16),
    Experimenter { experimenter: u32, data: Vec<u8> },
}

/// A queue's description (`ofp_packet_queue`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PacketQueue {
    pub queue_id: u32,
    pub port: u32,
    pub properties: Vec<QueueProp>,
}

/// Flow and aggregate statistics requests (`ofp_flow_stats_request`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowStatsRequest {
    pub table_id: u8,
    pub out_port: u32,
    pub out_group: u32,
    pub cookie: u64,
    pub cookie_mask: u64,
    pub matched: Match,
}

/// One flow's statistics (`ofp_flow_stats`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowStats {
    pub table_id: u8,
    pub duration_sec: u32,
    pub duration_nsec: u32,
    pub priority: u16,
    pub idle_timeout: u16,
    pub hard_timeout: u16,
    pub flags: u16,
    pub cookie: u64,
    pub packet_count: u64,
    pub byte_count: u64,
    pub matched: Match,
    pub instructions: Vec<Instruction>,
}

/// `ofp_aggregate_stats_reply`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AggregateStats {
    pub packet_count: u64,
    pub byte_count: u64,
    pub flow_count: u32,
}

/// `ofp_table_stats`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableStats {
    pub table_id: u8,
    pub active_count: u32,
    pub lookup_count: u64,
    pub matched_count: u64,
}

/// `ofp_port_stats`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PortStats {
    pub port_no: u32,
    pub rx_packets: u64,
    pub tx_packets: u64,
    pub rx_bytes: u64,
    pub tx_bytes: u64,
    pub rx_dropped: u64,
    pub tx_dropped: u64,
    pub rx_errors: u64,
    pub tx_errors: u64,
    pub rx_frame_err: u64,
    pub rx_over_err: u64,
    pub rx_crc_err: u64,
    pub collisions: u64,
    pub duration_sec: u32,
    pub duration_nsec: u32,
}

impl PortStats {
    /// Its twelve counters in OpenFlow 1.3's order (rx/tx packets, bytes,
    /// dropped, errors, then frame, overrun and CRC errors, collisions).
    pub fn counters(&self) -> [u64; 12] {
        [
            self.rx_packets,
            self.tx_packets,
            self.rx_bytes,
            self.tx_bytes,
            self.rx_dropped,
            self.tx_dropped,
            self.rx_errors,
            self.tx_errors,
            self.rx_frame_err,
            self.rx_over_err,
            self.rx_crc_err,
            self.collisions,
        ]
    }
}

/// `ofp_queue_stats`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueStats {
    pub port_no: u32,
    pub queue_id: u32,
    pub tx_bytes: u64,
    pub tx_packets: u64,
    pub tx_errors: u64,
    pub duration_sec: u32,
    pub duration_nsec: u32,
}

/// `ofp_group_stats` (with its per-bucket counters: packets, bytes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupStats {
    pub group_id: u32,
    pub ref_count: u32,
    pub packet_count: u64,
    pub byte_count: u64,
    pub duration_sec: u32,
    pub duration_nsec: u32,
    pub buckets: Vec<(u64, u64)>,
}

/// `ofp_group_desc`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupDesc {
    pub typ: u8,
    pub group_id: u32,
    pub buckets: Vec<Bucket>,
}

/// `ofp_group_features`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupFeatures {
    pub types: u32,
    pub capabilities: u32,
    pub max_groups: [u32; 4],
    pub actions: [u32; 4],
}

/// `ofp_meter_stats` (with its per-band counters: packets, bytes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MeterStats {
    pub meter_id: u32,
    pub flow_count: u32,
    pub packet_in_count: u64,
    pub byte_in_count: u64,
    pub duration_sec: u32,
    pub duration_nsec: u32,
    pub bands: Vec<(u64, u64)>,
}

/// `ofp_meter_config`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MeterConfig {
    pub flags: u16,
    pub meter_id: u32,
    pub bands: Vec<MeterBand>,
}

/// `ofp_meter_features`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MeterFeatures {
    pub max_meter: u32,
    pub band_types: u32,
    pub capabilities: u32,
    pub max_bands: u8,
    pub max_color: u8,
}

/// A table feature property (`ofp_table_feature_prop_*`). The `*Miss`
/// variants are the same lists for the table-miss flow entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TableFeatureProp {
    /// Instruction types (only the type of each `ofp_instruction` header;
    /// experimenter instructions as `(0xffff, experimenter id)`).
    Instructions(Vec<(u16, u32)>),
    InstructionsMiss(Vec<(u16, u32)>),
    NextTables(Vec<u8>),
    NextTablesMiss(Vec<u8>),
    /// Action types (experimenter actions as `(0xffff, experimenter id)`).
    WriteActions(Vec<(u16, u32)>),
    WriteActionsMiss(Vec<(u16, u32)>),
    ApplyActions(Vec<(u16, u32)>),
    ApplyActionsMiss(Vec<(u16, u32)>),
    /// OXM headers (the 32-bit `class:field:hasmask:length` words; an
    /// experimenter OXM's header is followed by its experimenter id, kept
    /// as the next word).
    Match(Vec<u32>),
    Wildcards(Vec<u32>),
    WriteSetfield(Vec<u32>),
    WriteSetfieldMiss(Vec<u32>),
    ApplySetfield(Vec<u32>),
    ApplySetfieldMiss(Vec<u32>),
    Experimenter {
        typ: u16,
        experimenter: u32,
        exp_type: u32,
        data: Vec<u8>,
    },
}

/// `ofp_table_features`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableFeatures {
    pub table_id: u8,
    /// Up to 31 bytes on the wire (NUL-padded to 32).
    pub name: String,
    pub metadata_match: u64,
    pub metadata_write: u64,
    pub config: u32,
    pub max_entries: u32,
    pub properties: Vec<TableFeatureProp>,
}

/// `ofp_desc`: each string is NUL-padded on the wire (256 bytes, 32 for
/// the serial number).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Desc {
    pub mfr_desc: String,
    pub hw_desc: String,
    pub sw_desc: String,
    pub serial_num: String,
    pub dp_desc: String,
}

/// A multipart request body, by `ofp_multipart_type`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MultipartRequest {
    Desc,
    Flow(FlowStatsRequest),
    Aggregate(FlowStatsRequest),
    Table,
    PortStats {
        port_no: u32,
    },
    Queue {
        port_no: u32,
        queue_id: u32,
    },
    Group {
        group_id: u32,
    },
    GroupDesc,
    GroupFeatures,
    Meter {
        meter_id: u32,
    },
    MeterConfig {
        meter_id: u32,
    },
    MeterFeatures,
    /// Empty to ask for the tables' features; a list to set them.
    TableFeatures(Vec<TableFeatures>),
    PortDesc,
    /// OpenFlow 1.4+.
    TableDesc,
    /// OpenFlow 1.4+.
    QueueDesc {
        port_no: u32,
        queue_id: u32,
    },
    /// OpenFlow 1.4+: one or more monitor requests.
    FlowMonitor(Vec<crate::monitor::FlowMonitorRequest>),
    Experimenter {
        experimenter: u32,
        exp_type: u32,
        data: Vec<u8>,
    },
}

/// A multipart reply body, by `ofp_multipart_type`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MultipartReply {
    Desc(Desc),
    Flow(Vec<FlowStats>),
    Aggregate(AggregateStats),
    Table(Vec<TableStats>),
    PortStats(Vec<PortStats>),
    Queue(Vec<QueueStats>),
    Group(Vec<GroupStats>),
    GroupDesc(Vec<GroupDesc>),
    GroupFeatures(GroupFeatures),
    Meter(Vec<MeterStats>),
    MeterConfig(Vec<MeterConfig>),
    MeterFeatures(MeterFeatures),
    TableFeatures(Vec<TableFeatures>),
    PortDesc(Vec<PortDesc>),
    /// OpenFlow 1.4+.
    TableDesc(Vec<TableDesc>),
    /// OpenFlow 1.4+.
    QueueDesc(Vec<QueueDesc>),
    /// OpenFlow 1.4+: flow updates as their bytes (`crate::monitor`).
    FlowMonitor(Vec<u8>),
    Experimenter {
        experimenter: u32,
        exp_type: u32,
        data: Vec<u8>,
    },
}

/// `ofp_multipart_request_flags` / `ofp_multipart_reply_flags`.
pub const MULTIPART_MORE: u16 = 1;

/// Every OpenFlow 1.3 and 1.4 message (the header's type says which; the
/// variants marked 1.4 exist only there).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    Hello(Vec<HelloElement>),
    Error(ErrorMsg),
    EchoRequest(Vec<u8>),
    EchoReply(Vec<u8>),
    Experimenter {
        experimenter: u32,
        exp_type: u32,
        data: Vec<u8>,
    },
    FeaturesRequest,
    FeaturesReply(Features),
    GetConfigRequest,
    GetConfigReply(SwitchConfig),
    SetConfig(SwitchConfig),
    PacketIn(PacketIn),
    FlowRemoved(FlowRemoved),
    PortStatus {
        reason: u8,
        desc: PortDesc,
    },
    PacketOut(PacketOut),
    FlowMod(FlowMod),
    GroupMod(GroupMod),
    PortMod(PortMod),
    TableMod {
        table_id: u8,
        config: u32,
    },
    MultipartRequest {
        flags: u16,
        body: MultipartRequest,
    },
    MultipartReply {
        flags: u16,
        body: MultipartReply,
    },
    BarrierRequest,
    BarrierReply,
    QueueGetConfigRequest {
        port: u32,
    },
    QueueGetConfigReply {
        port: u32,
        queues: Vec<PacketQueue>,
    },
    RoleRequest(Role),
    RoleReply(Role),
    GetAsyncRequest,
    GetAsyncReply(AsyncConfig),
    SetAsync(AsyncConfig),
    /// OpenFlow 1.4's SET_ASYNC: the masks it sets, each a property.
    SetAsyncProps(Vec<AsyncProp>),
    MeterMod(MeterMod),
    /// OpenFlow 1.4: a controller's role changed by another's request.
    RoleStatus {
        role: u32,
        reason: u8,
        generation_id: u64,
    },
    /// OpenFlow 1.4.
    BundleControl(BundleControl),
    /// OpenFlow 1.4.
    BundleAdd(BundleAdd),
}
