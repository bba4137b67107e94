#!/usr/bin/env bash
# Performance lab: runs `sluice bench` (traffic replayed from memory, followed
# by the hand-written reference router on the same traffic) over a matrix of
# programs x frame sizes x worker counts x table sizes, collects every
# `result:` line under a header describing the machine and the commit, and
# renders a markdown table and an SVG plot with bench/perf_lab_report.py.
#
#   bench/perf-lab.sh
#
# Environment (lists are space-separated):
#   SLUICE_BIN  binary to run; when set nothing is built (default: cargo build
#               --release -p sluice, then target/release/sluice)
#   PROGRAMS    default "router edge l2-learning basic-routing psa-unicast
#               psa-metadata" (basic-routing is p4c's basic_routing-bmv2 from
#               ../shared/conformance/p4c-bench; the psa-* programs are PSA
#               programs of ../shared/conformance/p4c-stf-psa, see
#               `sluice bench --help`)
#   SIZES       default "64 256 550 1500"  (frame bytes on the wire, FCS included)
#   WORKERS     default "1 2"
#   ENTRIES     default "10 10000 1000000" (capped per program: edge 100000
#               routes, l2-learning 65536 hosts, the size of its tables)
#   DURATION    default 2  (seconds per run; the reference runs as long again)
#   ROUNDS      default 1  (`sluice bench --rounds`: engine and reference take
#               turns this many times and each result is the turns' median)
#
# Quick run:
#   SLUICE_BIN=target/release/sluice PROGRAMS=router SIZES=64 WORKERS=1 \
#     ENTRIES="10 10000" DURATION=1 bench/perf-lab.sh
#
# Output, in bench/results/: perf-lab-<UTC timestamp>.txt (header + result
# lines) and .log (full output of every run); latest.txt (a copy of the .txt),
# latest.md and latest.svg. A failed run stops everything with its name.
set -euo pipefail

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; }
die() { echo "perf-lab: error: $*" >&2; exit 1; }

case "${1:-}" in
    -h | --help) usage; exit 0 ;;
    "") ;;
    *) die "unexpected argument '$1' (the matrix is chosen with environment variables; see --help)" ;;
esac

# Single-quote a value for the recorded command line, so it can be pasted back.
quote() { printf "'%s'" "${1//\'/\'\\\'\'}"; }

# The exact invocation, recorded before anything changes the environment or
# the directory: the lab variables that were set, then the script itself.
invocation=""
for v in SLUICE_BIN PROGRAMS SIZES WORKERS ENTRIES DURATION ROUNDS; do
    if [[ -n "${!v+set}" ]]; then invocation+="$v=$(quote "${!v}") "; fi
done
invocation+="$0"

# A relative SLUICE_BIN means relative to where the script was started.
if [[ -n "${SLUICE_BIN:-}" && "$SLUICE_BIN" == */* && "$SLUICE_BIN" != /* ]]; then
    SLUICE_BIN="$PWD/$SLUICE_BIN"
fi

cd "$(dirname "$0")/.."

PROGRAMS="${PROGRAMS:-router edge l2-learning basic-routing psa-unicast psa-metadata}"
SIZES="${SIZES:-64 256 550 1500}"
WORKERS="${WORKERS:-1 2}"
ENTRIES="${ENTRIES:-10 10000 1000000}"
DURATION="${DURATION:-2}"
ROUNDS="${ROUNDS:-1}"

# Check the matrix up front so a typo fails now, not after half an hour of runs.
read -r -a programs <<<"$PROGRAMS"
read -r -a sizes <<<"$SIZES"
read -r -a workers <<<"$WORKERS"
read -r -a entries <<<"$ENTRIES"
((${#programs[@]})) || die "PROGRAMS is empty"
((${#sizes[@]})) || die "SIZES is empty"
((${#workers[@]})) || die "WORKERS is empty"
((${#entries[@]})) || die "ENTRIES is empty"
for i in "${!programs[@]}"; do
    case "${programs[$i]}" in
        router | edge | l2-learning | basic-routing | psa-unicast | psa-metadata) ;;
        l2_learning) programs[i]=l2-learning ;; # the label `result:` lines use
        basic_routing) programs[i]=basic-routing ;;
        psa_unicast) programs[i]=psa-unicast ;;
        psa_metadata) programs[i]=psa-metadata ;;
        *) die "PROGRAMS: unknown program '${programs[$i]}' (router, edge, l2-learning, basic-routing, psa-unicast, psa-metadata)" ;;
    esac
done
for n in "${sizes[@]}" "${workers[@]}" "${entries[@]}"; do
    [[ "$n" =~ ^[1-9][0-9]*$ ]] || die "SIZES, WORKERS and ENTRIES take positive integers, got '$n'"
done
[[ "$DURATION" =~ ^[0-9]+([.][0-9]+)?$ ]] || die "DURATION must be a number of seconds, got '$DURATION'"
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || die "ROUNDS must be a whole number from 1, got '$ROUNDS'"

# Largest table the lab sets a program up with, and why; bigger ENTRIES values
# are capped to it (the example would refuse them).
max_entries() {
    case "$1" in
        router) echo 4194304 ;;
        edge) echo 100000 ;;
        l2-learning) echo 65536 ;;
        basic-routing) echo 131072 ;;
        psa-unicast | psa-metadata) echo 256 ;;
    esac
}
cap_reason() {
    case "$1" in
        router) echo "the router example accepts at most 4194304 routes" ;;
        edge) echo "the edge example accepts at most 131072 routes; 100000 is the lab's large point" ;;
        l2-learning) echo "l2_learning tables hold at most 65536 entries" ;;
        basic-routing) echo "basic_routing's host table holds at most 131072 entries" ;;
        psa-unicast) echo "psa-unicast's traffic goes to at most 256 ports" ;;
        psa-metadata) echo "psa-metadata's table is keyed by one byte: at most 256 entries" ;;
    esac
}

if [[ -n "${SLUICE_BIN:-}" ]]; then
    bin="$(command -v "$SLUICE_BIN" || true)"
    [[ -n "$bin" && -x "$bin" ]] || die "SLUICE_BIN=$SLUICE_BIN is not an executable"
else
    echo "perf-lab: cargo build --release -p sluice" >&2
    cargo build --release -p sluice >&2
    bin="$PWD/target/release/sluice"
fi

mkdir -p bench/results
now="$(date -u +%s)" # one instant for the file name and the recorded date
stamp="$(date -u -d "@$now" +%Y%m%dT%H%M%SZ)"
out="bench/results/perf-lab-$stamp.txt"
log="bench/results/perf-lab-$stamp.log"

cpu="$(grep -m1 -E '^(model name|Hardware|Processor)[[:space:]]*:' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ *//' || true)"
if commit="$(git rev-parse --short HEAD 2>/dev/null)"; then
    # Dirty = any change to the sources; the lab's own results do not count.
    if [[ -n "$(git status --porcelain -- . ':(exclude)bench/results' 2>/dev/null)" ]]; then
        commit+="-dirty"
    fi
else
    commit="unknown (not a git checkout)"
fi

{
    echo "# sluice perf lab"
    echo "# date: $(date -u -d "@$now" '+%Y-%m-%d %H:%M:%S UTC')"
    echo "# kernel: $(uname -r)"
    echo "# cpu: ${cpu:-unknown}"
    echo "# nproc: $(nproc)"
    echo "# commit: $commit"
    echo "# command: $invocation"
    echo "# matrix: PROGRAMS='${programs[*]}' SIZES='${sizes[*]}' WORKERS='${workers[*]}' ENTRIES='${entries[*]}' DURATION=$DURATION ROUNDS=$ROUNDS"
    echo "# runs: $bin bench --example PROGRAM --entries N --size BYTES --workers W --duration $DURATION --rounds $ROUNDS"
} >"$out"

# The runs in matrix order (program, frame size, workers, table size), with
# table sizes capped per program. A capped value is recorded as a `# capped:`
# header line so the report can show it at the requested point.
runs=()
for p in "${programs[@]}"; do
    max="$(max_entries "$p")"
    pentries=()
    for n in "${entries[@]}"; do
        e="$n"
        if ((n > max)); then
            e="$max"
            echo "# capped: program=${p//-/_} requested=$n entries=$e ($(cap_reason "$p"))" >>"$out"
            echo "perf-lab: note: $p: $n entries capped at $e ($(cap_reason "$p"))" >&2
        fi
        if [[ " ${pentries[*]} " == *" $e "* ]]; then
            echo "perf-lab: note: $p: $n entries is the same run as $e entries, run once" >&2
            continue
        fi
        pentries+=("$e")
    done
    for s in "${sizes[@]}"; do
        for w in "${workers[@]}"; do
            for e in "${pentries[@]}"; do runs+=("$p $s $w $e"); done
        done
    done
done

total=${#runs[@]}
echo "perf-lab: $total runs of ${DURATION}s (+ reference) with $bin; results in $out" >&2
i=0
for r in "${runs[@]}"; do
    read -r p s w e <<<"$r"
    i=$((i + 1))
    name="program=$p size=$s workers=$w entries=$e"
    cmd=("$bin" bench --example "$p" --entries "$e" --size "$s" --workers "$w" --duration "$DURATION" --rounds "$ROUNDS")
    printf 'perf-lab: [%d/%d] %s ... ' "$i" "$total" "$name" >&2
    echo "### [$i/$total] ${cmd[*]}" >>"$log"
    status=0
    output="$("${cmd[@]}" 2>&1)" || status=$?
    printf '%s\n' "$output" >>"$log"
    result="$(grep '^result: ' <<<"$output" || true)"
    if ((status != 0)) || [[ -z "$result" ]]; then
        echo "FAILED" >&2
        why="exit status $status"
        ((status != 0)) || why="no 'result:' line in its output"
        echo "# FAILED: $name ($why)" >>"$out"
        {
            echo "perf-lab: error: run $i/$total failed: $name ($why)"
            echo "perf-lab: command: ${cmd[*]}"
            echo "perf-lab: last lines of its output:"
            tail -n 15 <<<"$output" | sed 's/^/    /'
            echo "perf-lab: partial results kept in $out (full output in $log); latest.* not updated"
        } >&2
        exit 1
    fi
    echo "$result" >>"$out"
    # Echo the figures so progress is visible without opening the file.
    sed -E 's/.* mpps=([^ ]+) reference_mpps=([^ ]+) ratio=([^ ]+).*/\1 Mpps (reference \2, ratio \3)/' <<<"$result" >&2
done

cp "$out" bench/results/latest.txt
python3 bench/perf_lab_report.py bench/results/latest.txt
echo "perf-lab: done: $out, bench/results/latest.{txt,md,svg}" >&2
