"""A MAC-learning switch application for os-ken in OpenFlow 1.0, the
workload of os-ken's old 1.0 simple_switch example: an OpenFlow 1.0 switch
sends every packet that misses its table to the controller (no table-miss
entry needed, unlike 1.3), buffered with the first miss_send_len bytes;
the application learns the source MAC's port, installs a flow for a known
destination naming the switch's buffer (the switch runs the packet through
the new flow) and floods an unknown destination with a packet-out of the
buffer. Run by the OpenFlow switch's tests with osken-manager."""

from os_ken.base import app_manager
from os_ken.controller import ofp_event
from os_ken.controller.handler import MAIN_DISPATCHER, set_ev_cls
from os_ken.lib.packet import ethernet, packet
from os_ken.ofproto import ofproto_v1_0


class L2Learning10(app_manager.OSKenApp):
    OFP_VERSIONS = [ofproto_v1_0.OFP_VERSION]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.port_of = {}

    @set_ev_cls(ofp_event.EventOFPPacketIn, MAIN_DISPATCHER)
    def on_packet_in(self, ev):
        msg = ev.msg
        dp = msg.datapath
        ofp, parser = dp.ofproto, dp.ofproto_parser
        eth = packet.Packet(msg.data).get_protocols(ethernet.ethernet)[0]
        known = self.port_of.setdefault(dp.id, {})
        known[eth.src] = msg.in_port
        out = known.get(eth.dst, ofp.OFPP_FLOOD)
        actions = [parser.OFPActionOutput(out)]
        self.logger.info("packet-in %s -> %s from port %s (reason %s): out %s, buffer %#x", eth.src, eth.dst,
                         msg.in_port, msg.reason, out, msg.buffer_id)
        buffered = msg.buffer_id != ofp.OFP_NO_BUFFER
        if out != ofp.OFPP_FLOOD:
            match = parser.OFPMatch(in_port=msg.in_port, dl_src=eth.src, dl_dst=eth.dst)
            dp.send_msg(parser.OFPFlowMod(datapath=dp, match=match, cookie=0, command=ofp.OFPFC_ADD,
                                          idle_timeout=0, hard_timeout=0, priority=ofp.OFP_DEFAULT_PRIORITY,
                                          buffer_id=msg.buffer_id, actions=actions))
            if buffered:
                return
        dp.send_msg(parser.OFPPacketOut(datapath=dp, buffer_id=msg.buffer_id, in_port=msg.in_port,
                                        actions=actions, data=None if buffered else msg.data))
