#!/usr/bin/env bash
# The whole test suite: formatting, lints, unit, conformance and property tests.
# Installs what it needs (Rust toolchain components) and fails loudly if the
# conformance corpora (../shared beside the repo) are missing.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-tools.sh
# Live-port tests need iproute2, iperf3, ethtool and ping (installed with apt when missing).
source scripts/ensure-net-tools.sh
# The stock control-plane clients (simple_switch_CLI, p4runtime-shell, finsy) in .venv.
source scripts/ensure-python.sh
if [ ! -d ../shared/conformance ]; then
    echo "error: ../shared/conformance not found beside the repository (the conformance corpora are required)" >&2
    exit 1
fi
echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --workspace --all-targets --profile test-release -- -D warnings
echo "== cargo test"
cargo test --workspace --profile test-release
echo "== perf lab report script"
python3 -m unittest bench/test_perf_lab_report.py
