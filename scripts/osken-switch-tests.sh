#!/usr/bin/env bash
# os-ken's switch test suite (os_ken/tests/switch/tester.py with its JSON
# cases: of13 by default, 991 cases in action, match, group, meter; of10 with
# --version of10, 192 cases in action and match; of14 with --version of14,
# of13's and the PBB_UCA ones) against `sluice openflow`, and
# against Open vSwitch as a reference, in one run.
# A conformance run, not a benchmark: hence scripts/, not bench/.
#
#   scripts/osken-switch-tests.sh [--quick | --cases REGEX] [--no-rate] [--targets sluice,ovs]
#                                 [--results DIR] [--failing-list FILE] [--timeout SECS]
#                                 [--wait SECS] [--settle SECS] [--version of10|of13|of14]
#
#   --version V      the suite's OpenFlow version (default of13): the target
#                    switches (Sluice with --protocols, the OVS bridge with
#                    protocols=) speak only that version; the tester bridge
#                    speaks 1.3
#   --quick          one case file per group (action/00_OUTPUT, match/00_IN_PORT,
#                    group/00_ALL, meter/01_DROP_01_PKTPS_00_100): about 2 min per target
#   --cases REGEX    only the case files whose path under the version's folder matches REGEX
#                    (grep -E), e.g. 'match/(03|04)_' or 'action/25_SET_FIELD/'
#   --no-rate        leave out the cases that measure packet/bit rates (every
#                    group and meter case of the suite checks throughput)
#   --targets LIST   which targets to test, in order (default sluice,ovs)
#   --results DIR    where the logs go (default bench/results/osken-switch-<time>)
#   --failing-list F write Sluice's failing cases to F, one line per case:
#                    "<group>/<file>: <case>: <tester.py's reason>" (e.g.
#                    tests/openflow/osken-switch-failing.txt)
#   --timeout SECS   give up on a target after SECS (default 3600)
#   --wait SECS      how long tester.py waits for each reply or packet-in it
#                    expects (default 3, tester.py's own); a passing case never
#                    waits it out, so a longer wait only slows failing cases
#   --settle SECS    how long tester.py sleeps before a table-miss case reads
#                    the lookup counters (default 1, tester.py's own)
#   STS_NETNS=NAME   the namespace's name (default sts-ns); runs in namespaces
#                    of different names do not disturb each other's switches
#
# Topology, all inside one network namespace (sts-ns) so that nothing clashes
# with other switches or OVS instances on the machine: veth pairs sts-a1/sts-b1,
# sts-a2/sts-b2, sts-a3/sts-b3 (offloads and IPv6 off). The target switch
# (dpid 1) owns the sts-aN ends as OpenFlow ports N; the tester, an Open vSwitch
# bridge sts-tester with datapath_type=netdev (dpid 2), owns the sts-bN ends as
# ports N. Both connect to osken-manager running tester.py on 127.0.0.1 in the
# namespace. Targets: `sluice openflow`, then a second OVS bridge sts-target
# (dpid 1). OVS runs as its own ovsdb-server/ovs-vswitchd with every file in a
# temp dir. tester.py runs through scripts/osken_tester_app.py, which sets
# its two waits (--wait, --settle), keeps a packet-in that comes before the
# tester waits for it, and sends each case's packet once Open vSwitch has
# applied the case's flows to its datapath. tester.py does not exit when done: the manager is stopped once its
# "OK(n) / ERROR(n)" report line appears.
#
# Prints per group the OK/failed counts for each target and
#   result: sluice=<ok>/<total> ovs=<ok>/<total>
# The results dir keeps each target's full tester log (<target>.log), the
# failing cases with their reasons (<target>-failing.txt; Sluice's are tagged
# "[ovs fails too]" where OVS failed the same case), the switch logs, and
# rate-cases.txt: the group and meter cases that measure packet/bit rates
# through the tester's Python packet sender (noisy on 2 cores).
#
# Time: a full run takes roughly 12-20 minutes per target on 2 cores: most of
# it goes to the 51 rate cases (15 group, 36 meter), which send packets for
# 30 s each when the group or meter is accepted, and to the time-outs of
# failing cases. --quick takes about 100 s per target. Needs root, iproute2, ethtool, Open vSwitch (installed with
# apt-get if missing), os-ken's venv (.venv/osken, or OSKEN_VENV=...), and the
# release binary (SLUICE=..., default target/release/sluice).
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)

CASES=""; TARGETS="sluice,ovs"; RESULTS=""; FAILING_LIST=""; TIMEOUT=3600
NO_RATE=""; WAIT=3; SETTLE=1; VERSION=of13
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) CASES='^(action/00_OUTPUT|match/00_IN_PORT|group/00_ALL|meter/01_DROP_01_PKTPS_00_100)\.json$' ;;
        --cases) CASES="$2"; shift ;;
        --targets) TARGETS="$2"; shift ;;
        --results) RESULTS="$2"; shift ;;
        --failing-list) FAILING_LIST="$2"; shift ;;
        --timeout) TIMEOUT="$2"; shift ;;
        --no-rate) NO_RATE=1 ;;
        --wait) WAIT="$2"; shift ;;
        --settle) SETTLE="$2"; shift ;;
        --version) VERSION="$2"; shift ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done
[ "$(id -u)" = 0 ] || { echo "error: run as root" >&2; exit 2; }
case "$VERSION" in
    of10) OFP_NAME=openflow10; OVS_PROTO=OpenFlow10 ;;
    of13) OFP_NAME=openflow13; OVS_PROTO=OpenFlow13 ;;
    of14) OFP_NAME=openflow14; OVS_PROTO=OpenFlow14 ;;
    *) echo "error: --version $VERSION: of10, of13 or of14" >&2; exit 2 ;;
esac

SLUICE=${SLUICE:-$REPO/target/release/sluice}
[ -x "$SLUICE" ] || { echo "error: $SLUICE is missing (cargo build --release -p sluice)" >&2; exit 2; }
OSKEN_VENV=${OSKEN_VENV:-$REPO/.venv/osken}
if [ ! -x "$OSKEN_VENV/bin/osken-manager" ]; then
    source scripts/ensure-python.sh
    OSKEN_VENV=$(dirname "$(dirname "$SLUICE_OSKEN_MANAGER")")
fi
OSKEN_PY=$OSKEN_VENV/bin/python
SWITCH_TESTS=$("$OSKEN_PY" -c 'import os, os_ken.tests.switch as m; print(os.path.dirname(m.__file__))')
[ -d "$SWITCH_TESTS/$VERSION" ] || { echo "error: $SWITCH_TESTS/$VERSION is missing from the os-ken install" >&2; exit 2; }
command -v ovs-vswitchd >/dev/null || { apt-get update -qq && apt-get install -y -qq openvswitch-switch >/dev/null; }
command -v ethtool >/dev/null || { apt-get update -qq && apt-get install -y -qq ethtool >/dev/null; }

RESULTS=${RESULTS:-$REPO/bench/results/osken-switch-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$RESULTS"; RESULTS=$(cd "$RESULTS" && pwd)
NS=${STS_NETNS:-sts-ns}      # STS_NETNS=other-name lets two runs go side by side
PORT=6633                    # the controller's port, on the namespace's own loopback
TMP=$(mktemp -d /tmp/sts-osken.XXXXXX)
export OVS_RUNDIR=$TMP OVS_DBDIR=$TMP OVS_LOGDIR=$TMP OVS_PKGDATADIR=/usr/share/openvswitch
VSCTL=(ovs-vsctl --db="unix:$TMP/db.sock" --timeout=20)
MANAGER_PID=""; SLUICE_PID=""

cleanup() {
    set +e
    [ -n "$MANAGER_PID" ] && kill "$MANAGER_PID" 2>/dev/null && wait "$MANAGER_PID" 2>/dev/null
    [ -n "$SLUICE_PID" ] && kill "$SLUICE_PID" 2>/dev/null && wait "$SLUICE_PID" 2>/dev/null
    for p in vswitchd ovsdb; do
        [ -f "$TMP/$p.pid" ] && kill "$(cat "$TMP/$p.pid")" 2>/dev/null
    done
    sleep 0.5
    cp "$TMP"/*.log "$RESULTS"/ 2>/dev/null
    ip netns del "$NS" 2>/dev/null
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

nsx() { ip netns exec "$NS" "$@"; }
# Background processes start with `ip netns exec` itself, not through nsx: then $! is the
# process (ip execs it), not a subshell whose kill would leave the process running.

# --- The test cases: the version's whole suite, or the files that match --cases.
# With --no-rate, the copies lose their rate-measuring cases (a file left with none goes).
SUITE=$SWITCH_TESTS/$VERSION
if [ -n "$CASES" ] || [ -n "$NO_RATE" ]; then
    SUITE=$TMP/$VERSION
    (cd "$SWITCH_TESTS/$VERSION" && find . -name '*.json' | sed 's|^\./||' | sort | grep -E -- "${CASES:-.}" || true) > "$TMP/cases"
    [ -s "$TMP/cases" ] || { echo "error: no case file matches '$CASES'" >&2; exit 2; }
    while read -r f; do
        mkdir -p "$SUITE/$(dirname "$f")"; cp "$SWITCH_TESTS/$VERSION/$f" "$SUITE/$f"
    done < "$TMP/cases"
    [ -z "$NO_RATE" ] || "$OSKEN_PY" scripts/osken_switch_report.py drop-rate-cases "$SUITE"
fi
"$OSKEN_PY" scripts/osken_switch_report.py rate-cases "$SUITE" > "$RESULTS/rate-cases.txt"

# --- Namespace and veth pairs.
ip netns del "$NS" 2>/dev/null || true
ip netns add "$NS"
nsx ip link set lo up
nsx sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
for i in 1 2 3; do
    nsx ip link add "sts-a$i" type veth peer name "sts-b$i"
    for end in a b; do
        nsx ip link set "sts-$end$i" up
        nsx ethtool -K "sts-$end$i" tx off tso off gso off >/dev/null 2>&1 || true
    done
done

# --- Open vSwitch: our own database and daemon, all files in $TMP.
ovsdb-tool create "$TMP/conf.db" /usr/share/openvswitch/vswitch.ovsschema
nsx ovsdb-server "$TMP/conf.db" --remote="punix:$TMP/db.sock" --pidfile="$TMP/ovsdb.pid" \
    --unixctl="$TMP/ovsdb.ctl" --log-file="$TMP/ovsdb-server.log" --detach --no-chdir
"${VSCTL[@]}" --no-wait init
nsx ovs-vswitchd "unix:$TMP/db.sock" --pidfile="$TMP/vswitchd.pid" --unixctl="$TMP/vswitchd.ctl" \
    --log-file="$TMP/ovs-vswitchd.log" --detach --no-chdir

# add_bridge NAME DPID PORT-PREFIX PROTOCOL: a netdev bridge speaking PROTOCOL with ports 1-3 on PREFIX1-3.
add_bridge() {
    "${VSCTL[@]}" add-br "$1" -- set bridge "$1" datapath_type=netdev protocols="$4" \
        fail-mode=secure other-config:datapath-id="$2" other-config:disable-in-band=true
    for i in 1 2 3; do
        "${VSCTL[@]}" add-port "$1" "$3$i" -- set interface "$3$i" ofport_request="$i"
    done
    "${VSCTL[@]}" set-controller "$1" "tcp:127.0.0.1:$PORT"
    "${VSCTL[@]}" set controller "$1" max_backoff=1000
}
add_bridge sts-tester 0000000000000002 sts-b OpenFlow13

# run_suite NAME: tester.py against whichever target (dpid 1) is connected; log in $RESULTS/NAME.log.
run_suite() {
    local log=$RESULTS/$1.log start=$SECONDS
    STS_WAIT=$WAIT STS_SETTLE=$SETTLE STS_OVS_CTL=$TMP/vswitchd.ctl ip netns exec "$NS" "$OSKEN_VENV/bin/osken-manager" --ofp-tcp-listen-port "$PORT" \
        --test-switch-dir "$SUITE" --test-switch-target 0000000000000001 --test-switch-tester 0000000000000002 \
        --test-switch-target-version "$OFP_NAME" --test-switch-tester-version openflow13 \
        "$REPO/scripts/osken_tester_app.py" > "$log" 2>&1 &
    MANAGER_PID=$!
    while kill -0 "$MANAGER_PID" 2>/dev/null; do
        grep -qE '^OK\([0-9]+\) / ERROR\([0-9]+\)' "$log" 2>/dev/null && break 
        if [ $((SECONDS - start)) -ge "$TIMEOUT" ]; then
            echo "warning: $1: gave up after $TIMEOUT s" >&2; break
        fi
        sleep 2
    done
    kill "$MANAGER_PID" 2>/dev/null || true; wait "$MANAGER_PID" 2>/dev/null || true
    MANAGER_PID=""
    echo "$1: tester.py ran for $((SECONDS - start)) s" >&2
}

declare -A SCORE
for target in ${TARGETS//,/ }; do
    case "$target" in
        sluice)
            ip netns exec "$NS" "$SLUICE" openflow -i 1@sts-a1 -i 2@sts-a2 -i 3@sts-a3 \
                --controller "tcp:127.0.0.1:$PORT" --datapath-id 1 --protocols "$OVS_PROTO" > "$RESULTS/sluice-switch.log" 2>&1 &
            SLUICE_PID=$!
            run_suite sluice
            kill "$SLUICE_PID" 2>/dev/null || true; wait "$SLUICE_PID" 2>/dev/null || true
            SLUICE_PID="" ;;
        ovs)
            add_bridge sts-target 0000000000000001 sts-a "$OVS_PROTO"
            run_suite ovs
            "${VSCTL[@]}" del-br sts-target ;;
        *) echo "error: unknown target $target (sluice, ovs)" >&2; exit 2 ;;
    esac
    "$OSKEN_PY" scripts/osken_switch_report.py summary "$SUITE" "$RESULTS/$target.log" "$target" \
        --failing "$RESULTS/$target-failing.txt" --counts "$TMP/$target.counts"
    read -r ok total < "$TMP/$target.counts"
    SCORE[$target]="$ok/$total"
done

# Sluice's failing cases again, each tagged "[ovs fails too]" where OVS failed it as well.
if [ -n "${SCORE[sluice]:-}" ] && [ -n "${SCORE[ovs]:-}" ]; then
    "$OSKEN_PY" scripts/osken_switch_report.py summary "$SUITE" "$RESULTS/sluice.log" sluice --quiet \
        --failing "$RESULTS/sluice-failing.txt" --reference "$RESULTS/ovs.log" --reference-label ovs
    echo "sluice failures that OVS passes: $(grep -v '^#' "$RESULTS/sluice-failing.txt" | grep -vc 'ovs fails too]$' || true)"
fi
if [ -n "$FAILING_LIST" ] && [ -f "$RESULTS/sluice-failing.txt" ]; then
    cp "$RESULTS/sluice-failing.txt" "$FAILING_LIST"
fi
echo "rate-measuring cases (noisy on 2 cores): $(wc -l < "$RESULTS/rate-cases.txt"), listed in $RESULTS/rate-cases.txt"
echo "logs: $RESULTS"
line="result:"
for target in ${TARGETS//,/ }; do line+=" $target=${SCORE[$target]}"; done
echo "$line"
