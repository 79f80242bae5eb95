#!/bin/bash
# BPF cost per context switch with Python frames (issue #32) against
# offcpu's default on the same workload: a CPython 3.11 process whose two
# threads block about 10,000 times a second in all, 12 Python frames deep.
#   sudo tools/bench/python_frames.sh [build dir, default build] [seconds]
# Prints "ns/switch" for --no-python and for Python frames, same loader
# (light-probe-reads: the object with plain loads has no Python walk yet).
set -euo pipefail
build=${1:-build}
secs=${2:-5}
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
/usr/bin/python3.11 "$py" &
pid=$!
sleep 1
for mode in --no-python ""; do
  line=$("$build/offcpu" -p "$pid" -U --loader light-probe-reads -v $mode \
    "$secs" 2>&1 >/dev/null | grep 'ns of BPF per context switch')
  echo "${mode:-python frames}: $line"
done
