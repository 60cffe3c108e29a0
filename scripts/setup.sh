#!/usr/bin/env bash
# Installs everything pkprof needs to build and test on a fresh Debian (bookworm) machine, idempotently.
# Safe to run again: it installs only what is missing.
set -euo pipefail

need_root() { [ "$(id -u)" = 0 ] || { echo "setup: run as root (apt-get and BPF need it)" >&2; exit 1; }; }
need_root

# bpftrace and libbpf-dev: the peer and the floor loader of bench/core.sh.
apt_pkgs=(clang llvm bpftool libbpf-dev bpftrace libelf-dev zlib1g-dev pkg-config make gcc iproute2 linux-perf prometheus tmux curl strace graphviz tar xz-utils)
# The man pages are checked with man -l, the zsh and fish completions by those shells.
apt_pkgs+=(man-db zsh fish)
# unzip: the Go toolchain fetched from the Go module proxy to build the OpenTelemetry Collector.
apt_pkgs+=(unzip)
# Python frames (crates/cli/tests/python.rs): Debian's CPython 3.11, and venv for py-spy below.
apt_pkgs+=(python3.11 python3-venv)
# The server chain's real server (bench/server_redis.sh): redis-server, and redis-benchmark (redis-tools).
apt_pkgs+=(redis-server redis-tools)
# BCC's offcputime (libbpf-tools: CO-RE, tracepoints only; bpfcc-tools' needs kernel headers and
# kprobes): the reference of record --off-cpu's test and cost bench.
apt_pkgs+=(libbpf-tools)
missing=()
for p in "${apt_pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # policy-rc.d keeps packaged services (prometheus) from being started by the install.
  printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  rm -f /usr/sbin/policy-rc.d
fi

if ! command -v cargo >/dev/null 2>&1; then
  [ -x "$HOME/.cargo/bin/cargo" ] || { echo "setup: no Rust toolchain; install rustup first" >&2; exit 1; }
fi
export PATH="$HOME/.cargo/bin:$PATH"
rustup component list --installed 2>/dev/null | grep -q rustfmt || rustup component add rustfmt clippy >/dev/null 2>&1 || true
# HTML report tests (crates/report/tests/export_html.rs): Debian's Chromium, driven through node by
# playwright-core, pinned in crates/report/tests/html/package-lock.json (node_modules not committed).
if ! dpkg-query -W -f='${Status}' chromium 2>/dev/null | grep -q "install ok installed"; then
  echo "setup: installing chromium"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends chromium >/dev/null
fi
command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || {
  echo "setup: node and npm are needed for the HTML report tests" >&2; exit 1; }
html_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/crates/report/tests/html"
want=$(node -p "require('$html_dir/package.json').dependencies['playwright-core']")
have=$(node -p "try { require('$html_dir/node_modules/playwright-core/package.json').version } catch (e) { '' }")
if [ "$want" != "$have" ]; then
  echo "setup: installing playwright-core $want into crates/report/tests/html"
  npm ci --prefix "$html_dir" --no-audit --no-fund --loglevel=error >/dev/null
fi

# OTLP push tests (crates/otlp/tests, crates/cli/tests/push.rs): an OpenTelemetry Collector with the
# OTLP receiver and the file exporter, built once with the collector builder (Go, fetched from the Go
# module proxy when none recent enough is installed; ~8 min cold on 2 CPUs, ~600 MB of module cache)
# into pkprof's development cache; the tests run $PKPROF_DEV_CACHE/otelcol/otelcol-pkprof.
dev_cache="${PKPROF_DEV_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pkprof-dev}"
bash "$(dirname "${BASH_SOURCE[0]}")/otelcol/build.sh" "$dev_cache/otelcol" >/dev/null
# py-spy (PyPI), the peer the Python-frame tests compare with, in pkprof's own cache directory.
pyspy_dir="${XDG_CACHE_HOME:-$HOME/.cache}/pkprof/py-spy"
pyspy_version=0.4.3
if [ "$("$pyspy_dir/bin/py-spy" --version 2>/dev/null)" != "py-spy $pyspy_version" ]; then
  echo "setup: installing py-spy $pyspy_version into $pyspy_dir"
  python3 -m venv "$pyspy_dir"
  "$pyspy_dir/bin/pip" install -q "py-spy==$pyspy_version"
fi
# The Python-frame tests also use pyenv's CPython 3.12/3.13 (a second supported minor version) and
# 3.10 (one pkprof has no offsets for) when ~/.pyenv has them; nothing here downloads interpreters.
for v in 3.10 3.12 3.13; do
  ls -d "$HOME"/.pyenv/versions/"$v".* >/dev/null 2>&1 ||
    echo "setup: note: no CPython $v under ~/.pyenv: tests/python.rs needs it (pyenv install $v)" >&2
done

echo "setup: ok"
