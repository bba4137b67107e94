"""A MAC-learning switch application for os-ken (OpenFlow 1.3), the
workload of os-ken's old simple_switch_13 example (which os-ken's PyPI
releases no longer ship): every packet the switch does not know goes to
the controller (a table-miss entry), which learns the source MAC's port,
installs a flow for a known destination and sends the packet on with a
packet-out (flooding an unknown destination). Run by the OpenFlow switch's
tests with osken-manager."""

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

    @staticmethod
    def apply(dp, actions):
        return [dp.ofproto_parser.OFPInstructionActions(dp.ofproto.OFPIT_APPLY_ACTIONS, actions)]

    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def on_features(self, ev):
        dp = ev.msg.datapath
        ofp, parser = dp.ofproto, dp.ofproto_parser
        to_controller = parser.OFPActionOutput(ofp.OFPP_CONTROLLER, ofp.OFPCML_NO_BUFFER)
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
        if out != ofp.OFPP_FLOOD:
            match = parser.OFPMatch(in_port=in_port, eth_src=eth.src, eth_dst=eth.dst)
            dp.send_msg(parser.OFPFlowMod(datapath=dp, priority=1, match=match,
                                          instructions=self.apply(dp, actions)))
        dp.send_msg(parser.OFPPacketOut(datapath=dp, buffer_id=ofp.OFP_NO_BUFFER, in_port=in_port,
                                        actions=actions, data=msg.data))
        self.logger.info("packet-in %s -> %s from port %s: out %s", eth.src, eth.dst, in_port, out)
