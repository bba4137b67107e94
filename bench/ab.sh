#!/usr/bin/env bash
# Interleaved A/B comparison of two sluice binaries on the lab's programs:
# for every (program, table size) point, the two binaries take turns
# (A B A B ...), each turn one `sluice bench` run of the engine and the
# hand-written reference; the medians of the turns are printed side by side.
# Turns alternate so that both binaries see the same drift of a shared machine.
#
#   bench/ab.sh A_BINARY B_BINARY
#
# Environment: POINTS (default "router:10 router:10000 router:1000000
# edge:10 edge:10000 edge:100000 l2-learning:10 l2-learning:10000
# l2-learning:65536 basic-routing:10 basic-routing:10000 basic-routing:131072"),
# TURNS (default 3), DURATION (seconds per run, default 1), SIZE (default 64),
# WORKERS (default 1).
set -euo pipefail
[[ $# -eq 2 ]] || { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 2; }
A=$1; B=$2
POINTS=${POINTS:-"router:10 router:10000 router:1000000 edge:10 edge:10000 edge:100000 l2-learning:10 l2-learning:10000 l2-learning:65536 basic-routing:10 basic-routing:10000 basic-routing:131072"}
TURNS=${TURNS:-3}; DURATION=${DURATION:-1}; SIZE=${SIZE:-64}; WORKERS=${WORKERS:-1}
cd "$(dirname "$0")/.."
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for p in $POINTS; do
    prog=${p%%:*}; n=${p##*:}
    for t in $(seq "$TURNS"); do
        for side in A B; do
            bin=$A; [[ $side == B ]] && bin=$B
            line=$("$bin" bench --example "$prog" --entries "$n" --size "$SIZE" --workers "$WORKERS" \
                --duration "$DURATION" | grep '^result: ') || { echo "ab: $bin failed on $p" >&2; exit 1; }
            echo "$prog $n $side $line" >> "$out"
        done
    done
done
python3 - "$out" "$A" "$B" <<'PY'
import sys, statistics
rows = {}
for l in open(sys.argv[1]):
    prog, n, side, *rest = l.split()
    kv = dict(x.split("=", 1) for x in rest if "=" in x)
    rows.setdefault((prog, int(n)), {}).setdefault(side, []).append((float(kv["mpps"]), float(kv["ratio"])))
print(f"A = {sys.argv[2]}\nB = {sys.argv[3]}\n")
print("| program | entries | A Mpps | B Mpps | B/A | A ratio | B ratio |")
print("|---|---:|---:|---:|---:|---:|---:|")
for (prog, n), s in rows.items():
    a = statistics.median(m for m, _ in s["A"]); b = statistics.median(m for m, _ in s["B"])
    ar = statistics.median(r for _, r in s["A"]); br = statistics.median(r for _, r in s["B"])
    print(f"| {prog} | {n} | {a:.1f} | {b:.1f} | {b/a:.3f} | {ar:.3f} | {br:.3f} |")
PY
