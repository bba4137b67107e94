#!/usr/bin/env python3
"""Per-instruction sample counts for one of Sluice's generated functions.

Run Sluice with SLUICE_PERF_MAP=1 under `perf record`; Sluice then writes
/tmp/perf-PID.map (function addresses) and /tmp/sluice-jit-PID-NAME.bin
(machine code). This joins `perf script` samples with `objdump` of the code:

    SLUICE_PERF_MAP=1 perf record -e cpu-clock -o perf.data \
        target/release/sluice bench --example router --no-reference
    bench/annotate-jit.py perf.data PID sluice_forward

Every copy of the function in the map (Sluice compiles a program once per
switch it builds) is counted at the same offsets."""
import subprocess, sys, collections, re
data, pid, func = sys.argv[1:4]
ranges = []
for line in open(f"/tmp/perf-{pid}.map"):
    a, s, n = line.split(None, 2)
    if n.strip() == func:
        ranges.append((int(a, 16), int(s, 16)))
out = subprocess.run(["perf", "script", "-i", data, "-F", "ip"], capture_output=True, text=True).stdout
cnt = collections.Counter()
for l in out.split():
    ip = int(l, 16)
    for a, s in ranges:
        if a <= ip < a + s:
            cnt[ip - a] += 1
total = sum(cnt.values())
dis = subprocess.run(["objdump", "-D", "-b", "binary", "-m", "i386:x86-64", f"/tmp/sluice-jit-{pid}-{func}.bin"], capture_output=True, text=True).stdout
for l in dis.splitlines():
    m = re.match(r"\s*([0-9a-f]+):\s*(.*)", l)
    if not m:
        continue
    off = int(m.group(1), 16)
    c = cnt.get(off, 0)
    parts = m.group(2).split("\t")
    ins = parts[-1] if len(parts) > 1 else m.group(2)
    print(f"{c:6d} {100*c/max(total,1):5.1f}% {off:5x}: {ins}")
print("total", total)
