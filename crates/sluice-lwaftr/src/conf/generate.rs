//! Large configurations for tests and benchmarks, as Snabb's
//! `snabb lwaftr generate-configuration` makes them: a binding table over
//! consecutive IPv4 addresses, every PSID of each, one B4 address per
//! softwire counting up from a start, and fixed interface settings.

use std::net::{Ipv4Addr, Ipv6Addr};

use super::schema::*;

/// The most softwires one call makes (a guard against a typo that would
/// fill the memory).
pub const MAX_GENERATED: u64 = 1 << 26;

/// A configuration like Snabb's
/// `lwaftr generate-configuration IPV4 NUM_IPV4S BR_ADDRESS B4 PSID_LEN [SHIFT]`:
///
/// - `ipv4`: the first public IPv4 address; the table covers `num_ipv4s`
///   consecutive addresses from it (an error if that passes 255.255.255.255).
/// - `num_ipv4s`: how many IPv4 addresses.
/// - `br_address`: the lwAFTR's tunnel endpoint, the `br-address` of every
///   softwire; also the queue's internal `ip` (where Snabb writes a fixed
///   `fc00::100`, the br-address of its own examples), so that the lwAFTR
///   answers NDP and ping on the address its B4s tunnel to.
/// - `b4`: the first B4 IPv6 address; it counts up by one per softwire, in
///   table order (address by address, PSID by PSID).
/// - `psid_len`: `psid-length` k (0..=16) of every address. With k = 0 each
///   address has one softwire, PSID 0 (the whole address); otherwise each has
///   the 2^k − 1 softwires of PSIDs 1..2^k − 1 (PSID 0, whose ports include
///   the well-known ones, is left out, as Snabb does). So Snabb's
///   "one million subscribers" example, `193.5.1.100 15874 fc00::100
///   fc00:1:2:3:4:5:0:7e 6`, makes 15874 × 63 = 1 000 062 softwires.
/// - `shift`: the port bits under the PSID, 16 − k when `None`; k + shift
///   must not exceed 16. Snabb only checks it; here a shift below 16 − k
///   sets `reserved-ports-bit-count` = 16 − k − shift, so that the table has
///   that shift.
///
/// The interfaces are Snabb's (and `bench/lwaftr.conf`'s): on both sides
/// `allow-incoming-icmp false`, `error-rate-limiting { packets 600000; }`,
/// `reassembly { max-fragments-per-packet 40; }`; one instance, device
/// `test`, queue 0 with external ip 10.0.1.1, both MACs 02:aa:aa:aa:aa:aa
/// and both next hops MAC 02:99:99:99:99:99.
///
/// Errors: psid_len > 16, k + shift > 16, addresses past the end of IPv4,
/// more than [`MAX_GENERATED`] softwires.
pub fn generate_configuration(
    ipv4: Ipv4Addr,
    num_ipv4s: u32,
    br_address: Ipv6Addr,
    b4: Ipv6Addr,
    psid_len: u8,
    shift: Option<u8>,
) -> Result<Config, String> {
    if psid_len > 16 {
        return Err(format!("psid-length {psid_len} is above 16"));
    }
    let shift = shift.unwrap_or(16 - psid_len);
    if u32::from(psid_len) + u32::from(shift) > 16 {
        return Err(format!("psid-length {psid_len} + shift {shift} exceeds 16"));
    }
    let first = u32::from(ipv4);
    if u64::from(first) + u64::from(num_ipv4s) > 1 << 32 {
        return Err(format!("{num_ipv4s} addresses from {ipv4} pass 255.255.255.255"));
    }
    let per_address: u64 = if psid_len == 0 { 1 } else { (1u64 << psid_len) - 1 };
    let total = per_address * u64::from(num_ipv4s);
    if total > MAX_GENERATED {
        return Err(format!("{total} softwires is more than the {MAX_GENERATED} this makes"));
    }
    let port_set = PortSet { psid_length: psid_len, reserved_ports_bit_count: 16 - psid_len - shift };
    let psids = if psid_len == 0 { 0..1u32 } else { 1..(1u32 << psid_len) };
    let mut softwires = Vec::with_capacity(total as usize);
    let mut b4n = u128::from(b4);
    for a in 0..num_ipv4s {
        let ipv4 = Ipv4Addr::from(first + a);
        for psid in psids.clone() {
            softwires.push(Softwire {
                ipv4,
                psid: psid as u16,
                b4_ipv6: Ipv6Addr::from(b4n),
                br_address,
                padding: 0,
                port_set,
            });
            b4n = b4n.wrapping_add(1);
        }
    }
    let mut common = InterfaceCommon::with_mtu(1460);
    common.allow_incoming_icmp = false;
    common.error_rate_limiting.packets = 600_000;
    common.reassembly.max_fragments_per_packet = 40;
    let external = ExternalInterface { common: common.clone() };
    let mut internal = InternalInterface::default();
    internal.common = InterfaceCommon { mtu: internal.common.mtu, ..common };
    let mac = [0x02, 0xaa, 0xaa, 0xaa, 0xaa, 0xaa];
    let hop = [0x02, 0x99, 0x99, 0x99, 0x99, 0x99];
    let queue = Queue {
        id: 0,
        external: QueueInterface { ip: Ipv4Addr::new(10, 0, 1, 1), mac, vlan_tag: None, next_hop: NextHop::Mac(hop) },
        internal: QueueInterface { ip: br_address, mac, vlan_tag: None, next_hop: NextHop::Mac(hop) },
    };
    Ok(Config {
        name: None,
        instances: vec![Instance { device: "test".into(), external_device: None, queues: vec![queue] }],
        external,
        internal,
        binding_table: BindingTable { softwires, version: None },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(s: &str) -> Ipv4Addr {
        s.parse().unwrap()
    }
    fn v6(s: &str) -> Ipv6Addr {
        s.parse().unwrap()
    }

    #[test]
    fn snabb_example_630() {
        let c =
            generate_configuration(v4("193.5.1.100"), 10, v6("fc00::100"), v6("fc00:1:2:3:4:5:0:7e"), 6, None).unwrap();
        let sw = &c.binding_table.softwires;
        assert_eq!(sw.len(), 630);
        assert_eq!((sw[0].ipv4, sw[0].psid, sw[0].b4_ipv6), (v4("193.5.1.100"), 1, v6("fc00:1:2:3:4:5:0:7e")));
        assert_eq!((sw[62].ipv4, sw[62].psid), (v4("193.5.1.100"), 63));
        assert_eq!((sw[63].ipv4, sw[63].psid, sw[63].b4_ipv6), (v4("193.5.1.101"), 1, v6("fc00:1:2:3:4:5:0:bd")));
        assert_eq!(sw[629].ipv4, v4("193.5.1.109"));
        assert!(sw.iter().all(|s| s.br_address == v6("fc00::100") && s.port_set.shift() == 10));
        // It reads back as written, and a queue's settings merge.
        let back = Config::parse(&c.to_text(), "gen").unwrap();
        assert_eq!(back, c);
        let q = c.queue_settings(None, None).unwrap();
        assert_eq!(q.internal.queue.ip, v6("fc00::100"));
        assert!(!q.external.common.allow_incoming_icmp);
        assert_eq!(q.internal.common.mtu, 1500);
    }

    #[test]
    fn psid_length_zero_shift_and_errors() {
        let c = generate_configuration(v4("10.0.0.255"), 3, v6("::1"), v6("::ffff"), 0, None).unwrap();
        let sw = &c.binding_table.softwires;
        assert_eq!(
            sw.iter().map(|s| (s.ipv4, s.psid)).collect::<Vec<_>>(),
            [(v4("10.0.0.255"), 0), (v4("10.0.1.0"), 0), (v4("10.0.1.1"), 0)]
        );
        assert_eq!(sw[2].b4_ipv6, v6("::1:1"));
        let c = generate_configuration(v4("10.0.0.1"), 1, v6("::1"), v6("::2"), 4, Some(10)).unwrap();
        assert_eq!(c.binding_table.softwires[0].port_set.reserved_ports_bit_count, 2);
        assert_eq!(c.binding_table.softwires[0].port_set.shift(), 10);
        assert!(generate_configuration(v4("10.0.0.1"), 1, v6("::1"), v6("::2"), 17, None).is_err());
        assert!(generate_configuration(v4("10.0.0.1"), 1, v6("::1"), v6("::2"), 8, Some(9)).is_err());
        assert!(generate_configuration(v4("255.255.255.255"), 2, v6("::1"), v6("::2"), 0, None).is_err());
        assert!(generate_configuration(v4("1.0.0.0"), 1 << 20, v6("::1"), v6("::2"), 16, None).is_err());
        assert_eq!(
            generate_configuration(v4("255.255.255.255"), 1, v6("::1"), v6("::2"), 0, None)
                .unwrap()
                .binding_table
                .softwires
                .len(),
            1
        );
    }
}
