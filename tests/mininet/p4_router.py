#!/usr/bin/python3
"""Two hosts and one Sluice switch in Mininet, started through
sluice_mininet.SluiceP4Switch with bmv2's P4Switch arguments (so with
--nanolog and, here, --log-file, as bmv2's class passes them); the router
example's entries installed with the stock simple_switch_CLI; ping and
one iperf3 flow; a subscriber command (given) reads the event stream.

  p4_router.py --json ROUTER.json --cli SIMPLE_SWITCH_CLI --log-file PATH
               [--subscriber 'CMD ...'] [--device-id N] [--thrift-port N]

Prints one JSON object: pings answered, iperf3's bits per second, the
subscriber's output lines. Run with Debian's /usr/bin/python3 (Mininet).
"""
import argparse
import json
import shlex
import subprocess
import sys
import time

from mininet.log import setLogLevel
from mininet.net import Mininet
from mininet.node import Host
from mininet.topo import Topo

from sluice_mininet import SluiceP4Switch

MAC_H1, MAC_H2 = "02:00:00:00:01:01", "02:00:00:00:02:01"
MAC_SW1, MAC_SW2 = "02:00:00:00:01:fe", "02:00:00:00:02:fe"


class P4Host(Host):
    """A host as bmv2's P4Host: offloads off, IPv6 off."""

    def config(self, **params):
        r = Host.config(self, **params)
        for off in ("rx", "tx", "sg"):
            self.cmd("ethtool --offload %s %s off" % (self.defaultIntf().name, off))
        self.cmd("sysctl -w net.ipv6.conf.all.disable_ipv6=1")
        return r


class TwoHosts(Topo):
    def build(self, **switch_opts):
        s1 = self.addSwitch("s1", cls=SluiceP4Switch, **switch_opts)
        h1 = self.addHost("h1", ip="10.0.1.1/24", mac=MAC_H1)
        h2 = self.addHost("h2", ip="10.0.2.1/24", mac=MAC_H2)
        self.addLink(h1, s1)
        self.addLink(h2, s1)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--json", required=True)
    p.add_argument("--cli", required=True)
    p.add_argument("--log-file", required=True)
    p.add_argument("--subscriber")
    p.add_argument("--device-id", type=int, default=0)
    p.add_argument("--thrift-port", type=int, default=9090)
    a = p.parse_args()
    setLogLevel("warning")
    topo = TwoHosts(json_path=a.json, thrift_port=a.thrift_port, log_file=a.log_file, device_id=a.device_id)
    net = Mininet(topo=topo, host=P4Host, controller=None)
    result = {}
    sub = None
    try:
        net.start()
        s1, h1, h2 = net.get("s1"), net.get("h1"), net.get("h2")
        for h, gw, mac in ((h1, "10.0.1.254", MAC_SW1), (h2, "10.0.2.254", MAC_SW2)):
            h.cmd("ip route add default via %s" % gw)
            h.cmd("ip neigh replace %s lladdr %s dev %s" % (gw, mac, h.defaultIntf().name))
        commands = (
            "table_add RouterIngress.ipv4_lpm RouterIngress.set_nexthop 10.0.1.0/24 => 1\n"
            "table_add RouterIngress.ipv4_lpm RouterIngress.set_nexthop 10.0.2.0/24 => 2\n"
            "table_add RouterIngress.nexthop RouterIngress.forward 1 => 1 %s %s\n"
            "table_add RouterIngress.nexthop RouterIngress.forward 2 => 2 %s %s\n" % (MAC_SW1, MAC_H1, MAC_SW2, MAC_H2)
        )
        cli = subprocess.run([a.cli, "--thrift-port", str(s1.thrift_port)], input=commands, text=True,
                             capture_output=True, timeout=300)
        result["cli"] = cli.stdout
        if a.subscriber:
            sub = subprocess.Popen(shlex.split(a.subscriber) + [s1.nanomsg], stdout=subprocess.PIPE, text=True)
            result["subscribed"] = sub.stdout.readline().strip()
        out = h1.cmd("ping -c 5 -i 0.2 -W 5 10.0.2.1")
        result["pings"] = sum(1 for line in out.splitlines() if "bytes from 10.0.2.1" in line)
        h2.cmd("iperf3 -s -D -1 -p 5201")
        time.sleep(0.5)
        iperf = h1.cmd("iperf3 -c 10.0.2.1 -p 5201 -t 2 -J")
        try:
            result["iperf_bps"] = json.loads(iperf)["end"]["sum_received"]["bits_per_second"]
        except (ValueError, KeyError):
            result["iperf_bps"] = 0
            result["iperf_output"] = iperf[-2000:]
        if sub is not None:
            try:
                out, _ = sub.communicate(timeout=120)
            except subprocess.TimeoutExpired:
                sub.kill()
                out, _ = sub.communicate()
            result["events"] = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    finally:
        if sub is not None and sub.poll() is None:
            sub.kill()
        net.stop()
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
