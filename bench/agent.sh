#!/usr/bin/env bash
# Agent cost benchmark (issue 13; docs/design.md, "The agent"): `pkprof agent` at its default
# 19 Hz per CPU (10 s windows, store in a temporary directory) under a mixed load: one CPU-bound
# `compute` per CPU but one, and a fork-heavy shell loop (`/bin/true` started back to back). Pairs
# of runs without (A) and with (B) the agent, in alternating order; printed per pair and as
# medians: the agent's own CPU (user + system from /proc, % of one CPU), its BPF programs' run
# time (the kernel's BPF stats, % of one CPU), and the slowdown of the CPU-bound and fork loads
# (B against A). Goals: agent CPU <= 0.5% of one CPU; each slowdown <= 1%.
# The agent runs for weeks: what is measured is its steady state. Each run first runs the load
# for BENCH_WARM seconds (default 12: past the first window's close, where the agent reads the
# kernel's symbols and meets every binary of the load for the first time), then measures; the
# agent's CPU during that warm-up (start-up included) is printed in a column of its own.
#
# Usage: bash bench/agent.sh [PAIRS]      (default 6 pairs; run as root)
# Env:   BENCH_SECS=S     seconds per run (default 10)
#        BENCH_WARM=S     seconds of load before each measured run (default 12; 0: none)
#        BENCH_HZ=N       the agent's rate (default 19)
#        BENCH_BPF_STATS=1  run the agent with --bpf-stats (the BPF column; off by default, as
#                         the agent runs by default: the kernel's timing costs on every BPF run)
set -euo pipefail

PAIRS=${1:-6}
[[ $PAIRS =~ ^[1-9][0-9]*$ ]] || { echo "usage: bash bench/agent.sh [PAIRS]" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "bench: must run as root (pkprof loads BPF programs)" >&2; exit 1; }
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
OUT=bench/out
mkdir -p "$OUT"
export PATH="$HOME/.cargo/bin:$PATH"
SECS=${BENCH_SECS:-10}
WARM=${BENCH_WARM:-12}
HZ=${BENCH_HZ:-19}
NCPU=$(nproc)
TCK=$(getconf CLK_TCK)
log() { echo "bench: $*" >&2; }

log "building pkprof (cargo build --release -p pkprof)"
cargo build --release -p pkprof >&2
PKPROF="$ROOT/target/release/pkprof"
COMPUTE="$OUT/compute"
cc -O2 -g -fno-omit-frame-pointer -o "$COMPUTE" bench/compute.c
STORE=$(mktemp -d)
SOCK="$STORE/agent.sock"
AGENT_PID=
cleanup() { [ -n "$AGENT_PID" ] && kill "$AGENT_PID" 2>/dev/null; rm -rf "$STORE"; }
trap cleanup EXIT

# The load: prints "<compute iterations/s> <forks/s>".
run_load() {
  local SECS=${1:-$SECS}
  local pids=() n=$((NCPU > 1 ? NCPU - 1 : 1)) total=0 f
  for ((i = 0; i < n; i++)); do
    "$COMPUTE" "$SECS" >"$OUT/agent-compute.$i" &
    pids+=($!)
  done
  local forks
  forks=$(SECS=$SECS bash -c 'end=$((SECONDS + SECS)); n=0; while [ $SECONDS -lt $end ]; do /bin/true; n=$((n + 1)); done; echo $n')
  wait "${pids[@]}"
  for ((i = 0; i < n; i++)); do
    f=$(awk '/^iterations/ {print $2}' "$OUT/agent-compute.$i")
    total=$((total + f))
  done
  python3 -c "print($total / $SECS, $forks / $SECS)"
}

ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
bpf_s() { curl -s "http://127.0.0.1:19475/metrics" | awk '/^pkprof_bpf_prog_run_seconds_total/ {s += $2} END {print s + 0}'; }

start_agent() {
  "$PKPROF" agent -F "$HZ" ${BENCH_BPF_STATS:+--bpf-stats} --store "$STORE/w" --socket "$SOCK" --listen 127.0.0.1:19475 2>"$OUT/agent-stderr.txt" &
  AGENT_PID=$!
  for _ in $(seq 600); do grep -q "agent sampling at" "$OUT/agent-stderr.txt" 2>/dev/null && break; sleep 0.1; done
  grep -q "agent sampling at" "$OUT/agent-stderr.txt" || { log "the agent did not start"; cat "$OUT/agent-stderr.txt" >&2; exit 1; }
  sleep 3 # past start-up (BPF load, kernel symbols): the steady state is measured
}

RAW="$OUT/raw-agent.tsv"
: >"$RAW"
for ((PAIR = 1; PAIR <= PAIRS; PAIR++)); do
  order="A B"
  ((PAIR % 2 == 0)) && order="B A"
  for mode in $order; do
    sleep 0.5
    if [ "$mode" = B ]; then
      start_agent
      s0=$(ticks "$AGENT_PID"); ws=$(date +%s.%N)
      ((WARM > 0)) && run_load "$WARM" >/dev/null
      t0=$(ticks "$AGENT_PID"); b0=$(bpf_s); w0=$(date +%s.%N)
      read -r it fk < <(run_load)
      t1=$(ticks "$AGENT_PID"); b1=$(bpf_s); w1=$(date +%s.%N)
      kill -TERM "$AGENT_PID"; wait "$AGENT_PID" || true; AGENT_PID=
      python3 -c "print('B', $it, $fk, ($t1 - $t0) / $TCK / ($w1 - $w0) * 100, ($b1 - $b0) / ($w1 - $w0) * 100, ($t0 - $s0) / $TCK / ($w0 - $ws) * 100 if $WARM > 0 else 0, sep='\t')" >>"$RAW"
    else
      ((WARM > 0)) && run_load "$WARM" >/dev/null
      read -r it fk < <(run_load)
      printf 'A\t%s\t%s\t0\t0\t0\n' "$it" "$fk" >>"$RAW"
    fi
  done
  log "pair $PAIR done"
done

python3 - "$RAW" "$HZ" <<'PY'
import statistics, sys
rows = [l.split("\t") for l in open(sys.argv[1]).read().splitlines()]
a = [r for r in rows if r[0] == "A"]
b = [r for r in rows if r[0] == "B"]
print(f"pkprof agent at {sys.argv[2]} Hz per CPU, mixed load (compute on all CPUs but one + fork loop)")
print("pair  compute B/A  forks B/A  agent CPU %  BPF %  warm-up CPU %")
cr, fr, cpu, bpf, warm = [], [], [], [], []
for i, (x, y) in enumerate(zip(a, b), 1):
    c = float(y[1]) / float(x[1]); f = float(y[2]) / float(x[2])
    cr.append(c); fr.append(f); cpu.append(float(y[3])); bpf.append(float(y[4])); warm.append(float(y[5]))
    print(f"{i:4}  {c:11.4f}  {f:9.4f}  {float(y[3]):11.3f}  {float(y[4]):5.3f}  {float(y[5]):13.3f}")
m = statistics.median
print(f"median  compute {m(cr):.4f} (slowdown {100 * (1 - m(cr)):.2f}%), forks {m(fr):.4f} "
      f"(slowdown {100 * (1 - m(fr)):.2f}%), agent CPU {m(cpu):.3f}% of one CPU, BPF {m(bpf):.3f}%, "
      f"warm-up (start-up and first window) {m(warm):.3f}%")
PY
