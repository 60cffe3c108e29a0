#!/usr/bin/env bash
# pkprof report/export benchmark on a synthetic profile (1,000,000 sample groups over 50,000
# distinct stacks): flat + call graph, pprof export, HTML, each timed with its peak memory, and
# `go tool pprof -top` on the same pprof file for comparison. No root needed. See bench/README.md.
#
# Usage: bash bench/report.sh [RUNS]      (default 3 runs of each; the median is reported)
set -euo pipefail
RUNS=${1:-3}
[[ $RUNS =~ ^[1-9][0-9]*$ ]] || { echo "usage: bash bench/report.sh [RUNS]" >&2; exit 2; }
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
OUT=bench/out
mkdir -p "$OUT"
export PATH="$HOME/.cargo/bin:/usr/local/go/bin:$PATH"
log() { echo "bench: $*" >&2; }
command -v go >/dev/null || { log "go not found (needed for go tool pprof)"; exit 1; }
[ -x /usr/bin/time ] || { log "/usr/bin/time not found (apt-get install time)"; exit 1; }

log "building (cargo build --release -p pkprof; the synthetic example)"
cargo build --release -p pkprof >&2
cargo build --release -p pkprof-profile --example synthetic >&2
PKPROF=target/release/pkprof
PROFILE="$OUT/synthetic-1m.pkprof"
target/release/examples/synthetic "$PROFILE" 1000000 50000 5000 1 >&2
go tool pprof -h >/dev/null 2>&1 || true # builds the pprof tool once, outside the timings

RAW="$OUT/raw-report.tsv"
: >"$RAW"
# Runs a command RUNS times under /usr/bin/time; records wall seconds and peak RSS (KiB).
timed() {
  local what=$1; shift
  for ((i = 1; i <= RUNS; i++)); do
    /usr/bin/time -f "%e %M" -o "$OUT/time.txt" "$@" >/dev/null 2>"$OUT/time-stderr.txt" || {
      log "$what failed:"; cat "$OUT/time-stderr.txt" >&2; exit 1; }
    read -r secs kib <"$OUT/time.txt"
    printf '%s\t%s\t%s\n' "$what" "$secs" "$kib" >>"$RAW"
  done
}
timed "flat + call graph" "$PKPROF" report "$PROFILE" --flat --graph
timed "pprof export" "$PKPROF" report "$PROFILE" --format pprof -o "$OUT/synthetic.pb.gz"
timed "HTML" "$PKPROF" report "$PROFILE" --format html -o "$OUT/synthetic.html"
timed "go tool pprof -top" go tool pprof -top "$OUT/synthetic.pb.gz"

python3 - "$RAW" "$OUT/synthetic.html" <<'PY' | tee "$OUT/report-latest.txt"
import os, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    what, secs, kib = line.rstrip("\n").split("\t")
    rows.setdefault(what, []).append((float(secs), int(kib)))
goals = {"flat + call graph": 2.0, "pprof export": 2.0, "HTML": 3.0}
print("synthetic profile: 1,000,000 sample groups, 50,000 stacks, 5,000 frames; medians")
for what, runs in rows.items():
    secs = statistics.median(r[0] for r in runs)
    mib = max(r[1] for r in runs) / 1024
    goal = goals.get(what)
    verdict = "" if goal is None else f"  goal <= {goal:.0f} s: {'met' if secs <= goal else 'MISSED'}; <= 500 MB: {'met' if mib <= 500 else 'MISSED'}"
    print(f"{what:20} {secs:6.2f} s  peak {mib:7.1f} MiB{verdict}")
flat = statistics.median(r[0] for r in rows["flat + call graph"])
go = statistics.median(r[0] for r in rows["go tool pprof -top"])
print(f"pkprof flat + call graph vs go tool pprof -top on the same data: {flat / go:.2f}x the time")
print(f"HTML file: {os.path.getsize(sys.argv[2]) / 2**20:.1f} MiB")
PY
