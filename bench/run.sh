#!/usr/bin/env bash
# pkprof overhead benchmark: interleaved A/B runs of a context-switch storm and a UDP flood, without
# pkprof (A), with `pkprof top --batch` (B) and with `pkprof top --batch --syscalls` (S), plus
# pkprof's own CPU/RSS and BPF run time from `--bpf-stats`. See bench/README.md.
#
# Usage: bash bench/run.sh [PAIRS]        (default 10 pairs; run as root)
# Env:   BENCH_QUICK=1          short smoke run (shorter workloads)
#        BENCH_PIPE_LOOPS=N     perf bench sched pipe -l N, pinned run  (default 200000; quick 50000)
#        BENCH_PIPEU_LOOPS=N    perf bench sched pipe -l N, unpinned    (default 50000; quick 20000)
#        BENCH_UDP_SECS=S       measured seconds per UDP flood run     (default 3; quick 1)
#        BENCH_STORM_LOOPS=N    pipe loops for the --bpf-stats runs    (default 1000000; quick 600000)
#        BENCH_STORM_UDP_SECS=S UDP flood seconds for the --bpf-stats run (default 5; quick 3)
#        BENCH_PIPE_CPU=C|none  CPU both pipe tasks are pinned to      (default: the last CPU)
#        BENCH_UDP_CPUS="S R"|none  UDP sender and receiver CPUs       (default "0 1"; none on 1 CPU)
#        BENCH_SETTLE=S         pause between runs, seconds            (default 0.5)
#        BENCH_BASELINE_BIN=P   also run mode O = another pkprof build (e.g. before a change), same args as B
set -euo pipefail

PAIRS=${1:-10}
[[ $PAIRS =~ ^[1-9][0-9]*$ ]] || { echo "usage: bash bench/run.sh [PAIRS]" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "bench: must run as root (pkprof loads BPF programs)" >&2; exit 1; }

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
OUT=bench/out
mkdir -p "$OUT"
export PATH="$HOME/.cargo/bin:$PATH"

if [ "${BENCH_QUICK:-0}" = 1 ]; then
  PIPE_LOOPS=${BENCH_PIPE_LOOPS:-50000}
  PIPEU_LOOPS=${BENCH_PIPEU_LOOPS:-20000}
  UDP_SECS=${BENCH_UDP_SECS:-1}
  STORM_LOOPS=${BENCH_STORM_LOOPS:-600000}
  STORM_UDP_SECS=${BENCH_STORM_UDP_SECS:-3}
else
  PIPE_LOOPS=${BENCH_PIPE_LOOPS:-200000}
  PIPEU_LOOPS=${BENCH_PIPEU_LOOPS:-50000}
  UDP_SECS=${BENCH_UDP_SECS:-3}
  STORM_LOOPS=${BENCH_STORM_LOOPS:-1000000}
  STORM_UDP_SECS=${BENCH_STORM_UDP_SECS:-5}
fi
NCPU=$(nproc)
PIPE_CPU=${BENCH_PIPE_CPU:-$((NCPU - 1))}
if [ "$NCPU" -ge 2 ]; then UDP_CPUS=${BENCH_UDP_CPUS:-0 1}; else UDP_CPUS=${BENCH_UDP_CPUS:-none}; fi
if [ "$UDP_CPUS" = none ]; then UDP_PIN=(-1 -1); else read -r -a UDP_PIN <<<"$UDP_CPUS"; fi
[ "${#UDP_PIN[@]}" = 2 ] || { echo "bench: BENCH_UDP_CPUS must be \"SENDER RECEIVER\" or none" >&2; exit 2; }
SETTLE=${BENCH_SETTLE:-0.5}
BASELINE_BIN=${BENCH_BASELINE_BIN:-}
if [ -n "$BASELINE_BIN" ] && [ ! -x "$BASELINE_BIN" ]; then
  echo "bench: BENCH_BASELINE_BIN=$BASELINE_BIN is not an executable" >&2; exit 2
fi

for tool in perf cc python3 taskset; do
  command -v "$tool" >/dev/null || { echo "bench: $tool not found" >&2; exit 1; }
done
perf bench sched pipe -l 10 >/dev/null 2>&1 || { echo "bench: 'perf bench sched pipe' does not work here" >&2; exit 1; }

log() { echo "bench: $*" >&2; }

# ---- build ---------------------------------------------------------------------------------------
log "building pkprof (cargo build --release -p pkprof)"
cargo build --release -p pkprof >&2
PKPROF="$ROOT/target/release/pkprof"
UDP_FLOOD="$OUT/udp_flood"
cc -O2 -Wall -Wextra -pthread -o "$UDP_FLOOD" bench/udp_flood.c

STAMP=$(date +%Y%m%d-%H%M%S)
RAW="$OUT/raw-$STAMP.tsv"        # pair  workload  mode  value  foreign (another pkprof was running)
STATS_DIR="$OUT/bpfstats-$STAMP"
mkdir -p "$STATS_DIR"
printf 'pair\tworkload\tmode\tvalue\tforeign\n' >"$RAW"

# ---- pkprof lifecycle ----------------------------------------------------------------------------
PK_PID=""
PK_LOG=""
FOREIGN_RUNS=0

stop_pkprof() {
  [ -n "$PK_PID" ] || return 0
  kill -TERM "$PK_PID" 2>/dev/null || true
  local i
  for i in $(seq 100); do               # up to 5 s for a clean detach
    kill -0 "$PK_PID" 2>/dev/null || break
    sleep 0.05
  done
  if kill -0 "$PK_PID" 2>/dev/null; then
    log "pkprof $PK_PID ignored SIGTERM for 5 s; killing it"
    kill -KILL "$PK_PID" 2>/dev/null || true
  fi
  wait "$PK_PID" 2>/dev/null || true
  if kill -0 "$PK_PID" 2>/dev/null; then
    echo "bench: pkprof $PK_PID is still alive" >&2
    exit 1
  fi
  PK_PID=""
}
trap 'stop_pkprof' EXIT
trap 'exit 130' INT TERM

# Starts pkprof with the given arguments, output to $2; returns once it has printed its first frame,
# i.e. once its programs are attached and have run for one refresh interval.
start_pkprof() {
  local out=$1; shift
  local bin=$PKPROF
  if [ "$1" = --baseline ]; then bin=$BASELINE_BIN; shift; fi
  PK_LOG="$OUT/pkprof-stderr.log"
  : >"$out"
  "$bin" "$@" >"$out" 2>"$PK_LOG" &
  PK_PID=$!
  local i
  for i in $(seq 500); do               # up to 10 s
    [ -s "$out" ] && return 0
    if ! kill -0 "$PK_PID" 2>/dev/null; then
      wait "$PK_PID" 2>/dev/null || true
      PK_PID=""
      echo "bench: pkprof $* exited before its first frame:" >&2
      cat "$PK_LOG" >&2
      exit 1
    fi
    sleep 0.02
  done
  echo "bench: pkprof $* printed no frame within 10 s" >&2
  exit 1
}

# Another pkprof (someone else's, e.g. a test suite) running during a run skews it: say so, and
# count such runs. Prints 1 if one is running, else 0. Our own pkprof is stopped when this runs.
foreign_pkprof() {
  local pids
  pids=$(pgrep -x pkprof | tr '\n' ' ' || true)
  if [ -n "$pids" ]; then
    log "WARNING: another pkprof is running: $(pgrep -x pkprof | paste -sd, | xargs -r ps -o pid=,args= -p 2>/dev/null | tr '\n' ';' | cut -c1-200)"
    echo 1
  else
    echo 0
  fi
}

# ---- workloads (each prints one number) ----------------------------------------------------------
pin() { if [ "$PIPE_CPU" = none ]; then "$@"; else taskset -c "$PIPE_CPU" "$@"; fi; }

# perf bench sched pipe: prints pipe round trips ("ops") per second, from perf's usecs/op.
pipe_ops() {
  local usecs
  usecs=$("$@" | awk '/usecs\/op/ {print $1}')
  [ -n "$usecs" ] || { echo "bench: could not parse perf bench output" >&2; exit 1; }
  python3 -c "print(f'{1e6 / float(\"$usecs\"):.1f}')"
}

# Context switches per second, both tasks pinned to one CPU: one round trip is then exactly two
# context switches. The worst case for pkprof: every switch runs its sched_switch program and
# nothing else happens on that CPU.
run_pipe() {
  python3 -c "print(f'{2 * float(\"$(pipe_ops pin perf bench sched pipe -l "$PIPE_LOOPS")\"):.1f}')"
}

# Round trips per second, tasks unpinned (perf's default): cross-CPU wake-ups dominate, and the
# number of switches per round trip varies, so round trips are reported.
run_pipeu() {
  pipe_ops perf bench sched pipe -l "$PIPEU_LOOPS"
}

run_udp() {
  local line
  line=$("$UDP_FLOOD" "$UDP_SECS" 64 "${UDP_PIN[@]}")
  sed -n 's/.*rx_pps=\([0-9.]*\).*/\1/p' <<<"$line"
}

# run_one PAIR WORKLOAD MODE   (MODE: A = no pkprof, B = pkprof top --batch, S = B with --syscalls,
#                               O = B with the baseline build)
run_one() {
  local pair=$1 wl=$2 mode=$3 value before after
  before=$(foreign_pkprof)
  case $mode in
    A) ;;
    B) start_pkprof "$OUT/pkprof-batch.out" top --batch -d 1 ;;
    S) start_pkprof "$OUT/pkprof-batch.out" top --batch --syscalls -d 1 ;;
    O) start_pkprof "$OUT/pkprof-batch.out" --baseline top --batch -d 1 ;;
  esac
  value=$("run_$wl")
  stop_pkprof
  after=$(foreign_pkprof)
  local foreign=$((before | after))
  FOREIGN_RUNS=$((FOREIGN_RUNS + foreign))
  printf '%s\t%s\t%s\t%s\t%s\n' "$pair" "$wl" "$mode" "$value" "$foreign" >>"$RAW"
  log "pair $pair $wl $mode: $value"
  sleep "$SETTLE"
}

# ---- A/B pairs -----------------------------------------------------------------------------------
if pgrep -x pkprof >/dev/null 2>&1; then
  log "WARNING: pkprof is already running ($(pgrep -x pkprof | tr '\n' ' ')); results will be skewed"
fi
log "$PAIRS pairs; pipe -l $PIPE_LOOPS pinned to CPU $PIPE_CPU, -l $PIPEU_LOOPS unpinned; UDP ${UDP_SECS}s (sender/receiver CPUs: $UDP_CPUS); raw results in $RAW"
for pair in $(seq 1 "$PAIRS"); do
  if (( pair % 2 )); then order="A B S${BASELINE_BIN:+ O}"; else order="${BASELINE_BIN:+O }S B A"; fi
  for wl in pipe pipeu udp; do
    for mode in $order; do
      run_one "$pair" "$wl" "$mode"
    done
  done
done

# ---- pkprof's own cost under load (--bpf-stats) ----------------------------------------------------
# Frames whose whole interval lies inside the workload are used; BPF run time is the delta of the
# kernel's cumulative per-program counters between consecutive frames.
# cost_run TAG WORKLOAD [extra pkprof args]   (WORKLOAD: pipe or udp)
cost_run() {
  local tag=$1 wl=$2; shift 2
  local json="$STATS_DIR/$tag.jsonl" t0 t1 before after
  before=$(foreign_pkprof)
  start_pkprof "$json" top --json --bpf-stats -d 1 "$@"
  t0=$(date +%s.%N)
  case $wl in
    pipe) pin perf bench sched pipe -l "$STORM_LOOPS" >"$STATS_DIR/$tag.workload.txt" ;;
    udp) "$UDP_FLOOD" "$STORM_UDP_SECS" 64 "${UDP_PIN[@]}" >"$STATS_DIR/$tag.workload.txt" ;;
  esac
  t1=$(date +%s.%N)
  # Let pkprof print the frame that covers the end of the workload, then stop it.
  sleep 1.2
  stop_pkprof
  after=$(foreign_pkprof)
  FOREIGN_RUNS=$((FOREIGN_RUNS + (before | after)))
  printf '%s\t%s\t%s\n' "$t0" "$t1" "$wl" >"$STATS_DIR/$tag.window"
  sleep "$SETTLE"
}
log "measuring pkprof's own cost with --bpf-stats (pipe -l $STORM_LOOPS, UDP ${STORM_UDP_SECS}s)"
cost_run pipe pipe
cost_run pipe-syscalls pipe --syscalls
cost_run udp udp

# ---- report --------------------------------------------------------------------------------------
REPORT="$OUT/latest.txt"
{
  echo "pkprof overhead benchmark"
  echo "command:  $(env | grep '^BENCH_' | sort | sed 's/=\(.*\)/="\1"/' | tr '\n' ' ')bash bench/run.sh $PAIRS   (in $ROOT)"
  echo "date:     $(date -Is)"
  echo "kernel:   $(uname -r)   cpus: $NCPU   pkprof: $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD -- 2>/dev/null || echo ' (+uncommitted changes)')"
  echo "settings: pipe -l $PIPE_LOOPS pinned to CPU $PIPE_CPU, -l $PIPEU_LOOPS unpinned; UDP 64-byte flood ${UDP_SECS}s/run, sender/receiver CPUs $UDP_CPUS; --bpf-stats runs: pipe -l $STORM_LOOPS, UDP ${STORM_UDP_SECS}s"
  if [ "$FOREIGN_RUNS" -gt 0 ]; then
    echo "WARNING:  another pkprof process was running during $FOREIGN_RUNS run(s); results are skewed"
  fi
  echo
  python3 bench/summarize.py "$RAW" "$STATS_DIR"
  echo
  echo "raw: $RAW   bpf-stats frames: $STATS_DIR/"
} | tee "$REPORT"
