#!/usr/bin/env bash
# pkprof syscalls benchmark: what transition counting costs a syscall storm (1-byte reads from
# /dev/zero), interleaved with the same storm untraced, with the kernel's own counting of the same
# tracepoints (perf stat: the floor any tracepoint-based counter pays), and under strace -f -c.
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
counted() { "$PKPROF" syscalls "$@" -o "$OUT/storm.txt" -- "$STORM" "$CALLS" 2>>"$OUT/syscalls-bench.log" | ns; }
perfstat() { perf stat -x, -o /dev/null -e "$1" -- "$STORM" "$CALLS" | ns; }

MODES=(plain floor2 floor1 timed untimed nostack)
log "$PAIRS rounds of: ${MODES[*]}"
for ((r = 1; r <= PAIRS; r++)); do
  # Order rotates each round so drift does not favour one mode.
  for m in $(python3 -c "m='${MODES[*]}'.split(); r=$r%len(m); print(' '.join(m[r:]+m[:r]))"); do
    case $m in
      plain) v=$(plain) ;;
      floor2) v=$(perfstat raw_syscalls:sys_enter,raw_syscalls:sys_exit) ;;
      floor1) v=$(perfstat raw_syscalls:sys_exit) ;;
      timed) v=$(counted) ;;
      untimed) v=$(counted --no-time) ;;
      nostack) v=$(counted --stack-every 0) ;;
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
print(f"  {'untraced':44} {med['plain']:8.1f}")
rows = (
    ('floor2', 'perf stat of sys_enter+sys_exit (floor)', False),
    ('floor1', 'perf stat of sys_exit only (floor)', False),
    ('timed', 'pkprof syscalls (default: timed)', True),
    ('untimed', 'pkprof syscalls --no-time', True),
    ('nostack', 'pkprof syscalls --stack-every 0', True),
)
for m, label, goal in rows:
    ratios = [by[m][r] / by['plain'][r] for r in by[m]]
    print(f"  {label:44} {med[m]:8.1f}   slowdown {100 * (statistics.median(ratios) - 1):+6.1f}% "
          f"(paired {100 * (min(ratios) - 1):+.0f}%..{100 * (max(ratios) - 1):+.0f}%)"
          + ("; goal <= +15%" if goal else ""))
for m, floor in (('timed', 'floor2'), ('untimed', 'floor1')):
    print(f"  pkprof's own programs above the floor ({m}): {med[m] - med[floor]:+.1f} ns per call")
print(f"  {'strace -f -c':44} {med['strace']:8.1f}   slowdown x{med['strace'] / med['plain']:.0f}")
PY
