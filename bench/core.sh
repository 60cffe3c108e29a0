#!/usr/bin/env bash
# The accounting core's cost, side by side with its peers and with the floor (issue 11 §2; see
# bench/README.md "Accounting core: bash bench/core.sh"). One run prints:
#   - the pinned switch storm (taskset -c CPU perf bench sched pipe) under: nothing (A), pkprof top
#     (P), pkprof top with BPF stats on (S: what the stats cost), bpftrace's per-thread on-CPU time accumulator (T), perf record -e sched:sched_switch -a
#     (R), an empty program on sched_switch (E), empty programs on all of pkprof's tracepoints
#     (F) and the floor of exact accounting (M: bench/floor_acc.bpf.c, a clock read and a
#     tid-indexed add per switch, the cheapest exact per-thread on-CPU time); each as the median
#     of the per-pair ratios to A, plus the wall time added per switch;
#   - the 64-byte UDP loopback flood (bench/udp_flood.c) under A, P, F;
#   - the compile loop (NCPU loops of cc -O2 -c) under A, P, F;
#   - the per-event cost in ns of every program that ran, by the kernel's BPF stats, for pkprof,
#     bpftrace, the exact floor and the empty programs on the same storm and flood
#     (bench/bpfcost.py).
# The pairs run with BPF stats off (their clock reads would slow every program); only the cost
# section turns them on.
#
# Usage: bash bench/core.sh [PAIRS]        (default 10 pairs; run as root)
# Env:   BENCH_PIPE_LOOPS=N     pinned storm, perf bench sched pipe -l N   (default 200000)
#        BENCH_UDP_SECS=S       measured seconds per UDP flood run          (default 3)
#        BENCH_BUILDS=N         compiles per CPU per compile-loop run       (default 15)
#        BENCH_COST_LOOPS=N     storm loops of each BPF-stats run            (default 500000)
#        BENCH_PIPE_CPU=C       CPU the storm is pinned to                  (default: the last CPU)
#        BENCH_UDP_CPUS="S R"|none  UDP sender and receiver CPUs            (default "0 1")
#        BENCH_SETTLE=S         pause between runs, seconds                  (default 0.3)
#        BENCH_PKPROF=PATH      pkprof binary to measure (default: cargo build --release -p pkprof)
#        BENCH_SECTIONS="storm udp build cost"   which parts to run (default: all)
#        BENCH_STORM_MODES="A P S T R E F M"     storm modes (drop T if bpftrace cannot run)
set -euo pipefail

PAIRS=${1:-10}
[[ $PAIRS =~ ^[1-9][0-9]*$ ]] || { echo "usage: bash bench/core.sh [PAIRS]" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "bench: must run as root (BPF programs, perf record -a)" >&2; exit 1; }

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
OUT=bench/out
mkdir -p "$OUT"
export PATH="$HOME/.cargo/bin:$PATH"

PIPE_LOOPS=${BENCH_PIPE_LOOPS:-200000}
UDP_SECS=${BENCH_UDP_SECS:-3}
BUILDS=${BENCH_BUILDS:-15}
COST_LOOPS=${BENCH_COST_LOOPS:-500000}
NCPU=$(nproc)
PIPE_CPU=${BENCH_PIPE_CPU:-$((NCPU - 1))}
if [ "$NCPU" -ge 2 ]; then UDP_CPUS=${BENCH_UDP_CPUS:-0 1}; else UDP_CPUS=${BENCH_UDP_CPUS:-none}; fi
if [ "$UDP_CPUS" = none ]; then UDP_PIN=(-1 -1); else read -r -a UDP_PIN <<<"$UDP_CPUS"; fi
[ "${#UDP_PIN[@]}" = 2 ] || { echo "bench: BENCH_UDP_CPUS must be \"SENDER RECEIVER\" or none" >&2; exit 2; }
SETTLE=${BENCH_SETTLE:-0.3}
SECTIONS=${BENCH_SECTIONS:-storm udp build cost}
STORM_MODES=${BENCH_STORM_MODES:-A P S T R E F M}

log() { echo "bench: $*" >&2; }
for tool in perf cc clang bpftool python3 taskset; do
  command -v "$tool" >/dev/null || { echo "bench: $tool not found (bash scripts/setup.sh installs it)" >&2; exit 1; }
done
[ -f /usr/include/bpf/libbpf.h ] || { echo "bench: libbpf headers not found (apt-get install libbpf-dev; bash scripts/setup.sh)" >&2; exit 1; }
if [[ " $STORM_MODES " == *" T "* ]] && ! command -v bpftrace >/dev/null; then
  log "bpftrace not found (bash scripts/setup.sh installs it): the bpftrace peer (T) is skipped"
  STORM_MODES=${STORM_MODES// T/}
fi

# ---- build ---------------------------------------------------------------------------------------
if [ -n "${BENCH_PKPROF:-}" ]; then
  PKPROF=$BENCH_PKPROF
  [ -x "$PKPROF" ] || { echo "bench: BENCH_PKPROF=$PKPROF is not an executable" >&2; exit 2; }
else
  log "building pkprof (cargo build --release -p pkprof)"
  cargo build --release -p pkprof >&2
  PKPROF="$ROOT/target/release/pkprof"
fi
UDP_FLOOD="$OUT/udp_flood"
cc -O2 -Wall -Wextra -pthread -o "$UDP_FLOOD" bench/udp_flood.c
FLOOR_OBJ="$OUT/floor.bpf.o"
FLOOR_LOAD="$OUT/floor_load"
clang -O2 -g -target bpf -c bench/floor.bpf.c -o "$FLOOR_OBJ"
# The exact floor (M) reads the switch's task through kernel BTF: it needs the pinned vmlinux.h
# of this architecture (crates/collect/build.rs uses the same).
ACC_OBJ="$OUT/floor_acc.bpf.o"
VMLINUX_DIR="crates/collect/src/bpf/vmlinux/$(uname -m)"
case $(uname -m) in x86_64) BPF_ARCH=x86 ;; aarch64) BPF_ARCH=arm64 ;; *) BPF_ARCH= ;; esac
if [[ " $STORM_MODES " == *" M "* ]]; then
  if [ -n "$BPF_ARCH" ] && [ -f "$VMLINUX_DIR/vmlinux.h" ]; then
    clang -O2 -g -target bpf -D__TARGET_ARCH_$BPF_ARCH -I"$VMLINUX_DIR" \
      -c bench/floor_acc.bpf.c -o "$ACC_OBJ"
  else
    log "no vmlinux.h for $(uname -m) in crates/collect/src/bpf/vmlinux: the exact floor (M) is skipped"
    STORM_MODES=$(for x in $STORM_MODES; do [ "$x" = M ] || printf '%s ' "$x"; done)
  fi
fi
cc -O2 -Wall -Wextra -o "$FLOOR_LOAD" bench/floor_load.c -lbpf

STAMP=$(date +%Y%m%d-%H%M%S)
RAW="$OUT/core-raw-$STAMP.tsv"      # pair  workload  mode  value
COST="$OUT/core-cost-$STAMP"        # <workload>-<mode>.tsv (bpfcost.py) and .rate
mkdir -p "$COST"
printf 'pair\tworkload\tmode\tvalue\n' >"$RAW"

# The peer accumulator: on-CPU ns per thread, charged at each switch to the thread switched out
# (the time since this CPU's previous switch) — what pkprof's core does at its simplest.
BPFTRACE_PROG='tracepoint:sched:sched_switch { $t = nsecs; if (@last[cpu]) { @ns[args->prev_pid] = sum($t - @last[cpu]); } @last[cpu] = $t; }'

# ---- the tools under test --------------------------------------------------------------------------
TOOL_PID=""
TOOL_SIG=TERM
stop_tool() {
  [ -n "$TOOL_PID" ] || return 0
  kill -"$TOOL_SIG" "$TOOL_PID" 2>/dev/null || true
  local i
  for i in $(seq 200); do               # up to 10 s (bpftrace prints its maps, perf its file)
    kill -0 "$TOOL_PID" 2>/dev/null || break
    sleep 0.05
  done
  if kill -0 "$TOOL_PID" 2>/dev/null; then
    log "tool $TOOL_PID ignored SIG$TOOL_SIG for 10 s; killing it"
    kill -KILL "$TOOL_PID" 2>/dev/null || true
  fi
  wait "$TOOL_PID" 2>/dev/null || true
  TOOL_PID=""
}
trap 'stop_tool; rm -f "$OUT"/core-perf.data*' EXIT
trap 'exit 130' INT TERM

# Waits until file $1 matches pattern $2 (a grep -E), the tool still alive; up to 15 s.
wait_ready() {
  local file=$1 pattern=$2 i
  for i in $(seq 750); do
    grep -qE "$pattern" "$file" 2>/dev/null && return 0
    if ! kill -0 "$TOOL_PID" 2>/dev/null; then
      echo "bench: mode $MODE's tool exited before it was ready:" >&2
      cat "$file" "$file.err" >&2 2>/dev/null || true
      TOOL_PID=""
      exit 1
    fi
    sleep 0.02
  done
  echo "bench: mode $MODE's tool was not ready within 15 s" >&2
  exit 1
}

# start_tool MODE: starts the mode's tool in the background and returns once it is attached.
start_tool() {
  MODE=$1
  local f="$OUT/core-tool.out"
  : >"$f"
  case $MODE in
    A) return 0 ;;
    P) "$PKPROF" top --batch -d 1 >"$f" 2>"$f.err" & TOOL_PID=$!; TOOL_SIG=TERM
       wait_ready "$f" . ;;             # its first frame: programs attached and running
    S) "$PKPROF" top --batch --bpf-stats -d 1 >"$f" 2>"$f.err" & TOOL_PID=$!; TOOL_SIG=TERM
       wait_ready "$f" . ;;
    T) bpftrace -e "$BPFTRACE_PROG" >"$f" 2>"$f.err" & TOOL_PID=$!; TOOL_SIG=INT
       wait_ready "$f" '^Attaching' ;;
    R) perf record -q -e sched:sched_switch -a -o "$OUT/core-perf.data" >"$f" 2>"$f.err" & TOOL_PID=$!; TOOL_SIG=INT
       # perf says nothing once attached: its file's header is written at start; then 0.5 s.
       local i; for i in $(seq 250); do [ -s "$OUT/core-perf.data" ] && break; sleep 0.02; done
       sleep 0.5 ;;
    E) "$FLOOR_LOAD" "$FLOOR_OBJ" floor_sched_switch >"$f" 2>"$f.err" & TOOL_PID=$!; TOOL_SIG=TERM
       wait_ready "$f" '^attached' ;;
    F) "$FLOOR_LOAD" "$FLOOR_OBJ" >"$f" 2>"$f.err" & TOOL_PID=$!; TOOL_SIG=TERM
       wait_ready "$f" '^attached' ;;
    M) "$FLOOR_LOAD" "$ACC_OBJ" >"$f" 2>"$f.err" & TOOL_PID=$!; TOOL_SIG=TERM
       wait_ready "$f" '^attached' ;;
    *) echo "bench: unknown mode $MODE" >&2; exit 2 ;;
  esac
}

# ---- workloads (each prints one number) ----------------------------------------------------------
pin() { taskset -c "$PIPE_CPU" "$@"; }
# Context switches per second of the pinned storm: one round trip is two switches on one CPU.
run_storm() {
  local usecs
  usecs=$(pin perf bench sched pipe -l "$PIPE_LOOPS" | awk '/usecs\/op/ {print $1}')
  [ -n "$usecs" ] || { echo "bench: could not parse perf bench output" >&2; exit 1; }
  python3 -c "print(f'{2e6 / float(\"$usecs\"):.1f}')"
}
run_udp() {
  "$UDP_FLOOD" "$UDP_SECS" 64 "${UDP_PIN[@]}" | sed -n 's/.*rx_pps=\([0-9.]*\).*/\1/p'
}
# Compiles per second: NCPU loops of cc -O2 -c (fork, exec, page faults, file I/O, short tasks).
run_build() {
  local start end pids=() i
  start=$(date +%s.%N)
  for ((i = 0; i < NCPU; i++)); do
    ( for ((j = 0; j < BUILDS; j++)); do cc -O2 -c -o "$OUT/core-build.$i.o" bench/udp_flood.c; done ) &
    pids+=($!)
  done
  wait "${pids[@]}"
  end=$(date +%s.%N)
  python3 -c "print($NCPU * $BUILDS / ($end - $start))"
}

run_one() {
  local pair=$1 wl=$2 mode=$3 value
  start_tool "$mode"
  value=$("run_$wl")
  stop_tool
  rm -f "$OUT"/core-perf.data*
  printf '%s\t%s\t%s\t%s\n' "$pair" "$wl" "$mode" "$value" >>"$RAW"
  log "pair $pair $wl $mode: $value"
  sleep "$SETTLE"
}

# Pair k runs the modes rotated by k, reversed in even pairs, so that drift and order cancel.
order() {
  local -a m; read -r -a m <<<"$1"
  local n=${#m[@]} k=$2 i out=()
  for ((i = 0; i < n; i++)); do out+=("${m[$(((i + k) % n))]}"); done
  if ((k % 2 == 0)); then for ((i = n - 1; i >= 0; i--)); do echo -n "${out[$i]} "; done
  else echo -n "${out[*]}"; fi
}

if pgrep -x pkprof >/dev/null || pgrep -x bpftrace >/dev/null; then
  log "WARNING: another pkprof or bpftrace is running ($(pgrep -x 'pkprof|bpftrace' | tr '\n' ' ')); results will be skewed"
fi
log "$PAIRS pairs; storm pipe -l $PIPE_LOOPS on CPU $PIPE_CPU, UDP ${UDP_SECS}s (CPUs $UDP_CPUS), $BUILDS compiles x $NCPU; raw: $RAW"
for pair in $(seq 1 "$PAIRS"); do
  for wl in storm udp build; do
    if [[ " $SECTIONS " != *" $wl "* ]]; then continue; fi
    if [ "$wl" = storm ]; then modes=$STORM_MODES; else modes="A P F"; fi
    for m in $(order "$modes" "$pair"); do run_one "$pair" "$wl" "$m"; done
  done
done

# ---- per-program cost by BPF stats ---------------------------------------------------------------
# cost_run WORKLOAD MODE: the mode's tool attached, stats on (bpfcost.py), one longer workload.
cost_run() {
  local wl=$1 mode=$2 tsv="$COST/$1-$2.tsv" cmd
  start_tool "$mode"
  case $wl in
    storm) cmd=(taskset -c "$PIPE_CPU" perf bench sched pipe -l "$COST_LOOPS") ;;
    udp) cmd=("$UDP_FLOOD" "$UDP_SECS" 64 "${UDP_PIN[@]}") ;;
  esac
  python3 bench/bpfcost.py "$TOOL_PID" "$COST/$wl-$mode.out" -- "${cmd[@]}" >"$tsv"
  stop_tool
  log "cost $wl $mode: $(sed -n 2p "$tsv" | cut -f1,3) ns/run"
  sleep "$SETTLE"
}
if [[ " $SECTIONS " == *" cost "* ]]; then
  log "per-program cost with BPF stats on (storm -l $COST_LOOPS, UDP ${UDP_SECS}s)"
  for m in P E $(for x in $STORM_MODES; do case $x in T | M) echo "$x" ;; esac; done); do
    cost_run storm "$m"
  done
  for m in P F; do cost_run udp "$m"; done
fi

# ---- report --------------------------------------------------------------------------------------
REPORT="$OUT/core-latest.txt"
{
  echo "pkprof accounting core: cost against peers and the floor"
  echo "command:  $(env | grep '^BENCH_' | sort | sed 's/=\(.*\)/="\1"/' | tr '\n' ' ')bash bench/core.sh $PAIRS   (in $ROOT)"
  echo "date:     $(date -Is)   kernel: $(uname -r)   cpus: $NCPU   load before: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "pkprof:   $PKPROF @ $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD -- 2>/dev/null || echo ' (+uncommitted changes)')"
  echo "bpftrace: $(bpftrace --version 2>/dev/null || echo absent)   perf: $(perf version 2>/dev/null)"
  echo
  python3 bench/core_summary.py "$RAW" "$COST" "$NCPU"
  echo
  echo "raw: $RAW   BPF stats: $COST/"
} | tee "$REPORT"
