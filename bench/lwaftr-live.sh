#!/usr/bin/env bash
# The lwAFTR on live ports, measured as Snabb's benchmarking document does:
# `sluice lwaftr run` between two load generators (`sluice lwaftr loadtest`)
# on veth pairs, N runs, and for each direction the min/max/avg/stdev of the
# first and of the last second's received Mpps and Gbps over the runs.
#
#   bench/lwaftr-live.sh [-n RUNS] [-D SECONDS] [--rate GBPS] [--size 550] [--backend af_packet|af_xdp] [--workers N]
#
# Defaults: 5 runs of 5 s, as fast as the generator goes, the corpus's
# bench/lwaftr.conf with ipv4-0550.pcap + ipv6-0550.pcap. Namespaces
# lwb-gen (the generator) and lwb-aftr (the lwAFTR) are removed on exit, also
# on failure. Offloads are off on every veth. Needs root and iproute2, ethtool.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=5; SECS=5; RATE=""; SIZE=0550; BACKEND=af_packet; WORKERS=1
while [ $# -gt 0 ]; do
    case "$1" in
        -n) RUNS="$2"; shift ;;
        -D) SECS="$2"; shift ;;
        --rate) RATE="--rate $2"; shift ;;
        --size) SIZE=$(printf %04d "$2"); shift ;;
        --backend) BACKEND="$2"; shift ;;
        --workers) WORKERS="$2"; shift ;;
        *) echo "unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done
source scripts/ensure-net-tools.sh
BENCH=../shared/conformance/lwaftr/bench
[ -f "$BENCH/lwaftr.conf" ] || { echo "error: $BENCH/lwaftr.conf not found (../shared beside the repository)" >&2; exit 1; }
SLUICE=${SLUICE:-target/release/sluice}
[ -x "$SLUICE" ] || cargo build --release -p sluice
GEN=lwb-gen; AFTR=lwb-aftr
AFTR_PID=""
OUT=$(mktemp -d)
cleanup() {
    [ -n "$AFTR_PID" ] && kill "$AFTR_PID" 2>/dev/null && wait "$AFTR_PID" 2>/dev/null || true
    for n in $GEN $AFTR; do ip netns del $n 2>/dev/null || true; done
    rm -rf "$OUT"
}
trap cleanup EXIT
for n in $GEN $AFTR; do ip netns add $n; ip -n $n link set lo up; done
ip netns exec $AFTR sysctl -q -w net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
ip netns exec $GEN sysctl -q -w net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
# The lwAFTR's ends carry the configuration's MACs (the pcaps are addressed to them).
ip link add gen-v4 netns $GEN type veth peer name aftr-v4 netns $AFTR address 12:12:12:12:12:12
ip link add gen-v6 netns $GEN address 44:44:44:44:44:44 type veth peer name aftr-v6 netns $AFTR address 22:22:22:22:22:22
ip -n $GEN link set gen-v4 address 68:68:68:68:68:68
for p in "$GEN gen-v4" "$GEN gen-v6" "$AFTR aftr-v4" "$AFTR aftr-v6"; do
    set -- $p
    ip netns exec $1 ethtool -K $2 rx off tx off tso off gso off gro off >/dev/null 2>&1 || true
    ip -n $1 link set $2 up
done
prefix=""; [ "$BACKEND" = af_xdp ] && prefix="af_xdp:"
for run in $(seq 1 "$RUNS"); do
    ip netns exec $AFTR "$SLUICE" lwaftr run --conf "$BENCH/lwaftr.conf" --v4 "${prefix}aftr-v4" --v6 "${prefix}aftr-v6" \
        --workers "$WORKERS" -v >"$OUT/aftr-$run.out" 2>"$OUT/aftr-$run.err" &
    AFTR_PID=$!
    for _ in $(seq 100); do grep -q "running with" "$OUT/aftr-$run.err" 2>/dev/null && break; sleep 0.1; done
    grep -q "running with" "$OUT/aftr-$run.err" || { cat "$OUT/aftr-$run.err" >&2; exit 1; }
    # shellcheck disable=SC2086
    ip netns exec $GEN "$SLUICE" lwaftr loadtest "$BENCH/ipv4-$SIZE.pcap" "$BENCH/ipv6-$SIZE.pcap" \
        --v4 gen-v4 --v6 gen-v6 -D "$SECS" $RATE >"$OUT/load-$run.out"
    kill -TERM "$AFTR_PID"; wait "$AFTR_PID" || true; AFTR_PID=""
    echo "run $run: the lwAFTR's own per-second figures, then the generator's totals" >&2
    grep -E '^(Time|[0-9])' "$OUT/aftr-$run.out" >&2 || true
    sed -n '/^Total/,$p' "$OUT/load-$run.out" >&2
done
python3 - "$OUT" "$RUNS" <<'EOF'
import re, statistics, sys
out, runs = sys.argv[1], int(sys.argv[2])
pat = re.compile(r"^  (IPv\d -> IPv\d) \((\w+)\): TX .*; RX (\d+) packets \(([\d.]+) MPPS\), (\d+) bytes \(([\d.]+) Gbps\)")
firsts, lasts = {}, {}
for r in range(1, runs + 1):
    secs = []
    cur = None
    for l in open(f"{out}/load-{r}.out"):
        if l.startswith("Time"):
            cur = {}; secs.append(cur)
        elif l.startswith("Total"):
            cur = None
        elif cur is not None and (m := pat.match(l)):
            cur[m.group(2)] = (float(m.group(4)), float(m.group(6)))
    for d in ("encapsulation", "decapsulation"):
        firsts.setdefault(d, []).append(secs[0][d])
        lasts.setdefault(d, []).append(secs[-1][d])
def show(name, vals):
    sd = statistics.stdev(vals) if len(vals) > 1 else 0.0
    return f"{name} min {min(vals):.3f} max {max(vals):.3f} avg {statistics.mean(vals):.3f} stdev {sd:.3f}"
print(f"lwAFTR on live veth ports: {runs} runs")
for d in ("encapsulation", "decapsulation"):
    for which, table in (("first second", firsts), ("last second", lasts)):
        v = table[d]
        print(f"  {d:14} {which:12}: {show('Mpps', [x[0] for x in v])}; {show('Gbps', [x[1] for x in v])}")
EOF
