#!/usr/bin/env bash
# Builds pkprof and shows it at work: five seconds of `pkprof top` in batch mode while a short
# demo load runs: a CPU-bound loop, and a UDP flood over loopback to a small receiver. Linux bills
# the receive work to whoever happens to run (the sender, mostly); pkprof bills it to the receiver
# (+NET%). Usage (as root):  bash scripts/run.sh [extra pkprof top arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH="$HOME/.cargo/bin:$PATH"
cargo build --release --locked -p pkprof

# Demo load, stopped on exit whatever happens.
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT
timeout 7 sh -c 'while :; do :; done' & pids+=($!)
timeout 7 python3 -c '
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.1", 9999))
while True:
    s.recv(2048)' & pids+=($!)
timeout 7 bash -c 'exec 3>/dev/udp/127.0.0.1/9999; while :; do printf "%064d" 0 >&3; done' 2>/dev/null & pids+=($!)

./target/release/pkprof top --batch -n 5 -d 1 --rows 12 --syscalls "$@"
