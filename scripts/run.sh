#!/usr/bin/env bash
# Runs the main job: `sluice bench` on the built-in router example with
# generated routes and traffic (no files needed). Extra arguments go to
# `sluice bench`, e.g. `scripts/run.sh --duration 10`.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-tools.sh
cargo build --release -p sluice
exec ./target/release/sluice bench "$@"
