#!/bin/bash
# BPF cost per context switch with Python frames (issue #32) against
# offcpu's default on the same workload: a CPython 3.11 process whose two
# threads block about 10,000 times a second in all, 12 Python frames deep.
#   sudo tools/bench/python_frames.sh [build dir, default build] [seconds] [rounds]
# Each round runs offcpu -v on the workload with --no-python and with
# Python frames (the default), alternating, each with the default loader
# (the object with plain loads on 6.8+) and with --loader light-probe-reads
# (what kernels before 6.8 get); prints every run's "ns of BPF per context
# switch" (run_time_ns / run_cnt of the switch hook), then the medians and
# their ratio to the default's, with the load average beside them.
set -euo pipefail
build=${1:-build}
secs=${2:-5}
rounds=${3:-3}
py=$(mktemp --suffix=.py)
trap 'rm -f "$py"; kill "$pid" 2>/dev/null || true' EXIT
cat >"$py" <<'PY'
import os, threading, time
def deep(n):
    if n == 0:
        while True:
            time.sleep(0.0002)
    deep(n - 1)
for _ in range(2):
    threading.Thread(target=deep, args=(10,), daemon=True).start()
print(os.getpid(), flush=True)
time.sleep(1e6)
PY
/usr/bin/python3.11 "$py" >/dev/null &
pid=$!
sleep 1
declare -A runs
modes=("default --no-python" "default python" "probe-reads --no-python"
       "probe-reads python")
for ((r = 0; r < rounds; r++)); do
  for mode in "${modes[@]}"; do
    args=()
    [[ $mode == probe-reads* ]] && args+=(--loader light-probe-reads)
    [[ $mode == *--no-python ]] && args+=(--no-python)
    ns=$("$build/offcpu" -p "$pid" -U -v "${args[@]}" "$secs" 2>&1 >/dev/null |
      sed -n 's/.*cost: \([0-9]*\) ns of BPF per context switch.*/\1/p')
    echo "round $r, $mode: ${ns:-?} ns/switch (load $(cut -d' ' -f1-3 /proc/loadavg))"
    runs[$mode]+="${ns:-0} "
  done
done
median() { tr ' ' '\n' <<<"$1" | grep . | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
base=$(median "${runs[default --no-python]}")
for mode in "${modes[@]}"; do
  m=$(median "${runs[$mode]}")
  awk -v m="$m" -v b="$base" -v n="$mode" \
    'BEGIN {printf "median %s: %d ns/switch, %.2fx the default\n", n, m, m / b}'
done
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
