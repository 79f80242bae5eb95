#!/bin/bash
# Runs offcpu and libbpf-tools' offcputime side by side, over the same 5 s,
# on the test suite's blocker workload (threads that block in named
# functions; see tests/workloads/blocker.c), and prints each thread's total
# off-CPU time as each tool saw it, then both tools' stacks.
#   sudo tools/bench/compare.sh [build dir]
set -euo pipefail
build=${1:-$(dirname "$0")/../../build}
secs=5
out=$(mktemp -d)
trap 'kill "$wl" 2>/dev/null; rm -rf "$out"' EXIT
"$build/tests/offcpu_blocker" > "$out/ready" &
wl=$!
sleep 0.5
"$build/offcpu" -p "$wl" -f "$secs" > "$out/offcpu.folded" 2>/dev/null &
a=$!
/usr/sbin/offcputime -p "$wl" "$secs" > "$out/libbpf-tools.txt" 2>/dev/null &
b=$!
wait "$a" "$b"

echo "per-thread off-CPU totals over ${secs} s (ms); each thread but 'spinner' blocks all the time"
printf '%-10s %10s %14s\n' thread offcpu libbpf-tools
awk '{ split($1, f, ";"); t[f[1]] += $NF } END { for (c in t) print c, t[c] }' \
  "$out/offcpu.folded" | sort > "$out/a"
# libbpf-tools' text output: "    -   comm (tid)" then the value on the next line.
awk '/^    -  / { c = $2; getline; t[c] += $1 } END { for (c in t) print c, t[c] }' \
  "$out/libbpf-tools.txt" | sort > "$out/b"
join -a1 -a2 -e 0 -o 0,1.2,2.2 "$out/a" "$out/b" |
  awk '{ printf "%-10s %10.0f %14.0f\n", $1, $2 / 1000, $3 / 1000 }'
echo
echo "offcpu stacks (folded):"
cut -c1-240 "$out/offcpu.folded"
echo
echo "libbpf-tools stacks:"
cat "$out/libbpf-tools.txt"
