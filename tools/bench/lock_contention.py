#!/usr/bin/env python3
"""BPF cost per lock contention of `offcpu lock` beside bpftrace doing the
same aggregation (issue #30's budget: at most 0.5x).

    sudo python3 tools/bench/lock_contention.py [BUILD] [--rounds N] [--secs S]

The workload is the lock tests' own (BUILD/tests/lock_contend fpos 4: four
threads reading one file description, contending its f_pos_lock mutex).
Each round runs `offcpu lock -p PID -f` and then a bpftrace script that
keys the same waits by (comm, kernel stack, user stack, lock flags) with
their total, count and log2 histogram, each for S seconds, alternating so
that the VM's slow phases fall on both. Cost per event: the run time of
every program the tracer holds (kernel.bpf_stats_enabled=1) divided by the
contention_begin events it saw (its busiest program's run count: begin and
end fire alike). Prints each round and the medians with their ratio, and
the load average, which moves every number on a shared VM.
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402
import server_load  # noqa: E402

# The same aggregation as offcpu lock's default: per thread name, stacks
# taken at the contention's begin, kind (flags), total/count/histogram.
BPFTRACE = """
tracepoint:lock:contention_begin /pid == %(pid)d && !@start[tid]/ {
  @start[tid] = nsecs; @lk[tid] = args->lock_addr; @fl[tid] = args->flags;
  @ks[tid] = kstack; @us[tid] = ustack;
}
tracepoint:lock:contention_end /@start[tid] && @lk[tid] == args->lock_addr/ {
  $d = nsecs - @start[tid];
  @total[comm, @ks[tid], @us[tid], @fl[tid]] = sum($d);
  @hist[comm, @ks[tid], @us[tid], @fl[tid]] = hist($d);
  delete(@start[tid]); delete(@lk[tid]); delete(@fl[tid]);
  delete(@ks[tid]); delete(@us[tid]);
}
"""


def stats(ids):
    progs = bench.bpf_progs()
    return {i: (progs[i].get("run_time_ns", 0), progs[i].get("run_cnt", 0))
            for i in ids if i in progs}


def measure(cmd, secs):
    """ns per contention event of the tracer `cmd`, and the events."""
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 60
        ids = set()
        while time.time() < deadline and proc.poll() is None:
            ids = server_load.progs_held_by(proc.pid)
            s = stats(ids)
            if len(s) >= 2 and max(c for _, c in s.values()) > 0:
                break
            time.sleep(0.1)
        if proc.poll() is not None or not ids:
            bench.die(f"{cmd[0]} did not attach")
        before = stats(ids)
        time.sleep(secs)
        after = stats(ids)
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    spent = sum(after[i][0] - before[i][0] for i in after if i in before)
    events = max(after[i][1] - before[i][1] for i in after if i in before)
    return (spent / events if events else float("nan")), events


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("build", nargs="?", default="build")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--secs", type=float, default=5)
    a = ap.parse_args()
    if not os.path.exists("/usr/bin/bpftrace"):
        bench.die("bpftrace not found: apt-get install bpftrace")
    with open("/proc/sys/kernel/bpf_stats_enabled", "w") as f:
        f.write("1")
    work = subprocess.Popen([os.path.join(a.build, "tests", "lock_contend"),
                             "fpos", "4"], stdout=subprocess.PIPE, text=True)
    pid = int(work.stdout.readline().split()[1])
    offcpu = [os.path.join(a.build, "offcpu"), "lock", "-p", str(pid), "-f"]
    trace = ["/usr/bin/bpftrace", "-e", BPFTRACE % {"pid": pid}]
    ours, theirs = [], []
    try:
        for r in range(a.rounds):
            o, oe = measure(offcpu, a.secs)
            t, te = measure(trace, a.secs)
            ours.append(o)
            theirs.append(t)
            print(f"round {r + 1}: offcpu lock {o:.0f} ns/event ({oe} events), "
                  f"bpftrace {t:.0f} ns/event ({te} events), "
                  f"load {os.getloadavg()[0]:.1f}", flush=True)
    finally:
        work.kill()
    mo, mt = statistics.median(ours), statistics.median(theirs)
    print(f"median: offcpu lock {mo:.0f} ns, bpftrace {mt:.0f} ns per "
          f"contention; ratio {mo / mt:.2f} (budget 0.5)")


if __name__ == "__main__":
    main()
