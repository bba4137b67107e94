#!/usr/bin/env bash
# What a packet costs Sluice at low rates on AF_PACKET, where batches hold
# one frame and the cost per packet is the worker's wake-ups and system calls:
# the question whether the kernel's memory-mapped rings (TPACKET_V3), which
# save the receive call, would pay.
#
#   bench/low-rate.sh [--count N]
#
# Two hosts in namespaces joined through `sluice simple_switch` (router
# example, offloads off on the hosts) on veth pairs; `ping -f` (one request
# in flight: every batch is one frame) sends N requests (default 20000).
# Reports, per packet forwarded: the switch's CPU time (user and system, from
# /proc), its system calls by name (perf stat on the syscall tracepoints), and
# the share of the worker's CPU samples inside each call (the kernel's work
# below it included): receive (what a receive ring would save at most),
# send (a transmit ring still asks the kernel to send: on veth the peer's
# receive runs inside it) and poll (the sleep and wake-up, a ring's too). Everything it
# creates (namespaces lr-h1, lr-h2, lr-sw) is removed on exit.
# Needs root, iproute2, perf (scripts/ensure-net-tools.sh installs them).
set -euo pipefail
cd "$(dirname "$0")/.."
COUNT=20000
while [ $# -gt 0 ]; do
    case "$1" in
        --count) COUNT="$2"; shift ;;
        *) echo "unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done
source scripts/ensure-net-tools.sh
command -v perf >/dev/null || { echo "perf is missing (apt install linux-perf)" >&2; exit 1; }
SLUICE=${SLUICE:-target/release/sluice}
[ -x "$SLUICE" ] || cargo build --release -p sluice
H1=lr-h1; H2=lr-h2; SW=lr-sw; PID=""; DIR=""
cleanup() {
    [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null || true
    for n in $H1 $H2 $SW; do ip netns del $n 2>/dev/null || true; done
    [ -z "$DIR" ] || rm -rf "$DIR"
}
trap cleanup EXIT
cleanup
DIR=$(mktemp -d)
for n in $H1 $H2 $SW; do ip netns add $n; ip -n $n link set lo up; ip netns exec $n sysctl -qw net.ipv6.conf.all.disable_ipv6=1; done
ip link add h1-eth0 netns $H1 type veth peer name s1-eth1 netns $SW
ip link add h2-eth0 netns $H2 type veth peer name s1-eth2 netns $SW
ip -n $SW link set s1-eth1 up; ip -n $SW link set s1-eth2 up
for h in 1 2; do
    ns=lr-h$h; o=$((3 - h))
    ip -n $ns link set h$h-eth0 address 02:00:00:00:0$h:01
    ip -n $ns addr add 10.0.$h.1/24 dev h$h-eth0
    ip -n $ns link set h$h-eth0 up
    ip -n $ns route add 10.0.$o.0/24 via 10.0.$h.254
    ip -n $ns neigh add 10.0.$h.254 lladdr 02:00:00:00:0$h:fe dev h$h-eth0
    for f in tx tso gso sg; do ip netns exec $ns ethtool -K h$h-eth0 $f off >/dev/null 2>&1 || true; done
done
cat > "$DIR/cmds.txt" <<EOF
table_add RouterIngress.ipv4_lpm RouterIngress.set_nexthop 10.0.1.0/24 => 1
table_add RouterIngress.ipv4_lpm RouterIngress.set_nexthop 10.0.2.0/24 => 2
table_add RouterIngress.nexthop RouterIngress.forward 1 => 1 02:00:00:00:01:fe 02:00:00:00:01:01
table_add RouterIngress.nexthop RouterIngress.forward 2 => 2 02:00:00:00:02:fe 02:00:00:00:02:01
EOF
ip netns exec $SW "$SLUICE" simple_switch -i 1@s1-eth1 -i 2@s1-eth2 --thrift-port 29790 \
    --commands "$DIR/cmds.txt" examples/router.json 2>"$DIR/sluice.log" &
PID=$!
for _ in $(seq 100); do grep -q "forwarding on" "$DIR/sluice.log" && break; sleep 0.1; done
ip netns exec $H1 ping -c 3 -i 0.2 10.0.2.1 >/dev/null
WORKER=$(grep -l sluice-worker /proc/$PID/task/*/comm | head -1 | cut -d/ -f5)
cpu() { awk '{print $14 + $15}' /proc/$PID/task/$WORKER/stat; }
TICK=$(getconf CLK_TCK)
SYSCALLS="syscalls:sys_enter_recvmmsg,syscalls:sys_enter_sendmmsg,syscalls:sys_enter_poll,syscalls:sys_enter_ppoll,raw_syscalls:sys_enter"

# 1. CPU and system calls per packet (perf stat counts tracepoints: no per-call overhead worth naming).
c0=$(cpu)
perf stat -x, -e "$SYSCALLS" -t "$WORKER" -o "$DIR/stat.csv" -- \
    ip netns exec $H1 ping -f -q -c "$COUNT" 10.0.2.1 >"$DIR/ping.txt"
c1=$(cpu)
recv=$(grep -o '[0-9]* received' "$DIR/ping.txt" | cut -d' ' -f1)
PKTS=$((COUNT + recv))   # requests and replies both cross the switch
# 2. Where the worker's time goes: CPU samples by kernel/user symbol.
perf record -q -F 4999 -g -t "$WORKER" -o "$DIR/perf.data" -- \
    ip netns exec $H1 ping -f -q -c "$COUNT" 10.0.2.1 >/dev/null 2>&1
perf report -q -i "$DIR/perf.data" --children --sort sym --stdio 2>/dev/null \
    | grep -E '^ +[0-9.]+% +[0-9.]+% +\[\.\] (__recvmmsg|__sendmmsg|__poll)$' > "$DIR/report.txt" || true
share() { awk -v s="$1" '$NF == s {print $1; exit}' "$DIR/report.txt"; }

echo "== Sluice at low rate: ping -f, $COUNT requests ($PKTS packets forwarded), one frame per batch"
awk -v t=$((c1 - c0)) -v hz="$TICK" -v p="$PKTS" \
    'BEGIN { printf "worker CPU: %.2f us per packet\n", t / hz * 1e6 / p }'
awk -F, -v p="$PKTS" '{ n = $3; sub(/^syscalls:sys_enter_/, "", n); sub(/^raw_syscalls:sys_enter/, "all", n);
    if ($1 ~ /^[0-9]+$/) printf "system calls per packet, %-9s %.2f\n", n ":", $1 / p }' "$DIR/stat.csv"
echo "share of the worker's CPU samples in each call (the kernel's work below it included):"
for s in __recvmmsg __sendmmsg __poll; do
    printf "  %-16s %s\n" "$s" "$(share $s || true)"
done
