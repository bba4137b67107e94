#!/usr/bin/env python3
"""Per-instruction execution counts of one of Sluice's generated functions,
from callgrind (no hardware counters needed).

    SLUICE_PERF_MAP=1 valgrind --tool=callgrind --dump-instr=yes \\
        --callgrind-out-file=cg.out target/release/sluice bench ... --packets N
    bench/callgrind-jit.py cg.out PID sluice_batch N

Prints each instruction of the function's last compiled copy (from
/tmp/perf-PID.map and /tmp/sluice-jit-PID-NAME.bin) with its executions per
packet, then the total per packet. Callgrind's compressed addresses (+N,
-N, *) are followed; the cost lines of calls are skipped (they hold the
callee's inclusive cost)."""
import collections, re, subprocess, sys

cg, pid, func, packets = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
lo = hi = None
for line in open(f"/tmp/perf-{pid}.map"):
    a, s, n = line.split(None, 2)
    if n.strip() == func:
        lo, hi = int(a, 16), int(a, 16) + int(s, 16)
if lo is None:
    sys.exit(f"{func} is not in /tmp/perf-{pid}.map")
counts = collections.Counter()
addr, call_line = 0, False
for line in open(cg):
    if line.startswith("calls="):
        call_line = True
        continue
    t = line.split(None, 1)[0] if line.strip() else ""
    if t.startswith("0x"):
        a = int(t, 16)
    elif t[:1] in ("+", "-") and t[1:].isdigit():
        a = addr + int(t)
    elif t == "*":
        a = addr
    else:
        continue
    addr = a
    parts = line.split()
    if call_line:
        call_line = False
    elif lo <= a < hi and len(parts) >= 3:
        counts[a - lo] += int(parts[2])
dis = subprocess.run(["objdump", "-D", "-b", "binary", "-m", "i386:x86-64",
                      f"/tmp/sluice-jit-{pid}-{func}.bin"], capture_output=True, text=True).stdout
total = 0.0
for l in dis.splitlines():
    m = re.match(r"\s*([0-9a-f]+):\s*(.*)", l)
    if not m:
        continue
    off = int(m.group(1), 16)
    c = counts.get(off, 0) / packets
    total += c
    ins = m.group(2).split("\t")[-1]
    print(f"{c:6.2f} {off:5x}: {ins}")
print("total/packet", total)
