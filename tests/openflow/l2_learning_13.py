"""A MAC-learning switch application for os-ken (OpenFlow 1.3), the
workload of os-ken's old simple_switch_13 example (which os-ken's PyPI
releases no longer ship): every packet the switch does not know goes to
the controller (a table-miss entry), which learns the source MAC's port,
installs a flow for a known destination and sends the packet on with a
packet-out (flooding an unknown destination). Run by the OpenFlow switch's
tests with osken-manager.

With L2_MISS_MAX_LEN=N in the environment, the table-miss entry asks for
N bytes of each packet: the switch keeps the packet in a buffer, and the
application sends it on by naming its buffer id in the flow-mod (known
destination: the switch runs the packet through the new flow) or in the
packet-out (flood), as os-ken's simple_switch_13 used to."""

import os

from os_ken.base import app_manager
from os_ken.controller import ofp_event
from os_ken.controller.handler import CONFIG_DISPATCHER, MAIN_DISPATCHER, set_ev_cls
from os_ken.lib.packet import ethernet, packet
from os_ken.ofproto import ofproto_v1_3


class L2Learning13(app_manager.OSKenApp):
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.port_of = {}
        self.miss_max_len = int(os.environ.get("L2_MISS_MAX_LEN", ofproto_v1_3.OFPCML_NO_BUFFER))

    @staticmethod
    def apply(dp, actions):
        return [dp.ofproto_parser.OFPInstructionActions(dp.ofproto.OFPIT_APPLY_ACTIONS, actions)]

    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def on_features(self, ev):
        dp = ev.msg.datapath
        ofp, parser = dp.ofproto, dp.ofproto_parser
        to_controller = parser.OFPActionOutput(ofp.OFPP_CONTROLLER, self.miss_max_len)
        dp.send_msg(parser.OFPFlowMod(datapath=dp, priority=0, match=parser.OFPMatch(),
                                      instructions=self.apply(dp, [to_controller])))
        self.logger.info("switch %016x: table-miss entry installed", dp.id)

    @set_ev_cls(ofp_event.EventOFPPacketIn, MAIN_DISPATCHER)
    def on_packet_in(self, ev):
        msg = ev.msg
        dp = msg.datapath
        ofp, parser = dp.ofproto, dp.ofproto_parser
        in_port = msg.match["in_port"]
        eth = packet.Packet(msg.data).get_protocols(ethernet.ethernet)[0]
        known = self.port_of.setdefault(dp.id, {})
        known[eth.src] = in_port
        out = known.get(eth.dst, ofp.OFPP_FLOOD)
        actions = [parser.OFPActionOutput(out)]
        buffered = msg.buffer_id != ofp.OFP_NO_BUFFER
        self.logger.info("packet-in %s -> %s from port %s: out %s, buffer %#x", eth.src, eth.dst, in_port, out,
                         msg.buffer_id)
        if out != ofp.OFPP_FLOOD:
            match = parser.OFPMatch(in_port=in_port, eth_src=eth.src, eth_dst=eth.dst)
            dp.send_msg(parser.OFPFlowMod(datapath=dp, priority=1, match=match, buffer_id=msg.buffer_id,
                                          instructions=self.apply(dp, actions)))
            if buffered:
                return
        dp.send_msg(parser.OFPPacketOut(datapath=dp, buffer_id=msg.buffer_id, in_port=in_port,
                                        actions=actions, data=None if buffered else msg.data))
