#!/usr/bin/env python3
"""BPF cost per sched_switch of two offcpu builds, in turns, on one load.

    sudo python3 tools/bench/ab.py OLD_BUILD NEW_BUILD [--repeat N] [--loops N]
        [-- OFFCPU OPTIONS...]

For a change to the switch hook (a bigger aggregation value, another
counter): `perf bench sched pipe` runs under each build's offcpu (whole
system, the options given, `-f` by default) in turns, so that the VM's slow
phases fall on both alike (on a shared machine other tracers' loads
still come and go: repeat until the medians settle); prints each run's ns per event (run_time_ns /
run_cnt of the sched_switch program, kernel.bpf_stats_enabled=1, as
bench.py measures it) and the medians with their ratio."""
import argparse
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--loops", type=int, default=200000)
    ap.add_argument("options", nargs="*", default=["-f"])
    args = ap.parse_args()
    if os.geteuid() != 0:
        bench.die("run as root (BPF programs, bpf_stats)")
    subprocess.run(["sysctl", "-qw", "kernel.bpf_stats_enabled=1"], check=True)
    runs = {"old": [], "new": []}
    for i in range(args.repeat):
        for which in ("old", "new"):
            offcpu = os.path.join(os.path.abspath(getattr(args, which)), "offcpu")
            try:
                r = bench.measure_mode(which, [offcpu, *args.options, "600"],
                                       "offcpu_switch", args.loops, paired=False)
            except KeyError:  # another tracer's program came and went
                print(f"run {i + 1} {which}: a program vanished, not counted")
                continue
            runs[which].append(r["ns_per_event"])
            print(f"run {i + 1} {which}: {r['ns_per_event']:.0f} ns per switch "
                  f"({r['events']} events)", flush=True)
    old, new = statistics.median(runs["old"]), statistics.median(runs["new"])
    print(f"median ns per switch, offcpu {' '.join(args.options)}: "
          f"old {old:.0f}, new {new:.0f}, new/old {new / old:.3f}")


if __name__ == "__main__":
    main()
