/* fabric.p4: an IPv6 leaf-spine fabric switch for the v1model architecture,
 * driven by a P4Runtime controller.
 *
 *  - The controller talks to the switch through CPU port 255: frames it sends
 *    carry a packet_out header naming the egress port; frames punted to it
 *    carry a packet_in header naming the port they arrived on.
 *  - acl (ternary, priorities) sees every frame that did not come from the
 *    controller and may punt it (LLDP, NDP, ...) or drop it.
 *  - IPv6 is routed: routing_v6 (lpm on the destination) picks an ECMP group
 *    or a single next hop; the action selector ecmp_selector hashes
 *    (crc16) the addresses, the flow label and the next header to choose a
 *    group member, which rewrites the MAC addresses, picks the port and
 *    decrements the hop limit.  The ICMPv6 checksum does not cover the hop
 *    limit, so no checksum is updated.
 *  - Everything else drops: non-IPv6 frames, hop limit 1 or 0, route misses.
 */
#include <core.p4>
#include <v1model.p4>

typedef bit<48>  mac_addr_t;
typedef bit<128> ipv6_addr_t;
typedef bit<9>   port_t;

const port_t CPU_PORT = 255;
const bit<16> ETHERTYPE_IPV6 = 0x86dd;
const bit<16> ETHERTYPE_LLDP = 0x88cc;
const bit<8>  IPPROTO_ICMPV6 = 58;

@controller_header("packet_in")
header packet_in_t {
    port_t  ingress_port;
    bit<7>  _pad;
}

@controller_header("packet_out")
header packet_out_t {
    port_t  egress_port;
    bit<7>  _pad;
}

header ethernet_t {
    mac_addr_t dst_addr;
    mac_addr_t src_addr;
    bit<16>    ether_type;
}

header ipv6_t {
    bit<4>      version;
    bit<8>      traffic_class;
    bit<20>     flow_label;
    bit<16>     payload_len;
    bit<8>      next_hdr;
    bit<8>      hop_limit;
    ipv6_addr_t src_addr;
    ipv6_addr_t dst_addr;
}

header icmpv6_t {
    bit<8>  type;
    bit<8>  code;
    bit<16> checksum;
}

struct headers_t {
    packet_out_t packet_out;
    packet_in_t  packet_in;
    ethernet_t   ethernet;
    ipv6_t       ipv6;
    icmpv6_t     icmpv6;
}

struct metadata_t {
}

parser FabricParser(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                    inout standard_metadata_t std) {
    state start {
        transition select(std.ingress_port) {
            CPU_PORT: parse_packet_out;
            default: parse_ethernet;
        }
    }
    state parse_packet_out {
        pkt.extract(hdr.packet_out);
        transition parse_ethernet;
    }
    state parse_ethernet {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV6: parse_ipv6;
            ETHERTYPE_LLDP: accept;     // LLDP: nothing more to parse
            default: accept;
        }
    }
    state parse_ipv6 {
        pkt.extract(hdr.ipv6);
        transition select(hdr.ipv6.next_hdr) {
            IPPROTO_ICMPV6: parse_icmpv6;
            default: accept;
        }
    }
    state parse_icmpv6 {
        pkt.extract(hdr.icmpv6);
        transition accept;
    }
}

control FabricVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control FabricIngress(inout headers_t hdr, inout metadata_t meta,
                      inout standard_metadata_t std) {
    action drop() {
        mark_to_drop(std);
    }

    action punt() {
        std.egress_spec = CPU_PORT;
        hdr.packet_in.setValid();
        hdr.packet_in.ingress_port = std.ingress_port;
    }

    table acl {
        key = {
            std.ingress_port        : ternary;
            hdr.ethernet.dst_addr   : ternary;
            hdr.ethernet.ether_type : ternary;
            hdr.ipv6.next_hdr       : ternary;
            hdr.icmpv6.type         : ternary;
        }
        actions = { punt; drop; NoAction; }
        default_action = NoAction();
        size = 256;
    }

    action_selector(HashAlgorithm.crc16, 32w1024, 32w16) ecmp_selector;

    action route(port_t port, mac_addr_t smac, mac_addr_t dmac) {
        std.egress_spec = port;
        hdr.ethernet.src_addr = smac;
        hdr.ethernet.dst_addr = dmac;
        hdr.ipv6.hop_limit = hdr.ipv6.hop_limit - 1;
    }

    table routing_v6 {
        key = {
            hdr.ipv6.dst_addr   : lpm;
            hdr.ipv6.src_addr   : selector;
            hdr.ipv6.dst_addr   : selector;
            hdr.ipv6.flow_label : selector;
            hdr.ipv6.next_hdr   : selector;
        }
        actions = { route; drop; }
        implementation = ecmp_selector;
        size = 1024;
    }

    apply {
        if (hdr.packet_out.isValid()) {
            std.egress_spec = hdr.packet_out.egress_port;
            hdr.packet_out.setInvalid();
            exit;
        }
        switch (acl.apply().action_run) {
            punt: { exit; }
            drop: { exit; }
        }
        if (!hdr.ipv6.isValid() || hdr.ipv6.hop_limit <= 1) {
            drop();
            exit;
        }
        drop();          // a route miss drops; route overrides egress_spec
        routing_v6.apply();
    }
}

control FabricEgress(inout headers_t hdr, inout metadata_t meta,
                     inout standard_metadata_t std) {
    apply { }
}

control FabricComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control FabricDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.packet_in);
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.ipv6);
        pkt.emit(hdr.icmpv6);
    }
}

V1Switch(FabricParser(), FabricVerifyChecksum(), FabricIngress(), FabricEgress(),
         FabricComputeChecksum(), FabricDeparser()) main;
