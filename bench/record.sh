#!/usr/bin/env bash
# pkprof record benchmark: what system-wide sampling at the default rate costs the machine, what
# pkprof itself costs, and symbolization time and file size per 100,000 samples. See bench/README.md.
#
# Usage: bash bench/record.sh [PAIRS]      (default 6 pairs; run as root)
# Env:   BENCH_CPU_SECS=S    seconds per CPU-bound run        (default 4)
#        BENCH_BUILDS=N      compiles per CPU per build run   (default 40)
#        BENCH_SETTLE=S      pause between runs, seconds      (default 0.5)
set -euo pipefail

PAIRS=${1:-6}
[[ $PAIRS =~ ^[1-9][0-9]*$ ]] || { echo "usage: bash bench/record.sh [PAIRS]" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "bench: must run as root (pkprof loads BPF programs)" >&2; exit 1; }
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
OUT=bench/out
mkdir -p "$OUT"
export PATH="$HOME/.cargo/bin:$PATH"
CPU_SECS=${BENCH_CPU_SECS:-4}
BUILDS=${BENCH_BUILDS:-40}
SETTLE=${BENCH_SETTLE:-0.5}
NCPU=$(nproc)
log() { echo "bench: $*" >&2; }

log "building pkprof (cargo build --release -p pkprof)"
cargo build --release -p pkprof >&2
PKPROF="$ROOT/target/release/pkprof"
COMPUTE="$OUT/compute"
cc -O2 -g -fno-omit-frame-pointer -o "$COMPUTE" bench/compute.c
PROFILE="$OUT/record-bench.pkprof"
RAW="$OUT/raw-record.tsv"
: >"$RAW"

# CPU-bound: one compute process per CPU; throughput = iterations/s summed.
run_cpu() {
  local total=0 pids=() f
  for ((i = 0; i < NCPU; i++)); do
    "$COMPUTE" "$CPU_SECS" >"$OUT/compute.$i" &
    pids+=($!)
  done
  wait "${pids[@]}"
  for ((i = 0; i < NCPU; i++)); do
    f=$(awk '/^iterations/ {print $2}' "$OUT/compute.$i")
    total=$((total + f))
  done
  python3 -c "print($total / $CPU_SECS)"
}

# Build-like: NCPU parallel loops of compiler runs (fork, exec, page faults, file I/O); compiles/s.
run_build() {
  local start end pids=()
  start=$(date +%s.%N)
  for ((i = 0; i < NCPU; i++)); do
    ( for ((j = 0; j < BUILDS; j++)); do cc -O2 -c -o "$OUT/build.$i.o" bench/udp_flood.c; done ) &
    pids+=($!)
  done
  wait "${pids[@]}"
  end=$(date +%s.%N)
  python3 -c "print($NCPU * $BUILDS / ($end - $start))"
}

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# Runs workload $2 with pkprof record -a at the default rate (mode R) or without (mode A).
measure() {
  local mode=$1 work=$2 rec_pid t0 t1 c0 c1 value
  if [ "$mode" = R ]; then
    "$PKPROF" record -a -o "$PROFILE" >"$OUT/record-summary.txt" 2>"$OUT/record-stderr.txt" &
    rec_pid=$!
    for _ in $(seq 100); do grep -q "recording at" "$OUT/record-stderr.txt" 2>/dev/null && break; sleep 0.1; done
    grep -q "recording at" "$OUT/record-stderr.txt" || { log "pkprof record did not start"; cat "$OUT/record-stderr.txt" >&2; exit 1; }
    c0=$(cpu_ticks "$rec_pid"); t0=$(date +%s.%N)
  elif [ "$mode" = T ]; then
    # The accounting alone, as `pkprof top` runs it: what record adds is R against T.
    "$PKPROF" top --batch -d 1 >"$OUT/record-top.txt" 2>&1 &
    rec_pid=$!
    for _ in $(seq 100); do [ -s "$OUT/record-top.txt" ] && break; sleep 0.1; done
  fi
  value=$("run_$work")
  if [ "$mode" = T ]; then
    kill -TERM "$rec_pid"; wait "$rec_pid" || true
  fi
  if [ "$mode" = R ]; then
    c1=$(cpu_ticks "$rec_pid"); t1=$(date +%s.%N)
    kill -INT "$rec_pid"; wait "$rec_pid"
    # pkprof's own CPU while the workload ran, % of one CPU (clock ticks: 100/s).
    python3 -c "print(f'$work\tpkprof_cpu\t$PAIR\t{($c1 - $c0) / 100 / ($t1 - $t0) * 100:.3f}')" >>"$RAW"
  fi
  printf '%s\t%s\t%s\t%s\n' "$work" "$mode" "$PAIR" "$value" >>"$RAW"
  sleep "$SETTLE"
}

for ((p = 1; p <= PAIRS; p++)); do
  PAIR=$p
  log "pair $p/$PAIRS"
  if ((p % 2)); then order=(A T R); else order=(R T A); fi
  for work in cpu build; do
    for mode in "${order[@]}"; do measure "$mode" "$work"; done
  done
done

log "symbolization and file size: pkprof record -a -F 9999 for 5 s over the build workload"
"$PKPROF" record -a -F 9999 --duration 5 -o "$PROFILE" >"$OUT/record-9999.txt" 2>/dev/null &
rec=$!
sleep 0.5
BUILDS=40 run_build >/dev/null &
build=$!
wait "$rec"
kill "$build" 2>/dev/null || true
wait 2>/dev/null || true

python3 - "$RAW" "$OUT/record-9999.txt" "$PROFILE" <<'PY' | tee "$OUT/record-latest.txt"
import os, re, statistics, sys
raw, summary, profile = sys.argv[1:4]
vals = {}
for line in open(raw):
    work, mode, pair, v = line.split("\t")
    vals.setdefault((work, mode), {})[int(pair)] = float(v)
print("pkprof record -a at the default rate (99 Hz) vs nothing; ratio = median of per-pair ratios")
print(f"{'workload':10} {'without':>14} {'with record':>14} {'ratio':>7}  {'slowdown':>8}  pkprof CPU (% of one CPU)")
for work, unit in (("cpu", "iter/s"), ("build", "compiles/s")):
    a, r = vals[(work, "A")], vals[(work, "R")]
    ratios = [r[p] / a[p] for p in a if p in r]
    ratio = statistics.median(ratios)
    cpu = list(vals[(work, "pkprof_cpu")].values())
    print(f"{work:10} {statistics.median(a.values()):14.1f} {statistics.median(r.values()):14.1f} {ratio:7.4f}  {100 * (1 - ratio):7.2f}%  median {statistics.median(cpu):.3f}, max {max(cpu):.3f}  ({unit}, {len(ratios)} pairs)")
    print("   per-pair R/A: " + " ".join(f"{x:.3f}" for x in ratios))
    t = vals.get((work, "T"), {})
    if t:
        rt = statistics.median([t[p] / a[p] for p in a if p in t])
        print(f"   accounting alone (pkprof top, mode T): ratio {rt:.4f} ({100 * (1 - rt):.2f}% slowdown)")
text = open(summary).read()
m = re.search(r"(\d+) samples in .*?wrote .*? \(([\d.]+) KiB\)", text)
s = re.search(r"symbolization ([\d.]+) s", text)
if m and s:
    n, kib, secs = int(m.group(1)), float(m.group(2)), float(s.group(1))
    print(f"per 100,000 samples ({n} recorded at 9999 Hz over a build): symbolization {secs * 1e5 / n:.2f} s, file {kib * 1e5 / n:.0f} KiB")
PY
