#!/usr/bin/env bash
# The whole test suite: formatting, lints, unit, conformance and property tests.
# Installs what it needs (Rust toolchain components) and fails loudly if the
# conformance corpora (../shared beside the repo) are missing.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-tools.sh
# Live-port tests need iproute2, iperf3, ethtool and ping (installed with apt when missing).
source scripts/ensure-net-tools.sh
if [ ! -d ../shared/conformance ]; then
    echo "error: ../shared/conformance not found beside the repository (the conformance corpora are required)" >&2
    exit 1
fi
# The stock control-plane clients (simple_switch_CLI, p4runtime-shell, finsy,
# pygnmi, os-ken, Faucet) in .venv: built in the background while Rust
# compiles (pip mostly waits on downloads, rustc on the CPU), then sourced
# for their paths before the tests run.
venv_log="$(mktemp)"
(source scripts/ensure-python.sh) >"$venv_log" 2>&1 &
venv_pid=$!
trap 'kill "$venv_pid" 2>/dev/null || true; rm -f "$venv_log"' EXIT
echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo test (build)"
cargo test --workspace --profile test-release --no-run
if ! wait "$venv_pid"; then
    cat "$venv_log" >&2
    echo "error: the Python clients' venvs could not be built (scripts/ensure-python.sh, output above)" >&2
    exit 1
fi
cat "$venv_log" >&2
source scripts/ensure-python.sh
# Clippy runs beside the tests, in its own target directory (no lock
# shared with the test run): the tests spend much of their time waiting on
# namespaces, peers and sockets, so the lints use cores the tests leave,
# and the tests run on a busy machine, as they must be able to. Its output
# is printed once the tests end; a lint fails the suite.
clippy_log="$(mktemp)"
echo "== cargo clippy (beside the tests; output below when they end)"
CARGO_TARGET_DIR=target/clippy cargo clippy --workspace --all-targets --profile test-release -- -D warnings \
    >"$clippy_log" 2>&1 &
clippy_pid=$!
trap 'kill "$venv_pid" "$clippy_pid" 2>/dev/null || true; rm -f "$venv_log" "$clippy_log"' EXIT
echo "== cargo test"
tests_status=0
cargo test --workspace --profile test-release || tests_status=$?
clippy_status=0
wait "$clippy_pid" || clippy_status=$?
echo "== cargo clippy (output)"
cat "$clippy_log"
if [ "$clippy_status" -ne 0 ]; then
    echo "error: cargo clippy found warnings or errors (output above)" >&2
fi
if [ "$tests_status" -ne 0 ]; then
    echo "error: cargo test failed (its output is above the clippy output)" >&2
fi
if [ "$tests_status" -ne 0 ] || [ "$clippy_status" -ne 0 ]; then
    exit 1
fi
echo "== perf lab report script"
python3 -m unittest bench/test_perf_lab_report.py
