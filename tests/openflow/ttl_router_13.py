"""A static IPv4 router application for os-ken (OpenFlow 1.3) that answers
expiring packets the way os-ken's REST router does: it asks the switch for
INVALID_TTL packet-ins the OpenFlow 1.3 way (SET_ASYNC with that reason in
the master's packet-in mask), routes each subnet with a flow that
decrements the TTL and rewrites both MAC addresses, and answers a packet
whose TTL ran out with an ICMP "time exceeded" from the gateway address of
the port it came in on. Run by the OpenFlow switch's tests with
osken-manager.

The routes come from ROUTER_PORTS in the environment, one entry per port:
"PORT,GATEWAY_IP,GATEWAY_MAC,SUBNET/LEN,HOST_MAC;..." (the hosts' MAC
addresses are static: the test sets the hosts' neighbour entries, so the
router needs no ARP)."""

import os

from os_ken.base import app_manager
from os_ken.controller import ofp_event
from os_ken.controller.handler import CONFIG_DISPATCHER, MAIN_DISPATCHER, set_ev_cls
from os_ken.lib.packet import ethernet, icmp, ipv4, packet
from os_ken.ofproto import ether, inet, ofproto_v1_3


class TtlRouter13(app_manager.OSKenApp):
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.ports = {}
        for entry in os.environ["ROUTER_PORTS"].split(";"):
            port, gw_ip, gw_mac, subnet, host_mac = entry.split(",")
            self.ports[int(port)] = (gw_ip, gw_mac, subnet, host_mac)

    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def on_features(self, ev):
        dp = ev.msg.datapath
        ofp, parser = dp.ofproto, dp.ofproto_parser
        # Packet-ins for table misses, controller actions and expired TTLs
        # (master and equal); port status and flow removals as by default.
        pin = (1 << ofp.OFPR_NO_MATCH) | (1 << ofp.OFPR_ACTION) | (1 << ofp.OFPR_INVALID_TTL)
        status = (1 << ofp.OFPPR_ADD) | (1 << ofp.OFPPR_DELETE) | (1 << ofp.OFPPR_MODIFY)
        removed = (1 << ofp.OFPRR_IDLE_TIMEOUT) | (1 << ofp.OFPRR_HARD_TIMEOUT) | (1 << ofp.OFPRR_DELETE)
        dp.send_msg(parser.OFPSetAsync(dp, [pin, 0], [status, status], [removed, 0]))
        for port, (_gw_ip, gw_mac, subnet, host_mac) in self.ports.items():
            net, plen = subnet.split("/")
            mask = ".".join(str((0xFFFFFFFF << (32 - int(plen)) >> (24 - 8 * i)) & 0xFF) for i in range(4))
            match = parser.OFPMatch(eth_type=ether.ETH_TYPE_IP, ipv4_dst=(net, mask))
            actions = [parser.OFPActionDecNwTtl(),
                       parser.OFPActionSetField(eth_src=gw_mac),
                       parser.OFPActionSetField(eth_dst=host_mac),
                       parser.OFPActionOutput(port)]
            inst = [parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, actions)]
            dp.send_msg(parser.OFPFlowMod(datapath=dp, priority=100, match=match, instructions=inst))
        dp.send_msg(parser.OFPBarrierRequest(dp))
        self.logger.info("switch %016x: routes installed", dp.id)

    @set_ev_cls(ofp_event.EventOFPPacketIn, MAIN_DISPATCHER)
    def on_packet_in(self, ev):
        msg = ev.msg
        dp = msg.datapath
        ofp, parser = dp.ofproto, dp.ofproto_parser
        in_port = msg.match["in_port"]
        if msg.reason != ofp.OFPR_INVALID_TTL or in_port not in self.ports:
            return
        pkt = packet.Packet(msg.data)
        eth = pkt.get_protocol(ethernet.ethernet)
        ip = pkt.get_protocol(ipv4.ipv4)
        if eth is None or ip is None:
            return
        gw_ip, gw_mac, _subnet, _host_mac = self.ports[in_port]
        self.logger.info("invalid-ttl packet-in from port %s: %s -> %s", in_port, ip.src, ip.dst)
        # The offending datagram's header and first 8 bytes of its payload.
        offset = len(ethernet.ethernet()) if eth.ethertype == ether.ETH_TYPE_IP else None
        if offset is None:
            return
        quoted = msg.data[offset:offset + ip.header_length * 4 + 8]
        reply = packet.Packet()
        reply.add_protocol(ethernet.ethernet(dst=eth.src, src=gw_mac, ethertype=ether.ETH_TYPE_IP))
        reply.add_protocol(ipv4.ipv4(src=gw_ip, dst=ip.src, proto=inet.IPPROTO_ICMP, ttl=64))
        reply.add_protocol(icmp.icmp(type_=icmp.ICMP_TIME_EXCEEDED, code=0,
                                     data=icmp.TimeExceeded(data=quoted)))
        reply.serialize()
        dp.send_msg(parser.OFPPacketOut(datapath=dp, buffer_id=ofp.OFP_NO_BUFFER, in_port=ofp.OFPP_CONTROLLER,
                                        actions=[parser.OFPActionOutput(in_port)], data=reply.data))
