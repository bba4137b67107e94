#!/usr/bin/env bash
# Live-port packet rate: 64-byte UDP frames of 256 flows pushed by trafgen
# (netsniff-ng) from one host through the switch to the other, in network
# namespaces, on veth pairs with QUEUES queues per end: from h1 (on a veth)
# to h2, or with the TAP backend from h2, on the multi-queue TAP device
# Sluice created, to h1 (so that the TAP's queues are what spreads flows). Measured, in one run
# and with the same setup: the null forwarder (Sluice's loop and ports with
# no pipeline: `--null-forward`) and the router example, each with 1 worker
# and with QUEUES workers. The rate is what the receiving host's interface received per
# second (median of RUNS runs of SECS seconds).
#
#   bench/live-udp.sh [--backend af_xdp|af_packet|tap] [--runs N] [--secs S] [--queues Q]
#
# Everything it creates (namespaces lu-h1, lu-h2, lu-sw) is removed on exit,
# also on failure. Needs root, iproute2, ethtool and trafgen (package
# netsniff-ng, installed with apt when missing).
set -euo pipefail
cd "$(dirname "$0")/.."
BACKEND=af_xdp; RUNS=5; SECS=3; QUEUES=2
while [ $# -gt 0 ]; do
    case "$1" in
        --backend) BACKEND="$2"; shift ;;
        --runs) RUNS="$2"; shift ;;
        --secs) SECS="$2"; shift ;;
        --queues) QUEUES="$2"; shift ;;
        *) echo "unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done
source scripts/ensure-net-tools.sh
if ! command -v trafgen >/dev/null; then
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
    $SUDO apt-get install -y -qq netsniff-ng >/dev/null || { echo "live-udp: cannot install netsniff-ng (trafgen)" >&2; exit 1; }
fi
SLUICE=${SLUICE:-target/release/sluice}
[ -x "$SLUICE" ] || cargo build --release -p sluice
H1=lu-h1; H2=lu-h2; SW=lu-sw; SLUICE_PID=""; TMP=$(mktemp -d)
cleanup() {
    [ -n "$SLUICE_PID" ] && kill "$SLUICE_PID" 2>/dev/null && wait "$SLUICE_PID" 2>/dev/null || true
    SLUICE_PID=""
    for n in $H1 $H2 $SW; do ip netns del $n 2>/dev/null || true; done
}
trap 'pkill -KILL -f "$TMP/flood.cfg" 2>/dev/null; cleanup; rm -rf "$TMP"' EXIT
MAC_H1=02:00:00:00:01:01; MAC_H2=02:00:00:00:02:01; MAC_SW1=02:00:00:00:01:fe; MAC_SW2=02:00:00:00:02:fe
offloads_off() { for o in rx tx sg tso gso gro; do ip netns exec "$1" ethtool -K "$2" $o off >/dev/null 2>&1 || true; done; }
cat > "$TMP/cmds.txt" <<CMDS
table_add RouterIngress.ipv4_lpm RouterIngress.set_nexthop 10.0.1.0/24 => 1
table_add RouterIngress.ipv4_lpm RouterIngress.set_nexthop 10.0.2.0/24 => 2
table_add RouterIngress.nexthop RouterIngress.forward 1 => 1 $MAC_SW1 $MAC_H1
table_add RouterIngress.nexthop RouterIngress.forward 2 => 2 $MAC_SW2 $MAC_H2
CMDS

# $1: router|null, $2: workers
start() {
    cleanup
    for n in $H1 $H2 $SW; do ip netns add $n; ip -n $n link set lo up; done
    local q="numrxqueues $QUEUES numtxqueues $QUEUES" p2="2@s1-eth2" h2if=h2-eth0 pre=""
    ip link add h1-eth0 netns $H1 $q type veth peer name s1-eth1 netns $SW $q
    if [ "$BACKEND" = tap ]; then p2="2@tap:s1-tap2"; h2if=s1-tap2
    else ip link add h2-eth0 netns $H2 $q type veth peer name s1-eth2 netns $SW $q; fi
    for i in s1-eth1 s1-eth2; do ip -n $SW link set $i up 2>/dev/null || true; offloads_off $SW $i; done
    [ "$BACKEND" = tap ] || pre="$BACKEND:"
    [ "$BACKEND" = tap ] && pre="af_packet:"
    local extra="--no-offload" gw1=$MAC_SW1 gw2=$MAC_SW2
    if [ "$1" = null ]; then extra="$extra --null-forward"; gw1=$MAC_H2; gw2=$MAC_H1; fi
    [ "$BACKEND" = af_xdp ] && p2="2@af_xdp:s1-eth2"
    ip netns exec $SW "$SLUICE" simple_switch -i "1@${pre}s1-eth1" -i "$p2" --workers "$2" \
        --commands "$TMP/cmds.txt" $extra examples/router.json 2>"$TMP/sluice.log" &
    SLUICE_PID=$!
    for _ in $(seq 100); do grep -q "forwarding on\|null forwarder" "$TMP/sluice.log" 2>/dev/null && break; sleep 0.1; done
    grep -q "forwarding on\|null forwarder" "$TMP/sluice.log" || { cat "$TMP/sluice.log" >&2; exit 1; }
    [ "$BACKEND" = tap ] && ip -n $SW link set s1-tap2 netns $H2
    ip -n $H1 link set h1-eth0 address $MAC_H1; ip -n $H2 link set $h2if address $MAC_H2
    ip -n $H1 addr add 10.0.1.1/24 dev h1-eth0; ip -n $H2 addr add 10.0.2.1/24 dev $h2if
    ip -n $H1 link set h1-eth0 up; ip -n $H2 link set $h2if up
    offloads_off $H1 h1-eth0; offloads_off $H2 $h2if
    if [ "$BACKEND" = tap ]; then
        cat > "$TMP/flood.cfg" <<CFG
{ eth(da=$gw2, sa=$MAC_H2), ipv4(sa=10.0.2.1, da=10.0.1.1, ttl=64), udp(sp=dinc(1024, 1279), dp=9), fill(0x00, 18) }
CFG
        FROM=$H2; FROM_IF=$h2if; TO=$H1; TO_IF=h1-eth0
    else
        cat > "$TMP/flood.cfg" <<CFG
{ eth(da=$gw1, sa=$MAC_H1), ipv4(sa=10.0.1.1, da=10.0.2.1, ttl=64), udp(sp=dinc(1024, 1279), dp=9), fill(0x00, 18) }
CFG
        FROM=$H1; FROM_IF=h1-eth0; TO=$H2; TO_IF=$h2if
    fi
    sleep 0.5
}
rx() { ip netns exec $TO cat /sys/class/net/$TO_IF/statistics/rx_packets; }
# One run: trafgen floods for SECS s; the rate h2 received over the last SECS-1 s (after a 1 s warm-up).
run() {
    ip netns exec $FROM trafgen -o $FROM_IF -i "$TMP/flood.cfg" -P 1 -q >/dev/null 2>&1 &
    local tg=$!
    sleep 1; local a; a=$(rx); local t0; t0=$(date +%s.%N)
    sleep $((SECS - 1)); local b; b=$(rx); local t1; t1=$(date +%s.%N)
    # trafgen's sending child outlives a signal to its parent: stop them all.
    pkill -INT -f "$TMP/flood.cfg" 2>/dev/null || true; sleep 0.2
    pkill -KILL -f "$TMP/flood.cfg" 2>/dev/null || true; wait $tg 2>/dev/null || true
    python3 -c "print(f'{($b - $a) / ($t1 - $t0) / 1e3:.0f}')"
}
median() { sort -g | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
declare -A RESULT
for w in 1 "$QUEUES"; do
    for what in null router; do
        start $what "$w"
        runs=$(for r in $(seq "$RUNS"); do run; done | tr '\n' ' ')
        RESULT[$what,$w]=$(echo "$runs" | tr ' ' '\n' | grep . | median)
        printf "%-16s %s worker(s): %6s kpps  (runs: %s)\n" "$what" "$w" "${RESULT[$what,$w]}" "$runs"
        cleanup
    done
done
for w in 1 "$QUEUES"; do
    python3 -c "print(f'router / null forwarder, $w worker(s): {${RESULT[router,$w]} / ${RESULT[null,$w]}:.3f}')"
done
python3 -c "print(f'router, $QUEUES workers / 1 worker: {${RESULT[router,$QUEUES]} / ${RESULT[router,1]}:.3f}')"
echo "backend $BACKEND, $QUEUES queues per veth end, 64 B UDP, 256 flows, trafgen; $(nproc) CPUs, $(uname -r), $(date -u +%F)"
