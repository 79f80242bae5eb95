#!/bin/bash
# The size of each BPF program offcpu loads, for each loader: instructions
# the verifier processed (load cost), instructions the kernel runs (xlated)
# and the JIT image. Compare before and after a change of bpf/.
#   sudo tools/bench/bpf-prog-sizes.sh [build dir]
set -euo pipefail
build=${1:-$(dirname "$0")/../../build}
sizes=$build/tools/offcpu_prog_sizes
[ -x "$sizes" ] || {
  echo "build the offcpu_prog_sizes target first" >&2
  exit 1
}
# One programs' listing per loader while a run holds them (sorted by name:
# the order of a process's descriptors is not the programs').
show() {
  local what=$1
  shift
  timeout -s INT 10 "$@" >/dev/null 2>&1 &
  local pid=$!
  sleep 3
  echo "== $what"
  # The programs are offcpu's, timeout's child (timeout holds none).
  local target
  target=$(pgrep -P "$pid" | head -1)
  "$sizes" "${target:-$pid}" | (read -r head && echo "$head" && sort)
  wait "$pid" || true
}
show "offcpu, light skeleton, plain loads" "$build/offcpu" --loader light 4
show "offcpu, light skeleton, probe reads" "$build/offcpu" --loader light-probe-reads 4
show "offcpu, libbpf" "$build/offcpu" --loader libbpf 4
show "offcpu, light, --wakers --children -- sleep 4" "$build/offcpu" --wakers --children -- sleep 4
show "offcpu, libbpf, --wakers --children -- sleep 4" "$build/offcpu" --loader libbpf --wakers --children -- sleep 4
show "offcpu rwsem --wakers (until stopped)" "$build/offcpu" rwsem --wakers
