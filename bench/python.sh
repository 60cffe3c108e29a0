#!/usr/bin/env bash
# Python frames benchmark (issue 14; docs/design.md, "Python frames"): the per-sample cost of
# splicing CPython frames against native-only unwinding, on the same Python workload (a fib
# recursion, ~25 frames deep), in pairs run back to back: `record -F 999 -- python3.11 fib` with
# Python frames, and with `--no-python`. Per pair: the kernel side's mean per sample by BPF stats
# (`on_sample`), its median by the sample's own clock, and pkprof's own CPU per sample; printed
# as with/without ratios, median of pairs. Goal: kernel side <= 2x native-only.
#
# Usage: bash bench/python.sh [PAIRS]     (default 6 pairs; run as root)
# Env:   BENCH_SECS=S   seconds of workload CPU per run (default 3)
#        BENCH_PKPROF=BIN   use this pkprof binary instead of building the release one
set -euo pipefail

PAIRS=${1:-6}
[[ $PAIRS =~ ^[1-9][0-9]*$ ]] || { echo "usage: bash bench/python.sh [PAIRS]" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "bench: must run as root (pkprof loads BPF programs)" >&2; exit 1; }
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
OUT=bench/out
mkdir -p "$OUT"
export PATH="$HOME/.cargo/bin:$PATH"
SECS=${BENCH_SECS:-3}
PY=/usr/bin/python3.11
WORK=crates/cli/tests/workloads/python_work.py
log() { echo "bench: $*" >&2; }

if [ -n "${BENCH_PKPROF:-}" ]; then
  PKPROF=$BENCH_PKPROF
else
  log "building pkprof (cargo build --release -p pkprof)"
  cargo build --release -p pkprof >&2
  PKPROF="$ROOT/target/release/pkprof"
fi
RAW="$OUT/raw-python.tsv"
printf 'pair\tmode\tsamples\tbpf_mean_us\tkernel_median_us\tpkprof_cpu_us_per_sample\n' >"$RAW"

# One recording; prints "samples bpf_mean_us kernel_median_us pkprof_cpu_us_per_sample".
measure() {
  local extra=$1 sum
  sum="$OUT/python-summary.txt"
  "$PKPROF" record -F 999 $extra -o "$OUT/python.pkprof" -- "$PY" "$WORK" fib "$SECS" >"$sum" 2>&1
  python3 - "$sum" <<'PYEOF'
import re, sys
t = open(sys.argv[1]).read()
n = int(re.search(r"record: (\d+) samples", t).group(1))
kmed = float(re.search(r"kernel side ([\d.]+) µs median", t).group(1))
bpf = re.search(r"([\d.]+) µs mean by BPF stats", t)
cpu = re.search(r"overhead:\s+pkprof ([\d.]+)% of one CPU", t)
dur = re.search(r"samples in ([\d.]+) s", t)
cpu_us = float(cpu.group(1)) / 100 * float(dur.group(1)) * 1e6 / max(n, 1)
print(n, bpf.group(1) if bpf else "nan", kmed, round(cpu_us, 2))
PYEOF
}

for ((PAIR = 1; PAIR <= PAIRS; PAIR++)); do
  for mode in python native; do
    extra=""
    [ "$mode" = native ] && extra="--no-python"
    read -r n bpf kmed cpu < <(measure "$extra")
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$PAIR" "$mode" "$n" "$bpf" "$kmed" "$cpu" >>"$RAW"
    log "pair $PAIR $mode: $n samples, on_sample $bpf µs mean, kernel side $kmed µs median, pkprof $cpu µs/sample"
  done
done

python3 - "$RAW" <<'PYEOF'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
pairs = {}
for r in rows:
    pairs.setdefault(r["pair"], {})[r["mode"]] = r
def ratio(field):
    v = []
    for p in pairs.values():
        a, b = float(p["python"][field]), float(p["native"][field])
        if b > 0 and a == a and b == b:
            v.append(a / b)
    return statistics.median(v) if v else float("nan")
def med(mode, field):
    return statistics.median(float(p[mode][field]) for p in pairs.values())
print(f"python frames vs native-only, median of {len(pairs)} pairs (record -F 999, fib ~25 deep):")
for field, what in [("bpf_mean_us", "kernel side per sample, BPF stats mean"),
                    ("kernel_median_us", "kernel side per sample, median"),
                    ("pkprof_cpu_us_per_sample", "pkprof's own CPU per sample")]:
    print(f"  {what:42s} {med('python', field):7.2f} µs vs {med('native', field):7.2f} µs  ratio {ratio(field):.2f}x")
PYEOF
