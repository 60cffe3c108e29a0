#!/usr/bin/env bash
# The system call clustering paper's copy experiment on io_uring multi-calls (crates/multicall):
# the 4 KiB read/write loop (A, copy_loop), each iteration's read+write in one multi-call
# (B, copy_multicall) and 16 iterations per multi-call (C, copy_multicall_looped), on files of the
# paper's sizes (80 KB, 925 KB, 2.28 MB) and 64 MiB, page cache warm; and D, the single Linux call
# `pkprof syscalls` suggests for a read/write loop (copy_single_call: copy_file_range).
#
# Usage:  bash bench/copy.sh [ROUNDS]          (default 30 rounds)
# Env:    BENCH_DIR   directory for the files (default $TMPDIR or /tmp; its file system matters:
#                     see the README-like notes printed at the end)
#         COPY_SIZES  sizes in bytes (default "81920 947200 2390753 67108864")
#         COPY_DST    "file" (default: a file next to the source) or "null" (/dev/null: no
#                     file-system write cost, the crossings show more)
#         PKPROF      a pkprof binary: also count each version's system calls with
#                     `pkprof syscalls --format json` and print total_calls
#
# Note: io_uring completes buffered writes inline only on file systems with FOP_BUFFER_WASYNC
# (XFS, btrfs); on ext4 and tmpfs each write is handed to an io-wq worker thread, which costs
# more than the crossing it saves. The script prints the file system it used.
#
# Per round and size the three programs run interleaved (order rotated every round so drift
# cancels), each copying the file a batch of times and timing only the copies (no process
# start-up, no ring set-up). Printed per size: median ns per copy of each version and the saving
# of B and C against A, as the median of the per-round paired savings (side by side, one run).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-30}
sizes=${COPY_SIZES:-"81920 947200 2390753 67108864"}
target=${CARGO_TARGET_DIR:-$PWD/target}

echo "== building (cargo build --release -p pkprof-multicall)"
cargo build --release -p pkprof-multicall
lib=$target/release/libpkprof_multicall.a
[ -f "$lib" ] || { echo "copy.sh: $lib missing after the build" >&2; exit 1; }

work=$(mktemp -d "${BENCH_DIR:-${TMPDIR:-/tmp}}/pkprof-copy.XXXXXX")
trap 'rm -rf "$work"' EXIT
src_dir=crates/multicall/c
for p in copy_loop copy_multicall copy_multicall_looped copy_single_call; do
  cc -O2 -Wall -Wextra -I crates/multicall/include -o "$work/$p" "$src_dir/$p.c" "$lib" \
    -lgcc_s -lutil -lrt -lpthread -lm -ldl
done
cc -O2 -Wall -Wextra -o "$work/syscall_cost" "$src_dir/syscall_cost.c"

for size in $sizes; do
  head -c "$size" /dev/urandom >"$work/src-$size"
  cat "$work/src-$size" >/dev/null # page cache warm
done

# Copies per program run: about 10 MB worth, at least 1.
batch_for() { local b=$((10000000 / $1)); [ "$b" -ge 1 ] || b=1; echo "$b"; }

case ${COPY_DST:-file} in
  file) dst=$work/dst ;;
  null) dst=/dev/null ;;
  *) echo "copy.sh: COPY_DST must be file or null" >&2; exit 2 ;;
esac
fstype=$(findmnt -n -o FSTYPE --target "$work" 2>/dev/null || stat -f -c %T "$work")
progs=(copy_loop copy_multicall copy_multicall_looped copy_single_call)
raw=$work/raw.tsv
echo "== $rounds rounds; files in $work ($fstype); destination $dst; kernel $(uname -r)"
for size in $sizes; do
  batch=$(batch_for "$size")
  printf '   size %9d: %d copies per run ' "$size" "$batch"
  for ((r = 0; r < rounds; r++)); do
    for ((k = 0; k < ${#progs[@]}; k++)); do
      p=${progs[$(((r + k) % ${#progs[@]}))]}
      out=$("$work/$p" "$work/src-$size" "$dst" "$batch")
      ns=${out##*total_ns=}
      printf '%s\t%s\t%s\t%s\t%s\n' "$size" "$r" "$p" "$batch" "$ns" >>"$raw"
    done
    if [ "$dst" != /dev/null ] && ! cmp -s "$work/src-$size" "$dst"; then
      echo "copy.sh: $p made a bad copy" >&2
      exit 1
    fi
    printf '.'
  done
  echo
done

echo
echo "== ns per copy (median over $rounds rounds) and saving against the loop"
echo "   saving = median over rounds of (A - X) / A, A and X measured in the same round;"
echo "   [p25, p75] of the per-round savings in brackets; paper: multicall 2.6-6.3%, looped 4-7.8%"
python3 - "$raw" <<'EOF'
import collections, statistics, sys
runs = collections.defaultdict(dict)  # (size, round) -> prog -> ns per copy
for line in open(sys.argv[1]):
    size, rnd, prog, batch, ns = line.split()
    runs[(int(size), int(rnd))][prog] = int(ns) / int(batch)
sizes = sorted({s for s, _ in runs})
def q(v, f):
    v = sorted(v); return v[min(len(v) - 1, int(f * len(v)))]
print(f"{'size':>10} {'A loop':>11} {'B multicall':>11} {'C looped':>11} {'D single':>11}   "
      f"{'B saving':>22}   {'C saving':>22}   {'D saving':>22}")
for s in sizes:
    rounds = [p for (size, _), p in sorted(runs.items()) if size == s]
    med = {p: statistics.median(r[p] for r in rounds) for p in rounds[0]}
    cols = []
    for p in ("copy_multicall", "copy_multicall_looped", "copy_single_call"):
        sav = [100 * (r["copy_loop"] - r[p]) / r["copy_loop"] for r in rounds]
        cols.append(f"{statistics.median(sav):+6.1f}% [{q(sav, .25):+5.1f},{q(sav, .75):+5.1f}]")
    print(f"{s:>10} {med['copy_loop']:>11.0f} {med['copy_multicall']:>11.0f} "
          f"{med['copy_multicall_looped']:>11.0f} {med['copy_single_call']:>11.0f}   "
          f"{cols[0]:>22}   {cols[1]:>22}   {cols[2]:>22}")
EOF

echo
echo "== syscall_cost (one kernel crossing vs one procedure call)"
"$work/syscall_cost" 2000000

if [ -n "${PKPROF:-}" ]; then
  echo
  echo "== system calls per copy, counted by $PKPROF syscalls (total_calls, whole process)"
  printf '%10s %13s %13s %13s %13s\n' size "A loop" "B multicall" "C looped" "D single"
  for size in $sizes; do
    line=$(printf '%10d' "$size")
    for p in "${progs[@]}"; do
      json=$work/syscalls-$p-$size.json
      if "$PKPROF" syscalls --format json -o "$json" -- "$work/$p" "$work/src-$size" "$dst" \
        >"$work/pkprof.log" 2>&1; then
        n=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["total_calls"])' "$json")
      else
        n="failed"
        echo "copy.sh: $PKPROF syscalls failed for $p (see below)" >&2
        tail -5 "$work/pkprof.log" >&2
      fi
      line+=$(printf ' %13s' "$n")
    done
    echo "$line"
  done
fi
