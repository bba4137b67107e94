//! The typed `softwire-config` tree of `snabb-softwire-v3`, with the YANG
//! defaults, and the interface settings of one queue merged with the global
//! ones (what the data plane runs with).

use std::net::{Ipv4Addr, Ipv6Addr};

/// A MAC address.
pub type Mac = [u8; 6];

/// `softwire-config`: the whole configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// `name`, if given.
    pub name: Option<String>,
    /// `instance` entries, keyed by `device`.
    pub instances: Vec<Instance>,
    /// `external-interface`: settings of the IPv4 side shared by every queue.
    pub external: ExternalInterface,
    /// `internal-interface`: settings of the IPv6 side shared by every queue.
    pub internal: InternalInterface,
    /// `binding-table`.
    pub binding_table: BindingTable,
}

/// `instance`: one device (process) with its queues.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instance {
    /// `device` (the key).
    pub device: String,
    /// `external-device`; absent means on a stick.
    pub external_device: Option<String>,
    /// `queue` entries, keyed by `id`.
    pub queues: Vec<Queue>,
}

/// `queue`: the addresses of one queue's two interfaces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Queue {
    /// `id` (the key).
    pub id: u8,
    /// `external-interface` of the queue.
    pub external: QueueInterface<Ipv4Addr>,
    /// `internal-interface` of the queue.
    pub internal: QueueInterface<Ipv6Addr>,
}

/// A queue's interface: its own address, MAC, VLAN tag and next hop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueInterface<A> {
    /// `ip`.
    pub ip: A,
    /// `mac`.
    pub mac: Mac,
    /// `vlan-tag` (0..=4095), if any.
    pub vlan_tag: Option<u16>,
    /// `next-hop`.
    pub next_hop: NextHop<A>,
}

/// `next-hop`: a MAC given outright, or an address to resolve (ARP or NDP).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NextHop<A> {
    /// `mac`.
    Mac(Mac),
    /// `ip`.
    Ip(A),
}

/// `error-rate-limiting`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    /// `packets` per period (default 200).
    pub packets: u32,
    /// `period` in seconds (default 2, at least 1).
    pub period: u32,
}

impl Default for RateLimit {
    fn default() -> Self {
        RateLimit { packets: 200, period: 2 }
    }
}

/// `reassembly`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reassembly {
    /// `max-fragments-per-packet` (default 20, at least 1).
    pub max_fragments_per_packet: u32,
    /// `max-packets` in reassembly at once (default 20000).
    pub max_packets: u32,
}

impl Default for Reassembly {
    fn default() -> Self {
        Reassembly { max_fragments_per_packet: 20, max_packets: 20000 }
    }
}

/// What both global interface containers have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterfaceCommon {
    /// `mtu` (L3 bytes).
    pub mtu: u16,
    /// `mru` (read, unused, as in Snabb).
    pub mru: u16,
    /// `ingress-filter` (pflang), if any.
    pub ingress_filter: Option<String>,
    /// `egress-filter` (pflang), if any.
    pub egress_filter: Option<String>,
    /// `allow-incoming-icmp` (default true).
    pub allow_incoming_icmp: bool,
    /// `generate-icmp-errors` (default true).
    pub generate_icmp_errors: bool,
    /// `error-rate-limiting`.
    pub error_rate_limiting: RateLimit,
    /// `reassembly`.
    pub reassembly: Reassembly,
}

impl InterfaceCommon {
    /// The YANG defaults with the given `mtu`.
    pub fn with_mtu(mtu: u16) -> Self {
        InterfaceCommon {
            mtu,
            mru: 1460,
            ingress_filter: None,
            egress_filter: None,
            allow_incoming_icmp: true,
            generate_icmp_errors: true,
            error_rate_limiting: RateLimit::default(),
            reassembly: Reassembly::default(),
        }
    }
}

/// Global `external-interface` (default mtu 1460).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExternalInterface {
    /// The settings both sides have.
    pub common: InterfaceCommon,
}

impl Default for ExternalInterface {
    fn default() -> Self {
        ExternalInterface { common: InterfaceCommon::with_mtu(1460) }
    }
}

/// Global `internal-interface` (default mtu 1500).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InternalInterface {
    /// The settings both sides have.
    pub common: InterfaceCommon,
    /// `flow-label` of encapsulated packets (default 0).
    pub flow_label: u32,
    /// `vlan-tag`, if any (the queue's tag wins).
    pub vlan_tag: Option<u16>,
    /// `hairpinning` (default true).
    pub hairpinning: bool,
}

impl Default for InternalInterface {
    fn default() -> Self {
        InternalInterface { common: InterfaceCommon::with_mtu(1500), flow_label: 0, vlan_tag: None, hairpinning: true }
    }
}

/// `binding-table`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BindingTable {
    /// `softwire` entries, keyed by (`ipv4`, `psid`), in file order.
    pub softwires: Vec<Softwire>,
    /// `version`, if given: (`number`, `date`).
    pub version: Option<(Option<u64>, Option<String>)>,
}

/// `softwire`: one B4's share of an IPv4 address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Softwire {
    /// `ipv4` (key).
    pub ipv4: Ipv4Addr,
    /// `psid` (key).
    pub psid: u16,
    /// `b4-ipv6`.
    pub b4_ipv6: Ipv6Addr,
    /// `br-address`.
    pub br_address: Ipv6Addr,
    /// `padding` (default 0).
    pub padding: u16,
    /// `port-set`.
    pub port_set: PortSet,
}

/// `port-set` of a softwire's IPv4 address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortSet {
    /// `psid-length` (0..=16).
    pub psid_length: u8,
    /// `reserved-ports-bit-count` (0..=16, default 0).
    pub reserved_ports_bit_count: u8,
}

impl PortSet {
    /// `shift`: the low bits of a port under the PSID,
    /// 16 - psid-length - reserved-ports-bit-count.
    pub fn shift(&self) -> u8 {
        16 - self.psid_length - self.reserved_ports_bit_count
    }
}

/// The settings one queue's data plane runs with: the queue's addresses
/// merged with the global interface containers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueSettings {
    /// External (IPv4) side.
    pub external: SideSettings<Ipv4Addr>,
    /// Internal (IPv6) side.
    pub internal: SideSettings<Ipv6Addr>,
    /// `flow-label` of encapsulated packets.
    pub flow_label: u32,
    /// `hairpinning`.
    pub hairpinning: bool,
}

/// One side's merged settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SideSettings<A> {
    /// The queue's interface (ip, mac, vlan-tag, next-hop).
    pub queue: QueueInterface<A>,
    /// The global settings of that side.
    pub common: InterfaceCommon,
}

impl Config {
    /// The merged settings of queue `queue` of instance `device` (the first
    /// instance and its first queue when `None`), or a message naming what
    /// is missing.
    pub fn queue_settings(&self, device: Option<&str>, queue: Option<u8>) -> Result<QueueSettings, String> {
        let inst = match device {
            Some(d) => self
                .instances
                .iter()
                .find(|i| i.device == d)
                .ok_or_else(|| format!("/softwire-config/instance[device={d}]: no such instance"))?,
            None => self.instances.first().ok_or("/softwire-config/instance: the configuration has none")?,
        };
        let q = match queue {
            Some(id) => inst.queues.iter().find(|q| q.id == id).ok_or_else(|| {
                format!("/softwire-config/instance[device={}]/queue[id={id}]: no such queue", inst.device)
            })?,
            None => inst.queues.first().ok_or_else(|| {
                format!("/softwire-config/instance[device={}]/queue: the instance has none", inst.device)
            })?,
        };
        let mut internal_queue = q.internal.clone();
        if internal_queue.vlan_tag.is_none() {
            internal_queue.vlan_tag = self.internal.vlan_tag;
        }
        Ok(QueueSettings {
            external: SideSettings { queue: q.external.clone(), common: self.external.common.clone() },
            internal: SideSettings { queue: internal_queue, common: self.internal.common.clone() },
            flow_label: self.internal.flow_label,
            hairpinning: self.internal.hairpinning,
        })
    }
}
