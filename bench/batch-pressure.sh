#!/bin/bash
# Where the generated batch function's time goes, without hardware counters
# (this VM has none): callgrind counts how often each of its instructions
# runs, the ones run once per packet form the per-packet path, and llvm-mca
# estimates that path's cycles and which execution resource bounds them.
#
#   bench/batch-pressure.sh target/release/sluice --example router --entries 10
#
# Prints instructions per packet in the batch function, llvm-mca's cycles
# per packet and the per-resource pressure line (load/store units, ALUs).
# Needs valgrind, llvm (llvm-mca) and binutils (objdump).
set -euo pipefail
bin=$1; shift
packets=200000
out=$(mktemp -d)
for tool in valgrind llvm-mca objdump; do
    command -v "$tool" >/dev/null || { echo "batch-pressure: $tool is missing (apt install valgrind llvm binutils)" >&2; exit 1; }
done
SLUICE_PERF_MAP=1 valgrind --tool=callgrind --dump-instr=yes --callgrind-out-file="$out/cg" \
    "$bin" bench "$@" --no-reference --packets $packets >/dev/null 2>"$out/log"
pid=$(sed -n 's/^==\([0-9]*\)==.*/\1/p' "$out/log" | head -1)
python3 "$(dirname "$0")/callgrind-jit.py" "$out/cg" "$pid" sluice_batch $packets > "$out/batch.txt"
tail -1 "$out/batch.txt"
# The per-packet path, straight-line: branches dropped, rip-relative comments cut.
awk '$1 >= 0.9 && !/total/ { sub(/^ *[0-9.]+ +[0-9a-f]+: /, ""); print }' "$out/batch.txt" \
    | grep -v '^j' | sed 's/#.*//' > "$out/path.s"
echo "instructions run once per packet: $(wc -l < "$out/path.s")"
llvm-mca -mcpu=znver3 -iterations=200 "$out/path.s" > "$out/mca.txt" 2>&1
awk '/^Total Cycles:/ { printf "llvm-mca cycles per packet: %.1f\n", $3 / 200 }' "$out/mca.txt"
grep -A2 'Resource pressure per iteration' "$out/mca.txt" | tail -2
grep -B30 'Resource pressure per iteration' "$out/mca.txt" | grep '^\[' | tr '\n' ' '; echo
echo "(files in $out)"
