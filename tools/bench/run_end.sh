#!/bin/bash
# The end of a whole-system run (issue #31's budget: window closed to output
# written <= 1 s): three 5 s runs of `offcpu -v -f --lines 5` beside a
# sleeping python3.11 (whose DWARF, with python3.11-dbg installed, is the
# largest a run reads here), each printing -v's "after the window" line and
# its sum. Usage: sudo tools/bench/run_end.sh [path/to/offcpu]
set -eu
bin=${1:-build/offcpu}
python3.11 -c "import time; time.sleep(600)" &
py=$!
trap 'kill $py 2>/dev/null' EXIT
sleep 0.5
err=$(mktemp)
for i in 1 2 3; do
  "$bin" -v -f --lines 5 >/dev/null 2>"$err"
  line=$(grep "after the window" "$err" || true)
  total=$(echo "$line" | grep -o '[0-9]* ms' | awk '{s += $1} END {print s + 0}')
  echo "run $i: ${total} ms from window end to output (${line#offcpu: })"
done
rm -f "$err"
