#!/usr/bin/env bash
# Issue 16: where does a multi-call win? Runs crates/multicall/examples/mcbench.rs on each
# workload kind of the system call clustering paper, each as the plain loop, its multi-call
# versions (one crossing per item, K items per crossing as independent chains, + each io_uring
# lever: RESOLVE_CACHED, fixed files and buffers, registered ring fd, SQPOLL) and the best single
# Linux call where one exists, interleaved in rounds in one process (median of the per-round paired
# savings, wall and CPU); then counts each mode's system calls from outside with
# `perf stat -e raw_syscalls:sys_enter` (two runs of different lengths, the difference per unit,
# so set-up is not counted) to check the crossings the program reports.
#
# Usage:  bash bench/multicall.sh [ROUNDS]        (default 11 rounds; root only for perf)
# Env:    MC_WORKLOADS  default "files sock sock-tcp pipe copy copy-null"
#         MC_BATCH      items per multi-call (default 16)
#         MC_FILES      files in the tree (default 10000, 1 KiB each)
#         BENCH_DIR     where the files go (default $TMPDIR or /tmp; its file system matters)
#         MC_COUNT=0    skip the perf count
# Output: bench/out/multicall-latest.txt (and the TSV lines in bench/out/multicall-raw.tsv).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-11}
batch=${MC_BATCH:-16}
files=${MC_FILES:-10000}
workloads=${MC_WORKLOADS:-"files sock sock-tcp pipe copy copy-null"}
target=${CARGO_TARGET_DIR:-$PWD/target}
mkdir -p bench/out
out=bench/out/multicall-latest.txt
raw=bench/out/multicall-raw.tsv
: >"$raw"

echo "== building (cargo build --release -p pkprof-multicall --example mcbench)"
cargo build --release -p pkprof-multicall --example mcbench
bin=$target/release/examples/mcbench

args_for() {
  case $1 in
    files) echo "files --files $files" ;;
    sock) echo "sock" ;;
    sock-tcp) echo "sock --tcp" ;;
    pipe) echo "pipe" ;;
    copy) echo "copy" ;;
    copy-null) echo "copy --null" ;;
    *) echo "multicall.sh: unknown workload $1" >&2; exit 2 ;;
  esac
}

{
  echo "== kernel $(uname -r), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "   files in ${BENCH_DIR:-${TMPDIR:-/tmp}} ($(findmnt -n -o FSTYPE --target "${BENCH_DIR:-${TMPDIR:-/tmp}}" 2>/dev/null || echo '?'))"
  echo "   CPU vulnerability mitigations (what a kernel crossing pays):"
  for f in /sys/devices/system/cpu/vulnerabilities/*; do
    v=$(cat "$f")
    case $v in "Not affected") ;; *) echo "     $(basename "$f"): $v" ;; esac
  done
  echo "   io_uring_disabled = $(cat /proc/sys/kernel/io_uring_disabled 2>/dev/null || echo '?')"
} | tee "$out"

for w in $workloads; do
  # shellcheck disable=SC2046
  "$bin" $(args_for "$w") --rounds "$rounds" --batch "$batch" 2> >(grep '^TSV' >>"$raw") | tee -a "$out"
done

if [ "${MC_COUNT:-1}" = 1 ] && command -v perf >/dev/null &&
  perf stat -e raw_syscalls:sys_enter -x, true >/dev/null 2>&1; then
  echo | tee -a "$out"
  echo "== system calls per unit counted by perf stat -e raw_syscalls:sys_enter (whole process, threads included)" | tee -a "$out"
  count() { # workload-args mode iters -> sys_enter count
    # shellcheck disable=SC2086
    perf stat -x, -e raw_syscalls:sys_enter -- "$bin" $1 --rounds 1 --batch "$batch" --iters "$3" --only "$2" \
      2>&1 >/dev/null | grep raw_syscalls | cut -d, -f1
  }
  for w in $workloads; do
    a=$(args_for "$w")
    [ "$w" = files ] && a="files --files 2000"
    grep -P "^TSV\t$w" "$raw" >/dev/null 2>&1 || true
    # the mode names of this workload, from its TSV lines (title starts with the workload word)
    word=${w%%-*}
    mapfile -t modes < <(awk -F'\t' -v w="$word" 'index($2, w":") == 1 {print $3}' "$raw" | awk '!seen[$0]++')
    for m in "${modes[@]}"; do
      lo=$(count "$a" "$m" 20)
      hi=$(count "$a" "$m" 220)
      printf '   %-10s %-36s %8.2f\n' "$w" "$m" "$(echo "($hi - $lo) / 200" | bc -l)" | tee -a "$out"
    done
  done
fi
echo "(report in $out)"
