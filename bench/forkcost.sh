#!/usr/bin/env bash
# Per-event cost of pkprof's programs under a fork-heavy load (a `/bin/true` loop), by the kernel's
# BPF stats, for several pkprof builds alternated in one run: the way the levers of
# bench/README.md "Levers measured" on process creation were judged. Each round runs, per build,
# `top --json --bpf-stats` while the loop runs BENCH_SECS seconds, and reads the ns per run of the
# programs the loop exercises from top's last frame; the script prints each program's median per
# build. A label ending in O runs that build with the wall chain off (as bench/wall.sh's O).
#
# Usage: bash bench/forkcost.sh ROUNDS LABEL=PKPROF_BINARY...      (root)
# Env:   BENCH_SECS=S   seconds of fork loop per run (default 4)
set -euo pipefail
ROUNDS=${1:-}
shift || true
[[ $ROUNDS =~ ^[1-9][0-9]*$ && $# -gt 0 ]] || {
  echo "usage: bash bench/forkcost.sh ROUNDS LABEL=PKPROF_BINARY..." >&2
  exit 2
}
[ "$(id -u)" = 0 ] || { echo "bench: must run as root (pkprof loads BPF programs)" >&2; exit 1; }
SECS=${BENCH_SECS:-4}
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
: >"$OUT/res.tsv"
for ((r = 1; r <= ROUNDS; r++)); do
  for spec in "$@"; do
    label=${spec%%=*}
    bin=${spec#*=}
    env=()
    [ "${label%O}" != "$label" ] && env=(PKPROF_TEST_HIDE_TRACEPOINTS=sched:sched_wakeup_new)
    f="$OUT/$label.json"
    env "${env[@]}" "$bin" top --json --bpf-stats -d 0.5 >"$f" 2>"$f.err" &
    pid=$!
    for _ in $(seq 750); do [ -s "$f" ] && break; sleep 0.02; done
    SECS=$SECS bash -c 'end=$((SECONDS + SECS)); while [ $SECONDS -lt $end ]; do /bin/true; done'
    sleep 0.7
    kill -TERM "$pid"
    wait "$pid" || true
    python3 - "$f" "$label" >>"$OUT/res.tsv" <<'PY'
import json, sys
last = None
for line in open(sys.argv[1]):
    last = json.loads(line)
for p in last["progs"]:
    if p["run_cnt"]:
        print(sys.argv[2], p["name"], p["run_ns"] / p["run_cnt"], sep="\t")
PY
  done
  echo "bench: round $r done" >&2
done
python3 - "$OUT/res.tsv" <<'PY'
import statistics, sys
d = {}
for line in open(sys.argv[1]):
    label, prog, ns = line.rstrip("\n").split("\t")
    d.setdefault(prog, {}).setdefault(label, []).append(float(ns))
labels = sorted({l for v in d.values() for l in v})
print("ns per run (median over rounds) under a /bin/true fork loop")
print(f"{'program':26s}" + "".join(f"{l:>12s}" for l in labels))
for prog in ("on_sched_switch", "on_process_fork", "on_process_exec", "on_process_exit",
             "on_sched_wakeup_new", "on_target_free", "on_task_rename"):
    if prog in d:
        print(f"{prog:26s}" + "".join(
            f"{statistics.median(d[prog][l]):12.1f}" if l in d[prog] else f"{'-':>12s}"
            for l in labels))
PY
