#!/usr/bin/env bash
# Off-CPU cost benchmark (issue 12 §2, docs/design.md "Off-CPU samples"): what `record --off-cpu`
# adds to a wakeup-heavy load (`perf bench sched messaging`), side by side with BCC's
# `offcputime` (libbpf-tools) on the same load. Each round runs the load four ways, in a rotating
# order: alone (B), under offcputime system-wide (O), under `pkprof record -a` (Q) and under
# `pkprof record -a --off-cpu` (P). offcputime's cost is O - B; --off-cpu's is P - Q (the same
# recording without off-CPU samples), and the goal is P - Q <= (O - B) / 2. Printed: medians of the
# per-round differences (seconds of the load's own "Total time") and their ratio. Less noisy on
# a shared machine: what each tracer itself spent during the load, its BPF programs' run time
# (kernel BPF stats, turned on for the bench; for P plus the run time of its task works, which the
# stats do not see) plus its process's CPU time (utime + stime), the
# same differences and ratio of those. And pkprof's off-CPU counts of its last P run.
#
# Usage: bash bench/offcpu.sh [ROUNDS]     (default 8; run as root; needs perf and offcputime)
# Env:   BENCH_GROUPS=G  BENCH_LOOPS=L     perf bench sched messaging -g G -l L (default 10, 500)
#        BENCH_OFFCPU_ARGS="..."           extra pkprof args for P (e.g. --off-cpu-period 0)
#        PKPROF=path                        a pkprof binary (default: cargo build --release)
set -euo pipefail

ROUNDS=${1:-8}
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || { echo "usage: bash bench/offcpu.sh [ROUNDS]" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "bench: must run as root (BPF)" >&2; exit 1; }
command -v perf >/dev/null || { echo "bench: needs perf (Debian: linux-perf)" >&2; exit 1; }
OFFCPUTIME=/usr/sbin/offcputime
[ -x "$OFFCPUTIME" ] || { echo "bench: needs $OFFCPUTIME (Debian: libbpf-tools; scripts/setup.sh)" >&2; exit 1; }
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
OUT=bench/out
mkdir -p "$OUT"
export PATH="$HOME/.cargo/bin:$PATH"
GROUPS_=${BENCH_GROUPS:-10}
LOOPS=${BENCH_LOOPS:-500}
log() { echo "bench: $*" >&2; }

if [ -z "${PKPROF:-}" ]; then
  log "building pkprof (cargo build --release -p pkprof)"
  cargo build --release -p pkprof >&2
  PKPROF="$ROOT/target/release/pkprof"
fi
RAW="$OUT/raw-offcpu.tsv"
: >"$RAW"
command -v bpftool >/dev/null || { echo "bench: needs bpftool" >&2; exit 1; }
STATS_WAS=$(cat /proc/sys/kernel/bpf_stats_enabled)
echo 1 >/proc/sys/kernel/bpf_stats_enabled
trap 'echo "$STATS_WAS" >/proc/sys/kernel/bpf_stats_enabled' EXIT

load() { perf bench sched messaging -g "$GROUPS_" -l "$LOOPS" 2>&1 | awk '/Total time/ {print $3}'; }

start_pkprof() {
  "$PKPROF" record -a "$@" -o "$OUT/offcpu.pkprof" >"$OUT/offcpu-summary-$MODE.txt" 2>"$OUT/offcpu-stderr.txt" &
  TRACER=$!
  for _ in $(seq 300); do grep -q "recording at" "$OUT/offcpu-stderr.txt" 2>/dev/null && return; sleep 0.1; done
  log "pkprof record did not start"; cat "$OUT/offcpu-stderr.txt" >&2; exit 1
}

# ns the tracer PID spent so far: its BPF programs' run time plus its own CPU time.
spent_ns() {
  local pid=$1 bpf ticks ids
  # Its programs: the BPF program descriptors it holds (prog_id in their fdinfo).
  ids=$(grep -h '^prog_id:' /proc/"$pid"/fdinfo/* 2>/dev/null | awk '{print $2}' | sort -u | tr '\n' ' ')
  bpf=$(bpftool prog show -j | python3 -c 'import json, sys
ids = {int(x) for x in sys.argv[1].split()}
print(sum(p.get("run_time_ns", 0) for p in json.load(sys.stdin) if p.get("id") in ids))' "$ids")
  ticks=$(awk '{print $14 + $15}' "/proc/$pid/stat")
  echo "$bpf $((ticks * 10000000))"
}

measure() {
  local mode=$1 value s0="0 0" s1="0 0"
  MODE=$mode
  TRACER=
  case $mode in
    O) "$OFFCPUTIME" 3600 >"$OUT/offcpu-offcputime.txt" 2>&1 & TRACER=$!; sleep 2 ;;
    Q) start_pkprof ;;
    # shellcheck disable=SC2086
    P) start_pkprof --off-cpu ${BENCH_OFFCPU_ARGS:-} ;;
  esac
  if [ -n "$TRACER" ]; then s0=$(spent_ns "$TRACER"); fi
  value=$(load)
  if [ -n "$TRACER" ]; then s1=$(spent_ns "$TRACER"); kill -INT "$TRACER"; wait "$TRACER" || true; fi
  printf '%s\t%s\t%s\n' "$mode" "$ROUND" "$value" >>"$RAW"
  read -r b0 c0 <<<"$s0"; read -r b1 c1 <<<"$s1"
  # --off-cpu's task works (they take the blocked threads' user stacks) are BPF code that the
  # programs' stats do not see: the summary reports their run time (the whole recording's, which
  # starts with the load and ends soon after it), added to the BPF part.
  if [ "$mode" = P ]; then
    tw=$(sed -n 's/.*task works \([0-9.]*\) ms.*/\1/p' "$OUT/offcpu-summary-P.txt")
    b1=$((b1 + $(python3 -c 'import sys; print(int(float(sys.argv[1] or 0) * 1e6))' "${tw:-0}")))
  fi
  printf 'spent_%s\t%s\t%s\n' "$mode" "$ROUND" "$(((b1 - b0 + c1 - c0) / 1000))" >>"$RAW"
  printf 'bpf_%s\t%s\t%s\n' "$mode" "$ROUND" "$(((b1 - b0) / 1000))" >>"$RAW"
  sleep 0.5
}

orders=("B O Q P" "P Q O B" "O B P Q" "Q P B O")
for ((r = 1; r <= ROUNDS; r++)); do
  ROUND=$r
  log "round $r/$ROUNDS"
  for mode in ${orders[$(((r - 1) % 4))]}; do measure "$mode"; done
done

python3 - "$RAW" "$OUT/offcpu-summary-P.txt" <<'PY' | tee "$OUT/offcpu-latest.txt"
import re, statistics, sys
vals = {}
for line in open(sys.argv[1]):
    k, r, v = line.split("\t")
    vals.setdefault(k, {})[int(r)] = float(v)
rounds = sorted(set.intersection(*(set(v) for k, v in vals.items() if k in "BOQP")))
med = lambda xs: statistics.median(xs)
d_off = [vals["O"][r] - vals["B"][r] for r in rounds]
d_pk = [vals["P"][r] - vals["Q"][r] for r in rounds]
d_all = [vals["P"][r] - vals["B"][r] for r in rounds]
b = med([vals["B"][r] for r in rounds])
print("perf bench sched messaging: seconds of the load (median of %d rounds); alone %.3f s" % (len(rounds), b))
print("  offcputime (system-wide)         +%.3f s (%+.1f%%)" % (med(d_off), 100 * med(d_off) / b))
print("  pkprof record -a --off-cpu vs -a +%.3f s (%+.1f%%)   [record -a --off-cpu vs nothing: +%.3f s]" % (med(d_pk), 100 * med(d_pk) / b, med(d_all)))
if med(d_off) > 0:
    print("  --off-cpu cost / offcputime's cost: %.2f (goal <= 0.5)" % (med(d_pk) / med(d_off)))
print("  per-round (O-B, P-Q): " + " ".join("%.3f/%.3f" % (x, y) for x, y in zip(d_off, d_pk)))
sp = lambda m: [vals["spent_" + m][r] / 1e6 for r in rounds]
so, sq, spk = sp("O"), sp("Q"), sp("P")
dpk = [p - q for p, q in zip(spk, sq)]
print("tracers' own time during the load (BPF programs + process CPU, s; median):")
print("  offcputime %.3f s; pkprof -a %.3f s; pkprof -a --off-cpu %.3f s (its off-CPU part %.3f s)" % (med(so), med(sq), med(spk), med(dpk)))
if med(so) > 0:
    print("  --off-cpu's own time / offcputime's: %.2f (goal <= 0.5)" % (med(dpk) / med(so)))
bp = lambda m: [vals["bpf_" + m][r] / 1e6 for r in rounds]
bo, bq, bpk = bp("O"), bp("Q"), bp("P")
print("  of which BPF programs: offcputime %.3f s; pkprof -a %.3f s; --off-cpu's part %.3f s" % (med(bo), med(bq), med([p - q for p, q in zip(bpk, bq)])))
text = open(sys.argv[2]).read()
m = re.search(r"^off-cpu: .*$", text, re.M)
if m:
    print("  last run: " + m.group(0))
PY
