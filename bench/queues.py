#!/usr/bin/env python3
"""Port queues of `sluice openflow` on live ports: how closely a queue's
maximum rate holds, the delay a class in its own queue sees while another
queue is congested, and what queues cost when nothing congests them.

    bench/queues.py [--sluice PATH] [--secs S] [--rounds R] [--rates 1M,10M,100M,1G]

Topology: hosts qb-h1 (10.0.0.1/24) and qb-h2 (10.0.0.2/24), each on a
veth pair to the switch namespace qb-sw (ends qb-s1, OpenFlow port 1, and
qb-s2, port 2); the hosts' ends have tx checksum, TSO, GSO and
scatter-gather off (every frame at most 1514 bytes). The switch is
`sluice openflow` on AF_PACKET ports, its flows set with ovs-ofctl:
in_port=2 -> output:1, and in_port=1 -> set_queue:1,output:2 (the queue
under test on port 2).

Measured, in this order:
1. the ceiling: queue 1 configured without a rate (counted, not shaped),
   iperf3 UDP h1 -> h2 at an unlimited offered rate (1400-byte datagrams);
2. shaping: for each rate R of --rates below the ceiling, and for 90% of
   the ceiling, --rounds runs with queue 1 at max-rate=R and UDP offered at
   1.5 R (unlimited above 1 Gbit/s), each run followed by a run of the
   ceiling again (the machine's speed drifts within minutes): the rate the
   queue sent, in frame bits per second, from two readings of `ovs-ofctl
   queue-stats` (bytes, and the queue's own duration) taken 1 s into the
   run and 0.5 s before its end; the median's error against R (the goal:
   within 2%), each run's figure, and the ceilings measured between them;
3. a class under congestion: queue 1 shaped to 10 Mbit/s (100 packets deep)
   with UDP offered at 20 Mbit/s, and ICMP with TOS 0xb8 (DSCP EF) sent by a flow into queue 2
   (not shaped) of the same port: ping's average round trip for that class,
   and for plain ping in the congested queue 1;
4. the cost of queues that never congest: iperf3 TCP h1 -> h2 through
   output:2 without queues, and through set_queue:1 into a queue shaped to
   100 Gbit/s (never reached), alternated --rounds times; medians and their
   ratio.

Prints one Markdown table per part and a last line `result: ...`.

Needs root, iproute2, iperf3, ethtool, ping and ovs-ofctl
(openvswitch-common), installed with apt when missing. Uses
target/release/sluice (or --sluice); it does not build it. Everything it
creates (namespaces qb-*, their veths) is removed on exit, also on failure.
"""

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

H1, H2, SW = "qb-h1", "qb-h2", "qb-sw"
OF_PORT = 16710
TARGET = f"tcp:127.0.0.1:{OF_PORT}"


def sh(*args, check=True, **kw):
    return subprocess.run(list(args), check=check, text=True, capture_output=True, **kw)


def ns(n, *args, check=True):
    return sh("ip", "netns", "exec", n, *args, check=check)


def ensure_tools():
    need = []
    for tool, pkg in [("ip", "iproute2"), ("iperf3", "iperf3"), ("ethtool", "ethtool"), ("ping", "iputils-ping"),
                      ("ovs-ofctl", "openvswitch-common")]:
        if shutil.which(tool) is None:
            need.append(pkg)
    if need:
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        r = subprocess.run(["apt-get", "install", "-y", "-q", *need], env=env, capture_output=True)
        if r.returncode != 0:
            subprocess.run(["apt-get", "update", "-q"], env=env, capture_output=True)
            r = subprocess.run(["apt-get", "install", "-y", "-q", *need], env=env, capture_output=True)
        if r.returncode != 0:
            sys.exit(f"queues: could not install {' '.join(need)} with apt-get")


def teardown():
    for n in (H1, H2, SW):
        pids = sh("ip", "netns", "pids", n, check=False).stdout.split()
        for p in pids:
            sh("kill", p, check=False)
        sh("ip", "netns", "del", n, check=False)


def setup():
    teardown()
    for n in (H1, H2, SW):
        sh("ip", "netns", "add", n)
        sh("ip", "-n", n, "link", "set", "lo", "up")
    sh("ip", "link", "add", "qb-h1e", "netns", H1, "type", "veth", "peer", "name", "qb-s1", "netns", SW)
    sh("ip", "link", "add", "qb-h2e", "netns", H2, "type", "veth", "peer", "name", "qb-s2", "netns", SW)
    for e in ("qb-s1", "qb-s2"):
        sh("ip", "-n", SW, "link", "set", e, "up")
    for n, e, a in ((H1, "qb-h1e", "10.0.0.1/24"), (H2, "qb-h2e", "10.0.0.2/24")):
        sh("ip", "-n", n, "addr", "add", a, "dev", e)
        sh("ip", "-n", n, "link", "set", e, "up")
        ns(n, "ethtool", "-K", e, "tx", "off", "tso", "off", "gso", "off", "sg", "off", check=False)


class Switch:
    """`sluice openflow` in the switch namespace with `queues` (--queue specs) and `flows`."""

    def __init__(self, sluice, tmp, queues, flows):
        self.log = os.path.join(tmp, "sluice.log")
        args = ["ip", "netns", "exec", SW, sluice, "openflow", "-i", "1@qb-s1", "-i", "2@qb-s2",
                "--listen", f"ptcp:{OF_PORT}:127.0.0.1", "--datapath-id", "1"]
        for q in queues:
            args += ["--queue", q]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=open(self.log, "w"))
        for _ in range(100):
            if "listening on" in open(self.log).read():
                break
            if self.proc.poll() is not None:
                sys.exit(f"queues: sluice openflow exited:\n{open(self.log).read()}")
            time.sleep(0.1)
        else:
            sys.exit(f"queues: sluice openflow did not start:\n{open(self.log).read()}")
        for f in flows:
            ofctl("add-flow", f)
        ping_ok = ns(H1, "ping", "-c", "3", "-i", "0.2", "-W", "1", "-q", "10.0.0.2", check=False).returncode == 0
        if not ping_ok:
            sys.exit(f"queues: h1 cannot reach h2 through the switch\n{open(self.log).read()}")

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


def ofctl(*args):
    cmd = ["ovs-ofctl", "-O", "OpenFlow13", "--timeout=10", args[0], TARGET, *args[1:]]
    r = ns(SW, *cmd, check=False)
    if r.returncode != 0:
        sys.exit(f"queues: ovs-ofctl {' '.join(args)} failed: {r.stderr}")
    return r.stdout


def queue_reading(port, queue):
    """(tx bytes, the queue's duration in seconds) from queue-stats."""
    out = ofctl("queue-stats", str(port), str(queue))
    m = re.search(rf"port {port} queue {queue}: bytes=(\d+), pkts=\d+, errors=\d+, duration=([0-9.]+)s", out)
    if not m:
        sys.exit(f"queues: no reading of queue {queue} in:\n{out}")
    return int(m.group(1)), float(m.group(2))


def iperf(secs, *client_args, background=False):
    """iperf3 h1 -> h2 for `secs` (a one-shot server); the client's JSON, or the Popen when `background`."""
    server = subprocess.Popen(["ip", "netns", "exec", H2, "iperf3", "-s", "-1", "-p", "5211"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.3)
    cmd = ["ip", "netns", "exec", H1, "iperf3", "-c", "10.0.0.2", "-p", "5211", "-t", str(secs), "-J", *client_args]
    client = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    if background:
        client.server = server
        return client
    out, _ = client.communicate()
    server.wait()
    return json.loads(out)


def finish(client):
    out, _ = client.communicate()
    client.server.wait()
    return json.loads(out)


def rate_name(bps):
    for unit, div in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if bps >= div:
            return f"{bps / div:g}{unit}"
    return str(int(bps))


def parse_rate(s):
    mul = {"k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9}.get(s[-1], 1)
    return float(s[:-1] if mul != 1 else s) * mul


def shaped_rate(sluice, tmp, secs, max_rate):
    """The frame bit rate queue 1 sends while shaped to `max_rate` (None: not shaped) under UDP offered at 1.5x."""
    spec = "2:1" if max_rate is None else f"2:1:max-rate={int(max_rate)}"
    sw = Switch(sluice, tmp, [spec], ["in_port=1,actions=set_queue:1,output:2", "in_port=2,actions=output:1"])
    try:
        offered = "0" if max_rate is None or max_rate > 1e9 else str(int(max_rate * 1.5))
        client = iperf(secs, "-u", "-b", offered, "-l", "1400", background=True)
        time.sleep(1.3)
        b0, d0 = queue_reading(2, 1)
        time.sleep(max(secs - 2.3, 0.5))
        b1, d1 = queue_reading(2, 1)
        finish(client)
        return (b1 - b0) * 8 / (d1 - d0)
    finally:
        sw.stop()


def class_delays(sluice, tmp, secs):
    """Ping round trips (ms): EF-marked ICMP into unshaped queue 2, plain ICMP into queue 1 congested at 10 Mbit/s."""
    sw = Switch(sluice, tmp, ["2:1:max-rate=10M,depth=100", "2:2"], [
        "priority=20,in_port=1,icmp,nw_tos=184,actions=set_queue:2,output:2",
        "priority=10,in_port=1,actions=set_queue:1,output:2",
        "priority=10,in_port=2,actions=output:1",
    ])
    try:
        client = iperf(secs, "-u", "-b", "20M", "-l", "1400", background=True)
        time.sleep(1.0)
        n = str(max(int((secs - 2) / 0.1), 5))
        ef = ns(H1, "ping", "-Q", "0xb8", "-c", n, "-i", "0.1", "-q", "10.0.0.2", check=False).stdout
        plain = ns(H1, "ping", "-c", "10", "-i", "0.1", "-q", "10.0.0.2", check=False).stdout
        finish(client)
    finally:
        sw.stop()

    def avg(out):
        m = re.search(r"= [0-9.]+/([0-9.]+)/", out)
        return float(m.group(1)) if m else float("nan")

    return avg(ef), avg(plain)


def tcp_gbps(sluice, tmp, secs, queued):
    queues = ["2:1:max-rate=100G"] if queued else []
    first = "in_port=1,actions=set_queue:1,output:2" if queued else "in_port=1,actions=output:2"
    sw = Switch(sluice, tmp, queues, [first, "in_port=2,actions=output:1"])
    try:
        j = iperf(secs)
        return j["end"]["sum_received"]["bits_per_second"] / 1e9
    finally:
        sw.stop()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sluice", default="target/release/sluice")
    p.add_argument("--secs", type=float, default=5)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--rates", default="1M,10M,100M,1G")
    a = p.parse_args()
    if os.geteuid() != 0:
        sys.exit("queues: run as root (network namespaces)")
    sluice = os.path.realpath(a.sluice)
    if not os.access(sluice, os.X_OK):
        sys.exit(f"queues: {a.sluice} not found: build it (cargo build --release -p sluice) or pass --sluice")
    ensure_tools()
    tmp = tempfile.mkdtemp(prefix="qb.")
    try:
        setup()
        started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        ceiling = shaped_rate(sluice, tmp, a.secs, None)
        rates = [r for r in (parse_rate(x) for x in a.rates.split(",")) if r < ceiling * 0.9] + [ceiling * 0.9]
        print(f"Port queues of sluice openflow, {started}, {a.secs:g} s runs (bench/queues.py)\n")
        print(f"Ceiling (queue without a rate, UDP unlimited): {ceiling / 1e6:.1f} Mbit/s of frames\n")
        print(f"| max-rate | sent, median of {a.rounds} (frame bits/s) | error | runs | ceilings after each run |")
        print("|---:|---:|---:|---|---|")
        worst = 0.0
        for r in rates:
            runs, ceilings = [], []
            for _ in range(a.rounds):
                runs.append(shaped_rate(sluice, tmp, a.secs, r))
                ceilings.append(shaped_rate(sluice, tmp, a.secs, None))
            got = statistics.median(runs)
            err = (got - r) / r * 100
            worst = max(worst, abs(err))
            print(f"| {rate_name(r)} | {rate_name(got)} | {err:+.2f}% | {', '.join(rate_name(x) for x in runs)} "
                  f"| {', '.join(rate_name(x) for x in ceilings)} |")
        ef, plain = class_delays(sluice, tmp, a.secs)
        print("\n| class, port 2 with queue 1 congested (10 Mbit/s, 20 offered) | ping average |")
        print("|---|---:|")
        print(f"| ICMP with DSCP EF, own queue 2 | {ef:.2f} ms |")
        print(f"| plain ICMP, congested queue 1 | {plain:.2f} ms |")
        plain_runs, queued_runs = [], []
        for _ in range(a.rounds):
            plain_runs.append(tcp_gbps(sluice, tmp, a.secs, False))
            queued_runs.append(tcp_gbps(sluice, tmp, a.secs, True))
        mp, mq = statistics.median(plain_runs), statistics.median(queued_runs)
        print(f"\n| TCP h1 -> h2, {a.rounds} alternated rounds | Gbit/s (median) | rounds |")
        print("|---|---:|---|")
        print(f"| output:2, no queues | {mp:.2f} | {', '.join(f'{x:.2f}' for x in plain_runs)} |")
        print(f"| set_queue:1 into a queue shaped to 100 Gbit/s | {mq:.2f} | {', '.join(f'{x:.2f}' for x in queued_runs)} |")
        print(f"\nresult: worst_shaping_error_pct={worst:.2f} ceiling_mbps={ceiling / 1e6:.1f} "
              f"ef_ping_ms={ef:.2f} congested_ping_ms={plain:.2f} uncongested_queue_tcp_ratio={mq / mp:.3f}")
    finally:
        teardown()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
