"""Seed corpora of the OpenFlow fuzz targets, serialized by os-ken's
OpenFlow 1.3 and 1.0 encoders (the controller library the OpenFlow tests
drive Sluice with). Run by fuzz/make-seeds.sh with the os-ken venv's
Python. Writes fuzz/corpus/<target>/<sha1 of the input>.
"""

import struct

from make_seeds import put
from os_ken.ofproto import ofproto_v1_0, ofproto_v1_0_parser as p10
from os_ken.ofproto import ofproto_v1_3 as o13, ofproto_v1_3_parser as p13
from os_ken.lib.packet import packet, ethernet, ipv4, ipv6, tcp, udp, arp, vlan, icmp

class Datapath:
    """What os-ken's message classes need of a datapath to serialize."""

    def __init__(self, ofproto, parser):
        self.ofproto, self.ofproto_parser, self.id = ofproto, parser, 1


D13 = Datapath(o13, p13)
D10 = Datapath(ofproto_v1_0, p10)


def raw(msg, xid=1):
    msg.set_xid(xid)
    msg.serialize()
    return bytes(msg.buf)


def packet_out_to_pipeline(in_port, data, xid=1):
    """A PACKET_OUT without actions (the differential target runs its
    frame into the pipeline at in_port), packed here: os-ken's encoder
    overwrites the first 16 bytes of the frame of an action-less one."""
    body = struct.pack(">IIH6x", 0xFFFFFFFF, in_port, 0) + data
    return struct.pack(">BBHI", 4, 13, 8 + len(body), xid) + body


def frame(*layers):
    p = packet.Packet()
    for layer in layers:
        p.add_protocol(layer)
    p.serialize()
    return bytes(p.data)


A, B = "02:00:00:00:00:0a", "02:00:00:00:00:0b"
FRAMES = [
    frame(ethernet.ethernet(B, A, 0x0800), ipv4.ipv4(src="10.0.0.1", dst="10.0.1.2", proto=6), tcp.tcp(1234, 80)),
    frame(ethernet.ethernet(B, A, 0x0800), ipv4.ipv4(src="192.168.0.5", dst="10.2.0.9", proto=17), udp.udp(5000, 53)),
    frame(ethernet.ethernet(B, A, 0x86dd), ipv6.ipv6(src="2001:db8::1", dst="2001:db8::2", nxt=17), udp.udp(1, 2)),
    frame(ethernet.ethernet("ff:ff:ff:ff:ff:ff", A, 0x0806), arp.arp(src_mac=A, src_ip="10.0.0.1", dst_ip="10.0.0.2")),
    frame(ethernet.ethernet(B, A, 0x8100), vlan.vlan(vid=10, ethertype=0x0800),
          ipv4.ipv4(src="10.0.0.1", dst="10.0.0.2", proto=1), icmp.icmp()),
]


def flow_mods():
    """Flow-mods of the kinds Faucet and the os-ken tests send."""
    P, O = p13, o13
    out = lambda port: P.OFPActionOutput(port, 0)
    apply = lambda *a: P.OFPInstructionActions(O.OFPIT_APPLY_ACTIONS, list(a))
    fm = lambda table, prio, match, inst, **kw: P.OFPFlowMod(D13, table_id=table, priority=prio, match=match,
                                                           instructions=inst, **kw)
    return [
        fm(0, 0, P.OFPMatch(), [apply(out(O.OFPP_CONTROLLER))]),
        fm(0, 10, P.OFPMatch(in_port=1), [P.OFPInstructionGotoTable(1)]),
        fm(0, 10, P.OFPMatch(in_port=2), [apply(out(1))]),
        fm(1, 20, P.OFPMatch(eth_type=0x0800, ipv4_dst=("10.0.0.0", "255.0.0.0")),
           [apply(P.OFPActionSetField(eth_dst=B), P.OFPActionDecNwTtl(), out(3))]),
        fm(1, 30, P.OFPMatch(eth_type=0x0800, ip_proto=6, tcp_dst=80), [apply(out(2))]),
        fm(1, 5, P.OFPMatch(eth_type=0x86dd, ipv6_dst="2001:db8::2"), [apply(out(4))]),
        fm(1, 1, P.OFPMatch(), [P.OFPInstructionActions(O.OFPIT_WRITE_ACTIONS, [out(2)]),
                                P.OFPInstructionGotoTable(2)]),
        fm(2, 1, P.OFPMatch(eth_type=0x0806), [apply(out(O.OFPP_FLOOD))]),
        fm(2, 2, P.OFPMatch(vlan_vid=(0x1000 | 10)), [apply(P.OFPActionPopVlan(), out(1))]),
        fm(0, 40, P.OFPMatch(eth_src=A), [apply(P.OFPActionPushVlan(0x8100), P.OFPActionSetField(vlan_vid=0x1000 | 7),
                                               P.OFPActionGroup(1))]),
        fm(0, 50, P.OFPMatch(eth_type=0x0800, ipv4_src="192.168.0.5"), [apply(out(O.OFPP_NORMAL))]),
        fm(0, 60, P.OFPMatch(in_port=3), [P.OFPInstructionMeter(1), apply(out(1))]),
        fm(1, 20, P.OFPMatch(eth_type=0x0800), [], command=O.OFPFC_DELETE, out_port=O.OFPP_ANY, out_group=O.OFPG_ANY),
        fm(0, 10, P.OFPMatch(in_port=1), [apply(out(4))], command=O.OFPFC_MODIFY_STRICT),
    ]


def group_mods():
    P, O = p13, o13
    b = lambda port, w=0: P.OFPBucket(weight=w, watch_port=port, watch_group=O.OFPG_ANY,
                                      actions=[P.OFPActionOutput(port, 0)])
    return [
        P.OFPGroupMod(D13, O.OFPGC_ADD, O.OFPGT_ALL, 1, [b(1), b(2)]),
        P.OFPGroupMod(D13, O.OFPGC_ADD, O.OFPGT_SELECT, 2, [b(3, 1), b(4, 1)]),
        P.OFPGroupMod(D13, O.OFPGC_ADD, O.OFPGT_FF, 3, [b(1), b(2)]),
        P.OFPGroupMod(D13, O.OFPGC_ADD, O.OFPGT_INDIRECT, 4, [b(2)]),
        P.OFPGroupMod(D13, O.OFPGC_DELETE, O.OFPGT_ALL, O.OFPG_ALL, []),
    ]


def of13():
    P, O = p13, o13
    msgs = flow_mods() + group_mods() + [
        P.OFPHello(D13), P.OFPEchoRequest(D13, data=b"ping"), P.OFPFeaturesRequest(D13),
        P.OFPGetConfigRequest(D13), P.OFPSetConfig(D13, 0, 128), P.OFPBarrierRequest(D13),
        P.OFPRoleRequest(D13, O.OFPCR_ROLE_MASTER, 1), P.OFPGetAsyncRequest(D13),
        P.OFPSetAsync(D13, [3, 3], [7, 7], [15, 15]),
        P.OFPMeterMod(D13, O.OFPMC_ADD, O.OFPMF_KBPS, 1, [P.OFPMeterBandDrop(rate=1000, burst_size=10)]),
        P.OFPMeterMod(D13, O.OFPMC_ADD, O.OFPMF_PKTPS | O.OFPMF_BURST, 2,
                      [P.OFPMeterBandDscpRemark(rate=100, burst_size=10, prec_level=1)]),
        P.OFPPortMod(D13, 1, "02:00:00:00:01:01", O.OFPPC_PORT_DOWN, O.OFPPC_PORT_DOWN, 0),
        P.OFPTableMod(D13, 0, 0),
        P.OFPPacketOut(D13, O.OFP_NO_BUFFER, O.OFPP_CONTROLLER, [P.OFPActionOutput(O.OFPP_TABLE, 0)], FRAMES[0]),
        P.OFPPacketOut(D13, O.OFP_NO_BUFFER, 1, [P.OFPActionOutput(2, 0)], FRAMES[1]),
        P.OFPFlowStatsRequest(D13, 0, O.OFPTT_ALL, O.OFPP_ANY, O.OFPG_ANY, 0, 0, P.OFPMatch()),
        P.OFPAggregateStatsRequest(D13, 0, O.OFPTT_ALL, O.OFPP_ANY, O.OFPG_ANY, 0, 0, P.OFPMatch(in_port=1)),
        P.OFPTableStatsRequest(D13, 0), P.OFPPortStatsRequest(D13, 0, O.OFPP_ANY), P.OFPPortDescStatsRequest(D13, 0),
        P.OFPGroupStatsRequest(D13, 0, O.OFPG_ALL), P.OFPGroupDescStatsRequest(D13, 0),
        P.OFPGroupFeaturesStatsRequest(D13, 0), P.OFPMeterStatsRequest(D13, 0, O.OFPM_ALL),
        P.OFPMeterConfigStatsRequest(D13, 0, O.OFPM_ALL), P.OFPMeterFeaturesStatsRequest(D13, 0),
        P.OFPDescStatsRequest(D13, 0), P.OFPTableFeaturesStatsRequest(D13, 0, []),
        P.OFPQueueGetConfigRequest(D13, 1),
    ]
    for m in msgs:
        put("openflow_decode", raw(m))
    # The differential target: a pipeline, then frames through it (a
    # packet-out without actions enters the pipeline at its in_port).
    mods = [raw(m, i + 1) for i, m in enumerate(group_mods()[:4] + flow_mods())]
    entries = [packet_out_to_pipeline(port, f) for port in (1, 2, 3) for f in FRAMES]
    outs = [raw(P.OFPPacketOut(D13, O.OFP_NO_BUFFER, 1, [P.OFPActionOutput(O.OFPP_TABLE, 0)], f)) for f in FRAMES]
    put("openflow_differential", b"".join(mods + entries))
    put("openflow_differential", b"".join(mods[:6] + entries[:5] + outs))
    for i in range(0, len(mods), 3):
        put("openflow_differential", b"".join(mods[i:i + 3] + entries[i % len(entries):i % len(entries) + 4]))
    for f in flow_mods():
        put("openflow_differential", raw(f) + b"".join(entries[:5]))


def of10():
    P, O = p10, ofproto_v1_0
    m = P.OFPMatch(dl_type=0x0800, nw_dst="10.0.0.1")
    msgs = [
        P.OFPHello(D10), P.OFPEchoRequest(D10), P.OFPFeaturesRequest(D10), P.OFPGetConfigRequest(D10),
        P.OFPSetConfig(D10, 0, 128), P.OFPBarrierRequest(D10),
        P.OFPFlowMod(D10, m, 0, O.OFPFC_ADD, 0, 0, 10, O.OFP_NO_BUFFER, O.OFPP_NONE, 0,
                     [P.OFPActionOutput(2), P.OFPActionSetDlDst(b"\x02\x00\x00\x00\x00\x0b")]),
        P.OFPFlowMod(D10, P.OFPMatch(in_port=1), 0, O.OFPFC_DELETE, 0, 0, 0, O.OFP_NO_BUFFER, O.OFPP_NONE, 0, []),
        P.OFPPacketOut(D10, 0xffffffff, 1, [P.OFPActionOutput(O.OFPP_FLOOD)], FRAMES[0]),
        P.OFPFlowStatsRequest(D10, 0, P.OFPMatch(), 0xff, O.OFPP_NONE),
        P.OFPPortStatsRequest(D10, 0, O.OFPP_NONE), P.OFPDescStatsRequest(D10, 0),
        P.OFPPortMod(D10, 1, "02:00:00:00:01:01", 1, 1, 0),
    ]
    for msg in msgs:
        put("openflow10_decode", raw(msg))


if __name__ == "__main__":
    of13()
    of10()
