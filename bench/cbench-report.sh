#!/usr/bin/env bash
# libfluid's four controller tests, reproduced with `sluice ofbench` (cbench's workload, options
# and output) against `sluice controller`, as one report:
#   1. the learning switch (--app l2), 16 switches, -M 100000: throughput (-t) and latency mode,
#      OpenFlow 1.0 and 1.3;
#   2. the fast-reply app over 1, 2 and 4 controller threads (throughput, 16 switches, 1.0);
#   3. network size: the learning switch with 1, 4, 16, 64, 256 and 1000 switches (-M 100000,
#      throughput, 1.0).
# Each line starts a controller on 127.0.0.1:PORT (default 16633), runs ofbench for -l LOOPS
# tests of -m MS ms (first one warmup), and stops the controller; it reports ofbench's RESULT
# average (responses/s, shown per ms like cbench's "total = ... per ms"), its CHECK line's
# verdict, and the CPU seconds the controller and the generator used (both share the machine).
#
#   bench/cbench-report.sh [--loops N] [--ms MS] [--port PORT] [--threads N]
#
# --threads is the controller's for tests 1 and 3 (default 2: this machine's cores). Uses
# target/release/sluice (or $SLUICE); it does not build it.
set -euo pipefail
cd "$(dirname "$0")/.."
LOOPS=6; MS=1000; PORT=16633; THREADS=2
while [ $# -gt 0 ]; do
    case "$1" in
        --loops) LOOPS="$2"; shift ;;
        --ms) MS="$2"; shift ;;
        --port) PORT="$2"; shift ;;
        --threads) THREADS="$2"; shift ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done
SLUICE=${SLUICE:-target/release/sluice}
[ -x "$SLUICE" ] || { echo "$SLUICE not found: build it (cargo build --release -p sluice) or set SLUICE=path" >&2; exit 1; }
TMP=$(mktemp -d /tmp/cbench-report.XXXXXX)
CTL=""
trap '[ -n "$CTL" ] && kill "$CTL" 2>/dev/null; rm -rf "$TMP"' EXIT
ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }
HZ=$(getconf CLK_TCK)

# run LABEL APP THREADS VERSION SWITCHES MODE(-t or "")
run() {
    local label=$1 app=$2 threads=$3 version=$4 switches=$5 mode=$6
    "$SLUICE" controller --listen "tcp:127.0.0.1:$PORT" --app "$app" --threads "$threads" 2>"$TMP/ctl.log" &
    CTL=$!
    for _ in $(seq 50); do grep -q "listening on" "$TMP/ctl.log" 2>/dev/null && break; sleep 0.1; done
    local t0; t0=$(date +%s.%N)
    # shellcheck disable=SC2086
    /usr/bin/env time -f "%U %S" -o "$TMP/gen.time" "$SLUICE" ofbench -c 127.0.0.1 -p "$PORT" -s "$switches" -M 100000 \
        -l "$LOOPS" -m "$MS" -w 1 -V "$version" $mode >"$TMP/out.txt" 2>&1 || true
    local c; c=$(ticks "$CTL")
    local t1; t1=$(date +%s.%N)
    kill "$CTL" 2>/dev/null; wait "$CTL" 2>/dev/null || true; CTL=""
    local avg check gen
    avg=$(sed -n 's|^RESULT: .* = [0-9.]*/[0-9.]*/\([0-9.]*\)/.*|\1|p' "$TMP/out.txt")
    check=$(sed -n 's/^CHECK: //p' "$TMP/out.txt")
    [ -n "$avg" ] || { echo "| $label | failed: $(tail -2 "$TMP/out.txt" | tr '\n' ' ') |"; return; }
    gen=$(awk '{printf "%.1f", $1 + $2}' "$TMP/gen.time")
    local verdict="ok"
    if [ "$app" = fast-reply ]; then verdict="fixed flow-mods (not checked)"
    else case "$check" in *" table-miss, 0 others"*) ;; *) verdict="wrong flows" ;; esac
    fi
    case "$check" in *" 0 errors, 0 switches never ready"*) ;; *) verdict="$verdict; errors or silent switches" ;; esac
    printf "| %s | %.1f | %.2f | %.1f / %.1f of %.1f s | %s |\n" "$label" "$(echo "$avg / 1000" | bc -l)" \
        "$(echo "$avg / 1000000" | bc -l)" "$(echo "$c / $HZ" | bc -l)" "$gen" "$(echo "$t1 - $t0" | bc -l)" "$verdict"
}
command -v bc >/dev/null || { apt-get install -y -q bc >/dev/null 2>&1 || { echo "needs bc" >&2; exit 1; }; }

echo "# sluice ofbench against sluice controller; $(nproc) CPUs, $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%F)"
echo "# $LOOPS tests of $MS ms each (the first a warmup), -M 100000"
echo
echo "| test | flows/ms (avg) | M responses/s | CPU s controller / generator of wall | answers |"
echo "|---|---:|---:|---:|---|"
run "l2, 1.0, throughput, 16 switches, $THREADS threads" l2 "$THREADS" 1.0 16 -t
run "l2, 1.3, throughput, 16 switches, $THREADS threads" l2 "$THREADS" 1.3 16 -t
run "l2, 1.0, latency, 16 switches, $THREADS threads" l2 "$THREADS" 1.0 16 ""
run "l2, 1.3, latency, 16 switches, $THREADS threads" l2 "$THREADS" 1.3 16 ""
for t in 1 2 4; do run "fast-reply, 1.0, throughput, 16 switches, $t thread(s)" fast-reply "$t" 1.0 16 -t; done
for s in 1 4 16 64 256 1000; do run "l2, 1.0, throughput, $s switch(es), $THREADS threads" l2 "$THREADS" 1.0 "$s" -t; done
