#!/usr/bin/env bash
# Agent soak (issue 13): `pkprof agent` (defaults: 19 Hz, 10 s windows, store in a temporary
# directory) under process, thread and socket churn for SECONDS: a shell loop starting short
# processes back to back, a python3 starting 20 threads every 0.5 s, and a loop of short-lived
# loopback TCP connections. Samples the agent's RSS every 5 s and prints it at start (after the
# first window), its median, peak and last, and the growth from the first to the last quarter's
# median (goal: flat within 10%), the same for its anonymous memory (RssAnon: its heap; RSS adds
# the pages of the binaries it reads in place) and its open descriptors; the agent's own CPU;
# windows written.
#
# Usage: bash bench/agent-soak.sh [SECONDS]    (default 300; 3600 for the hour of the goal; root)
set -euo pipefail

SECS=${1:-300}
[[ $SECS =~ ^[1-9][0-9]*$ ]] || { echo "usage: bash bench/agent-soak.sh [SECONDS]" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "bench: must run as root (pkprof loads BPF programs)" >&2; exit 1; }
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
OUT=bench/out
mkdir -p "$OUT"
export PATH="$HOME/.cargo/bin:$PATH"
log() { echo "bench: $*" >&2; }

log "building pkprof (cargo build --release -p pkprof)"
cargo build --release -p pkprof >&2
PKPROF="${CARGO_TARGET_DIR:-$ROOT/target}/release/pkprof"
STORE=$(mktemp -d)

PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$STORE"
}
trap cleanup EXIT

(while :; do /bin/true; done) &
PIDS+=($!)
python3 "$ROOT/bench/agent-soak-churn.py" &
PIDS+=($!)

"$PKPROF" agent --store "$STORE/w" --socket "$STORE/agent.sock" --listen "" 2>"$OUT/agent-soak.log" &
PK=$!
PIDS+=("$PK")
log "agent (pid $PK) under churn for $SECS s"
python3 - "$PK" "$SECS" "$STORE/w" <<'PY'
import os, statistics, sys, time
pid, secs, store = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
def status_kib(field):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(field):
            return int(line.split()[1])
def rss_kib():
    return status_kib("VmRSS:")
def cpu_s():
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
time.sleep(12)  # past start-up and the first window
t0, c0, rss, anon, fds = time.monotonic(), cpu_s(), [], [], []
while time.monotonic() < t0 + secs:
    rss.append(rss_kib())
    anon.append(status_kib("RssAnon:"))
    fds.append(len(os.listdir(f"/proc/{pid}/fd")))
    time.sleep(5)
used, elapsed = cpu_s() - c0, time.monotonic() - t0
q = max(1, len(rss) // 4)
first, last = statistics.median(rss[:q]), statistics.median(rss[-q:])
mib = lambda k: f"{k / 1024:.1f} MiB"
windows = sum(1 for n in os.listdir(store) if n.startswith("w-"))
print(f"agent soak: {elapsed:.0f} s under churn, {len(rss)} RSS samples, {windows} windows stored")
print(f"  RSS: {mib(rss[0])} at start, median {mib(statistics.median(rss))}, peak {mib(max(rss))}, last {mib(rss[-1])}")
print(f"  growth first->last quarter (medians): {100 * (last - first) / first:+.1f}%")
af, al = statistics.median(anon[:q]), statistics.median(anon[-q:])
print(f"  RssAnon (its heap): {mib(anon[0])} at start, peak {mib(max(anon))}, last {mib(anon[-1])}; "
      f"first->last quarter {100 * (al - af) / af:+.1f}%")
print(f"  open descriptors: {fds[0]} at start, peak {max(fds)}, last {fds[-1]}")
print(f"  agent's own CPU: {100 * used / elapsed:.3f}% of one CPU")
PY
