#!/usr/bin/env bash
# Issue 12 §3: what the server chain (docs/design.md, "Server work billed to its clients") costs
# while `pkprof top --server` runs (the chain is opt-in). The chain attaches the syscall tracepoints of read/write-like calls, so
# every syscall of every process takes the kernel's traced path, and each read or write of a
# pipe, socket (or /dev/zero) runs one of its programs.
#
# Measured side by side, ROUNDS pairs in a rotating order: `pkprof top` with every chain, and with
# the server chain off (its tracepoints hidden, PKPROF_TEST_HIDE_TRACEPOINTS); each with
#   - bench/syscall_storm.c: 1-byte reads of /dev/zero (ns per call; the fd walk runs, no mark),
#   - tests' pipe_pingpong: one byte each way over two pipes (round trips in 2 s: marks taken).
# Printed: the median of the per-pair ratios (server chain on / off) for each.
#
# Usage:  bash bench/server_cost.sh [ROUNDS]    (default 5; root: BPF)
# Env:    PKPROF   pkprof binary (default: target/debug/pkprof; a release build for real figures)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
pkprof=${PKPROF:-target/debug/pkprof}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cc -O2 -o "$dir/storm" bench/syscall_storm.c
cc -O2 -o "$dir/pingpong" crates/cli/tests/workloads/pipe_pingpong.c

# run MODE: one storm and one ping-pong under `pkprof top` (MODE on|off); prints "NS TRIPS".
run() {
  local env=()
  [ "$1" = off ] && env=(PKPROF_TEST_HIDE_TRACEPOINTS=raw_syscalls:sys_enter)
  env "${env[@]}" "$pkprof" top --server --json -d 1 -p 1 >"$dir/top.json" 2>/dev/null &
  local top=$!
  for _ in $(seq 100); do [ -s "$dir/top.json" ] && break; sleep 0.1; done
  local ns trips
  ns=$("$dir/storm" 2000000 | awk '{print $2}')
  trips=$("$dir/pingpong" 2 | awk '{print $1}')
  kill -INT "$top"; wait "$top" 2>/dev/null || true
  echo "$ns $trips"
}

ratios_ns=(); ratios_trips=()
for r in $(seq "$rounds"); do
  if [ $((r % 2)) = 1 ]; then on=$(run on); off=$(run off); else off=$(run off); on=$(run on); fi
  read -r on_ns on_trips <<<"$on"; read -r off_ns off_trips <<<"$off"
  echo "round $r: storm ns/call on $on_ns off $off_ns; ping-pong trips on $on_trips off $off_trips"
  ratios_ns+=("$(awk -v a="$on_ns" -v b="$off_ns" 'BEGIN {print a / b}')")
  ratios_trips+=("$(awk -v a="$on_trips" -v b="$off_trips" 'BEGIN {print b / a}')")
done
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
echo "server chain cost, median of $rounds pairs (on / off): syscall storm time per call x$(median "${ratios_ns[@]}"), pipe ping-pong time per round trip x$(median "${ratios_trips[@]}")"
