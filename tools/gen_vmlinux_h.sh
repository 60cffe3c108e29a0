#!/usr/bin/env bash
# Regenerates the pinned vmlinux header used by the BPF programs from the running kernel's BTF.
# Usage: tools/gen_vmlinux_h.sh [BTF_FILE]   (default /sys/kernel/btf/vmlinux; needs bpftool)
set -euo pipefail
btf=${1:-/sys/kernel/btf/vmlinux}
arch=$(uname -m)
out="$(dirname "$0")/../crates/collect/src/bpf/vmlinux/$arch/vmlinux.h"
mkdir -p "$(dirname "$out")"
bpftool btf dump file "$btf" format c > "$out.tmp"
mv "$out.tmp" "$out"
echo "wrote $out ($(wc -l < "$out") lines) from $btf"
