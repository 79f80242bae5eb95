#!/bin/bash
# Every bpf/*.bpf.h compiles alone after the usual prelude (vmlinux.h and
# libbpf's headers), in each configuration the objects are built in: each
# includes what it uses, so any of them can be opened, read and compiled
# on its own. Fails listing the headers that do not.
#   tools/bpf-headers-check.sh [CLANG]
set -euo pipefail
cd "$(dirname "$0")/.."
clang=${1:-clang}
tu=$(mktemp --suffix=.c)
err=$(mktemp)
trap 'rm -f "$tu" "$err"' EXIT
bad=0
for h in bpf/*.bpf.h; do
  printf '#include "vmlinux.h"\n#include <bpf/bpf_core_read.h>\n#include <bpf/bpf_helpers.h>\n#include <bpf/bpf_tracing.h>\n#include "%s"\n' \
    "$(basename "$h")" >"$tu"
  # The regular object and the light one with plain loads; the waker also
  # with the ORC walk (OFFCPU_WAKER_ORC).
  configs=("" "-DOFFCPU_LIGHT_OBJECT -DOFFCPU_DIRECT_LOADS")
  if [ "$h" = bpf/waker.bpf.h ]; then
    configs+=("-DOFFCPU_WAKER_ORC")
  fi
  for defs in "${configs[@]}"; do
    # shellcheck disable=SC2086 # defs is a list of flags
    if ! "$clang" -target bpf -D__TARGET_ARCH_x86 $defs -Wall -Werror \
      -Wno-unused-function -Ivmlinux/x86 -Iinclude -Ibpf -fsyntax-only \
      "$tu" 2>"$err"; then
      echo "$h does not compile alone${defs:+ ($defs)}:"
      head -5 "$err"
      bad=1
    fi
  done
done
exit $bad
