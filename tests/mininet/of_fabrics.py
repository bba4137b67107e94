#!/usr/bin/python3
"""Sluice OpenFlow switches in Mininet under real controllers, through
sluice_mininet.SluiceOFSwitch and Mininet's RemoteController (without its
telnet check: the port is checked here).

  of_fabrics.py tree --port P [--depth 2] [--fanout 2]
      a tree of switches (Mininet's TreeTopo) under `sluice controller
      --app l2` ($SLUICE), started here on 127.0.0.1:P
  of_fabrics.py faucet-stack --port P --faucet FAUCET --dir DIR
      three switches in a line, stacked under Faucet (its stacking: a
      root by priority, stack ports verified by LLDP between the
      switches), two hosts on each in one VLAN; Faucet (from its venv,
      whose bin/ goes first on PATH) started here on 127.0.0.1:P with
      its configuration, log and exception log in DIR

Then all-pairs ping (Mininet's pingAll, retried while the controller
settles: a stack is usable once LLDP has seen both ends of each link)
and one iperf3 flow from the first host to the last. Prints one JSON
object on the last line. Run as root with Debian's /usr/bin/python3.
"""
import argparse
import json
import os
import subprocess
import sys
import time

from mininet.log import setLogLevel
from mininet.net import Mininet
from mininet.node import Host, RemoteController
from mininet.topo import Topo
from mininet.topolib import TreeTopo

from sluice_mininet import SluiceOFSwitch


class QuietHost(Host):
    """IPv6 off: no neighbour discovery while the tests count packets."""

    def config(self, **params):
        r = Host.config(self, **params)
        self.cmd("sysctl -qw net.ipv6.conf.all.disable_ipv6=1")
        return r


class SocketCheckedController(RemoteController):
    """Mininet's RemoteController without its own listening check.

    Why: that check runs `echo A | telnet -e A IP PORT` in the controller
    node's shell and waits for the shell's end-of-command marker; telnet
    switches the node's terminal mode as it exits, and once in a while the
    marker never comes and the script waits for good (seen on a busy
    machine, telnet's output read, telnet gone, the shell idle). This
    script waits for the controller's port itself first
    (`wait_listening`), with a socket."""

    def checkListening(self):
        pass


class StackLine(Topo):
    """sw1 - sw2 - sw3, two hosts on each (ports 1 and 2); stack links on
    ports 3 (toward the lower-numbered switch) and 4 (the higher)."""

    def build(self):
        sws = [self.addSwitch("s%d" % i, dpid="%016x" % i) for i in (1, 2, 3)]
        for i, sw in enumerate(sws, start=1):
            for j in (1, 2):
                h = self.addHost("h%d%d" % (i, j), ip="10.0.0.%d%d/24" % (i, j))
                self.addLink(h, sw, port2=j)
        self.addLink(sws[0], sws[1], port1=4, port2=3)
        self.addLink(sws[1], sws[2], port1=4, port2=3)


FAUCET_YAML = """vlans:
  office:
    vid: 100
dps:
  sw1:
    dp_id: 0x1
    hardware: "Open vSwitch"
    stack:
      priority: 1
    interfaces:
      1: {native_vlan: office}
      2: {native_vlan: office}
      4: {stack: {dp: sw2, port: 3}}
  sw2:
    dp_id: 0x2
    hardware: "Open vSwitch"
    interfaces:
      1: {native_vlan: office}
      2: {native_vlan: office}
      3: {stack: {dp: sw1, port: 4}}
      4: {stack: {dp: sw3, port: 3}}
  sw3:
    dp_id: 0x3
    hardware: "Open vSwitch"
    interfaces:
      1: {native_vlan: office}
      2: {native_vlan: office}
      3: {stack: {dp: sw2, port: 4}}
"""


def wait_listening(port, proc, what, timeout=120):
    import socket
    t0 = time.time()
    while time.time() - t0 < timeout:
        if proc.poll() is not None:
            raise SystemExit("%s exited at start (%s)" % (what, proc.returncode))
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise SystemExit("%s did not listen on %d" % (what, port))


def ping_all_until_clean(net, tries, wait):
    """pingAll until a round loses nothing (at most `tries` rounds); the losses of each round."""
    rounds = []
    for _ in range(tries):
        loss = net.pingAll(timeout="3")
        rounds.append(loss)
        if loss == 0:
            break
        time.sleep(wait)
    return rounds


def iperf(net, first, last):
    last.cmd("iperf3 -s -D -1 -p 5201")
    time.sleep(0.5)
    out = first.cmd("timeout 60 iperf3 -c %s -p 5201 -t 2 -J" % last.IP())
    try:
        return json.loads(out)["end"]["sum_received"]["bits_per_second"], ""
    except (ValueError, KeyError):
        return 0, out[-1500:]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["tree", "faucet-stack"])
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--depth", type=int, default=2)
    p.add_argument("--fanout", type=int, default=2)
    p.add_argument("--faucet")
    p.add_argument("--dir", default="/tmp")
    a = p.parse_args()
    setLogLevel("warning")
    result = {"mode": a.mode}
    ctl = None
    log_path = os.path.join(a.dir, "controller.log")
    try:
        log = open(log_path, "w")
        if a.mode == "tree":
            sluice = os.environ.get("SLUICE", "sluice")
            ctl = subprocess.Popen([sluice, "controller", "--listen", "tcp:127.0.0.1:%d" % a.port, "--app", "l2"],
                                   stdout=log, stderr=log)
            topo = TreeTopo(depth=a.depth, fanout=a.fanout)
        else:
            conf = os.path.join(a.dir, "faucet.yaml")
            with open(conf, "w") as f:
                f.write(FAUCET_YAML)
            env = dict(os.environ)
            env["PATH"] = os.path.dirname(a.faucet) + ":" + env.get("PATH", "")
            env.update(FAUCET_CONFIG=conf, FAUCET_LOG=os.path.join(a.dir, "faucet.log"),
                       FAUCET_EXCEPTION_LOG=os.path.join(a.dir, "faucet.exc"),
                       FAUCET_PROMETHEUS_ADDR="127.0.0.1", FAUCET_PROMETHEUS_PORT=str(a.port + 1))
            ctl = subprocess.Popen([a.faucet, "--ryu-ofp-listen-host", "127.0.0.1",
                                    "--ryu-ofp-tcp-listen-port", str(a.port)], stdout=log, stderr=log, env=env)
            topo = StackLine()
        wait_listening(a.port, ctl, "the controller")
        net = Mininet(topo=topo, switch=SluiceOFSwitch, host=QuietHost, build=False, autoSetMacs=True,
                      controller=None)
        net.addController(SocketCheckedController("c0", ip="127.0.0.1", port=a.port))
        net.build()
        try:
            net.start()
            result["switches"] = len(net.switches)
            result["hosts"] = len(net.hosts)
            # Faucet brings a stack up with LLDP between the switches: give it rounds.
            result["ping_rounds"] = ping_all_until_clean(net, 12 if a.mode == "faucet-stack" else 4, 5)
            result["ping_loss_pct"] = result["ping_rounds"][-1]
            result["iperf_bps"], failed = iperf(net, net.hosts[0], net.hosts[-1])
            if failed:
                result["iperf_output"] = failed
            result["switch_alive"] = all(sw.connected() for sw in net.switches)
        finally:
            net.stop()
    finally:
        if ctl is not None:
            ctl.terminate()
            try:
                ctl.wait(timeout=20)
            except subprocess.TimeoutExpired:
                ctl.kill()
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
