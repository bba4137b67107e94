#!/usr/bin/python3
"""A routed tree of Sluice P4 switches in Mininet: an example topology
runner, and the shape Sluice's fabric test and idle benchmark use.

  sluice_fabric.py [--switches N] [--json ROUTER.json] [--cli SIMPLE_SWITCH_CLI]
                   [--ping-all] [--iperf] [--idle SECONDS] [--interactive]

The tree: one root switch, A aggregation switches under it (A = the
integer square root of N - 1) and the other N - 1 - A switches as leaves,
spread evenly over the aggregation switches; one host per leaf (per
aggregation switch that has no leaf). Every switch is a SluiceP4Switch
(bmv2's P4Switch arguments, so with --nanolog, a Thrift port and a device
id of its own) running the router example (router.p4: IPv4 longest-prefix
match, next hop rewriting the MAC addresses). The host under leaf l of
aggregation switch a is 10.a.l.1/24 with gateway 10.a.l.254; the routes,
entered with the stock simple_switch_CLI through each switch's Thrift
port, are the summarised ones a routed tree has: a leaf sends its own
/24 down and everything else up (0.0.0.0/0), an aggregation switch sends
each leaf's /24 down and the rest up, the root sends 10.a.0.0/16 to
aggregation switch a.

--ping-all pings every host from every other (Mininet's pingAll);
--iperf runs one iperf3 flow between the first and the last host;
--idle S then measures, over S seconds with no traffic, every switch
process's CPU time, each thread's voluntary wake-ups and the resident
memory (from /proc). --interactive opens Mininet's CLI instead of ending.
The result is printed as one JSON object on the last line.

Run as root with Debian's /usr/bin/python3 (Mininet); the Sluice binary
comes from $SLUICE or PATH (see sluice_mininet).
"""
import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import time

from mininet.cli import CLI
from mininet.log import setLogLevel
from mininet.net import Mininet
from mininet.node import Host
from mininet.topo import Topo

from sluice_mininet import SluiceP4Switch


class P4Host(Host):
    """A host as the P4 tutorials configure theirs: checksum and
    segmentation offloads off (the switch sees the frames the host
    computes), IPv6 off (no neighbour discovery traffic while idle)."""

    def config(self, **params):
        r = Host.config(self, **params)
        for off in ("rx", "tx", "sg"):
            self.cmd("ethtool --offload %s %s off" % (self.defaultIntf().name, off))
        self.cmd("sysctl -qw net.ipv6.conf.all.disable_ipv6=1")
        self.cmd("sysctl -qw net.ipv6.conf.default.disable_ipv6=1")
        return r


def plan(n):
    """(aggregation count, [(agg index, leaf index)...]) for n switches."""
    if n < 3:
        raise SystemExit("--switches: at least 3 (a root, an aggregation switch and a leaf)")
    aggs = max(1, math.isqrt(n - 1))
    leaves = n - 1 - aggs
    per = [leaves // aggs + (1 if a < leaves % aggs else 0) for a in range(aggs)]
    return aggs, [(a + 1, l + 1) for a in range(aggs) for l in range(per[a])]


class RoutedTree(Topo):
    def build(self, n=16, **switch_opts):
        aggs, leaves = plan(n)
        root = self.addSwitch("s1", cls=SluiceP4Switch, **switch_opts)
        self.agg_names = []
        self.hosts_at = {}
        k = 2
        for a in range(1, aggs + 1):
            name = "s%d" % k
            k += 1
            self.addSwitch(name, cls=SluiceP4Switch, **switch_opts)
            self.addLink(name, root)
            self.agg_names.append(name)
        self.leaf_names = {}
        for a, l in leaves:
            name = "s%d" % k
            k += 1
            self.addSwitch(name, cls=SluiceP4Switch, **switch_opts)
            self.addLink(name, self.agg_names[a - 1])
            self.leaf_names[(a, l)] = name
        # One host per leaf; an aggregation switch without a leaf gets one itself (leaf index 0).
        for a in range(1, aggs + 1):
            own = [key for key in leaves if key[0] == a]
            for key in own or [(a, 0)]:
                at = self.leaf_names.get(key, self.agg_names[a - 1])
                h = self.addHost("h%d_%d" % key, ip="10.%d.%d.1/24" % key)
                self.addLink(h, at)
                self.hosts_at[key] = (h, at)


def port_to(sw, peer):
    """(Sluice port number on `sw` toward node `peer`, the MAC of that port, the peer's MAC on the link)."""
    for intf in sw.intfList():
        link = intf.link
        if link is None:
            continue
        other = link.intf2 if link.intf1 is intf else link.intf1
        if other.node is peer:
            return sw.ports[intf], intf.MAC(), other.MAC()
    raise RuntimeError("%s has no link to %s" % (sw.name, peer.name))


def routes(net, topo):
    """The CLI commands of each switch: {switch name: [command, ...]}."""
    cmds = {}

    def nh(sw, hop, peer):
        port, smac, dmac = port_to(sw, peer)
        return "table_add RouterIngress.nexthop RouterIngress.forward %d => %d %s %s" % (hop, port, smac, dmac)

    def lpm(prefix, hop):
        return "table_add RouterIngress.ipv4_lpm RouterIngress.set_nexthop %s => %d" % (prefix, hop)

    root = net.get("s1")
    rc = cmds.setdefault("s1", [])
    for a, agg_name in enumerate(topo.agg_names, start=1):
        agg = net.get(agg_name)
        rc += [lpm("10.%d.0.0/16" % a, a), nh(root, a, agg)]
        ac = cmds.setdefault(agg_name, [lpm("0.0.0.0/0", 1000), nh(agg, 1000, root)])
        for key, (h, at) in topo.hosts_at.items():
            if key[0] != a:
                continue
            below = net.get(at) if at != agg_name else net.get(h)
            ac += [lpm("10.%d.%d.0/24" % key, 1 + key[1]), nh(agg, 1 + key[1], below)]
    for key, (h, at) in topo.hosts_at.items():
        host = net.get(h)
        sw = net.get(at)
        if at not in topo.agg_names:
            up = net.get(topo.agg_names[key[0] - 1])
            cmds[at] = [lpm("10.%d.%d.0/24" % key, 1), nh(sw, 1, host), lpm("0.0.0.0/0", 2), nh(sw, 2, up)]
        # The host's gateway: the switch's port toward it, by a static neighbour entry (the router answers no ARP).
        _, gw_mac, _ = port_to(sw, host)
        host.cmd("ip route add default via 10.%d.%d.254" % key)
        host.cmd("ip neigh replace 10.%d.%d.254 lladdr %s dev %s" % (key + (gw_mac, host.defaultIntf().name)))
    return cmds


def program(net, cmds, cli):
    """Enters each switch's commands with the CLI; returns the errors it printed."""
    errors = []
    for name, lines in cmds.items():
        sw = net.get(name)
        r = subprocess.run([cli, "--thrift-port", str(sw.thrift_port)], input="\n".join(lines) + "\n",
                           text=True, capture_output=True, timeout=600)
        bad = [line for line in r.stdout.splitlines() + r.stderr.splitlines() if "Error" in line or "error" in line]
        if r.returncode != 0 or bad:
            errors.append({"switch": name, "exit": r.returncode, "lines": bad[:5] or r.stderr[-500:]})
    return errors


def proc_sample(pids):
    """{pid: (cpu ticks, {tid: (name, voluntary switches)}, rss kB)}."""
    out = {}
    for pid in pids:
        try:
            with open("/proc/%d/stat" % pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            ticks = int(fields[11]) + int(fields[12])
            threads = {}
            for tid in os.listdir("/proc/%d/task" % pid):
                name, vol = "", 0
                with open("/proc/%d/task/%s/status" % (pid, tid)) as f:
                    for line in f:
                        if line.startswith("Name:"):
                            name = line.split(None, 1)[1].strip()
                        elif line.startswith("voluntary_ctxt_switches:"):
                            vol = int(line.split()[1])
                threads[tid] = (name, vol)
            rss = 0
            with open("/proc/%d/status" % pid) as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        rss = int(line.split()[1])
            out[pid] = (ticks, threads, rss)
        except (FileNotFoundError, ProcessLookupError):
            pass
    return out


def measure_idle(switches, seconds):
    """CPU share of one core, the busiest thread's wake-ups per second and memory, over `seconds`."""
    hz = os.sysconf("SC_CLK_TCK")
    names = {sw.sw_pid: sw.name for sw in switches if sw.sw_pid}
    pids = list(names)
    a = proc_sample(pids)
    t0 = time.time()
    time.sleep(seconds)
    b = proc_sample(pids)
    dt = time.time() - t0
    cpu = sum(b[p][0] - a[p][0] for p in b if p in a) / hz / dt
    wakes = {}
    for p in b:
        if p not in a:
            continue
        for tid, (name, vol) in b[p][1].items():
            if tid in a[p][1]:
                rate = (vol - a[p][1][tid][1]) / dt
                wakes[name] = max(wakes.get(name, 0.0), rate)
    rss = [b[p][2] for p in b]
    return {
        "seconds": round(dt, 1),
        "switches": len(b),
        "cpu_share_of_one_core": round(cpu, 4),
        "busiest_thread_wakeups_per_s": {k: round(v, 1) for k, v in sorted(wakes.items())},
        "rss_kb_total": sum(rss),
        "rss_kb_max": max(rss) if rss else 0,
        "rss_kb_mean": (sum(rss) // len(rss)) if rss else 0,
        "rss_kb_largest": sorted(((b[p][2], names[p]) for p in b), reverse=True)[:5],
    }


def default_json():
    here = os.path.dirname(os.path.realpath(__file__))
    for p in (os.path.join(here, "..", "examples", "router.json"), "examples/router.json"):
        if os.path.isfile(p):
            return os.path.abspath(p)
    return None


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--switches", type=int, default=16)
    p.add_argument("--json", default=default_json(), help="the router example's BMv2 JSON")
    p.add_argument("--cli", default=shutil.which("simple_switch_CLI"), help="bmv2's simple_switch_CLI")
    p.add_argument("--ping-all", action="store_true")
    p.add_argument("--iperf", action="store_true")
    p.add_argument("--idle", type=float, default=0.0, metavar="SECONDS")
    p.add_argument("--interactive", action="store_true")
    p.add_argument("--thrift-port", type=int, default=9090, help="the first switch's Thrift port")
    a = p.parse_args()
    if not a.json or not os.path.isfile(a.json):
        raise SystemExit("--json: the router example's JSON (examples/router.json) is needed")
    if not a.cli:
        raise SystemExit("--cli: no simple_switch_CLI on PATH")
    setLogLevel("warning")
    SluiceP4Switch.next_thrift_port = a.thrift_port
    topo = RoutedTree(n=a.switches, json_path=a.json)
    net = Mininet(topo=topo, host=P4Host, controller=None, autoSetMacs=True)
    result = {"switches": a.switches, "hosts": len(topo.hosts_at)}
    try:
        t = time.time()
        net.start()
        result["start_s"] = round(time.time() - t, 1)
        cmds = routes(net, topo)
        t = time.time()
        result["cli_errors"] = program(net, cmds, a.cli)
        result["entries"] = sum(len(c) for c in cmds.values())
        result["program_s"] = round(time.time() - t, 1)
        if a.ping_all:
            t = time.time()
            result["ping_loss_pct"] = net.pingAll(timeout="5")
            result["ping_s"] = round(time.time() - t, 1)
        if a.iperf:
            hosts = [net.get(h) for h, _ in topo.hosts_at.values()]
            first, last = hosts[0], hosts[-1]
            last.cmd("iperf3 -s -D -1 -p 5201")
            time.sleep(0.5)
            out = first.cmd("iperf3 -c %s -p 5201 -t 3 -J" % last.IP())
            try:
                result["iperf_bps"] = json.loads(out)["end"]["sum_received"]["bits_per_second"]
            except (ValueError, KeyError):
                result["iperf_bps"] = 0
                result["iperf_output"] = out[-1000:]
        if a.idle > 0:
            time.sleep(2)
            result["idle"] = measure_idle(net.switches, a.idle)
        if a.interactive:
            CLI(net)
    finally:
        net.stop()
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
