#!/usr/bin/env bash
# Issue 16, "advice that is measured": is the saving `pkprof syscalls` estimates for a
# suggestion within 30% of the saving measured when the suggestion is applied?
#
# Workloads: the paper's copy experiment of bench/copy.sh (crates/multicall/c): A, the 4 KiB
# read/write loop, is profiled by `pkprof syscalls` with a cost table from
# `pkprof syscalls --calibrate`; its read -> write loop cluster carries an estimate for each
# replacement the advice weighs (clusters[].alternatives in the JSON report): B, one multi-call
# per iteration (copy_multicall), and D, copy_file_range (copy_single_call). Then A, B and D run
# interleaved for ROUNDS rounds (order rotated each round), each timing only its copies, and the
# measured saving per copy of B and D against A (median of the per-round paired differences) is
# printed beside the estimate, with estimate / measured and whether it is within 30%.
#
# Then the workloads of bench/multicall.sh where a batch wins (ADVICE_WORKLOADS, default "files
# sock sock-tcp pipe"): mcbench's plain mode is profiled by `pkprof syscalls` with the same table,
# and each replacement the advice weighed for the workload's cluster (one multi-call per
# iteration, N iterations per multi-call, the single call) is set beside the mode of mcbench that
# applies it: the estimate per unit (saved_ns / iterations x iterations per unit) against the
# median of mcbench's per-round paired wall savings (plain - mode) per unit. A replacement whose
# basis names the fixed-file variant is compared with the "+ fixed files" mode where there is one.
#
# Usage:  bash bench/advice.sh [ROUNDS]          (default 10; root: pkprof syscalls needs BPF)
# Env:    PKPROF       pkprof binary (default: target/release/pkprof, built here)
#         CALIBRATE    full (default) or quick: the calibration run first, into a cache of its own
#         ADVICE_CACHE a directory holding a calibration.json to use instead of calibrating
#         COPY_SIZES   sizes in bytes (default "81920 947200 2390753 16777216")
#         BENCH_DIR    directory for the files (default /var/tmp, as the calibration's "file")
#         MC_LIB       a libpkprof_multicall.a to link instead of building the release one (with
#                      PKPROF; a debug pkprof and a debug library give a direction only)
#         MCBENCH      an mcbench binary instead of building the release example
#         ADVICE_COPY=0       skip the copy workloads
#         ADVICE_WORKLOADS    mcbench workloads (default "files sock sock-tcp pipe"; "" for none)
#         MC_FILES     files in the files workload's tree (default 2000)
#
# Notes: estimates assume the calibrated 4 KiB transfers and a page-cache file on the file system
# of /var/tmp (the calibration prints which); put BENCH_DIR on the same file system. The estimate
# is for the profiled run (REPEAT copies), divided by REPEAT. Each copy goes to a new file (see
# crates/multicall/c/copy_common.h: rewriting one in place on ext4 times the disk). Sockets are
# estimated on the table's loopback TCP figures, reads and writes on its page-cache file (the
# profile does not say what a descriptor is): the unix and pipe workloads show what that costs.
# A negative saving is a loss: the goal is met when the estimate has the right sign and is within
# 30% of the measure.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-10}
sizes=${COPY_SIZES:-"81920 947200 2390753 16777216"}
target=${CARGO_TARGET_DIR:-$PWD/target}

if [ -z "${PKPROF:-}" ]; then
  echo "== building (cargo build --release -p pkprof -p pkprof-multicall)"
  cargo build --release -p pkprof -p pkprof-multicall
  PKPROF=$target/release/pkprof
elif [ -z "${MC_LIB:-}" ]; then
  cargo build --release -p pkprof-multicall
fi
workloads=${ADVICE_WORKLOADS-"files sock sock-tcp pipe"}
if [ -n "$workloads" ] && [ -z "${MCBENCH:-}" ]; then
  cargo build --release -p pkprof-multicall --example mcbench
  MCBENCH=$target/release/examples/mcbench
fi
lib=${MC_LIB:-$target/release/libpkprof_multicall.a}
[ -f "$lib" ] || { echo "advice.sh: $lib missing after the build" >&2; exit 1; }

work=$(mktemp -d "${BENCH_DIR:-/var/tmp}/pkprof-advice.XXXXXX")
trap 'rm -rf "$work"' EXIT
progs=(copy_loop copy_multicall copy_single_call)
for p in "${progs[@]}"; do
  cc -O2 -Wall -Wextra -I crates/multicall/include -o "$work/$p" "crates/multicall/c/$p.c" "$lib" \
    -lgcc_s -lutil -lrt -lpthread -lm -ldl
done

cache=${ADVICE_CACHE:-$work/cache}
if [ -z "${ADVICE_CACHE:-}" ]; then
  echo "== $PKPROF syscalls --calibrate=${CALIBRATE:-full}"
  PKPROF_CACHE_DIR=$cache "$PKPROF" syscalls --calibrate="${CALIBRATE:-full}"
fi
[ -f "$cache/calibration.json" ] || { echo "advice.sh: no $cache/calibration.json" >&2; exit 1; }

batch_for() { local b=$((10000000 / $1)); [ "$b" -ge 1 ] || b=1; echo "$b"; }
fstype=$(findmnt -n -o FSTYPE --target "$work" 2>/dev/null || stat -f -c %T "$work")
echo
echo "== files in $work ($fstype), kernel $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg)"
score=$work/score
: >"$score"
if [ "${ADVICE_COPY:-1}" = 1 ]; then
est=$work/estimates.tsv
raw=$work/raw.tsv
: >"$est"
: >"$raw"
for size in $sizes; do
  head -c "$size" /dev/urandom >"$work/src-$size"
  cat "$work/src-$size" >/dev/null # page cache warm
  batch=$(batch_for "$size")
  json=$work/A-$size.json
  PKPROF_CACHE_DIR=$cache "$PKPROF" syscalls --format json -o "$json" -- \
    "$work/copy_loop" "$work/src-$size" "$work/dst" "$batch" >/dev/null 2>"$work/pkprof.log" || {
    echo "advice.sh: pkprof syscalls failed:" >&2
    tail -5 "$work/pkprof.log" >&2
    exit 1
  }
  # The read -> write loop's alternatives: size, kind, saved ns per copy (median, low, high),
  # iterations per copy, % of the cluster.
  python3 - "$json" "$size" "$batch" >>"$est" <<'EOF'
import json, sys
report, size, batch = json.load(open(sys.argv[1])), sys.argv[2], int(sys.argv[3])
loops = [c for c in report["clusters"] if c["shape"] == "loop" and sorted(c["path"]) == ["read", "write"]]
if not loops:
    sys.exit(f"advice.sh: no read -> write loop in the report for size {size}")
c = loops[0]
if not c.get("alternatives"):
    sys.exit("advice.sh: the report has no estimates (no cost table?): " + json.dumps(c.get("saving")))
for a in c["alternatives"]:
    s = a["saving"]
    # B runs one multi-call per iteration: the batch of several iterations (a multicall
    # alternative too, "..., N iterations per batch") is not what it measures.
    if (a["replacement"] or "").endswith("per batch"):
        continue
    if s["status"] != "estimated":
        print(f"{size}\t{a['kind']}\tnan\tnan\tnan\t{c['count'] / batch:.0f}\tnan")
        continue
    pct = 100 * s["saved_ns"] / s["cluster_ns"] if s["cluster_ns"] else 0
    print(f"{size}\t{a['kind']}\t{s['saved_ns'] / batch:.0f}\t{s['saved_low_ns'] / batch:.0f}\t"
          f"{s['saved_high_ns'] / batch:.0f}\t{c['count'] / batch:.0f}\t{pct:.1f}")
EOF
  printf '   size %9d: %d copies per run ' "$size" "$batch"
  for ((r = 0; r < rounds; r++)); do
    for ((k = 0; k < ${#progs[@]}; k++)); do
      p=${progs[$(((r + k) % ${#progs[@]}))]}
      out=$("$work/$p" "$work/src-$size" "$work/dst" "$batch")
      printf '%s\t%s\t%s\t%s\t%s\n' "$size" "$r" "$p" "$batch" "${out##*total_ns=}" >>"$raw"
    done
    cmp -s "$work/src-$size" "$work/dst" || { echo "advice.sh: a bad copy" >&2; exit 1; }
    printf '.'
  done
  echo
done

echo
echo "== estimated (pkprof syscalls, from the cost table) against measured saving per copy"
echo "   measured = median over rounds of (A - X), A and X in the same round [p25, p75];"
echo "   estimate [low..high from the table's spreads]; within 30%: |est - meas| <= 0.3 |meas|"
python3 - "$est" "$raw" "$score" <<'EOF'
import collections, statistics, sys
est = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    size, kind, mid, lo, hi, iters, pct = line.split("\t")
    est[int(size)][kind] = (float(mid), float(lo), float(hi), iters, float(pct))
runs = collections.defaultdict(dict)
for line in open(sys.argv[2]):
    size, rnd, prog, batch, ns = line.split()
    runs[(int(size), int(rnd))][prog] = int(ns) / int(batch)
def q(v, f):
    v = sorted(v); return v[min(len(v) - 1, int(f * len(v)))]
names = {"multicall": ("copy_multicall", "B multi-call per iteration"),
         "single_call": ("copy_single_call", "D copy_file_range")}
print(f"{'size':>10} {'iters':>6} {'A us/copy':>10}  {'replacement':<27} {'estimate us':>24} "
      f"{'est %':>7} {'measured us':>24} {'meas %':>7} {'est/meas':>8}  within 30%")
met = total = 0
for size in sorted(est):
    rounds = [p for (s, _), p in sorted(runs.items()) if s == size]
    a = statistics.median(r["copy_loop"] for r in rounds)
    for kind, (prog, label) in names.items():
        if kind not in est[size]:
            continue
        mid, lo, hi, iters, pct = est[size][kind]
        diff = [r["copy_loop"] - r[prog] for r in rounds]
        meas = statistics.median(diff)
        mpct = 100 * meas / a
        ratio = mid / meas if meas else float("nan")
        ok = abs(mid - meas) <= 0.3 * abs(meas)
        met += ok; total += 1
        e = f"{mid / 1e3:+.1f} [{lo / 1e3:+.1f}..{hi / 1e3:+.1f}]"
        m = f"{meas / 1e3:+.1f} [{q(diff, .25) / 1e3:+.1f}..{q(diff, .75) / 1e3:+.1f}]"
        print(f"{size:>10} {iters:>6} {a / 1e3:>10.1f}  {label:<27} {e:>24} {pct:>+6.1f}% {m:>24} "
              f"{mpct:>+6.1f}% {ratio:>8.2f}  {'yes' if ok else 'NO'}")
print(f"\n{met} of {total} copy estimates within 30% of the measured saving")
open(sys.argv[3], "a").write(f"{met} {total}\n")
EOF
fi

# ---- the workloads of bench/multicall.sh where a batch wins
mc_batch=16
for w in $workloads; do
  case $w in
    files) args=(files --files "${MC_FILES:-2000}") plain="plain openat+read+close" ;;
    sock) args=(sock) plain="plain recvmsg+sendmsg" ;;
    sock-tcp) args=(sock --tcp) plain="plain recvmsg+sendmsg" ;;
    pipe) args=(pipe) plain="plain read+write" ;;
    *) echo "advice.sh: unknown workload $w (files sock sock-tcp pipe)" >&2; exit 2 ;;
  esac
  json=$work/mc-$w.json
  echo
  echo "== $w: pkprof syscalls on mcbench's '$plain', then mcbench ${args[*]} --rounds $rounds"
  PKPROF_CACHE_DIR=$cache BENCH_DIR=$work "$PKPROF" syscalls --format json -o "$json" -- \
    "$MCBENCH" "${args[@]}" --batch "$mc_batch" --rounds 3 --only "$plain" >/dev/null 2>"$work/pkprof.log" || {
    echo "advice.sh: pkprof syscalls failed:" >&2
    tail -5 "$work/pkprof.log" >&2
    exit 1
  }
  BENCH_DIR=$work "$MCBENCH" "${args[@]}" --batch "$mc_batch" --rounds "$rounds" 2>&1 >/dev/null |
    grep '^TSV' >"$work/mc-$w.tsv"
  python3 - "$w" "$json" "$work/mc-$w.tsv" "$mc_batch" "$score" <<'EOF'
import json, statistics, sys
w, report, tsv, batch, score = sys.argv[1], json.load(open(sys.argv[2])), sys.argv[3], int(sys.argv[4]), sys.argv[5]
# The cluster the workload repeats, its iterations per mcbench unit, and the mcbench mode that
# applies each replacement: (per iteration, N iterations per batch, + fixed files, single call).
spec = {
    "files": (["close", "openat", "read"], batch, "multicall 1 file/crossing",
              f"multicall {batch} files/crossing", None, None),
    "sock": (["recvmsg", "sendmsg"], batch, "multicall 1 request/crossing",
             f"multicall {batch} requests/crossing", "  + fixed files", None),
    "pipe": (["read", "write"], min(batch, 15), None,
             f"multicall ({min(batch, 15)} read+write linked)", "  + fixed files", "single call: splice"),
}[w.split("-")[0]]
names, per_unit, per_iter_mode, iters_mode, fixed_mode, single_mode = spec
modes = {}
for line in open(tsv):
    f = line.rstrip("\n").split("\t")
    modes[f[2]] = dict(wall=float(f[3]), saved=float(f[8]), p25=float(f[9]), p75=float(f[10]))
plain = next(iter(modes.values()))["wall"]
cands = [c for c in report["clusters"] if sorted(n["name"] if isinstance(n, dict) else n for n in c["path"]) == names]
if not cands:
    sys.exit(f"advice.sh: no {' / '.join(names)} cluster in the {w} report")
c = max(cands, key=lambda c: c["count"])
print(f"   cluster {c['shape']} {' -> '.join(n['name'] if isinstance(n, dict) else n for n in c['path'])}, "
      f"{c['count']} iterations; suggested: {c['suggestion']['replacement']}; {per_unit} iterations per unit")
print(f"   {'replacement':<52} {'estimate us/unit':>26} {'est %':>7} {'mcbench mode':<34} "
      f"{'measured us/unit':>24} {'meas %':>7} {'est/meas':>8}  within 30%")
met = total = 0
for a in c.get("alternatives", []):
    r, s = a["replacement"] or a["kind"], a["saving"]
    if a["kind"] == "single_call":
        mode = single_mode
    elif r.endswith("per batch"):
        mode = fixed_mode if fixed_mode and "(fixed file)" in s.get("basis", "") else iters_mode
    else:
        mode = per_iter_mode
    if s["status"] != "estimated":
        print(f"   {r:<52} {'unknown: ' + s.get('why', '')[:60]}")
        continue
    k = per_unit / c["count"]
    mid, lo, hi = s["saved_ns"] * k, s["saved_low_ns"] * k, s["saved_high_ns"] * k
    e = f"{mid / 1e3:+.2f} [{lo / 1e3:+.2f}..{hi / 1e3:+.2f}]"
    epct = 100 * s["saved_ns"] / s["cluster_ns"] if s["cluster_ns"] else 0
    if mode is None or mode not in modes:
        print(f"   {r:<52} {e:>26} {epct:>+6.1f}% {'(no such mode)':<34}")
        continue
    m = modes[mode]
    meas = m["saved"]
    ok = abs(mid - meas) <= 0.3 * abs(meas)
    met += ok
    total += 1
    ms = f"{meas / 1e3:+.2f} [{m['p25'] / 1e3:+.2f}..{m['p75'] / 1e3:+.2f}]"
    print(f"   {r:<52} {e:>26} {epct:>+6.1f}% {mode.strip():<34} {ms:>24} "
          f"{100 * meas / plain:>+6.1f}% {mid / meas if meas else float('nan'):>8.2f}  {'yes' if ok else 'NO'}")
open(score, "a").write(f"{met} {total}\n")
EOF
done

echo
awk '{ m += $1; t += $2 } END { printf "== %d of %d estimates within 30%% of the measured saving (copies and workloads)\n", m, t }' "$score"
