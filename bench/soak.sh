#!/usr/bin/env bash
# pkprof soak: `pkprof top --batch -d 1 --listen` for a while under heavy process and thread churn
# (a shell loop spawning processes, and a python3 starting 20 threads every 0.5 s), scraped every
# second. Reports pkprof's RSS (start, median, peak), its own CPU, the series per scrape and the
# counter resets seen (a counter lower than its previous sample, as Prometheus's resets() counts).
# See bench/README.md.
#
# Usage: bash bench/soak.sh [SECONDS]    (default 120; run as root)
# Env:   SOAK_PORT=N    port for --listen (default 19464)
set -euo pipefail

SECS=${1:-120}
[[ $SECS =~ ^[1-9][0-9]*$ ]] || { echo "usage: bash bench/soak.sh [SECONDS]" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "bench: must run as root (pkprof loads BPF programs)" >&2; exit 1; }
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
OUT=bench/out
mkdir -p "$OUT"
export PATH="$HOME/.cargo/bin:$PATH"
PORT=${SOAK_PORT:-19464}
log() { echo "bench: $*" >&2; }

log "building pkprof (cargo build --release -p pkprof)"
cargo build --release -p pkprof >&2
PKPROF="${CARGO_TARGET_DIR:-$ROOT/target}/release/pkprof"

# Everything started here is stopped on exit, by process id.
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT

# The churn: short processes one after the other, and a process whose threads come and go.
(while :; do /bin/true; done) &
PIDS+=($!)
python3 - <<'PY' &
import threading, time
def work():
    sum(range(20000))
while True:
    ts = [threading.Thread(target=work) for _ in range(20)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    time.sleep(0.5)
PY
PIDS+=($!)

"$PKPROF" top --batch -d 1 --listen "127.0.0.1:$PORT" >/dev/null 2>"$OUT/soak-pkprof.log" &
PK=$!
PIDS+=("$PK")
log "pkprof (pid $PK) under churn for $SECS s, scraping http://127.0.0.1:$PORT/metrics every second"

python3 - "$PK" "$PORT" "$SECS" <<'PY'
import statistics, sys, time, urllib.request
pid, port, secs = int(sys.argv[1]), sys.argv[2], float(sys.argv[3])
hz = 100  # USER_HZ: /proc/PID/stat's clock ticks

def rss_kib():
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])

def cpu_s():
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / hz  # utime, stime

def scrape():
    try:
        return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    except OSError:
        return None

deadline = time.time() + 30
while (body := scrape()) is None or "pkprof_cpu_seconds_total{" not in body:
    if time.time() > deadline:
        sys.exit("bench: no metrics from pkprof within 30 s")
    time.sleep(0.2)
t0, c0 = time.monotonic(), cpu_s()
rss, series, last, resets, examples, scrapes = [], [], {}, 0, [], 0
end = t0 + secs
while time.monotonic() < end:
    time.sleep(1)
    rss.append(rss_kib())
    body = scrape()
    if body is None:
        continue
    scrapes += 1
    counters, n = set(), 0
    for line in body.splitlines():
        if line.startswith("# TYPE ") and line.endswith(" counter"):
            counters.add(line.split()[2])
        elif line and not line.startswith("#"):
            n += 1
            key, value = line.rsplit(" ", 1)
            if key.split("{")[0] in counters:
                v = float(value)
                if key in last and v < last[key]:
                    resets += 1
                    if len(examples) < 5:
                        examples.append(f"{key} {last[key]} -> {v}")
                last[key] = v
    series.append(n)
if not series:
    sys.exit("bench: no scrape succeeded")
elapsed, used = time.monotonic() - t0, cpu_s() - c0
mib = lambda k: f"{k / 1024:.1f} MiB"
print(f"soak: {elapsed:.0f} s of `pkprof top --batch -d 1 --listen` under churn, {scrapes} scrapes")
print(f"  RSS: {mib(rss[0])} at start, median {mib(statistics.median(rss))}, peak {mib(max(rss))}")
print(f"  pkprof's own CPU: {100 * used / elapsed:.2f}% of one CPU ({used:.1f} s)")
print(f"  series per scrape: {min(series)}-{max(series)}")
print(f"  counter resets: {resets}" + "".join(f"\n    {e}" for e in examples))
PY
