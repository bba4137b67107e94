#!/usr/bin/env bash
# Table inserts per second through the control planes: starts Sluice as
# simple_switch_grpc (router example pushed by the script, one worker, two
# veth ports in a namespace it creates and removes) and runs
# bench/insert_rate.py: batched P4Runtime Writes and Thrift bm_mt_add_entry
# calls with the stock Python clients. The in-process figure comes from
# `cargo bench -p sluice --bench control -- --quick`.
#
#   bench/control-plane-inserts.sh [--batch N] [--p4rt-entries N] [--thrift-entries N] [--read-back]
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/ensure-python.sh
cargo build --release -p sluice >&2
NS=sl-inserts
cleanup() { pkill -f "sluice simple_switch_grpc --no-p4 -i 1@ins1" 2>/dev/null || true; ip netns del $NS 2>/dev/null || true; }
trap cleanup EXIT
cleanup
ip netns add $NS
ip -n $NS link set lo up
ip -n $NS link add ins1 type veth peer name ins2
ip -n $NS link set ins1 up
ip -n $NS link set ins2 up
ip netns exec $NS target/release/sluice simple_switch_grpc --no-p4 -i 1@ins1 -i 2@ins2 -- --grpc-server-addr 127.0.0.1:9559 2>/tmp/sluice-inserts.log &
for _ in $(seq 100); do grep -q "forwarding on" /tmp/sluice-inserts.log && break; sleep 0.1; done
echo "machine: $(nproc) CPUs, $(uname -r); command: bench/control-plane-inserts.sh $*"
ip netns exec $NS "$SLUICE_PY" bench/insert_rate.py --examples examples "$@"
