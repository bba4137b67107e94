#!/usr/bin/env bash
# Sluice's OpenFlow 1.3 switch (`sluice openflow`) next to Open vSwitch's user-space (netdev)
# datapath, forwarding iperf3 TCP and UDP and ping between two hosts in network namespaces.
#
#   bench/openflow-iperf.sh [-t SECS] [--rounds R] [--workers N] [--flow-mods N] [--offloads]
#                          [--ports af_packet|af_xdp|both]
#
# Topology, the same for every switch: hosts ofb-h1 (10.0.0.1/24, interface ofb-h1e) and ofb-h2
# (10.0.0.2/24, ofb-h2e), each joined by a veth pair to a switch that runs in its own namespace
# ofb-sw on the ends ofb-s1 (OpenFlow port 1) and ofb-s2 (port 2). By default the hosts' ends
# have tx checksum, TSO, GSO and scatter-gather off (user-space forwarding of TCP on veth needs
# it, every frame is at most 1514 bytes); with --offloads they keep the kernel's defaults (64 KB
# TCP segments with partial checksums) and each switch carries them its own way. The switch's
# ends keep the kernel's defaults. Switches, measured in this order in every round:
#   veth     h1 and h2 joined directly by one veth pair, same offloads (the ceiling, no switch)
#   null     `sluice simple_switch --null-forward`: Sluice's ports and loop, no pipeline
#            (--no-offload unless --offloads), once per port backend
#   ovs      Open vSwitch 3.x, bridge ofb-br0 with datapath_type=netdev and OpenFlow 1.3,
#            ovsdb-server and ovs-vswitchd started for the run (ovs-ctl, --no-mlockall) with
#            their database, sockets and logs in a temporary directory (OVS_DBDIR, OVS_RUNDIR,
#            OVS_LOGDIR, OVS_SYSCONFDIR): the system's /etc/openvswitch is never touched;
#            with --offloads, other_config:userspace-tso-enable=true (its user-space TSO)
#   sluice   `sluice openflow` with --workers N (default 1); with --offloads, --offload
#            (virtio-net offload headers carried), once per port backend
# Sluice's port backends (--ports, default both): AF_PACKET sockets (`-i 1@ofb-s1`) and AF_XDP
# sockets (`-i 1@af_xdp:ofb-s1`, copy mode on veth). AF_XDP carries no offload headers, so with
# --offloads only AF_PACKET runs.
# Both OpenFlow switches get the same two flows from ovs-ofctl -O OpenFlow13:
#   in_port=1,actions=output:2 and in_port=2,actions=output:1 (table 0, nothing else).
#
# Measured per switch and round: iperf3 TCP h1 -> h2 for SECS s (Gbit/s at the receiver);
# iperf3 UDP h1 -> h2, 1400-byte datagrams at an unlimited offered rate (-b 0) for SECS s
# (Gbit/s and loss % at the receiver); ping h1 -> h2 (50 x 20 ms, avg and mdev); the switch
# processes' resident memory (largest sum of VmRSS seen while TCP and UDP ran; OVS counts
# ovs-vswitchd + ovsdb-server) and their CPU use during the TCP run (utime+stime from
# /proc/PID/stat, in % of one core). For the two OpenFlow switches, flow-mods while forwarding:
# a second UDP run, during which `sluice openflow-flow-rate` (from 1 s in) adds N flows (default
# 100000; /32 IPv4 destinations into table 1, which the traffic never reaches) in batches of
# 1000, each batch followed by a barrier whose reply it waits for, then deletes them (strict
# deletes): flows/s added and deleted, and the UDP Gbit/s meanwhile. Open vSwitch takes them on
# a passive controller port (set-controller ptcp:). With several rounds the table shows medians.
# Prints one Markdown table and a last line
# `result: BACKEND tcp_ratio=<sluice/ovs> udp_ratio=<...> flowmod_add_ratio=<...> tcp_gbps=<sluice>
# ovs_tcp_gbps=<ovs> null_tcp_gbps=<null forwarder> tcp_null_ratio=<sluice/null>` per backend.
#
# Needs root. Installs iperf3, ethtool, ping and openvswitch-switch with apt when missing.
# Uses target/release/sluice (or $SLUICE); it does not build it. Everything it creates
# (namespaces ofb-*, their veths, the OVS bridge, the OVS daemons, the temporary directory)
# is removed on exit, also on failure or Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=5; ROUNDS=1; WORKERS=1; FLOWS=100000; OFFLOADS=0; PORTS=both
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
    case "$1" in
        -t|--time) SECS="$2"; shift ;;
        --rounds) ROUNDS="$2"; shift ;;
        --workers) WORKERS="$2"; shift ;;
        --flow-mods) FLOWS="$2"; shift ;;
        --offloads) OFFLOADS=1 ;;
        --ports) PORTS="$2"; shift ;;
        -h|--help) usage; exit 0 ;;
        *) echo "unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done
die() { echo "openflow-iperf: $*" >&2; exit 1; }
case "$PORTS" in
    af_packet|af_xdp) BACKENDS=$PORTS ;;
    both) BACKENDS="af_packet af_xdp" ;;
    *) die "--ports takes af_packet, af_xdp or both, not $PORTS" ;;
esac
if [ "$OFFLOADS" = 1 ]; then
    [ "$PORTS" = af_xdp ] && die "--offloads needs AF_PACKET ports (AF_XDP carries no offload headers)"
    BACKENDS=af_packet
fi
[ "$(id -u)" = 0 ] || die "run as root (network namespaces, OVS daemons)"

# --- tools -----------------------------------------------------------------------------------
need=()
command -v ip >/dev/null || need+=(iproute2)
command -v iperf3 >/dev/null || need+=(iperf3)
command -v ethtool >/dev/null || need+=(ethtool)
command -v ping >/dev/null || need+=(iputils-ping)
command -v python3 >/dev/null || need+=(python3)
command -v ovs-vswitchd >/dev/null || need+=(openvswitch-switch)
command -v ovs-ofctl >/dev/null || need+=(openvswitch-common)
if [ ${#need[@]} -gt 0 ]; then
    echo "installing ${need[*]}" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}" >/dev/null 2>&1 ||
        { apt-get update -q >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}" >/dev/null 2>&1; } ||
        die "could not install ${need[*]} with apt-get; install them by hand"
fi
OVS_CTL=/usr/share/openvswitch/scripts/ovs-ctl
[ -x "$OVS_CTL" ] || die "$OVS_CTL not found (package openvswitch-switch)"
SLUICE=${SLUICE:-target/release/sluice}
[ -x "$SLUICE" ] || die "$SLUICE not found: build it (cargo build --release -p sluice) or set SLUICE=path"
SLUICE=$(realpath "$SLUICE")

# --- names, temporary directory, cleanup ---------------------------------------------------------
H1=ofb-h1; H2=ofb-h2; SW=ofb-sw; BR=ofb-br0; OF_PORT=16653
TMP=$(mktemp -d /tmp/ofb.XXXXXX)
# OVS's scripts and tools (ovs-ctl, ovs-vsctl, ovs-ofctl, ovs-appctl) all read these.
export OVS_DBDIR=$TMP/ovs OVS_RUNDIR=$TMP/ovs OVS_LOGDIR=$TMP/ovs OVS_SYSCONFDIR=$TMP/ovs/etc
mkdir -p "$OVS_SYSCONFDIR/openvswitch"
SLUICE_PID=""; OVS_UP=0
stop_switch() {
    if [ -n "$SLUICE_PID" ]; then kill "$SLUICE_PID" 2>/dev/null || true; wait "$SLUICE_PID" 2>/dev/null || true; fi
    SLUICE_PID=""
    if [ "$OVS_UP" = 1 ]; then
        ovs-vsctl --timeout=5 --if-exists del-br $BR >/dev/null 2>&1 || true
        ip netns exec $SW "$OVS_CTL" stop >/dev/null 2>&1 || true
        OVS_UP=0
    fi
}
teardown() {
    stop_switch
    # Whatever still runs in our namespaces is ours (an iperf3 cut short by Ctrl-C, say).
    local n p
    for n in $H1 $H2 $SW; do
        for p in $(ip netns pids $n 2>/dev/null); do kill "$p" 2>/dev/null || true; done
        ip netns del $n 2>/dev/null || true
    done
}
trap 'teardown; rm -rf "$TMP"' EXIT
trap 'exit 130' INT TERM

h1() { ip netns exec $H1 "$@"; }
h2() { ip netns exec $H2 "$@"; }
sw() { ip netns exec $SW "$@"; }
# Background processes are started with `ip netns exec` itself, not through these functions, so
# that $! is the process (ip execs it) and not a subshell.
host_offloads_off() {
    [ "$OFFLOADS" = 1 ] || ip netns exec "$1" ethtool -K "$2" tx off tso off gso off sg off >/dev/null 2>&1 || true
}
NULL_OFFLOAD=--no-offload; SLUICE_OFFLOAD=""
[ "$OFFLOADS" = 1 ] && { NULL_OFFLOAD=""; SLUICE_OFFLOAD=--offload; }

# --- topologies --------------------------------------------------------------------------------
hosts() { # $1: h1's interface, $2: h2's interface (both already in their namespaces)
    h1 ip addr add 10.0.0.1/24 dev "$1"; h2 ip addr add 10.0.0.2/24 dev "$2"
    h1 ip link set "$1" up; h2 ip link set "$2" up
    host_offloads_off $H1 "$1"; host_offloads_off $H2 "$2"
}
setup_veth() {
    teardown
    for n in $H1 $H2; do ip netns add $n; ip -n $n link set lo up; done
    ip link add ofb-h1e netns $H1 type veth peer name ofb-h2e netns $H2
    hosts ofb-h1e ofb-h2e
}
setup_switched() { # hosts plus the switch namespace with ofb-s1 / ofb-s2 up
    teardown
    for n in $H1 $H2 $SW; do ip netns add $n; ip -n $n link set lo up; done
    ip link add ofb-h1e netns $H1 type veth peer name ofb-s1 netns $SW
    ip link add ofb-h2e netns $H2 type veth peer name ofb-s2 netns $SW
    sw ip link set ofb-s1 up; sw ip link set ofb-s2 up
    hosts ofb-h1e ofb-h2e
}
wait_log() { # $1: file, $2: pattern; waits up to 10 s
    for _ in $(seq 100); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
    cat "$1" >&2; die "switch did not start (no \"$2\" in $1)"
}
add_flows() { # $1: ovs-ofctl target
    sw ovs-ofctl -O OpenFlow13 del-flows "$1"
    sw ovs-ofctl -O OpenFlow13 add-flow "$1" "in_port=1,actions=output:2"
    sw ovs-ofctl -O OpenFlow13 add-flow "$1" "in_port=2,actions=output:1"
}
port_args() { # $1: backend; prints sluice's -i arguments for ofb-s1 and ofb-s2
    case $1 in
        af_packet) echo "-i 1@ofb-s1 -i 2@ofb-s2" ;;
        af_xdp) echo "-i 1@af_xdp:ofb-s1 -i 2@af_xdp:ofb-s2" ;;
    esac
}
setup_null() { # $1: backend
    setup_switched
    # router.json is only loaded; the null forwarder bypasses the pipeline.
    # shellcheck disable=SC2046
    ip netns exec $SW "$SLUICE" simple_switch $(port_args "$1") --workers "$WORKERS" $NULL_OFFLOAD --null-forward \
        examples/router.json 2>"$TMP/null.log" &
    SLUICE_PID=$!
    wait_log "$TMP/null.log" "forwarding on\|null forwarder"
    PIDS=$SLUICE_PID
}
setup_ovs() {
    setup_switched
    OVS_UP=1
    # ovs-vswitchd reads userspace-tso-enable only when it starts: the database first.
    sw "$OVS_CTL" --no-ovs-vswitchd start --system-id=random --no-record-hostname >"$TMP/ovs-ctl.log" 2>&1 ||
        { cat "$TMP/ovs-ctl.log" >&2; die "ovs-ctl start (ovsdb-server) failed"; }
    [ "$OFFLOADS" = 1 ] && ovs-vsctl --no-wait --timeout=10 set Open_vSwitch . other_config:userspace-tso-enable=true
    sw "$OVS_CTL" --no-ovsdb-server start --system-id=random --no-mlockall --no-record-hostname >>"$TMP/ovs-ctl.log" 2>&1 ||
        { cat "$TMP/ovs-ctl.log" >&2; die "ovs-ctl start (ovs-vswitchd) failed"; }
    ovs-vsctl --timeout=10 add-br $BR -- set bridge $BR datapath_type=netdev protocols=OpenFlow13 fail_mode=secure \
        -- add-port $BR ofb-s1 -- set interface ofb-s1 ofport_request=1 \
        -- add-port $BR ofb-s2 -- set interface ofb-s2 ofport_request=2
    add_flows $BR
    OF_TARGET=$BR
    ovs-vsctl --timeout=10 set-controller $BR "ptcp:$OF_PORT:127.0.0.1"
    FLOW_TARGET="tcp:127.0.0.1:$OF_PORT"
    PIDS="$(cat "$OVS_RUNDIR/ovs-vswitchd.pid") $(cat "$OVS_RUNDIR/ovsdb-server.pid")"
}
setup_sluice() { # $1: backend
    setup_switched
    # shellcheck disable=SC2046
    ip netns exec $SW "$SLUICE" openflow $(port_args "$1") --listen "ptcp:$OF_PORT:127.0.0.1" --datapath-id 1 \
        --workers "$WORKERS" $SLUICE_OFFLOAD 2>"$TMP/sluice.log" &
    SLUICE_PID=$!
    wait_log "$TMP/sluice.log" "listening on"
    add_flows "tcp:127.0.0.1:$OF_PORT"
    OF_TARGET="tcp:127.0.0.1:$OF_PORT"
    FLOW_TARGET=$OF_TARGET
    PIDS=$SLUICE_PID
}

# --- measurements ------------------------------------------------------------------------------
rss_kb() { local t=0 p; for p in $PIDS; do t=$((t + $(awk '/^VmRSS/ {print $2}' /proc/$p/status 2>/dev/null || echo 0))); done; echo $t; }
cpu_ticks() { local t=0 p; for p in $PIDS; do t=$((t + $(awk '{print $14 + $15}' /proc/$p/stat 2>/dev/null || echo 0))); done; echo $t; }
RSS_MAX=0
# Runs iperf3 (client arguments in "$@") against a one-shot server in h2, noting the switch's RSS
# every 0.2 s while it runs; the client's JSON goes to $TMP/iperf.json.
iperf() {
    ip netns exec $H2 iperf3 -s -1 -p 5201 >/dev/null 2>&1 &
    local srv=$!; sleep 0.3
    ip netns exec $H1 iperf3 -c 10.0.0.2 -p 5201 -t "$SECS" -J "$@" >"$TMP/iperf.json" 2>/dev/null &
    local cli=$!
    while kill -0 $cli 2>/dev/null; do
        if [ -n "$PIDS" ]; then local r; r=$(rss_kb); [ "$r" -le "$RSS_MAX" ] || RSS_MAX=$r; fi
        sleep 0.2
    done
    wait $cli || true
    kill $srv 2>/dev/null || true; wait $srv 2>/dev/null || true
}
json() { # $1: python expression over the iperf3 JSON `j`; prints n/a when it has no answer
    python3 -c "import json,sys
try: j=json.load(open('$TMP/iperf.json')); print($1)
except Exception: print('n/a')"
}
# Flow-mods while forwarding (see the header); prints: add_flows_per_s delete_flows_per_s udp_gbps
flowmods_under_load() {
    [ -n "$FLOW_TARGET" ] || { echo "n/a n/a n/a"; return; }
    # Until the switch answers on its controller port (OVS opens it shortly after set-controller).
    for _ in $(seq 50); do sw bash -c "exec 3<>/dev/tcp/${FLOW_TARGET#tcp:}" 2>/dev/null && break; sleep 0.1; done
    { sleep 1; sw "$SLUICE" openflow-flow-rate --switch "$FLOW_TARGET" --flows "$FLOWS" --table 1 >"$TMP/flowrate.txt" 2>&1; } &
    local fr=$! add del udp
    iperf -u -b 0 -l 1400
    wait $fr || true
    add=$(sed -n 's/^add: *\([0-9]*\) flows.*/\1/p' "$TMP/flowrate.txt")
    del=$(sed -n 's/^delete: *\([0-9]*\) flows.*/\1/p' "$TMP/flowrate.txt")
    [ -n "$add" ] || { echo "flow-rate against $FLOW_TARGET failed:" >&2; cat "$TMP/flowrate.txt" >&2; }
    udp=$(json '"%.3f" % (j["end"]["sum_received"]["bits_per_second"] / 1e9)')
    echo "${add:-n/a} ${del:-n/a} $udp"
}
# Prints: tcp_gbps udp_gbps udp_loss_pct ping_avg_ms ping_mdev_ms rss_mb cpu_pct fm_add fm_del fm_udp_gbps
measure() {
    RSS_MAX=0
    if ! h1 ping -c 3 -i 0.2 -W 1 -q 10.0.0.2 >/dev/null 2>&1; then
        echo "warning: h1 cannot reach h2 through $1" >&2
        echo "n/a n/a n/a n/a n/a n/a n/a n/a n/a n/a"; return
    fi
    local hz c0 c1 t0 t1 tcp udp loss ping cpu="n/a" rss="n/a"
    hz=$(getconf CLK_TCK)
    c0=$(cpu_ticks); t0=$(date +%s.%N)
    iperf
    c1=$(cpu_ticks); t1=$(date +%s.%N)
    tcp=$(json '"%.3f" % (j["end"]["sum_received"]["bits_per_second"] / 1e9)')
    [ -n "$PIDS" ] && cpu=$(python3 -c "print('%.0f' % (100.0 * ($c1 - $c0) / $hz / ($t1 - $t0)))")
    iperf -u -b 0 -l 1400
    udp=$(json '"%.3f" % (j["end"]["sum_received"]["bits_per_second"] / 1e9)')
    loss=$(json '"%.1f" % j["end"]["sum_received"]["lost_percent"]')
    [ -n "$PIDS" ] && rss=$(python3 -c "print('%.1f' % ($RSS_MAX / 1024))")
    ping=$(h1 ping -c 50 -i 0.02 -q 10.0.0.2 2>/dev/null | sed -n 's|^rtt [^=]*= [0-9.]*/\([0-9.]*\)/[0-9.]*/\([0-9.]*\) ms.*|\1 \2|p')
    [ -n "$ping" ] || ping="n/a n/a"
    echo "$tcp $udp $loss $ping $rss $cpu $(flowmods_under_load)"
}

# --- the run -----------------------------------------------------------------------------------
NULL_OK=0
if "$SLUICE" simple_switch --help 2>&1 | grep -q -- "--null-forward"; then NULL_OK=1
else echo "note: this sluice has no null forwarder (simple_switch --null-forward): skipping it" >&2; fi
SWITCHES="veth"
declare -A LABEL=([veth]="plain veth (ceiling)" [ovs]="Open vSwitch $(ovs-vswitchd --version | awk '/Open vSwitch/ {print $NF}') netdev")
declare -A BACKEND_NAME=([af_packet]=AF_PACKET [af_xdp]=AF_XDP)
if [ "$NULL_OK" = 1 ]; then
    for b in $BACKENDS; do SWITCHES="$SWITCHES null-$b"; LABEL[null-$b]="Sluice null forwarder (${BACKEND_NAME[$b]}, ${WORKERS}w)"; done
fi
SWITCHES="$SWITCHES ovs"
for b in $BACKENDS; do SWITCHES="$SWITCHES sluice-$b"; LABEL[sluice-$b]="sluice openflow (${BACKEND_NAME[$b]}, ${WORKERS}w)"; done
declare -A RES
echo "# $SECS s per test, $ROUNDS round(s); $(nproc) CPUs, $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
for r in $(seq "$ROUNDS"); do
    for s in $SWITCHES; do
        PIDS=""; OF_TARGET=""; FLOW_TARGET=""
        case $s in
            veth) setup_veth ;;
            null-*) setup_null "${s#null-}" ;;
            ovs) setup_ovs ;;
            sluice-*) setup_sluice "${s#sluice-}" ;;
        esac
        m=$(measure "$s")
        flows=""
        [ -n "$OF_TARGET" ] && flows=$(sw ovs-ofctl -O OpenFlow13 dump-flows "$OF_TARGET" 2>&1 |
            grep -o 'n_packets=[0-9]*.*in_port=[0-9]*' | sed 's/ n_bytes=[0-9]*,.*in_port=/ in_port=/' | tr '\n' ' ' || true)
        stop_switch
        echo "round $r  ${LABEL[$s]}: tcp_gbps udp_gbps loss% ping_ms mdev_ms rss_mb cpu% flowmods_add/s del/s udp_gbps_meanwhile = $m" >&2
        # The two flows' packet counts: the traffic went through them.
        [ -z "$flows" ] || echo "round $r  ${LABEL[$s]}: flows $flows" >&2
        RES[$s]="${RES[$s]:-}$m"$'\n'
    done
done
teardown

# Median of each column over the rounds (n/a values left out).
summary() { printf '%s' "${RES[$1]}" | python3 -c '
import sys, statistics
rows = [l.split() for l in sys.stdin if l.strip()]
def num(x):
    try: return float(x)
    except ValueError: return None
def med(i, fmt):
    v = [num(r[i]) for r in rows if num(r[i]) is not None]
    return fmt % statistics.median(v) if v else "n/a"
print(med(0, "%.3f"), med(1, "%.3f"), med(2, "%.1f"), med(3, "%.3f"), med(4, "%.3f"), med(5, "%.1f"), med(6, "%.0f"),
      med(7, "%.0f"), med(8, "%.0f"), med(9, "%.3f"))'; }
echo
echo "| switch | TCP Gbit/s | UDP Gbit/s | UDP loss % | ping avg ms (mdev) | RSS MB | CPU % (TCP) | flow-mods/s while forwarding (add / delete) | UDP Gbit/s meanwhile |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
declare -A SUM
for s in $SWITCHES; do
    SUM[$s]=$(summary "$s")
    read -r tcp udp loss pavg pmdev rss cpu fadd fdel fudp <<<"${SUM[$s]}"
    [ "$s" = veth ] && { rss="-"; cpu="-"; }
    fm="-"; [ "$fadd" = n/a ] || fm="$fadd / $fdel"
    [ "$fudp" = n/a ] && fudp="-"
    echo "| ${LABEL[$s]} | $tcp | $udp | $loss | $pavg ($pmdev) | $rss | $cpu | $fm | $fudp |"
done
echo
HOST_OFFLOADS="host offloads tx/tso/gso/sg off"
[ "$OFFLOADS" = 1 ] && HOST_OFFLOADS="host offloads on (Sluice --offload, OVS userspace-tso-enable)"
echo "iperf3 $SECS s per test, UDP 1400 B at -b 0, $ROUNDS round(s) (medians); $HOST_OFFLOADS;" \
     "$(nproc) CPUs, $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%F)"
read -r ot ou _ _ _ _ _ ofa _ <<<"${SUM[ovs]}"
ratio() { python3 -c 'import sys
a, b = sys.argv[1:]
print("n/a" if "n/a" in (a, b) or float(b) == 0 else "%.2f" % (float(a) / float(b)))' "$1" "$2"; }
for b in $BACKENDS; do
    read -r st su _ _ _ _ _ sfa _ <<<"${SUM[sluice-$b]}"
    nt=n/a
    [ -n "${SUM[null-$b]:-}" ] && read -r nt _ <<<"${SUM[null-$b]}"
    echo "result: $b tcp_ratio=$(ratio "$st" "$ot") udp_ratio=$(ratio "$su" "$ou") flowmod_add_ratio=$(ratio "$sfa" "$ofa")" \
         "tcp_gbps=$st ovs_tcp_gbps=$ot null_tcp_gbps=$nt tcp_null_ratio=$(ratio "$st" "$nt")"
done
