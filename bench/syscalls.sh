#!/usr/bin/env bash
# pkprof syscalls benchmark: what transition counting costs a syscall storm (1-byte reads from
# /dev/zero), A/B interleaved, against the same storm untraced and under strace -f -c.
# See bench/README.md.
#
# Usage: bash bench/syscalls.sh [PAIRS]    (default 10 pairs; run as root)
# Env:   BENCH_CALLS=N   reads per run (default 2000000); strace runs use N/20
set -euo pipefail

PAIRS=${1:-10}
[[ $PAIRS =~ ^[1-9][0-9]*$ ]] || { echo "usage: bash bench/syscalls.sh [PAIRS]" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "bench: must run as root (pkprof loads BPF programs)" >&2; exit 1; }
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
OUT=bench/out
mkdir -p "$OUT"
export PATH="$HOME/.cargo/bin:$PATH"
CALLS=${BENCH_CALLS:-2000000}
log() { echo "bench: $*" >&2; }

log "building pkprof (cargo build --release -p pkprof)"
cargo build --release -p pkprof >&2
PKPROF="$ROOT/target/release/pkprof"
STORM="$OUT/syscall_storm"
cc -O2 -o "$STORM" bench/syscall_storm.c
RAW="$OUT/raw-syscalls.tsv"
: >"$RAW"

ns() { awk '/^ns_per_call/ {print $2}'; }
plain() { "$STORM" "$CALLS" | ns; }
counted() { "$PKPROF" syscalls --stack-every "$1" -o "$OUT/storm.txt" -- "$STORM" "$CALLS" | ns; }

log "$PAIRS rounds of: plain, pkprof syscalls (stacks every 64th call), pkprof syscalls --stack-every 0"
for ((r = 1; r <= PAIRS; r++)); do
  # Order rotates each round so drift does not favour one side.
  for m in $(python3 -c "m=['plain','s64','s0']; r=$r%3; print(' '.join(m[r:]+m[:r]))"); do
    case $m in
      plain) v=$(plain) ;;
      s64) v=$(counted 64) ;;
      s0) v=$(counted 0) ;;
    esac
    printf '%s\t%s\t%s\n' "$r" "$m" "$v" >>"$RAW"
  done
done
log "strace -f -c on $((CALLS / 20)) calls (3 runs)"
for r in 1 2 3; do
  v=$(strace -f -c -o /dev/null "$STORM" $((CALLS / 20)) | ns)
  printf '%s\tstrace\t%s\n' "$r" "$v" >>"$RAW"
done

python3 - "$RAW" <<'PY'
import statistics, sys
rows = [l.split('\t') for l in open(sys.argv[1]).read().split('\n') if l]
by = {}
for r, m, v in rows:
    by.setdefault(m, {})[int(r)] = float(v)
med = {m: statistics.median(v.values()) for m, v in by.items()}
print(f"syscall storm, 1-byte reads of /dev/zero, ns per call (median of {len(by['plain'])} interleaved rounds):")
print(f"  untraced                       {med['plain']:8.1f}")
for m, label in (('s64', 'pkprof syscalls (default)'), ('s0', 'pkprof syscalls --stack-every 0')):
    ratios = [by[m][r] / by['plain'][r] for r in by[m]]
    print(f"  {label:30} {med[m]:8.1f}   slowdown {100 * (statistics.median(ratios) - 1):+.1f}% "
          f"(paired ratios {100 * (min(ratios) - 1):+.1f}%..{100 * (max(ratios) - 1):+.1f}%; goal <= +15%)")
print(f"  strace -f -c                   {med['strace']:8.1f}   slowdown x{med['strace'] / med['plain']:.0f}")
PY
