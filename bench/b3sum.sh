#!/usr/bin/env bash
# Issue 16, a program nobody here wrote, end to end (as the clustering paper did with mpeg_play):
# b3sum 1.8.7 (crates.io, the BLAKE3 command-line tool) hashing a tree of small files. Its
# `pkprof syscalls` report shows the per-file chain openat -> lseek -> read -> read -> close (then
# the write of the line). bench/b3sum-multicall.patch applies the suggested change: the files are
# read 16 at a time in one multi-call (openat into a direct descriptor -> read -> close, one
# independent chain per file, crates/multicall); larger files, errors and `-` keep the original
# path, so the output is byte-for-byte the same (checked). A third version runs the patched binary
# with B3SUM_PREFETCH=sequential: the same restructured loop as plain system calls (openat, read,
# close per file: 3 calls instead of the original's 5), which separates what the batching saves
# from what the restructuring alone saves.
#
# Usage:  bash bench/b3sum.sh [ROUNDS]        (default 15 rounds of the three versions)
# Env:    B3_FILES   files in the tree (default 10000)     B3_SIZE  bytes per file (default 1024)
#         BENCH_DIR  where the tree goes (default $TMPDIR or /tmp)
#         PKPROF     a pkprof binary: show the clusters of `pkprof syscalls` on the original
# Fetches b3sum with `cargo fetch` (crates.io), builds the original and the patched copy in a
# temporary directory (never in this repository), times PAIRS interleaved runs of each (order
# alternates), and prints the median of the per-pair savings of wall and CPU (user+sys of the
# process, from wait4), and each version's system calls (perf stat -e raw_syscalls:sys_enter).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
pairs=${1:-15}
nfiles=${B3_FILES:-10000}
size=${B3_SIZE:-1024}
version=1.8.7
work=$(mktemp -d "${BENCH_DIR:-${TMPDIR:-/tmp}}/pkprof-b3sum.XXXXXX")
trap 'rm -rf "$work"' EXIT

echo "== fetching b3sum $version (cargo fetch)"
mkdir -p "$work/fetch/src"
printf '[package]\nname = "fetch"\nversion = "0.0.0"\nedition = "2021"\n[dependencies]\nb3sum = "=%s"\n[workspace]\n' \
  "$version" >"$work/fetch/Cargo.toml"
echo 'fn main() {}' >"$work/fetch/src/main.rs"
(cd "$work/fetch" && cargo fetch -q)
src=$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/b3sum-$version 2>/dev/null | head -1)
[ -n "$src" ] || { echo "b3sum.sh: b3sum-$version source not found after cargo fetch" >&2; exit 1; }
cp -r "$src" "$work/orig"
cp -r "$src" "$work/patched"
(cd "$work/patched" && patch -s -p1 <"$repo/bench/b3sum-multicall.patch")
cat >>"$work/patched/Cargo.toml" <<TOML

[dependencies.pkprof-multicall]
path = "$repo/crates/multicall"

[dependencies.libc]
version = "0.2"
TOML

echo "== building both (cargo build --release, one target directory)"
export CARGO_TARGET_DIR=$work/target
(cd "$work/orig" && cargo build -q --release && cp "$CARGO_TARGET_DIR/release/b3sum" "$work/b3sum-orig")
(cd "$work/patched" && cargo build -q --release && cp "$CARGO_TARGET_DIR/release/b3sum" "$work/b3sum-multicall")

echo "== $nfiles files of $size B in $work/tree ($(findmnt -n -o FSTYPE --target "$work" 2>/dev/null || echo '?')), page cache warm"
python3 - "$work/tree" "$nfiles" "$size" <<'PY'
import os, sys
root, n, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for i in range(n):
    d = os.path.join(root, "d%03d" % (i // 100))
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "f%05d" % i), "wb") as f:
        f.write(os.urandom(size))
PY
(cd "$work/tree" && find . -type f | sort >"$work/list")

# Same output, byte for byte (and a bad argument handled alike).
printf '#!/bin/sh\nB3SUM_PREFETCH=sequential exec "%s" "$@"\n' "$work/b3sum-multicall" >"$work/b3sum-sequential"
chmod +x "$work/b3sum-sequential"
for v in orig sequential multicall; do
  (cd "$work/tree" && xargs -a "$work/list" "$work/b3sum-$v" >"$work/out-$v" 2>&1; \
    "$work/b3sum-$v" ./d000/f00000 /nonexistent ./d000 >>"$work/out-$v" 2>&1 || echo "exit $?" >>"$work/out-$v")
done
cmp -s "$work/out-orig" "$work/out-sequential" || { echo "b3sum.sh: the sequential prefetch prints something else" >&2; exit 1; }
cmp -s "$work/out-orig" "$work/out-multicall" || { echo "b3sum.sh: the patched b3sum prints something else" >&2; diff "$work/out-orig" "$work/out-multicall" | head >&2; exit 1; }
echo "   outputs identical ($(wc -l <"$work/out-orig") lines, errors included)"

if [ -n "${PKPROF:-}" ]; then
  echo
  echo "== $PKPROF syscalls --top 3 -- b3sum (original)"
  (cd "$work/tree" && "$PKPROF" syscalls --top 3 -- "$work/b3sum-orig" $(cat "$work/list") 2>&1 >/dev/null | head -40) || true
fi

echo
echo "== $pairs rounds of original / sequential prefetch / multi-call, order rotated; b3sum FILES > /dev/null"
python3 - "$work" "$pairs" <<'PY'
import os, statistics, subprocess, sys, time
work, pairs = sys.argv[1], int(sys.argv[2])
files = open(os.path.join(work, "list")).read().split()
exe = {"orig": "b3sum-orig", "multicall": "b3sum-multicall", "sequential": "b3sum-multicall"}
def run(v):
    env = dict(os.environ)
    if v == "sequential":
        env["B3SUM_PREFETCH"] = "sequential"
    t0 = time.perf_counter()
    p = subprocess.Popen([os.path.join(work, exe[v])] + files, cwd=os.path.join(work, "tree"),
                         stdout=subprocess.DEVNULL, env=env)
    _, status, ru = os.wait4(p.pid, 0)
    assert status == 0, status
    return time.perf_counter() - t0, ru.ru_utime + ru.ru_stime
versions = ("orig", "sequential", "multicall")
for v in versions:
    run(v)  # warm
rows = []
for i in range(pairs):
    order = versions[i % 3:] + versions[:i % 3]  # rotated every round
    rows.append({v: run(v) for v in order})
def q(v, f):
    v = sorted(v); return v[min(len(v) - 1, int(f * len(v)))]
def saving(base, v, k):
    sav = [100 * (r[base][k] - r[v][k]) / r[base][k] for r in rows]
    return f"{statistics.median(sav):+5.1f}% [{q(sav, .25):+5.1f},{q(sav, .75):+5.1f}]"
print("   medians; savings are medians of the per-round paired savings [p25,p75]")
print(f"   {'':4}  {'original':>10} {'sequential':>11} {'multi-call':>11}   {'multi-call vs original':>24}"
      f"   {'multi-call vs sequential':>24}")
for k, name in ((0, "wall"), (1, "cpu")):
    m = {v: statistics.median(r[v][k] for r in rows) * 1e3 for v in versions}
    print(f"   {name:4}  {m['orig']:8.1f}ms {m['sequential']:9.1f}ms {m['multicall']:9.1f}ms"
          f"   {saving('orig', 'multicall', k):>24}   {saving('sequential', 'multicall', k):>24}")
PY

if command -v perf >/dev/null && perf stat -e raw_syscalls:sys_enter -x, true >/dev/null 2>&1; then
  echo
  echo "== system calls (perf stat -e raw_syscalls:sys_enter, whole process)"
  for v in orig sequential multicall; do
    n=$(cd "$work/tree" && perf stat -x, -e raw_syscalls:sys_enter -- "$work/b3sum-$v" $(cat "$work/list") 2>&1 >/dev/null | grep raw_syscalls | cut -d, -f1)
    printf '   %-10s %8s\n' "$v" "$n"
  done
fi
