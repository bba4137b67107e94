"""os-ken's switch tester (os_ken.tests.switch.tester), with its waits set
from the environment and one race of its closed.

tester.py waits WAIT_TIMER seconds (3) for each reply or packet-in it
expects and sleeps INTERVAL seconds (1) before it reads the lookup
counters of a table-miss case. Neither wait is ever the passing outcome: a
reply that comes sooner ends the wait, and a table-miss check only reads
counters that must already have moved. On a busy 2-core machine 3 s and
1 s are sometimes too short:

  STS_WAIT=SECS     seconds to wait for an expected reply (tester.py: 3)
  STS_SETTLE=SECS   seconds before a table-miss case reads counters (tester.py: 1)

The race: tester.py sends a case's packet, then arms the wait for the
packet-in it expects; its packet-in handler drops a packet-in that comes
in between. A switch that forwards before the tester's next step then
fails the case ("Receiving timeout: increment in rx_packets in tester",
the packet having reached the tester switch). Here a packet-in that comes
after the packet was sent and before the wait is armed is kept and handed
to that wait.

And the tester switch's datapath: Open vSwitch applies flow changes to
its datapath's cached flows in a revalidator thread, after the barrier
reply the tester waits for. A case's packet sent before that round (on a
loaded machine) can hit a cached flow of the previous case's rules, a drop
while the tester's rules were being replaced, and never reach the
tester's controller. With STS_OVS_CTL set (the tester's ovs-vswitchd
control socket), each case's packet is sent after `ovs-appctl
revalidator/wait`, which returns once a revalidation round has run.

osken-manager loads this file as it would tester.py itself.
"""
import os
import subprocess

from os_ken.controller import handler, ofp_event
from os_ken.controller.handler import set_ev_cls
from os_ken.tests.switch import tester

tester.WAIT_TIMER = float(os.environ.get("STS_WAIT", tester.WAIT_TIMER))
tester.INTERVAL = float(os.environ.get("STS_SETTLE", tester.INTERVAL))


class PatientOfTester(tester.OfTester):
    """tester.OfTester, loaded under this module's name (osken-manager only
    starts apps whose class is defined in the module it was given), with
    early packet-ins kept (see the module documentation)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._early = None

    def _revalidated(self):
        ctl = os.environ.get("STS_OVS_CTL")
        if ctl:
            subprocess.run(["ovs-appctl", "-t", ctl, "revalidator/wait"], check=True, timeout=120,
                           stdout=subprocess.DEVNULL)

    def _one_time_packet_send(self, pkt):
        self._revalidated()
        # From now until the wait is armed, packet-ins are kept.
        self._early = []
        super()._one_time_packet_send(pkt)

    def _continuous_packet_send(self, pkt):
        self._revalidated()
        super()._continuous_packet_send(pkt)

    @set_ev_cls(ofp_event.EventOFPPacketIn, handler.MAIN_DISPATCHER)
    def packet_in_handler(self, ev):
        armed = self.state == tester.STATE_FLOW_MATCH_CHK and self.waiter
        if not armed and self._early is not None:
            self._early.append(ev.msg)
            return
        super().packet_in_handler(ev)

    def _wait(self):
        early, self._early = self._early, None
        if self.state == tester.STATE_FLOW_MATCH_CHK and early:
            self.logger.debug("a packet-in came before the wait was armed: kept")
            self.rcv_msgs = [early[0]]
            return
        super()._wait()
