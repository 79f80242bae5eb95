#!/bin/bash
# BPF cost of `offcpu lock --futex` per futex event against bpftrace
# scripts doing the same aggregation (issue #30's budget: at most 0.5x),
# on the test suite's futex_contend workload (4 threads contending one
# pthread mutex, each holding it 200 us asleep).
#   sudo tools/bench/futex_lock.sh [build dir, default build] [seconds] [rounds]
#   BASE=/path/to/other/offcpu sudo tools/bench/futex_lock.sh ...
# BASE adds a row for another offcpu binary (the build before a change),
# measured in the same rounds.
# Per tool and round: the run_time_ns of every BPF program the tool loaded
# (kernel.bpf_stats_enabled), over the workload's futex calls in the same
# seconds (counted by perf stat on the syscalls:sys_enter_futex tracepoint,
# no BPF); the tools alternate, and the median of the rounds is printed
# with the load average (the order reversed every other round). offcpu's sched_switch and sched_waking programs
# run for every switch and wakeup of the machine: their cost is in its
# total.
set -euo pipefail
build=${1:-build}
secs=${2:-5}
rounds=${3:-3}
was=$(sysctl -n kernel.bpf_stats_enabled)
sysctl -q kernel.bpf_stats_enabled=1
"$build/tests/futex_contend" mutex 4 200 >/dev/null &
wl=$!
tool=
trap 'sysctl -q kernel.bpf_stats_enabled="$was"; kill $wl 2>/dev/null || true;
      [ -n "$tool" ] && kill "$tool" 2>/dev/null || true' EXIT
sleep 0.5
waits='(args->op & 127) == 0 || (args->op & 127) == 9 || (args->op & 127) == 6 || (args->op & 127) == 13 || (args->op & 127) == 11'
# The same aggregation: time in the waiting calls by thread, name, word and
# user stack (bpftrace_ustack), or without the stack (bpftrace).
bt_ustack="tracepoint:syscalls:sys_enter_futex /pid == $wl && ($waits)/ { @s[tid] = nsecs; @a[tid] = args->uaddr; @u[tid] = ustack; }
tracepoint:syscalls:sys_exit_futex /@s[tid]/ { @w[pid, tid, comm, @a[tid], @u[tid]] = sum(nsecs - @s[tid]); delete(@s[tid]); delete(@a[tid]); delete(@u[tid]); }"
bt_plain="tracepoint:syscalls:sys_enter_futex /pid == $wl && ($waits)/ { @s[tid] = nsecs; @a[tid] = args->uaddr; }
tracepoint:syscalls:sys_exit_futex /@s[tid]/ { @w[pid, tid, comm, @a[tid]] = sum(nsecs - @s[tid]); delete(@s[tid]); delete(@a[tid]); }"

# The run_time_ns and run_cnt of each program process $1 holds (found
# through its descriptors' fdinfo): "id.name:ns:runs ...".
stats() {
  bpftool prog show -j | python3 -c '
import glob, json, sys
ids = set()
for f in glob.glob(f"/proc/{sys.argv[1]}/fdinfo/*"):
    try:
        for line in open(f):
            if line.startswith("prog_id:"):
                ids.add(int(line.split()[1]))
    except OSError:
        pass
print(" ".join("%d.%s:%d:%d" % (p["id"], p.get("name", ""),
                                 p.get("run_time_ns", 0), p.get("run_cnt", 0))
               for p in json.load(sys.stdin) if p["id"] in ids))' "$1"
}

measure() { # name, command...
  local name=$1
  shift
  "$@" >/dev/null 2>&1 &
  tool=$!
  # Attached once one of its programs has run (the workload never stops):
  # a tool slow to start (bpftrace compiling, a busy VM) is not measured
  # before it is there, and never gets its SIGINT before its handler.
  # (This runs in the caller's $(...): the EXIT trap there never sees
  # $tool, so a tool given up on is killed here.)
  local waited=0
  until stats "$tool" | grep -qE ':[1-9][0-9]*( |$)'; do
    sleep 0.2
    waited=$((waited + 1))
    if ! kill -0 "$tool" 2>/dev/null || [ $waited -ge 300 ]; then
      echo "futex_lock.sh: $name exited or did not attach within 60 s" >&2
      kill -KILL "$tool" 2>/dev/null || true
      wait "$tool" 2>/dev/null || true
      exit 1
    fi
  done
  sleep 0.5
  ns0=$(stats "$tool")
  calls=$(perf stat -x, -e syscalls:sys_enter_futex -p "$wl" -- sleep "$secs" 2>&1 |
    grep sys_enter_futex | cut -d, -f1)
  ns1=$(stats "$tool")
  kill -INT "$tool" 2>/dev/null || true
  # Its results are not needed: a tool that outlives 20 s is killed.
  for _ in $(seq 100); do
    kill -0 "$tool" 2>/dev/null || break
    sleep 0.2
  done
  kill -KILL "$tool" 2>/dev/null || true
  wait "$tool" 2>/dev/null || true
  tool=
  # The total per futex call and calls; for offcpu, each program's runs
  # and ns per run (the sched_switch program's runs are the machine's
  # switches) to stderr.
  python3 -c "
import sys
name, e = sys.argv[1], int(sys.argv[2] or 0)
a = {x.split(':')[0]: x.split(':')[1:] for x in sys.argv[3].split()}
b = {x.split(':')[0]: x.split(':')[1:] for x in sys.argv[4].split()}
n = 0
for k, (ns, runs) in b.items():
    ns0, runs0 = a.get(k, ('0', '0'))
    dn, dr = int(ns) - int(ns0), int(runs) - int(runs0)
    n += dn
    if dr and name.startswith('offcpu'):
        print(f'  {name} {k.split(\".\", 1)[1]}: {dr} runs, {dn / dr:.0f} ns/run', file=sys.stderr)
print(f'{name} {n / e if e else 0:.0f} {e}')" "$name" "${calls:-0}" "$ns0" "$ns1"
}

tools="offcpu bpftrace_ustack bpftrace"
[ -n "${BASE:-}" ] && tools="offcpu offcpu_base bpftrace_ustack bpftrace"
declare -A rows
for r in $(seq "$rounds"); do
  # Every other round in reverse order: in two runs with BASE and the
  # builds' slots swapped, the one measured first was lower in every round
  # (1-20% a sched_switch run), whichever build it was.
  order=$tools
  [ $((r % 2)) = 0 ] && order=$(echo "$tools" | tr ' ' '\n' | tac | tr '\n' ' ')
  for t in $order; do
    case $t in
    offcpu) line=$(measure offcpu "$build/offcpu" lock -p "$wl" -Y futex -f 3600) ;;
    offcpu_base) line=$(measure offcpu_base "$BASE" lock -p "$wl" -Y futex -f 3600) ;;
    bpftrace_ustack) line=$(measure bpftrace_ustack bpftrace -e "$bt_ustack") ;;
    bpftrace) line=$(measure bpftrace bpftrace -e "$bt_plain") ;;
    esac
    rows[$t]+="${line#* } "
  done
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "BPF ns per futex call (median of $rounds rounds of ${secs} s; calls per round):"
for t in $tools; do
  python3 -c "
import statistics, sys
v = sys.argv[2].split()
ns = [float(x) for x in v[0::2]]
ev = [int(x) for x in v[1::2]]
print(f'  {sys.argv[1]:16} {statistics.median(ns):8.0f} ns   ({\", \".join(map(str, ev))} calls)')
" "$t" "${rows[$t]}"
done
