#!/usr/bin/env bash
# Makes the seed corpora of every fuzz target (fuzz/corpus/<target>/) from
# the conformance corpora beside the repository and the stock clients'
# encoders (bmv2's Thrift client, the P4Runtime bindings, os-ken). The
# seeds are checked in; run this again when a corpus or a target's input
# format changes. Installs the Python clients it needs (as the test suite does).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-python.sh
if [ ! -d ../shared/conformance ]; then
    echo "error: ../shared/conformance not found beside the repository" >&2
    exit 1
fi
rm -rf fuzz/corpus
PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python "$SLUICE_PY" fuzz/make_seeds.py
.venv/osken/bin/python fuzz/make_seeds_openflow.py
for d in fuzz/corpus/*/; do
    echo "$(basename "$d"): $(ls "$d" | wc -l) seeds, $(du -sk "$d" | cut -f1) KiB"
done
