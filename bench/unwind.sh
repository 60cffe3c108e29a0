#!/usr/bin/env bash
# User-stack unwinding benchmark (issue 10; docs/design.md, "User stacks"): what `record -a` at 99 Hz
# with unwinding costs a CPU-bound load built without frame pointers, side by side with
# `perf record -a --call-graph dwarf` at the same rate; pkprof's own CPU; ring losses; the per-sample
# costs (kernel side, unwinding) and the tables' readiness from the record summary; the profile's
# size against perf.data for the same samples. See bench/README.md.
#
# Usage: bash bench/unwind.sh [PAIRS]      (default 8 pairs; run as root; needs perf)
# Env:   BENCH_CPU_SECS=S    seconds per CPU-bound run   (default 4)
#        BENCH_SETTLE=S      pause between runs, seconds (default 0.5)
set -euo pipefail

PAIRS=${1:-8}
[[ $PAIRS =~ ^[1-9][0-9]*$ ]] || { echo "usage: bash bench/unwind.sh [PAIRS]" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "bench: must run as root (pkprof loads BPF programs)" >&2; exit 1; }
command -v perf >/dev/null || { echo "bench: needs perf (Debian: linux-perf)" >&2; exit 1; }
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
OUT=bench/out
mkdir -p "$OUT"
export PATH="$HOME/.cargo/bin:$PATH"
CPU_SECS=${BENCH_CPU_SECS:-4}
SETTLE=${BENCH_SETTLE:-0.5}
NCPU=$(nproc)
log() { echo "bench: $*" >&2; }

log "building pkprof (cargo build --release -p pkprof)"
cargo build --release -p pkprof >&2
PKPROF="$ROOT/target/release/pkprof"
# The load is built without frame pointers, as distribution binaries are.
COMPUTE="$OUT/compute-nofp"
cc -O2 -g -fomit-frame-pointer -o "$COMPUTE" bench/compute.c
RAW="$OUT/raw-unwind.tsv"
: >"$RAW"

run_cpu() {
  local total=0 pids=() f
  for ((i = 0; i < NCPU; i++)); do
    "$COMPUTE" "$CPU_SECS" >"$OUT/unwind-compute.$i" &
    pids+=($!)
  done
  wait "${pids[@]}"
  for ((i = 0; i < NCPU; i++)); do
    f=$(awk '/^iterations/ {print $2}' "$OUT/unwind-compute.$i")
    total=$((total + f))
  done
  python3 -c "print($total / $CPU_SECS)"
}

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# Mode A: nothing; R: pkprof record -a (99 Hz, unwinding); P: perf record -a --call-graph dwarf 99 Hz.
measure() {
  local mode=$1 rec_pid t0 t1 c0 c1 value
  case $mode in
    R)
      "$PKPROF" record -a -o "$OUT/unwind.pkprof" >"$OUT/unwind-summary.$PAIR.txt" 2>"$OUT/unwind-stderr.txt" &
      rec_pid=$!
      for _ in $(seq 100); do grep -q "recording at" "$OUT/unwind-stderr.txt" 2>/dev/null && break; sleep 0.1; done
      grep -q "recording at" "$OUT/unwind-stderr.txt" || { log "pkprof record did not start"; cat "$OUT/unwind-stderr.txt" >&2; exit 1; }
      ;;
    P)
      perf record -a -F 99 --call-graph dwarf -o "$OUT/unwind-perf.data" >/dev/null 2>"$OUT/unwind-perf-stderr.txt" &
      rec_pid=$!
      sleep 1 # perf has no "started" line; it is sampling well within a second
      ;;
  esac
  if [ "$mode" != A ]; then c0=$(cpu_ticks "$rec_pid"); t0=$(date +%s.%N); fi
  value=$(run_cpu)
  if [ "$mode" != A ]; then
    c1=$(cpu_ticks "$rec_pid"); t1=$(date +%s.%N)
    kill -INT "$rec_pid"; wait "$rec_pid" || true
    python3 -c "print(f'own_cpu_$mode\t$PAIR\t{($c1 - $c0) / 100 / ($t1 - $t0) * 100:.3f}')" >>"$RAW"
  fi
  printf '%s\t%s\t%s\n' "$mode" "$PAIR" "$value" >>"$RAW"
  sleep "$SETTLE"
}

for ((p = 1; p <= PAIRS; p++)); do
  PAIR=$p
  log "pair $p/$PAIRS"
  if ((p % 2)); then order=(A R P); else order=(P R A); fi
  for mode in "${order[@]}"; do measure "$mode"; done
done

log "file size: the same command recorded by each at 999 Hz for ~5 s"
"$PKPROF" record -F 999 -o "$OUT/unwind-999.pkprof" -- "$COMPUTE" 5 >"$OUT/unwind-999.txt" 2>/dev/null
perf record -F 999 --call-graph dwarf -o "$OUT/unwind-999.perf.data" -- "$COMPUTE" 5 >/dev/null 2>&1
log "tables: pkprof record -- /usr/bin/python3 (a CPU-bound script)"
"$PKPROF" record -F 999 -o "$OUT/unwind-python.pkprof" -- /usr/bin/python3 -c \
  'def f(n): return n if n < 2 else f(n - 1) + f(n - 2)
f(27)' >"$OUT/unwind-python.txt" 2>/dev/null

python3 - "$RAW" "$OUT" "$PAIRS" <<'PY' | tee "$OUT/unwind-latest.txt"
import os, re, statistics, sys
raw, out, pairs = sys.argv[1], sys.argv[2], int(sys.argv[3])
vals = {}
for line in open(raw):
    k, pair, v = line.rstrip("\n").split("\t")
    vals.setdefault(k, {})[int(pair)] = float(v)
a = vals["A"]
print("record -a at 99 Hz with unwinding vs perf record -a --call-graph dwarf at 99 Hz; CPU-bound load without frame pointers")
print("ratio = median of per-pair ratios (throughput with / without)")
for mode, name in (("R", "pkprof record -a"), ("P", "perf record -a -g dwarf")):
    r = vals[mode]
    ratios = [r[p] / a[p] for p in a if p in r]
    ratio = statistics.median(ratios)
    cpu = list(vals["own_cpu_" + mode].values())
    print(f"  {name:26} ratio {ratio:.4f} ({100 * (1 - ratio):5.2f}% slowdown), own CPU median {statistics.median(cpu):.3f}% of one CPU (max {max(cpu):.3f}); {len(ratios)} pairs")
    print("     per-pair: " + " ".join(f"{x:.3f}" for x in ratios))
lost, costs = [], []
for p in range(1, pairs + 1):
    try:
        text = open(os.path.join(out, f"unwind-summary.{p}.txt")).read()
    except OSError:
        continue
    m = re.search(r"ring buffer full (\d+)", text)
    if m:
        lost.append(int(m.group(1)))
    m = re.search(r"^per sample: .*$", text, re.M)
    if m:
        costs.append(m.group(0))
print(f"  pkprof ring-buffer losses per run: {lost}")
for c in costs[-3:]:
    print("  " + c)
p999 = os.path.getsize(os.path.join(out, "unwind-999.pkprof"))
perf999 = os.path.getsize(os.path.join(out, "unwind-999.perf.data"))
print(f"file size, same command at 999 Hz for 5 s: pkprof {p999 / 1024:.0f} KiB, perf.data {perf999 / 1024:.0f} KiB (ratio {p999 / perf999:.4f})")
text = open(os.path.join(out, "unwind-python.txt")).read()
for pat in (r"^per sample: .*$", r"^user stacks: .*$"):
    m = re.search(pat, text, re.M)
    if m:
        print("python3: " + m.group(0))
PY
