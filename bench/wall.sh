#!/usr/bin/env bash
# What the wall-time classes cost (issue 12 "Cost"; docs/design.md "Wall time"): `pkprof top` with
# the wall chain on (W) against the same top with it off (O: PKPROF_TEST_HIDE_TRACEPOINTS hides
# sched:sched_wakeup_new, which turns the chain off alone, as on a kernel without it) and against
# nothing (A), on
#   - the pinned switch storm: taskset -c CPU perf bench sched pipe -l N (usecs per round trip),
#   - a wakeup-heavy load: perf bench sched messaging -g G -l L (seconds).
# Each pair runs A, O and W once, in a rotating order; the script prints, per workload, the median
# over pairs of W/O (the classes' own cost, goal <= 1.01 on the storm), O/A and W/A.
# Then the per-event cost by the kernel's BPF stats (top --bpf-stats --json), O and W each on one
# storm run: ns per switch of on_sched_switch, ns per event of the chain's wakeup_new program (it
# runs none at other wakeups), and what the chain adds per storm round trip (two switches and two
# wakeups each), as a share of A's round trip:
# the figure the ratio above measures, without the noise of a shared machine.
#
# Usage: bash bench/wall.sh [PAIRS]        (default 10 pairs; run as root)
# Env:   BENCH_PIPE_LOOPS=N   storm round trips per run (default 200000)
#        BENCH_PIPE_CPU=C     CPU the storm is pinned to (default: the last CPU)
#        BENCH_MSG="G L"      messaging groups and loops (default "10 200")
#        BENCH_SETTLE=S       pause between runs, seconds (default 0.3)
#        BENCH_PKPROF=PATH    pkprof binary (default: cargo build --release -p pkprof)
set -euo pipefail

PAIRS=${1:-10}
[[ $PAIRS =~ ^[1-9][0-9]*$ ]] || { echo "usage: bash bench/wall.sh [PAIRS]" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "bench: must run as root (BPF programs)" >&2; exit 1; }
command -v perf >/dev/null || { echo "bench: perf not found (bash scripts/setup.sh installs it)" >&2; exit 1; }

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
OUT=bench/out
mkdir -p "$OUT"
export PATH="$HOME/.cargo/bin:$PATH"
PIPE_LOOPS=${BENCH_PIPE_LOOPS:-200000}
PIPE_CPU=${BENCH_PIPE_CPU:-$(($(nproc) - 1))}
read -r MSG_G MSG_L <<<"${BENCH_MSG:-10 200}"
SETTLE=${BENCH_SETTLE:-0.3}
log() { echo "bench: $*" >&2; }

if [ -n "${BENCH_PKPROF:-}" ]; then
  PKPROF=$BENCH_PKPROF
else
  log "building pkprof (cargo build --release -p pkprof)"
  cargo build --release -p pkprof >&2
  PKPROF="$ROOT/target/release/pkprof"
fi
[ -x "$PKPROF" ] || { echo "bench: $PKPROF is not an executable" >&2; exit 2; }

RAW="$OUT/wall-raw-$(date +%Y%m%d-%H%M%S).tsv"
printf 'pair\tworkload\tmode\tvalue\n' >"$RAW"

TOOL_PID=""
stop_tool() {
  [ -n "$TOOL_PID" ] || return 0
  kill -TERM "$TOOL_PID" 2>/dev/null || true
  wait "$TOOL_PID" 2>/dev/null || true
  TOOL_PID=""
}
trap stop_tool EXIT
trap 'exit 130' INT TERM

# start_tool MODE: A nothing, O top with the wall chain off, W top with it on; returns once the
# first frame is out (programs attached).
start_tool() {
  local f="$OUT/wall-tool.out" i
  : >"$f"
  case $1 in
    A) return 0 ;;
    O) PKPROF_TEST_HIDE_TRACEPOINTS=sched:sched_wakeup_new "$PKPROF" top --batch -d 1 >"$f" 2>"$f.err" & ;;
    W) "$PKPROF" top --batch -d 1 >"$f" 2>"$f.err" & ;;
  esac
  TOOL_PID=$!
  for i in $(seq 750); do
    [ -s "$f" ] && return 0
    kill -0 "$TOOL_PID" 2>/dev/null || { cat "$f.err" >&2; echo "bench: mode $1's top exited" >&2; exit 1; }
    sleep 0.02
  done
  echo "bench: mode $1's top printed no frame within 15 s" >&2
  exit 1
}

run_workload() {
  case $1 in
    storm) taskset -c "$PIPE_CPU" perf bench sched pipe -l "$PIPE_LOOPS" | awk '/usecs\/op/ {print $1}' ;;
    messaging) perf bench sched messaging -g "$MSG_G" -l "$MSG_L" | awk '/Total time/ {print $3}' ;;
  esac
}

log "$PAIRS pairs; storm pipe -l $PIPE_LOOPS on CPU $PIPE_CPU, messaging -g $MSG_G -l $MSG_L; raw: $RAW"
orders=("A O W" "O W A" "W A O")
for pair in $(seq "$PAIRS"); do
  for wl in storm messaging; do
    for mode in ${orders[$(((pair - 1) % 3))]}; do
      start_tool "$mode"
      v=$(run_workload "$wl")
      stop_tool
      [ -n "$v" ] || { echo "bench: could not parse the $wl output" >&2; exit 1; }
      printf '%s\t%s\t%s\t%s\n' "$pair" "$wl" "$mode" "$v" >>"$RAW"
      sleep "$SETTLE"
    done
  done
done

# ---- per-event cost by BPF stats -----------------------------------------------------------------
for mode in O W; do
  f="$OUT/wall-cost-$mode.json"
  if [ $mode = O ]; then env=(PKPROF_TEST_HIDE_TRACEPOINTS=sched:sched_wakeup_new); else env=(); fi
  env "${env[@]}" "$PKPROF" top --json --bpf-stats -d 0.5 >"$f" 2>"$f.err" &
  TOOL_PID=$!
  for i in $(seq 750); do [ -s "$f" ] && break; sleep 0.02; done
  run_workload storm >/dev/null
  sleep 0.7
  stop_tool
done

python3 - "$RAW" "$OUT/wall-cost-O.json" "$OUT/wall-cost-W.json" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
by = {}
for r in rows:
    by.setdefault((r["workload"], r["pair"]), {})[r["mode"]] = float(r["value"])
for wl in ("storm", "messaging"):
    pairs = [v for (w, _), v in sorted(by.items()) if w == wl and len(v) == 3]
    ratio = lambda a, b: statistics.median(p[a] / p[b] for p in pairs)
    unit = "usecs/round trip" if wl == "storm" else "s"
    print(f"{wl:10} ({len(pairs)} pairs, median {unit}: A {statistics.median(p['A'] for p in pairs):.3f}"
          f" O {statistics.median(p['O'] for p in pairs):.3f} W {statistics.median(p['W'] for p in pairs):.3f}):"
          f" W/O {ratio('W', 'O'):.4f}  O/A {ratio('O', 'A'):.4f}  W/A {ratio('W', 'A'):.4f}")
import json
def progs(path):
    last = None
    for line in open(path):
        last = json.loads(line)
    return {p["name"]: p for p in last["progs"]}
def per(p, name):
    x = p.get(name)
    return (x["run_ns"] / x["run_cnt"], x["run_cnt"]) if x and x["run_cnt"] else (0.0, 0)
o, w = progs(sys.argv[2]), progs(sys.argv[3])
sw_o, _ = per(o, "on_sched_switch")
sw_w, n_sw = per(w, "on_sched_switch")
wk, n_wk = per(w, "on_sched_wakeup")
wn, _ = per(w, "on_sched_wakeup_new")
extra_per_switch = (sw_w - sw_o) + wk * n_wk / max(n_sw, 1)
storm = [v for (wl, _), v in by.items() if wl == "storm" and "A" in v]
a_us = statistics.median(v["A"] for v in storm) if storm else 0
wake_text = (f"on_sched_wakeup {wk:.0f} ns ({n_wk} for {n_sw} switches)" if n_wk
             else "no program at wakeups")
print(f"BPF stats: on_sched_switch {sw_o:.0f} ns off, {sw_w:.0f} ns on; {wake_text};"
      f" on_sched_wakeup_new {wn:.0f} ns")
if a_us:
    print(f"the chain adds {extra_per_switch:.0f} ns per switch: {2 * extra_per_switch / (a_us * 1e3) * 100:.2f}%"
          f" of the storm's round trip ({a_us:.2f} us, two switches)")
PY
