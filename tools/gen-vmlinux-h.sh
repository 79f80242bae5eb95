#!/bin/sh
# Regenerates vmlinux/<arch>/vmlinux.h from a kernel's BTF. CO-RE relocates
# field offsets at load time, so one header serves every kernel; regenerate
# only to use types or fields that newer kernels added.
#   tools/gen-vmlinux-h.sh [BTF file, default /sys/kernel/btf/vmlinux]
set -eu
btf=${1:-/sys/kernel/btf/vmlinux}
case "$(uname -m)" in
  x86_64) arch=x86 ;;
  aarch64) arch=arm64 ;;
  *) echo "gen-vmlinux-h: unsupported architecture $(uname -m)" >&2; exit 1 ;;
esac
out="$(dirname "$0")/../vmlinux/$arch/vmlinux.h"
mkdir -p "$(dirname "$out")"
bpftool btf dump file "$btf" format c > "$out.tmp"
mv "$out.tmp" "$out"
echo "wrote $out"
