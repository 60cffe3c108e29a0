#!/usr/bin/env bash
# Builds pkprof and shows it at work: five seconds of `pkprof top` in batch mode while a short
# demo load runs (a CPU-bound loop and a UDP flood over loopback, whose receive work Linux bills to
# whoever is running). Usage (as root):  bash scripts/run.sh [extra pkprof top arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH="$HOME/.cargo/bin:$PATH"
cargo build --release --locked -p pkprof

# Demo load, stopped on exit whatever happens.
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT
timeout 7 sh -c 'while :; do :; done' & pids+=($!)
timeout 7 bash -c 'exec 3>/dev/udp/127.0.0.1/9; while :; do printf "%064d" 0 >&3; done' 2>/dev/null & pids+=($!)

./target/release/pkprof top --batch -n 5 -d 1 --rows 12 --syscalls "$@"
