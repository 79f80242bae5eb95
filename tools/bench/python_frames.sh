#!/bin/bash
# BPF cost per context switch with Python frames (issue #32) against
# offcpu's default on the same workload: a CPython 3.11 process whose two
# threads block about 10,000 times a second in all, 12 Python frames deep;
# and what Python frames cost a process that is not Python (a C program
# blocking the same way, 12 native frames deep): nothing, as it is decided
# once per process.
#   sudo tools/bench/python_frames.sh [build dir, default build] [seconds] [rounds]
# Each round runs offcpu -v -p on each workload once per mode, alternating
# (Python: --no-python and Python frames, each with the default loader,
# the object with plain loads on 6.8+, and with --loader light-probe-reads,
# what kernels before 6.8 get; the C program: Python frames on and
# --no-python, default loader). Prints every run's "ns of BPF per context
# switch" (run_time_ns / run_cnt of the switch hook) with the load average,
# then each mode's median and its ratio to the default's (--no-python,
# default loader) on the same workload.
set -euo pipefail
build=${1:-build}
secs=${2:-5}
rounds=${3:-3}
dir=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; rm -rf "$dir"' EXIT
cat >"$dir/load.py" <<'PY'
import threading, time
def deep(n):
    if n == 0:
        while True:
            time.sleep(0.0002)
    deep(n - 1)
for _ in range(2):
    threading.Thread(target=deep, args=(10,), daemon=True).start()
time.sleep(1e6)
PY
cat >"$dir/load.c" <<'C'
#include <pthread.h>
#include <time.h>
__attribute__((noinline)) static void deep(int n) {
  if (n == 0)
    for (;;) {
      struct timespec t = {0, 200000};
      nanosleep(&t, 0);
    }
  deep(n - 1);
  __asm__ volatile("");
}
static void *run(void *a) { deep(10); return a; }
int main(void) {
  pthread_t t[2];
  for (int i = 0; i < 2; i++)
    pthread_create(&t[i], 0, run, 0);
  pthread_join(t[0], 0);
}
C
cc -O2 -pthread -o "$dir/load" "$dir/load.c"
/usr/bin/python3.11 "$dir/load.py" &
py=$!
"$dir/load" &
native=$!
pids=("$py" "$native")
sleep 1
declare -A runs
modes=("python: default --no-python" "python: default python"
       "python: probe-reads --no-python" "python: probe-reads python"
       "C: default --no-python" "C: default python")
for ((r = 0; r < rounds; r++)); do
  for mode in "${modes[@]}"; do
    args=(-p "$py")
    [[ $mode == C:* ]] && args=(-p "$native")
    [[ $mode == *probe-reads* ]] && args+=(--loader light-probe-reads)
    [[ $mode == *--no-python ]] && args+=(--no-python)
    ns=$("$build/offcpu" -U -v "${args[@]}" "$secs" 2>&1 >/dev/null |
      sed -n 's/.*cost: \([0-9]*\) ns of BPF per context switch.*/\1/p')
    echo "round $r, $mode: ${ns:-?} ns/switch (load $(cut -d' ' -f1-3 /proc/loadavg))"
    runs[$mode]+="${ns:-0} "
  done
done
median() { tr ' ' '\n' <<<"$1" | grep . | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
for mode in "${modes[@]}"; do
  m=$(median "${runs[$mode]}")
  b=$(median "${runs[${mode%%:*}: default --no-python]}")
  awk -v m="$m" -v b="$b" -v n="$mode" \
    'BEGIN {printf "median %s: %d ns/switch, %.2fx the default\n", n, m, m / b}'
done
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
