#!/usr/bin/env bash
# The network benchmark of bmv2's docs, without Mininet: two hosts in network
# namespaces joined through Sluice (router example) on veth pairs, measured
# side by side with the same hosts joined by a plain veth pair and by a Linux
# bridge (the ceilings).
#
#   bench/netns-router.sh [--quick] [--rounds N] [--backend af_packet|af_xdp|tap] [--offloads on|off|both]
#                         [--workers N] [--all-offloads-off]
#
# "off" turns every offload off on the hosts' interfaces, as bmv2's tutorials do. The switch's own
# veth ends are Sluice's: with the af_packet backend they keep their defaults plus GRO on, so the
# kernel coalesces the hosts' segments before Sluice reads them and Sluice forwards them with
# virtio-net offload headers. --all-offloads-off turns everything off on the switch's ends too (what
# bmv2 itself needs; Sluice then runs with --no-offload).
#
# Measures: ping latency (median of 20), iperf3 TCP (median of 5 x 10 s; --quick: 3 x 3 s)
# and UDP 64-byte frames (offered rate, received rate, loss). --rounds N (default 1) repeats the four
# set-ups N times, interleaved (veth, bridge, null forwarder, Sluice, then again), and ends with each
# set-up's median TCP rate over the rounds and Sluice's share of the null forwarder's. Everything it
# creates (namespaces sl-h1, sl-h2, sl-sw, a bridge) is removed on exit, also on failure.
# Needs root, iproute2, iperf3, ethtool (installed by scripts/ensure-net-tools.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=5; SECS=10; BACKEND=af_packet; OFFLOADS=both; WORKERS=1; SWITCH_GRO=1; ROUNDS=1
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) RUNS=3; SECS=3 ;;
        --rounds) ROUNDS="$2"; shift ;;
        --backend) BACKEND="$2"; shift ;;
        --offloads) OFFLOADS="$2"; shift ;;
        --workers) WORKERS="$2"; shift ;;
        --all-offloads-off) SWITCH_GRO=0 ;;
        *) echo "unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done
source scripts/ensure-net-tools.sh
SLUICE=${SLUICE:-target/release/sluice}
[ -x "$SLUICE" ] || cargo build --release -p sluice
H1=sl-h1; H2=sl-h2; SW=sl-sw
SLUICE_PID=""
cleanup() {
    [ -n "$SLUICE_PID" ] && kill "$SLUICE_PID" 2>/dev/null && wait "$SLUICE_PID" 2>/dev/null || true
    for n in $H1 $H2 $SW; do ip netns del $n 2>/dev/null || true; done
    rm -f /tmp/sl-router-cmds.txt
}
trap cleanup EXIT
h1() { ip netns exec $H1 "$@"; }
# What bmv2's veth setup does: every offload the device lets us turn off, off.
ns_offloads_off() { for o in rx tx sg tso ufo gso gro lro rxvlan txvlan rxhash; do ip netns exec "$1" ethtool -K "$2" $o off >/dev/null 2>&1 || true; done; }
h2() { ip netns exec $H2 "$@"; }
MAC_H1=02:00:00:00:01:01; MAC_H2=02:00:00:00:02:01; MAC_SW1=02:00:00:00:01:fe; MAC_SW2=02:00:00:00:02:fe

# hosts: h1 10.0.1.1/24, h2 10.0.2.1/24, each with a gateway .254 whose MAC is static.
hosts() {
    cleanup; ip netns add $H1; ip netns add $H2
    h1 ip link set lo up; h2 ip link set lo up
}
host_addrs() { # $1: h1 iface, $2: h2 iface, $3: on|off offloads
    h1 ip link set "$1" address $MAC_H1; h2 ip link set "$2" address $MAC_H2
    h1 ip addr add 10.0.1.1/24 dev "$1"; h2 ip addr add 10.0.2.1/24 dev "$2"
    h1 ip link set "$1" up; h2 ip link set "$2" up
    h1 ip route add 10.0.2.0/24 via 10.0.1.254; h2 ip route add 10.0.1.0/24 via 10.0.2.254
    h1 ip neigh add 10.0.1.254 lladdr $MAC_SW1 dev "$1"; h2 ip neigh add 10.0.2.254 lladdr $MAC_SW2 dev "$2"
    if [ "$3" = off ]; then ns_offloads_off $H1 "$1"; ns_offloads_off $H2 "$2"; fi
}
setup_sluice() { # $1 offloads on|off
    hosts; ip netns add $SW; ip netns exec $SW ip link set lo up
    ip link add h1-eth0 netns $H1 type veth peer name s1-eth1 netns $SW
    ip netns exec $SW ip link set s1-eth1 up
    local h2if=h2-eth0 port2="2@s1-eth2" extra=""
    local port1="1@s1-eth1"
    if [ "$BACKEND" = tap ]; then
        port2="2@tap:s1-tap2"; h2if=s1-tap2
    elif [ "$BACKEND" = af_xdp ]; then
        port1="1@af_xdp:s1-eth1"; port2="2@af_xdp:s1-eth2"
        ip link add h2-eth0 netns $H2 type veth peer name s1-eth2 netns $SW
        ip netns exec $SW ip link set s1-eth2 up
    else
        ip link add h2-eth0 netns $H2 type veth peer name s1-eth2 netns $SW
        ip netns exec $SW ip link set s1-eth2 up
    fi
    if [ "$1" = off ] && [ "$SWITCH_GRO" = 1 ] && [ "$BACKEND" = af_packet ]; then
        for i in s1-eth1 s1-eth2; do ip netns exec $SW ethtool -K $i gro on >/dev/null 2>&1 || true; done
    elif [ "$1" = off ]; then
        ns_offloads_off $SW s1-eth1; [ "$BACKEND" = tap ] || ns_offloads_off $SW s1-eth2
        extra="--no-offload"
    fi
    cat > /tmp/sl-router-cmds.txt <<CMDS
table_add RouterIngress.ipv4_lpm RouterIngress.set_nexthop 10.0.1.0/24 => 1
table_add RouterIngress.ipv4_lpm RouterIngress.set_nexthop 10.0.2.0/24 => 2
table_add RouterIngress.nexthop RouterIngress.forward 1 => 1 $MAC_SW1 $MAC_H1
table_add RouterIngress.nexthop RouterIngress.forward 2 => 2 $MAC_SW2 $MAC_H2
CMDS
    [ "${2:-}" = null ] && extra="$extra --null-forward"
    ip netns exec $SW "$SLUICE" simple_switch -i "$port1" -i "$port2" --workers "$WORKERS" \
        --commands /tmp/sl-router-cmds.txt $extra examples/router.json 2>/tmp/sl-sluice.log &
    SLUICE_PID=$!
    # Started: the router says "forwarding on", the null forwarder names itself.
    for _ in $(seq 100); do grep -qE "forwarding on|null forwarder" /tmp/sl-sluice.log 2>/dev/null && break; sleep 0.1; done
    grep -qE "forwarding on|null forwarder" /tmp/sl-sluice.log || { cat /tmp/sl-sluice.log >&2; exit 1; }
    # A TAP port is created by Sluice: it becomes h2's interface.
    [ "$BACKEND" = tap ] && ip netns exec $SW ip link set s1-tap2 netns $H2
    # The null forwarder rewrites nothing: each host's gateway MAC is the other host's.
    if [ "${2:-}" = null ]; then MAC_SW1=$MAC_H2; MAC_SW2=$MAC_H1; fi
    host_addrs h1-eth0 $h2if "$1"
    MAC_SW1=02:00:00:00:01:fe; MAC_SW2=02:00:00:00:02:fe
}
setup_veth() { hosts; ip link add h1-eth0 netns $H1 type veth peer name h2-eth0 netns $H2
    # Same addressing through a direct link: the "gateway" MAC is the peer's.
    MAC_SW1=$MAC_H2; MAC_SW2=$MAC_H1; host_addrs h1-eth0 h2-eth0 "$1"
    h1 ip route add 10.0.2.1/32 dev h1-eth0 2>/dev/null || true; h2 ip route add 10.0.1.1/32 dev h2-eth0 2>/dev/null || true
    MAC_SW1=02:00:00:00:01:fe; MAC_SW2=02:00:00:00:02:fe; }
setup_bridge() { hosts; ip netns add $SW; ip netns exec $SW ip link add br0 type bridge
    ip link add h1-eth0 netns $H1 type veth peer name b-eth1 netns $SW
    ip link add h2-eth0 netns $H2 type veth peer name b-eth2 netns $SW
    for i in b-eth1 b-eth2; do ip netns exec $SW ip link set $i master br0; ip netns exec $SW ip link set $i up; done
    ip netns exec $SW ip link set br0 up
    MAC_SW1=$MAC_H2; MAC_SW2=$MAC_H1; host_addrs h1-eth0 h2-eth0 "$1"
    MAC_SW1=02:00:00:00:01:fe; MAC_SW2=02:00:00:00:02:fe
    if [ "$1" = off ]; then for i in b-eth1 b-eth2; do ns_offloads_off $SW $i; done; fi; }

median() { sort -g | awk '{a[NR]=$1} END {if (NR==0) print "n/a"; else if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }

measure() { # prints: ping_ms tcp_gbps udp_offered_kpps udp_received_kpps udp_loss_pct
    local ping tcp udp
    ping=$(h1 ping -c 20 -i 0.05 -q 10.0.2.1 >/dev/null 2>&1; h1 ping -c 20 -i 0.05 10.0.2.1 2>/dev/null | sed -n 's/.*time=\([0-9.]*\) ms/\1/p' | median)
    h2 iperf3 -s -D -1 -p 5201 >/dev/null 2>&1; sleep 0.3
    tcp=$(for r in $(seq $RUNS); do
        h2 iperf3 -s -D -1 -p 5202 >/dev/null 2>&1; sleep 0.2
        h1 iperf3 -c 10.0.2.1 -p 5202 -t $SECS -J 2>/dev/null | sed -n 's/.*"bits_per_second":[[:space:]]*\([0-9.e+]*\).*/\1/p' | tail -1
    done | awk '{printf "%.3f\n", $1/1e9}' | median)
    pkill -f "iperf3 -s -D -1 -p 5201" 2>/dev/null || true
    h2 iperf3 -s -D -1 -p 5203 >/dev/null 2>&1; sleep 0.2
    udp=$(h1 iperf3 -c 10.0.2.1 -p 5203 -u -l 18 -b 0 -t $SECS -J 2>/dev/null | python3 -c '
import json,sys
j=json.load(sys.stdin); e=j["end"]; s=e.get("sum_sent", e.get("sum")); r=e.get("sum_received", e.get("sum"))
t=s["seconds"] or 1
sent=s.get("packets", 0); lost=r.get("lost_packets", 0); tot=r.get("packets", sent)
print("%.0f %.0f %.1f" % (sent/t/1e3, (tot-lost)/t/1e3, 100.0*lost/max(tot,1)))' 2>/dev/null || echo "n/a n/a n/a")
    echo "$ping $tcp $udp"
}

printf "%-28s %-9s %10s %14s %14s %14s %8s\n" setup offloads "ping ms" "TCP Gbit/s" "UDP sent kpps" "UDP recv kpps" "loss %"
offl_list="on off"; [ "$OFFLOADS" != both ] && offl_list=$OFFLOADS
TCP_LOG=$(mktemp)
for round in $(seq "$ROUNDS"); do
    for off in $offl_list; do
        for setup in veth bridge null sluice; do
            case $setup in
                null) setup_sluice $off null; label="null forwarder ($BACKEND)" ;;
                veth) setup_veth $off; label="plain veth (ceiling)" ;;
                bridge) setup_bridge $off; label="Linux bridge" ;;
                sluice) setup_sluice $off; label="Sluice router ($BACKEND, ${WORKERS}w)" ;;
            esac
            read -r p t us ur ul <<<"$(measure)"
            printf "%-28s %-9s %10s %14s %14s %14s %8s\n" "$label" "$off" "$p" "$t" "$us" "$ur" "$ul"
            echo "$off $setup $t" >>"$TCP_LOG"
            cleanup; SLUICE_PID=""
        done
    done
done
echo
echo "TCP Gbit/s, median of $ROUNDS interleaved round(s):"
for off in $offl_list; do
    for setup in veth bridge null sluice; do
        printf "  offloads %-4s %-8s %s\n" "$off" "$setup" "$(awk -v o="$off" -v s="$setup" '$1==o && $2==s {print $3}' "$TCP_LOG" | median)"
    done
    ratio=$(awk -v o="$off" '$1==o && $2=="null" {n[++i]=$3} $1==o && $2=="sluice" {s[++j]=$3}
        END {for (k=1; k<=j && k<=i; k++) if (n[k] > 0) printf "%.3f\n", s[k]/n[k]}' "$TCP_LOG" | median)
    printf "  offloads %-4s Sluice / null forwarder (median of the per-round ratios): %s\n" "$off" "$ratio"
done
rm -f "$TCP_LOG"
echo "machine: $(nproc) CPUs, $(uname -r), $(date -u +%F)"
