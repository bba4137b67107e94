"""PTF tests of the router example on a switch whose packets travel over
nanomsg (bmv2's --packet-in), run by PTF's own `nn` platform:

  ptf --test-dir tests/ptf --platform nn \
      --device-socket 0-{1,2}@ipc:///tmp/sw.ipc router_test

The switch runs ../shared/examples/router.json with the routes
10.0.1.0/24 -> port 1 and 10.0.2.0/24 -> port 2 (MACs as in the tests'
commands file: switch 02:00:00:00:0N:fe, host 02:00:00:00:0N:01).
"""
import ptf
import ptf.testutils as tu
from ptf.base_tests import BaseTest

SW = {1: "02:00:00:00:01:fe", 2: "02:00:00:00:02:fe"}
HOST = {1: "02:00:00:00:01:01", 2: "02:00:00:00:02:01"}


class RouterBase(BaseTest):
    def setUp(self):
        BaseTest.setUp(self)
        self.dataplane = ptf.dataplane_instance
        self.dataplane.flush()


class Forward(RouterBase):
    """A packet for each host's subnet leaves by that host's port, its MACs
    rewritten and its TTL decremented; the same for the other direction."""

    def runTest(self):
        for ingress, egress, dst in [(1, 2, "10.0.2.1"), (2, 1, "10.0.1.1")]:
            pkt = tu.simple_tcp_packet(
                eth_dst=SW[ingress], eth_src=HOST[ingress], ip_src="10.0.9.9", ip_dst=dst, ip_ttl=64
            )
            exp = tu.simple_tcp_packet(
                eth_dst=HOST[egress], eth_src=SW[egress], ip_src="10.0.9.9", ip_dst=dst, ip_ttl=63
            )
            tu.send_packet(self, ingress, pkt)
            tu.verify_packets(self, exp, [egress])


class NoRoute(RouterBase):
    """A packet with no route and one whose TTL is spent go nowhere."""

    def runTest(self):
        pkt = tu.simple_tcp_packet(eth_dst=SW[1], ip_dst="192.0.2.1")
        tu.send_packet(self, 1, pkt)
        spent = tu.simple_tcp_packet(eth_dst=SW[1], ip_dst="10.0.2.1", ip_ttl=1)
        tu.send_packet(self, 1, spent)
        tu.verify_no_other_packets(self)
