#!/usr/bin/env bash
# Interleaved A/B comparison of two sluice binaries on the lab's programs:
# for every point, the two binaries take turns (A B A B ...); the medians of
# the turns are printed side by side. Turns alternate so that both binaries
# see the same drift of a shared machine.
#
#   bench/ab.sh A_BINARY B_BINARY
#
# A point is PROGRAM:N:
#   router, edge, l2-learning, basic-routing:N   `sluice bench --example PROGRAM --entries N`
#                                                (the engine, then the hand-written reference)
#   lwaftr:SIZE     `sluice lwaftr bench` on the conformance corpus's bench
#                   configuration and its SIZE-byte captures (both directions)
#   openflow:N      `sluice openflow-bench --entries N` (the OpenFlow switch, then
#                   the P4 router on the same routes)
#
# Environment: POINTS (default: the P4 lab's twelve points, "lwaftr:550" and
# "openflow:10 openflow:10000 openflow:1000000"), TURNS (default 3), DURATION
# (seconds per run, default 1), SIZE (frame bytes of the P4 points, default
# 64), WORKERS (default 1), SHARED (default ../shared, for the lwAFTR's captures).
set -euo pipefail
[[ $# -eq 2 ]] || { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 2; }
A=$1; B=$2
P4_POINTS="router:10 router:10000 router:1000000 edge:10 edge:10000 edge:100000 l2-learning:10 l2-learning:10000 l2-learning:65536 basic-routing:10 basic-routing:10000 basic-routing:131072"
POINTS=${POINTS:-"$P4_POINTS lwaftr:550 openflow:10 openflow:10000 openflow:1000000"}
TURNS=${TURNS:-3}; DURATION=${DURATION:-1}; SIZE=${SIZE:-64}; WORKERS=${WORKERS:-1}
cd "$(dirname "$0")/.."
SHARED=${SHARED:-../shared}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
# The result line of one run of point PROG:N with binary $1.
run() {
    local bin=$1 prog=$2 n=$3
    case $prog in
        lwaftr)
            local b=$SHARED/conformance/lwaftr/bench
            printf -v n '%04d' "$n"
            "$bin" lwaftr bench "$b/lwaftr.conf" "$b/ipv4-$n.pcap" "$b/ipv6-$n.pcap" --duration "$DURATION" \
                --workers "$WORKERS" | grep '^result: ' ;;
        openflow)
            "$bin" openflow-bench --entries "$n" --duration "$DURATION" --workers "$WORKERS" | grep '^result: ' ;;
        *)
            "$bin" bench --example "$prog" --entries "$n" --size "$SIZE" --workers "$WORKERS" \
                --duration "$DURATION" | grep '^result: ' ;;
    esac
}
for p in $POINTS; do
    prog=${p%%:*}; n=${p##*:}
    for t in $(seq "$TURNS"); do
        for side in A B; do
            bin=$A; [[ $side == B ]] && bin=$B
            line=$(run "$bin" "$prog" "$n") || { echo "ab: $bin failed on $p" >&2; exit 1; }
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
    mpps = float(kv.get("openflow_mpps", kv.get("mpps")))
    ratio = kv.get("ratio", "-")
    rows.setdefault((prog, int(n)), {}).setdefault(side, []).append((mpps, None if ratio == "-" else float(ratio)))
print(f"A = {sys.argv[2]}\nB = {sys.argv[3]}\n")
print("| program | entries or size | A Mpps | B Mpps | B/A | A ratio | B ratio |")
print("|---|---:|---:|---:|---:|---:|---:|")
def med(xs):
    xs = [x for x in xs if x is not None]
    return f"{statistics.median(xs):.3f}" if xs else "-"
for (prog, n), s in rows.items():
    a = statistics.median(m for m, _ in s["A"]); b = statistics.median(m for m, _ in s["B"])
    print(f"| {prog} | {n} | {a:.1f} | {b:.1f} | {b/a:.3f} | {med(r for _, r in s['A'])} | {med(r for _, r in s['B'])} |")
PY
