#!/usr/bin/env bash
# Fuzzes every target (or the ones named) for SECONDS each under libFuzzer,
# JOBS targets at a time (default: the number of CPUs), starting from the
# checked-in seeds (fuzz/corpus/<target>, read only) and what earlier runs
# found (fuzz/work/corpus/<target>). Prints, and writes to
# fuzz/work/summary.txt, each target's executions, rate, coverage (edges
# and features) and crashes. A crash's input is in fuzz/artifacts/<target>/;
# once fixed, copy it to fuzz/regressions/<target>/ so the test suite
# replays it. Installs what it needs when missing (the build tools and
# libpcap, as the test command does; cargo-fuzz; a nightly toolchain).
# Built without a sanitizer by default (twice as many executions; debug
# assertions stay on): SANITIZER=address for AddressSanitizer. RUNS=N
# ends each target after N executions (or SECONDS, whichever comes first).
# PROCS=P runs each target as P libFuzzer processes sharing its corpus
# (each to RUNS/P executions; the summary adds their executions and rates):
# one slow target can then use every CPU.
#   fuzz/run-all.sh 600                  every target, 10 minutes each
#   fuzz/run-all.sh 60 packet pcap_file  two targets, a minute each
#   RUNS=10000000 fuzz/run-all.sh 7200   every target to 10 million executions
#   RUNS=10000000 JOBS=1 PROCS=2 fuzz/run-all.sh 7200 openflow_differential
set -euo pipefail
cd "$(dirname "$0")"
secs=${1:?usage: fuzz/run-all.sh SECONDS [TARGET...]}
shift
jobs=${JOBS:-$(nproc)}
sanitizer=${SANITIZER:-none}
runs=${RUNS:--1}
procs=${PROCS:-1}
if [ "$runs" -gt 0 ]; then runs_each=$(( (runs + procs - 1) / procs )); else runs_each=-1; fi

# libFuzzer options per target: input size bounds, dictionaries.
declare -A options=(
    [packet]="-max_len=2048"
    [p4_differential]="-max_len=2048"
    [load_json]="-max_len=65536 -rss_limit_mb=4096"
    [cli_command]="-dict=cli_command.dict -max_len=4096"
    [thrift_call]="-max_len=8192"
    [p4runtime_write]="-max_len=8192"
    [openflow_decode]="-max_len=65535"
    [openflow10_decode]="-max_len=65535"
    [openflow_differential]="-max_len=8192"
    [lwaftr_conf]="-max_len=8192"
    [lwaftr_plane]="-max_len=16384"
    [pcap_file]="-max_len=16384"
    [packet_in]="-max_len=16384"
)
if [ $# -gt 0 ]; then
    targets=("$@")
else
    mapfile -t targets < <(sed -n 's/^name = "\(.*\)"$/\1/p' Cargo.toml | grep -v '^sluice-fuzz$')
fi
for t in "${targets[@]}"; do
    [ -n "${options[$t]+x}" ] || { echo "error: unknown target $t (known: ${!options[*]})" >&2; exit 1; }
done

. ../scripts/ensure-tools.sh
rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
for t in "${targets[@]}"; do cargo +nightly fuzz build -s "$sanitizer" "$t" >/dev/null; done

mkdir -p work/logs
# One line per target ("name options..."), JOBS at a time; each runs PROCS
# processes (logs work/logs/<target>.<n>.log) and prints "name: done" or
# "name: FAILED".
for t in "${targets[@]}"; do
    echo "$t ${options[$t]}"
done | xargs -P "$jobs" -L 1 bash -c '
    t=$1; shift
    mkdir -p "work/corpus/$t"
    rm -f work/logs/"$t".*.log
    pids=()
    for n in $(seq 1 '"$procs"'); do
        cargo +nightly fuzz run -s '"$sanitizer"' "$t" "work/corpus/$t" "corpus/$t" -- \
            -max_total_time='"$secs"' -runs='"$runs_each"' -print_final_stats=1 "$@" \
            >"work/logs/$t.$n.log" 2>&1 &
        pids+=($!)
    done
    ok=1
    for p in "${pids[@]}"; do wait "$p" || ok=0; done
    if [ $ok = 1 ]; then
        echo "$t: done"
    else
        echo "$t: FAILED (see fuzz/work/logs/$t.*.log and fuzz/artifacts/$t/)"
    fi' _ | tee work/results.txt

{
    printf '%-22s %14s %10s %8s %8s %8s\n' target executions "execs/s" edges features crashes
    for t in "${targets[@]}"; do
        execs=0 rate=0 cov=? ft=?
        for log in work/logs/"$t".*.log; do
            e=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
            r=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
            execs=$((execs + ${e:-0})) rate=$((rate + ${r:-0}))
            c=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1 | cut -d' ' -f2)
            f=$(grep -o 'ft: [0-9]*' "$log" | tail -n 1 | cut -d' ' -f2)
            cov=${c:-$cov} ft=${f:-$ft}
        done
        crashes=$(ls "artifacts/$t" 2>/dev/null | grep -c -E '^(crash|oom|timeout|leak)-' || true)
        printf '%-22s %14s %10s %8s %8s %8s\n' "$t" "$execs" "$rate" "$cov" "$ft" "$crashes"
    done
} | tee work/summary.txt
! grep -q FAILED work/results.txt
