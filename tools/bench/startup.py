#!/usr/bin/env python3
"""offcpu's start-up: exec to attached, and to the banner, in turns.

    sudo python3 tools/bench/startup.py BUILD [--base OTHER_BUILD]
        [--repeat N] [--rt] [--modes default,wakers,json]

Each run starts `offcpu -v -f 0.2` with a mode's options. "attach" is exec
to the window's start, which -v prints at the end in CLOCK_MONOTONIC ns
(the clock of time.monotonic()): the moment every program is attached,
issue 27's figure. "banner" is exec to the "Tracing ..." line on stderr,
which comes after the waits in progress are seeded; then the CPU time
offcpu's threads had used is read (/proc/PID/task/*/schedstat, in ns): the
verifier and map creation run in offcpu's own system calls, so their cost
shows there even when other work on the machine stretches the wall time.
Modes and builds run in turns, N rounds, so a VM's slow phases fall on all
alike; the medians are printed, with the load average before and after.
--rt runs offcpu under SCHED_FIFO (chrt -f 50), so a busy machine's other
threads do not queue in front of it. Its own threads then do not share a
CPU either: once attached, the thread building unwind tables can hold a
CPU that the main thread, about to write the banner, waits for (the banner
then comes tens of ms after the attach; nothing like it at offcpu's own
nice -10).
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

MODES = {
    "default": [],
    "wakers": ["--wakers"],
    # The timeline: its ring buffer and the waking hook.
    "json": ["-o", "{tmp}/trace.json"],
}


def cpu_ns(pid):
    """CPU time used so far by every thread of `pid`, in ns: the live
    threads' (schedstat, ns) or the process's (/proc/PID/stat, in clock
    ticks, 10 ms, but with the threads that already ended, as the split
    load's second loading thread has), whichever is more."""
    total = 0
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        # utime and stime: fields 14 and 15, the 12th and 13th after comm.
        ticks = int(fields[11]) + int(fields[12])
        total = max(total, ticks * 1_000_000_000 // os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        pass
    return total


def one_run(offcpu, options, rt, tmp):
    """(attach ms, banner ms, CPU ms) or None: exec to the window's start
    (-v's "window: A to B ns", CLOCK_MONOTONIC as time.monotonic()), exec to
    the "Tracing" line, and the CPU used by then."""
    cmd = [offcpu, "-v", "-f"] + [o.format(tmp=tmp) for o in options] + ["0.2"]
    if rt:
        cmd = ["chrt", "-f", "50"] + cmd
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    seen = ""
    banner = cpu = None
    for line in proc.stderr:
        seen += line
        if "Tracing" in line:
            banner = (time.monotonic() - t0) * 1000
            cpu = cpu_ns(proc.pid)
            break
    seen += proc.communicate()[1]
    m = re.search(r"window: ([0-9]+) to [0-9]+ ns", seen)
    if banner is None or cpu is None or not m or proc.returncode != 0:
        sys.stderr.write(f"startup: {' '.join(cmd)} did not attach "
                         f"(exit {proc.returncode}): {seen.strip()[-300:]}\n")
        return None
    attach = (int(m.group(1)) / 1e9 - t0) * 1000
    return attach, banner, cpu / 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("build", help="build directory holding offcpu")
    ap.add_argument("--base", help="another build, measured in turns with it")
    ap.add_argument("--repeat", type=int, default=9)
    ap.add_argument("--rt", action="store_true",
                    help="run offcpu under SCHED_FIFO (chrt -f 50)")
    ap.add_argument("--modes", default="default,wakers,json",
                    help="comma list of: " + ", ".join(MODES))
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("startup: run as root (offcpu loads BPF programs)")
    modes = args.modes.split(",")
    for m in modes:
        if m not in MODES:
            sys.exit(f"startup: unknown mode '{m}' (modes: {', '.join(MODES)})")
    builds = [("new", args.build)]
    if args.base:
        builds.insert(0, ("base", args.base))
    runs = {(b, m): [] for b, _ in builds for m in modes}
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.repeat):
            for mode in modes:
                for name, path in builds:
                    r = one_run(os.path.join(os.path.abspath(path), "offcpu"),
                                MODES[mode], args.rt, tmp)
                    if r:
                        runs[(name, mode)].append(r)
    load_after = os.getloadavg()
    print(f"load average {load_before[0]:.2f} before, {load_after[0]:.2f} after"
          f"; {args.repeat} rounds{', SCHED_FIFO' if args.rt else ''}")
    print(f"{'mode':<9} {'build':<5} {'attach ms':>9} {'banner ms':>9} "
          f"{'CPU ms':>8}  runs")
    med = {}
    for mode in modes:
        for name, _ in builds:
            r = runs[(name, mode)]
            if not r:
                print(f"{mode:<9} {name:<5} {'-':>9} {'-':>9} {'-':>8}  0")
                continue
            med[(name, mode)] = [statistics.median(x[i] for x in r)
                                 for i in range(3)]
            a, b, c = med[(name, mode)]
            print(f"{mode:<9} {name:<5} {a:9.1f} {b:9.1f} {c:8.1f}  {len(r)}")
        if ("base", mode) in med and ("new", mode) in med:
            (ba, bb, bc), (na, nb, nc) = med[("base", mode)], med[("new", mode)]
            print(f"{mode:<9} new/base attach {na / ba:.2f}, banner "
                  f"{nb / bb:.2f}, CPU {nc / bc:.2f}")


if __name__ == "__main__":
    main()
