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
echo "== tests (root-only BPF tests included; one at a time so timing-sensitive tests run alone)"
cargo test --workspace --locked -- --include-ignored --test-threads=1
