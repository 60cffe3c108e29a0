#!/usr/bin/env bash
# Builds pkprof and runs its whole test suite, root-only BPF tests included.
# Usage (as root, on a fresh Debian machine):  bash scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH="$HOME/.cargo/bin:$PATH"

echo "== build"
cargo build --workspace --all-targets --locked
echo "== a second build must rebuild nothing"
if cargo build --workspace --all-targets --locked -v 2>&1 | grep -E '^\s*(Compiling|Running `.*build-script)'; then
  echo "test.sh: the second cargo build rebuilt something (see above): a build script lacks rerun-if-changed" >&2
  exit 1
fi
echo "== formatting"
cargo fmt --all -- --check
echo "== tests (root-only BPF tests included; one at a time so timing-sensitive tests run alone;"
echo "   every test binary runs even after a failure, so one failure hides no other)"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
set +e
cargo test --workspace --locked --no-fail-fast --lib --bins --tests -- --include-ignored --test-threads=1 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
# One closing line for the whole suite (cargo prints one per test binary, the last often empty).
# Cargo's "error: test failed" line of each failing test binary is counted too: one that died
# (a signal, an abort) prints no result line, and the suite line must not say "0 failed" then.
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed;?$/) p += $i; if ($(i+1) ~ /^failed;?$/) f += $i } }
     /^error: test failed/ { b++ }
     END { printf "suite: %d passed, %d failed", p, f; if (b) printf "; %d test binaries failed", b; printf "\n" }' "$log"
exit "$status"
