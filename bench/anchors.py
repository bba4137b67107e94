#!/usr/bin/env python3
"""Sluice against the anchors it claims to beat, measured in the same run.

    bench/anchors.py --snabb PATH --cbench PATH --msg-controller PATH
                     --raw-controller PATH [--msg-controller-1thread PATH]
                     [--rounds 3]
                     [--only lwaftr,controller,ofbench,router,openflow]
                     [--sluice PATH] [--cache DIR] [--out FILE]

The anchors are built by hand from their public sources, outside this
repository (docs/performance.md says which commits and how they were
configured); this script only runs them. Every comparison is interleaved:
round after round, Sluice then the anchor, and the table shows the medians
of the rounds' figures and the median of the rounds' ratios, with the goal
each ratio is held to. Nothing else of Sluice's should run meanwhile.

Comparisons (a section each, chosen with --only):
  lwaftr      `snabb lwaftr bench --cpu 1` against `sluice lwaftr bench`
              (one worker, pinned), Snabb's bench configuration and 550 B
              captures, both directions at once; then a million softwires
              (`sluice lwaftr generate-configuration 193.5.1.100 15874
              fc00::100 fc00:1:2:3:4:5:0:7e 6`, 1000 frames per side). The
              figure is the mean per-direction Mpps of the CSV rows after the
              first two (Snabb's rows start once its configuration is loaded).
  controller  stock cbench in OpenFlow 1.0, 16 switches, -M 100000, -t,
              against libfluid's msg_controller l2 and raw_controller l2 (its
              learning switch on libfluid_msg and on raw structs; two worker
              threads as shipped, one with the -1thread build) and
              `sluice controller --app l2 --threads N`; cbench's latency mode
              (no -t); flows/ms and flows/ms per CPU-second of the controller.
  ofbench     `sluice ofbench` against stock cbench, same options, on
              libfluid's msg_controller l2 (the -1thread build when given)
              and on `sluice controller --threads 1`, the generator pinned
              to CPU 0 and the controller to CPU 1 (taskset).
  router      `sluice bench --example router` against the hand-written
              reference router (the bench runs both, turn by turn) at 10,
              10 000 and 1 000 000 routes, 64 B, one worker.
  openflow    bench/openflow-iperf.sh: TCP through `sluice openflow` and
              Open vSwitch's user-space datapath, AF_PACKET and AF_XDP ports,
              with Sluice's null forwarder as the ceiling.

Output: progress on stderr; on stdout (and in --out) a header (date, commit,
machine, load, the machine's idle share just before and after the run) and
one Markdown table.
"""

import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH_DATA = os.path.join(REPO, "..", "shared", "conformance", "lwaftr", "bench")
CONTROLLER_PORT = 6653  # libfluid's examples listen there, compiled in


def log(msg):
    print(f"anchors: {msg}", file=sys.stderr, flush=True)


def die(msg):
    print(f"anchors: error: {msg}", file=sys.stderr)
    sys.exit(1)


def cpu_times():
    """(idle, total) jiffies of the whole machine."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + fields[4]
    return idle, sum(fields[:8])


def idle_share(seconds):
    """Share of the machine's CPU time idle over `seconds` (nothing of ours running)."""
    i0, t0 = cpu_times()
    time.sleep(seconds)
    i1, t1 = cpu_times()
    return (i1 - i0) / max(1, t1 - t0)


def proc_cpu_seconds(pid):
    """User + system CPU seconds of process `pid` (all its threads) so far."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            parts = f.read().rsplit(")", 1)[1].split()
        return (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def run(cmd, timeout, **kw):
    """Runs `cmd`; its stdout + stderr; fails the run with the output's tail."""
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout, **kw)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        die(f"{' '.join(cmd)}: no end after {timeout} s\n{out[-2000:]}")
    if p.returncode != 0:
        die(f"{' '.join(cmd)}: exit status {p.returncode}\n{p.stdout[-2000:]}")
    return p.stdout


def listening(port):
    """Whether anything listens on TCP `port`."""
    out = subprocess.run(["ss", "-Htln", f"sport = :{port}"], stdout=subprocess.PIPE, text=True).stdout
    return bool(out.strip())


def wait_port_free(port, timeout=30):
    """Waits until nothing listens on 127.0.0.1:`port`."""
    end = time.time() + timeout
    while time.time() < end:
        if not listening(port):
            return
        time.sleep(0.2)
    die(f"port {port} is still in use after {timeout} s")


def wait_listening(port, proc, timeout=30):
    end = time.time() + timeout
    while time.time() < end:
        if proc.poll() is not None:
            die(f"the controller exited with status {proc.returncode} before listening on {port}")
        if listening(port):
            return
        time.sleep(0.1)
    die(f"nothing listens on {port} after {timeout} s")


def sluice_controller(args, threads):
    """`sluice controller`'s learning switch on CONTROLLER_PORT with `threads` workers."""
    return [args.sluice, "controller", "--listen", f"tcp:127.0.0.1:{CONTROLLER_PORT}", "--app", "l2",
            "--threads", str(threads)]


# ---------------------------------------------------------------- lwAFTR


def csv_rate(out):
    """Mean per-direction Mpps of the bench's CSV rows, leaving out the first two."""
    rows = []
    for line in out.splitlines():
        parts = line.strip().split(",")
        if len(parts) == 5:
            try:
                t, dm, _, em, _ = (float(x) for x in parts)
            except ValueError:
                continue
            if dm > 0 or em > 0:
                rows.append((dm + em) / 2)
    if len(rows) < 3:
        die(f"fewer than 3 rows of rates in:\n{out[-2000:]}")
    return statistics.mean(rows[2:])


# Huge pages Snabb's lwAFTR finds reserved (2 GiB). Why: without them it
# reserves them one at a time as it allocates, and on kernels of this
# machine class that path crashed it (a segfault after "hugetlb mmap
# failed" with a million softwires).
SNABB_HUGE_PAGES = 1024
NR_HUGEPAGES = "/proc/sys/vm/nr_hugepages"


def reserve_huge_pages(n):
    """Raises the kernel's reserved huge pages to at least n; returns the
    count before, to be put back, or None when nothing changed."""
    before = int(open(NR_HUGEPAGES).read())
    if before >= n:
        return None
    try:
        with open(NR_HUGEPAGES, "w") as f:
            f.write(str(n))
    except OSError as e:
        die(f"reserving {n} huge pages for Snabb ({NR_HUGEPAGES}): {e} (run as root)")
    log(f"reserved {n} huge pages for Snabb ({int(open(NR_HUGEPAGES).read())} now, {before} before)")
    return before


def lwaftr_cases(args, cache):
    v4 = os.path.join(BENCH_DATA, "ipv4-0550.pcap")
    v6 = os.path.join(BENCH_DATA, "ipv6-0550.pcap")
    conf = os.path.join(BENCH_DATA, "lwaftr.conf")
    for f in (v4, v6, conf):
        if not os.path.exists(f):
            die(f"{f} not found (../shared beside the repository)")
    # Snabb compiles a configuration into CONF.o beside it: give it copies
    # in the cache, where it may write.
    small = os.path.join(cache, "lwaftr-bench.conf")
    with open(conf) as src, open(small, "w") as dst:
        dst.write(src.read())
    big = os.path.join(cache, "lwaftr-1m.conf")
    big4 = os.path.join(cache, "lwaftr-1m-v4.pcap")
    big6 = os.path.join(cache, "lwaftr-1m-v6.pcap")
    if not all(os.path.exists(f) for f in (big, big4, big6)):
        log("generating a million softwires and their traffic")
        run([args.sluice, "lwaftr", "generate-configuration", "193.5.1.100", "15874", "fc00::100",
             "fc00:1:2:3:4:5:0:7e", "6", "--output", big, "--pcap-v4", big4, "--pcap-v6", big6,
             "--packets", "1000"], 600)
    if not os.path.exists(big[:-len(".conf")] + ".o"):
        log("Snabb compiles the million-softwire configuration once (a few minutes)")
        run([args.snabb, "lwaftr", "bench", "--cpu", "1", "-D", "1", big, big4, big6], 1800)

    def snabb(conf, v4, v6, secs):
        return lambda: csv_rate(run([args.snabb, "lwaftr", "bench", "--cpu", "1", "-D", str(secs), conf, v4, v6],
                                    secs + 600))

    def sluice(conf, v4, v6, secs):
        return lambda: csv_rate(run([args.sluice, "lwaftr", "bench", conf, v4, v6, "--duration", str(secs)],
                                    secs + 600))

    return [
        Case("lwAFTR, Snabb's bench configuration, 550 B, both directions, one core (Mpps per direction)",
             sluice(small, v4, v6, 10), "Snabb `lwaftr bench`", snabb(small, v4, v6, 12), 3.0),
        Case("lwAFTR, 1 000 062 softwires, 1000 frames per side, 550 B, one core (Mpps per direction)",
             sluice(big, big4, big6, 10), "Snabb `lwaftr bench`", snabb(big, big4, big6, 40), 2.5),
    ]


# ---------------------------------------------------------------- controllers


class Controller:
    """A controller process listening on CONTROLLER_PORT for one cbench run."""

    def __init__(self, cmd):
        self.cmd = cmd

    def __enter__(self):
        wait_port_free(CONTROLLER_PORT)
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     start_new_session=True)
        wait_listening(CONTROLLER_PORT, self.proc)
        self.cpu0 = proc_cpu_seconds(self.proc.pid)
        return self

    def cpu(self):
        return proc_cpu_seconds(self.proc.pid) - self.cpu0

    def __exit__(self, *exc):
        try:
            os.killpg(self.proc.pid, signal.SIGINT)
            self.proc.wait(10)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


RESULT = re.compile(r"^RESULT: \d+ switches \d+ tests min/max/avg/stdev = [\d.]+/[\d.]+/([\d.]+)/", re.M)


def generator_run(gen, ctl_cmd, throughput, extra=()):
    """flows/ms (cbench's RESULT average / 1000) and flows/ms per controller CPU-second."""
    cmd = [*gen, "-c", "127.0.0.1", "-p", str(CONTROLLER_PORT), "-s", "16", "-M", "100000", "-m", "2000",
           "-l", "6", "-w", "1", *extra]
    if throughput:
        cmd.append("-t")
    with Controller(ctl_cmd) as c:
        t0 = time.time()
        out = run(cmd, 120)
        cpu = c.cpu()
        wall = time.time() - t0
    m = RESULT.search(out)
    if not m:
        die(f"no RESULT line from {' '.join(cmd)}:\n{out[-2000:]}")
    flows = float(m.group(1)) / 1000
    # The controller's CPU over the run; the flows/ms it made per CPU-second used per second.
    per_cpu = flows / (cpu / wall) if cpu > 0 else float("nan")
    return flows, per_cpu


class Case:
    """One comparison: Sluice's measure and the anchor's, and the goal for their ratio."""

    def __init__(self, what, sluice, anchor_name, anchor, goal, higher_is_better=True):
        self.what, self.sluice, self.anchor_name, self.anchor, self.goal = what, sluice, anchor_name, anchor, goal
        self.higher = higher_is_better
        self.s, self.a = [], []


def controller_cases(args):
    cbench = [args.cbench]
    sluice = lambda threads: sluice_controller(args, threads)
    cases = []
    cpu = {}

    def measure(ctl, throughput, key):
        def f():
            flows, per_cpu = generator_run(cbench, ctl, throughput)
            cpu.setdefault(key, []).append(per_cpu)
            return flows
        return f

    cases.append(Case("controller, cbench -t, learning switch, 2 threads each (flows/ms)",
                      measure(sluice(2), True, "s2"), "libfluid msg_controller l2",
                      measure([args.msg_controller, "l2"], True, "m2"), 2.0))
    if args.msg_controller_1thread:
        cases.append(Case("controller, cbench -t, learning switch, 1 thread each (flows/ms)",
                          measure(sluice(1), True, "s1"), "libfluid msg_controller l2, 1 thread",
                          measure([args.msg_controller_1thread, "l2"], True, "m1"), 2.0))
    cases.append(Case("controller, cbench -t, learning switch against libfluid's on raw structs, "
                      "2 threads each (flows/ms)",
                      measure(sluice(2), True, "s2r"), "libfluid raw_controller l2",
                      measure([args.raw_controller, "l2"], True, "r2"), 1.0))
    cases.append(Case("controller, cbench latency mode (no -t), learning switch, 2 threads each (flows/ms; "
                      "higher = less time per request)",
                      measure(sluice(2), False, "s2l"), "libfluid msg_controller l2",
                      measure([args.msg_controller, "l2"], False, "m2l"), 1.0))
    return cases, cpu


def ofbench_cases(args):
    """The two generators on one core and the controller, one thread, on the other: the
    generator's own cost then takes nothing from the controller, so the two read the same
    when they send the same requests and count the same answers."""
    pin = lambda cpu, cmd: ["taskset", "-c", str(cpu), *cmd]
    ofbench = pin(0, [args.sluice, "ofbench"])
    cbench = pin(0, [args.cbench])
    sluice_ctl = pin(1, sluice_controller(args, 1))
    fluid = pin(1, [args.msg_controller_1thread or args.msg_controller, "l2"])
    gen = lambda g, ctl: (lambda: generator_run(g, ctl, True)[0])
    return [
        Case("generator: `sluice ofbench` against stock cbench, on libfluid msg_controller l2, "
             "generator and controller on separate cores (flows/ms)",
             gen(ofbench, fluid), "cbench", gen(cbench, fluid), (0.95, 1.05)),
        Case("generator: `sluice ofbench` against stock cbench, on `sluice controller --threads 1`, "
             "generator and controller on separate cores (flows/ms)",
             gen(ofbench, sluice_ctl), "cbench", gen(cbench, sluice_ctl), (0.95, 1.05)),
    ]


# ---------------------------------------------------------------- in memory and live


def router_rows(args, rounds):
    rows = []
    for n in (10, 10000, 1000000):
        log(f"router, {n} routes: sluice bench --rounds {rounds}")
        out = run([args.sluice, "bench", "--example", "router", "--entries", str(n), "--size", "64",
                   "--workers", "1", "--duration", "2", "--rounds", str(rounds)], 900)
        m = re.search(r"^result: .* mpps=([\d.]+) reference_mpps=([\d.]+) ratio=([\d.]+)", out, re.M)
        if not m:
            die(f"no result line from sluice bench:\n{out[-2000:]}")
        s, a, r = (float(x) for x in m.groups())
        rows.append((f"P4 router in memory, {n} routes spread, 64 B, one worker (Mpps)", s,
                     "hand-written reference router", a, r, 0.7, "turns inside `sluice bench`"))
    return rows


def openflow_rows(args, rounds):
    log(f"openflow: bench/openflow-iperf.sh --rounds {rounds}")
    env = dict(os.environ, SLUICE=args.sluice)
    out = run(["bash", os.path.join(REPO, "bench", "openflow-iperf.sh"), "--rounds", str(rounds), "-t", "5",
               "--flow-mods", "10000"], 3600, env=env)
    rows = []
    for backend, name in (("af_packet", "AF_PACKET"), ("af_xdp", "AF_XDP")):
        m = re.search(rf"^result: {backend} tcp_ratio=(\S+) .*tcp_gbps=(\S+) ovs_tcp_gbps=(\S+) "
                      rf"null_tcp_gbps=(\S+) tcp_null_ratio=(\S+)", out, re.M)
        if not m:
            die(f"no result line for {backend} from openflow-iperf.sh:\n{out[-3000:]}")
        r, s, a, null, rn = m.groups()
        rows.append((f"OpenFlow switch, TCP between two hosts, host offloads off, {name} ports (Gbit/s)",
                     float(s), "Open vSwitch user space (netdev)", float(a), float(r), 3.0,
                     f"null forwarder {null} Gbit/s; Sluice / null {rn}"))
    return rows, out


# ---------------------------------------------------------------- the run


def fmt(x):
    if x != x:  # NaN
        return "n/a"
    return f"{x:.0f}" if x >= 100 else f"{x:.2f}"


def verdict(ratio, goal):
    if isinstance(goal, tuple):
        return "yes" if goal[0] <= ratio <= goal[1] else "no"
    return "yes" if ratio >= goal else "no"


def goal_text(goal):
    if isinstance(goal, tuple):
        return f"{goal[0]:.2f}-{goal[1]:.2f}"
    return f">= {goal:.1f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--snabb")
    ap.add_argument("--cbench")
    ap.add_argument("--msg-controller")
    ap.add_argument("--raw-controller")
    ap.add_argument("--msg-controller-1thread")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", default="lwaftr,controller,ofbench,router,openflow")
    ap.add_argument("--sluice", default=os.path.join(REPO, "target", "release", "sluice"))
    ap.add_argument("--cache", default="/var/tmp/sluice-anchors")
    ap.add_argument("--out")
    args = ap.parse_args()
    sections = args.only.split(",")
    known = {"lwaftr", "controller", "ofbench", "router", "openflow"}
    if not set(sections) <= known:
        die(f"--only takes {','.join(sorted(known))}, got {args.only}")
    if args.rounds < 1:
        die("--rounds must be at least 1")
    need = {"lwaftr": ["snabb"], "controller": ["cbench", "msg_controller", "raw_controller"],
            "ofbench": ["cbench", "msg_controller"]}
    for s in sections:
        for n in need.get(s, []):
            path = getattr(args, n)
            if not path:
                die(f"section {s} needs --{n.replace('_', '-')} PATH (the anchor, built from its public sources)")
            if not (os.path.isfile(path) and os.access(path, os.X_OK)):
                die(f"--{n.replace('_', '-')} {path}: not an executable")
    if args.msg_controller_1thread and not os.access(args.msg_controller_1thread, os.X_OK):
        die(f"--msg-controller-1thread {args.msg_controller_1thread}: not an executable")
    if not os.access(args.sluice, os.X_OK):
        die(f"{args.sluice} not found: cargo build --release -p sluice, or --sluice PATH")
    os.makedirs(args.cache, exist_ok=True)

    commit = subprocess.run(["git", "-C", REPO, "describe", "--always", "--dirty"], stdout=subprocess.PIPE,
                            text=True).stdout.strip() or "unknown"
    log("idle share of the machine before the run (5 s)")
    idle_before = idle_share(5)
    started = time.time()
    load_before = open("/proc/loadavg").read().split()[:3]

    cases, cpu, huge_pages_before = [], {}, None
    if "lwaftr" in sections:
        huge_pages_before = reserve_huge_pages(SNABB_HUGE_PAGES)
        cases += lwaftr_cases(args, args.cache)
    if "controller" in sections:
        c, cpu = controller_cases(args)
        cases += c
    if "ofbench" in sections:
        cases += ofbench_cases(args)
    for r in range(1, args.rounds + 1):
        for c in cases:
            log(f"round {r}/{args.rounds}: {c.what}: Sluice")
            c.s.append(c.sluice())
            log(f"round {r}/{args.rounds}: {c.what}: {c.anchor_name}")
            c.a.append(c.anchor())
            log(f"    {c.s[-1]:.3f} against {c.a[-1]:.3f}")
    if huge_pages_before is not None:
        with open(NR_HUGEPAGES, "w") as f:
            f.write(str(huge_pages_before))
    rows = []
    for c in cases:
        ratios = [s / a for s, a in zip(c.s, c.a)]
        per_round = ", ".join(f"{s:.2f}/{a:.2f}" for s, a in zip(c.s, c.a))
        rows.append((c.what, statistics.median(c.s), c.anchor_name, statistics.median(c.a),
                     statistics.median(ratios), c.goal, f"rounds (Sluice/anchor): {per_round}"))
    if "router" in sections:
        rows += router_rows(args, args.rounds)
    openflow_out = ""
    if "openflow" in sections:
        r, openflow_out = openflow_rows(args, args.rounds)
        rows += r
    elapsed = time.time() - started
    log("idle share of the machine after the run (5 s)")
    idle_after = idle_share(5)

    lines = []
    cpu_model = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    lines.append(f"# bench/anchors.py, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(started))}, "
                 f"{elapsed / 60:.0f} min; commit {commit}")
    lines.append(f"# machine: {os.cpu_count()} CPUs ({cpu_model}), kernel {os.uname().release}; load before "
                 f"{' '.join(load_before)}; idle share with nothing of ours running: {idle_before:.0%} before, "
                 f"{idle_after:.0%} after")
    lines.append(f"# {args.rounds} rounds, each Sluice then the anchor; medians of the rounds and of the "
                 f"rounds' ratios")
    lines.append("")
    lines.append("| comparison | Sluice | anchor | anchor's figure | Sluice / anchor | goal | met | notes |")
    lines.append("|---|---:|---|---:|---:|---:|---|---|")
    for what, s, an, a, ratio, goal, notes in rows:
        lines.append(f"| {what} | {fmt(s)} | {an} | {fmt(a)} | {ratio:.2f} | {goal_text(goal)} | "
                     f"{verdict(ratio, goal)} | {notes} |")
    if cpu:
        lines.append("")
        lines.append("Controllers' flows/ms per CPU-second they used (cbench shares the two cores), medians:")
        names = {"s2": "Sluice, 2 threads", "m2": "libfluid msg l2, 2 threads", "s1": "Sluice, 1 thread",
                 "m1": "libfluid msg l2, 1 thread", "r2": "libfluid raw l2, 2 threads",
                 "s2l": "Sluice, 2 threads, latency mode", "m2l": "libfluid msg l2, latency mode"}
        for k, v in cpu.items():
            if k in names:
                lines.append(f"- {names[k]}: {statistics.median(v):.0f}")
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
            if openflow_out:
                f.write("\nbench/openflow-iperf.sh output:\n\n" + openflow_out)


if __name__ == "__main__":
    main()
