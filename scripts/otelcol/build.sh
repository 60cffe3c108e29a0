#!/usr/bin/env bash
# Builds the OpenTelemetry Collector that pkprof's OTLP tests push to (OTLP receiver + file
# exporter), with the collector builder, into the cache directory given as $1. Idempotent: does
# nothing when the binary for this builder config is already there. Called by scripts/setup.sh.
#
# `builder --skip-compilation` writes dist/ and its go.mod but fails its own `go mod tidy`: a
# test-only dependency of fileexporter (otlpencodingextension) is not served by the module proxy;
# `go mod tidy -e` then a plain `go build` succeed.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${1:?usage: build.sh CACHE_DIR}"
version=0.162.0
# The binary's name carries a hash of the builder config: a changed config builds a new one.
key=$(sha256sum "$here/builder.yaml" | cut -c1-12)
bin="$cache/otelcol-pkprof-$version-$key"
# The tests run "$cache/otelcol-pkprof" (or $PKPROF_OTELCOL): a link to the binary of this config.
link() { ln -sfn "$(basename "$bin")" "$cache/otelcol-pkprof"; echo "$bin"; }
[ -x "$bin" ] && { link; exit 0; }
# Go: one on the PATH or in /usr/local/go that is at least 1.21 (older ones cannot switch to the
# toolchain the collector's go.mod asks for); else the pinned toolchain module from the Go module
# proxy (Debian bookworm's golang-go is 1.19).
go_ok() { local v; v=$("$1" env GOVERSION 2>/dev/null) || return 1; v=${v#go}
  [ "${v%%.*}" -gt 1 ] || { v=${v#1.}; [ "${v%%.*}" -ge 21 ]; }; }
go_bin=""
for g in "$(command -v go || true)" /usr/local/go/bin/go; do
  [ -n "$g" ] && [ -x "$g" ] && go_ok "$g" && { go_bin="$g"; break; }
done
if [ -z "$go_bin" ]; then
  toolchain=v0.0.1-go1.26.0.linux-$(dpkg --print-architecture)
  tdir="$cache/toolchain/golang.org/toolchain@$toolchain"
  if [ ! -x "$tdir/bin/go" ]; then
    echo "otelcol: fetching Go ($toolchain) from the Go module proxy" >&2
    mkdir -p "$cache/toolchain"
    curl -fsSL "https://proxy.golang.org/golang.org/toolchain/@v/$toolchain.zip" -o "$cache/toolchain/go.zip"
    (cd "$cache/toolchain" && unzip -q -o go.zip && rm go.zip)
    chmod +x "$tdir"/bin/* "$tdir"/pkg/tool/*/*
  fi
  go_bin="$tdir/bin/go"
fi
export PATH="$(dirname "$go_bin"):$PATH"
work="$cache/build-$version"
mkdir -p "$work"
export GOBIN="$work/bin"
[ -x "$GOBIN/builder" ] || go install "go.opentelemetry.io/collector/cmd/builder@v$version" >&2
cp "$here/builder.yaml" "$work/builder.yaml"
(cd "$work" && { "$GOBIN/builder" --config builder.yaml --skip-compilation >&2 || true; })
[ -f "$work/dist/go.mod" ] || { echo "otelcol: the collector builder wrote no dist/go.mod" >&2; exit 1; }
(cd "$work/dist" && go mod tidy -e >&2 && go build -trimpath -o "$bin.tmp" .)
mv "$bin.tmp" "$bin"
link
