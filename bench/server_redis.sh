#!/usr/bin/env bash
# Issue 12 §3, a real server nobody here wrote: what `pkprof top` bills each of two clients of
# Debian's redis-server (docs/design.md, "Server work billed to its clients").
#
# redis-server (single-threaded event loop) listens on a unix socket (or loopback TCP); two
# redis-benchmark clients run at once: A with 3 connections and N*3 SET requests, B with 1
# connection and N requests. Every request is the same command, so the truth is the request
# counts: A should be billed 3x what B is. Printed: redis's own CPU time, what it served for
# others (billed to a client), and each client's +SRV bill, its items and its bill per request.
#
# Usage:  bash bench/server_redis.sh [unix|tcp] [N]    (default unix 20000; root: BPF)
# Env:    PKPROF   pkprof binary (default: target/debug/pkprof)
set -euo pipefail
cd "$(dirname "$0")/.."
kind=${1:-unix}
n=${2:-20000}
pkprof=${PKPROF:-target/debug/pkprof}
command -v redis-server >/dev/null && command -v redis-benchmark >/dev/null || {
  echo "server_redis: redis-server and redis-benchmark are needed (scripts/setup.sh)" >&2; exit 1; }
dir=$(mktemp -d)
sock=$dir/redis.sock
port=6399
cleanup() {
  [ -n "${top_pid:-}" ] && kill "$top_pid" 2>/dev/null || true
  [ -n "${redis_pid:-}" ] && kill "$redis_pid" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT
redis-server --port "$([ "$kind" = tcp ] && echo $port || echo 0)" --bind 127.0.0.1 \
  --unixsocket "$sock" --save '' --appendonly no --dir "$dir" >"$dir/redis.log" 2>&1 &
redis_pid=$!
for _ in $(seq 50); do [ -S "$sock" ] && break; sleep 0.1; done
if [ "$kind" = tcp ]; then target=(-h 127.0.0.1 -p $port); else target=(-s "$sock"); fi

"$pkprof" top --json -d 1 --comm '^redis' >"$dir/top.json" 2>"$dir/top.err" &
top_pid=$!
for _ in $(seq 100); do [ -s "$dir/top.json" ] && break; sleep 0.2; done
redis-benchmark "${target[@]}" -c 3 -n $((n * 3)) -t set -q >"$dir/a.out" 2>&1 &
a_pid=$!
redis-benchmark "${target[@]}" -c 1 -n "$n" -t set -q >"$dir/b.out" 2>&1 &
b_pid=$!
wait "$a_pid" "$b_pid"
sleep 2.5
kill -INT "$top_pid"; wait "$top_pid" || true; top_pid=
echo "server_redis ($kind): A $(tr '\r' '\n' <"$dir/a.out" | grep -a 'requests per second' | tail -1)"
echo "server_redis ($kind): B $(tr '\r' '\n' <"$dir/b.out" | grep -a 'requests per second' | tail -1)"
python3 - "$dir/top.json" "$redis_pid" "$a_pid" "$b_pid" "$n" <<'EOF'
import json, sys
path, srv, a, b, n = sys.argv[1], *map(int, sys.argv[2:])
last = {}
for line in open(path):
    for r in json.loads(line)["rows"]:
        last[r["pid"]] = r["total"]
s, ta, tb = last[srv], last.get(a), last.get(b)
ms = lambda ns: ns / 1e6
print(f"redis-server: on CPU {ms(s['task_ns']):.1f} ms, served for others {ms(s['served_out_ns']):.1f} ms "
      f"({100 * s['served_out_ns'] / s['task_ns']:.1f}%), billed to it as a client {ms(s['served_ns'][3]):.1f} ms")
for name, t, req in (("A", ta, 3 * n), ("B", tb, n)):
    srv_ns, items = t["served_ns"][3], t["served_items"][3]
    print(f"client {name}: {req} requests; +SRV {ms(srv_ns):.1f} ms ({items} items), "
          f"{srv_ns / req / 1e3:.2f} us per request; own {ms(t['task_ns'] - t['served_out_ns']):.1f} ms, "
          f"served for others {ms(t['served_out_ns']):.1f} ms")
ra = ta["served_ns"][3] / tb["served_ns"][3]
print(f"billed A:B {ra:.3f} against requests 3.000 (error {100 * (ra / 3 - 1):+.1f}%)")
EOF
