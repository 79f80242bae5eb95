#!/bin/bash
# Runs the README's usage examples (its ```sh blocks, the lines that start
# with `offcpu`, `sudo offcpu` or `go tool pprof`) against the test
# workloads, so the README cannot drift from what offcpu does. As root,
# after a build; CI runs it. Example PIDs, names and durations are stand-ins:
# 1234 and 4321 become the blocker workload (its process and a thread),
# 5678 another process, mysqld the mmap_churn workload; durations become
# 1 s; a run without one is stopped by SIGINT after 2 s. Where
# flamegraph.pl is not installed, `offcpu flamegraph` stands in for it.
#   tools/readme-examples.sh [BUILD_DIR]
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
build=$(realpath "${1:-build}")
offcpu=$build/offcpu
[ -x "$offcpu" ] || { echo "no $offcpu: build first" >&2; exit 1; }
work=$(mktemp -d /tmp/offcpu-readme-XXXXXX)
pids=()
cleanup() {
  # The workloads were started in command substitutions: not our children,
  # so wait for them to be gone rather than wait(1).
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  for _ in $(seq 50); do
    alive=0
    for p in "${pids[@]}"; do [ -d "/proc/$p" ] && alive=1; done
    [ "$alive" = 0 ] && break
    sleep 0.1
  done
  rm -rf "$work"
  [ -n "${unit:-}" ] && rmdir "$unit" 2>/dev/null
}
trap cleanup EXIT

# Starts a workload that prints "ready PID"; echoes the PID.
start() {
  local out
  out=$(mktemp -p "$work" workload-XXXXXX)
  "$@" > "$out" < /dev/null 2>&1 &
  for _ in $(seq 100); do
    grep -q '^ready ' "$out" && break
    sleep 0.1
  done
  sed -n 's/^ready \([0-9]*\).*/\1/p' "$out" | head -1
}
blocker=$(start "$build/tests/offcpu_blocker")
other=$(start "$build/tests/offcpu_blocker")
churn=$(start "$build/tests/mmap_churn" 4)
pids+=($blocker $other $churn)
thread=$(ls "/proc/$blocker/task" | sort -n | tail -1)
[ -n "$blocker" ] && [ -n "$other" ] && [ -n "$churn" ] ||
  { echo "workloads did not start" >&2; exit 1; }

# The cgroup example's unit becomes a cgroup made here, with the blocker in it.
v2=/sys/fs/cgroup
grep -q cgroup2 <<< "$(stat -f -c %T $v2 2>/dev/null)" || v2=/sys/fs/cgroup/unified
unit=$v2/offcpu-readme-$$
mkdir "$unit" && echo "$blocker" > "$unit/cgroup.procs" ||
  { echo "cannot make cgroup $unit" >&2; exit 1; }

# The example lines, in order (later ones read files earlier ones wrote).
examples=$(awk '/^```sh$/ {on = 1; next} /^```$/ {on = 0} on' README.md |
  grep -E '^(sudo )?offcpu |^go tool pprof ')

failed=0 ran=0
cd "$work"
while IFS= read -r line; do
  cmd=${line#sudo }
  if [[ $cmd == *flamegraph.pl* ]] && ! command -v flamegraph.pl >/dev/null; then
    # offcpu flamegraph stands in where it takes the same options.
    if [[ $cmd == *--color* ]]; then
      echo "skipped (no flamegraph.pl): $line"
      continue
    fi
    cmd=${cmd//flamegraph.pl/offcpu flamegraph}
  fi
  pid=$blocker
  [[ $cmd == "offcpu rwsem"* ]] && pid=$churn
  cmd=$(sed -E "s/\b1234\b/$pid/g; s/\b5678\b/$other/g; s/\b4321\b/$thread/g;
    s/\bmysqld\b/mmap_churn/g; s|/sys/fs/cgroup/system.slice/nginx.service|$unit|g; s/ [0-9]+( *(\||>|$))/ 1\1/" <<< "$cmd")
  cmd=${cmd//offcpu /timeout --foreground --preserve-status -s INT 2 $offcpu }
  cmd=${cmd//timeout --foreground --preserve-status -s INT 2 $offcpu flamegraph/$offcpu flamegraph}
  ran=$((ran + 1))
  out=$(bash -o pipefail -c "$cmd" 2>&1 </dev/null)
  rc=$?
  # A command after -- that was still running when the 2 s stand-in for
  # Ctrl-C came is ended with SIGTERM, and its status is offcpu's (143).
  if [[ $rc -eq 143 && $cmd == *" -- "* && $out == *"ended with SIGTERM"* ]]; then
    rc=0
  fi
  if [[ $rc -eq 0 ]]; then
    echo "ok: $line"
  else
    echo "FAILED: $line"
    echo "  ran: $cmd"
    echo "$out" | tail -5 | sed 's/^/  /'
    failed=$((failed + 1))
  fi
done <<< "$examples"
echo "$ran README examples run, $failed failed"
[ "$failed" -eq 0 ] && [ "$ran" -gt 5 ]
