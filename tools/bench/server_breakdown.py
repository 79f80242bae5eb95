#!/usr/bin/env python3
"""Where offcpu's BPF time per switch goes on the server load (issue 27),
by difference: several offcpu variants and libbpf-tools' offcputime
attached whole-system in the same seconds, each one's BPF ns per switch
from its own programs' run_time_ns / run_cnt.

Variants (each leaves out or forces one part of the work):
  default            what a user runs
  -m 1000000         almost no wait passes -m: the hook's floor (time,
                     filters, task storage, memo lookup at switch-out)
  -K                 no user stacks: the user stack's share is default - -K
  -U                 no kernel stacks: the kernel stack's share
  --no-stack-reuse   every stack walked: what the memos save
  -o trace.json      the timeline (issue 29) at its default threshold:
                     what its events, wakers and hops add (budget 1.3x
                     the default)
  trace -U, trace -K the timeline with user stacks only or kernel stacks
                     only, beside -U and -K: -K takes no waker user stack;
                     -U walks the waker's kernel stack only to tell an
                     interrupt taken in user mode from the task
  trace floor        -o trace.json with --events-min 10 s: the timeline's
                     hooks with no event, waker or hop: what the wakers
                     and events cost is -o trace.json - trace floor
  timed              --time-walks: the user stacks by why they were walked,
                     each kind's BPF ns (two clock reads a stack more)
  -n postgres, -n pgbench
                     the server's or the client's processes alone: whose
                     walks they are

--timer-only adds a reference that is not offcpu: bpftrace keeping a
timestamp per thread at switch-out and adding the wait to the thread's
total at switch-in, no stacks. It is what timing every switch costs on the
load by itself, whatever the tool: on the 1,000-sleeper load it costs more
than offcpu's floor (-m 1000000), which keeps its starts in task storage.

Several tracers on every switch make each switch slower for all of them
(colder caches), so compare within one run, not with bench.py's figures.

    sudo python3 tools/bench/server_breakdown.py [--load redis|postgres|sleepers|pipe|churn]
        [--seconds 8] [--repeat 3] [--variants default,-K,...]
        [--base BIN [--base-variants default,-o trace.json]]
    --load sleepers: bench.py's row "1,000 threads waking every 10 ms",
    both tools in the same seconds; --load pipe: its pipe load
    --alone: each tracer alone on the load in turns (no shared cache)
"""
import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
import server_load as sl  # noqa: E402

TIMER_ONLY = "timer only (bpftrace)"
# Per thread: the time it was switched out; at its switch-in the wait is
# added to its total. A hash map by thread id, as libbpf-tools keeps its
# starts; no stack is taken. bpftrace's maps hold 4,096 keys: enough for
# the bench's loads (the sleepers' 1,000 threads and the host's).
TIMER_ONLY_SCRIPT = """
tracepoint:sched:sched_switch {
  @start[args->prev_pid] = nsecs;
  $s = @start[args->next_pid];
  if ($s) {
    @off[args->next_pid] = sum(nsecs - $s);
    delete(@start[args->next_pid]);
  }
}
"""

VARIANTS = {
    "default": [],
    "-m 1000000": ["-m", "1000000"],
    "-K": ["-K"],
    "-U": ["-U"],
    "--no-stack-reuse": ["--no-stack-reuse"],
    "-o trace.json": ["-o", "/tmp/offcpu-breakdown-trace.json"],
    "trace -U": ["-U", "-o", "/tmp/offcpu-breakdown-trace-U.json"],
    "trace -K": ["-K", "-o", "/tmp/offcpu-breakdown-trace-K.json"],
    "trace floor": ["-o", "/tmp/offcpu-breakdown-floor.json", "--events-min", "10000000"],
    "timed": ["--time-walks"],
    "-n postgres": ["-n", "postgres"],
    "-n pgbench": ["-n", "pgbench"],
}


class OneProcessLoad:
    """A load that is one process of ours, killed to stop it (start_load
    sets self.proc); stop_load reports no rate."""

    proc = None

    def stop_load(self):
        # Its whole process group: perf bench's other side of the pipe is a
        # child of its own, left blocked forever when only perf is killed.
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
        return 0

    def close(self):
        if self.proc and self.proc.poll() is None:
            self.stop_load()


class Sleepers(OneProcessLoad):
    """bench.py's scaling row "1,000 threads waking every 10 ms"
    (tools/bench/scale_load.c busy 1000), here with both tools attached in
    the same seconds rather than in turns."""

    def __init__(self, src_dir):
        self.exe = "/tmp/offcpu-bench-scale-load"
        subprocess.run(["cc", "-O0", "-fno-omit-frame-pointer", "-fno-optimize-sibling-calls",
                        "-pthread", "-o", self.exe,
                        os.path.join(src_dir, "tools", "bench", "scale_load.c")], check=True)

    def describe(self):
        return "1,000 threads waking every 10 ms (scale_load busy 1000)"

    def start_load(self):
        self.proc = subprocess.Popen([self.exe, "busy", "1000"], stdout=subprocess.PIPE,
                                     text=True, start_new_session=True)
        if self.proc.stdout.readline().strip() != "ready":
            raise RuntimeError("scale_load busy 1000 did not start")


class Churn(OneProcessLoad):
    """A host with thread churn: short threads, 8 at a time, each sleeping
    50 us once and exiting (tests/workloads/stack_storm.c churn 8): tens of
    thousands of thread/stack keys on a few stacks, what offcpu's memory
    after the window grows with."""

    def __init__(self, src_dir):
        self.exe = "/tmp/offcpu-bench-stack-storm"
        subprocess.run(["cc", "-O2", "-pthread", "-o", self.exe,
                        os.path.join(src_dir, "tests", "workloads", "stack_storm.c")],
                       check=True)

    def describe(self):
        return "thread churn (stack_storm churn 8)"

    def start_load(self):
        self.proc = subprocess.Popen([self.exe, "churn", "8"], stdout=subprocess.PIPE,
                                     text=True, start_new_session=True)
        if not self.proc.stdout.readline().startswith("ready"):
            raise RuntimeError("stack_storm churn 8 did not start")


class Pipe(OneProcessLoad):
    """bench.py's pipe load, `perf bench sched pipe`, run until stopped, with
    every tracer attached in the same seconds."""

    def describe(self):
        return "perf bench sched pipe"

    def start_load(self):
        self.proc = subprocess.Popen(["perf", "bench", "sched", "pipe", "-l", "1000000000"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     start_new_session=True)


def causes(stderr):
    """offcpu -v's counts behind the user stacks' cost, in one line."""
    def num(pattern):
        m = re.search(pattern, stderr)
        return int(m.group(1)) if m else None
    found = {
        "switches": num(r"cost: \d+ ns of BPF per context switch \((\d+) switches"),
        "user walks": num(r"by frame pointers, in (\d+) walks"),
        "before tables": num(r"readiness: (\d+) walks before their process's tables"),
        "ended unreadable": num(r"(\d+) at unreadable stack"),
        "rule cache misses": num(r"(\d+) rule cache misses"),
        "user reused": num(r"stack reuse: user (\d+) reused"),
        "kernel reused": num(r"kernel (\d+) reused"),
        "kernel walked": num(r"kernel \d+ reused, (\d+) walked again"),
        "tables ms": num(r"built in (\d+) ms"),
        "naming ms": num(r"naming (\d+) ms"),
    }
    line = ", ".join(f"{k} {v}" for k, v in found.items() if v is not None)
    by_cause = re.search(r"user stacks by cause, (.*)", stderr)
    return line + ("\n      " + by_cause.group(1) if by_cause else "")


def variant_cmd(offcpu, name, tag=""):
    args = [a.replace(".json", tag + ".json") for a in VARIANTS[name]]
    return [offcpu, "-v", "-f"] + args + ["3600"]


def tracers_of(offcpu, variants, base, base_variants, timer_only):
    """{name: (argv, its switch program's name prefix)}."""
    tracers = {name: (variant_cmd(offcpu, name), "offcpu_switch") for name in variants}
    for name in (base_variants if base else ()):  # an A/B of two builds, same seconds
        label = "base build" + ("" if name == "default" else " " + name)
        tracers[label] = (variant_cmd(base, name, "-base"), "offcpu_switch")
    tracers["libbpf-tools"] = ([sl.LIBBPF_TOOLS, "3600"], "sched_switch")
    if timer_only:
        tracers[TIMER_ONLY] = (["bpftrace", "-e", TIMER_ONLY_SCRIPT], "sched_switch")
    return tracers


def run_once(server, offcpu, variants, seconds, base=None, base_variants=("default",),
             turn=0, timer_only=False):
    """Every tracer attached at once, one after the other in an order
    reversed every other round (sl.start_tracers)."""
    tracers = tracers_of(offcpu, variants, base, base_variants, timer_only)
    procs, errs, ids = {}, {}, {}
    try:
        sl.start_tracers(tracers, procs, errs, ids, turn)
        time.sleep(0.5)
        server.start_load()
        time.sleep(1.0)
        p0 = sl.bpf_progs()
        time.sleep(seconds)
        p1 = sl.bpf_progs()
        server.stop_load()
        for p in procs.values():
            p.send_signal(signal.SIGINT)
        out = {}
        for name, (_, prefix) in tracers.items():
            cpu, rss = sl.wait_rusage(procs[name])
            errs[name].seek(0)
            r = sl.bpf_cost(ids[name], prefix, p0, p1)
            r.update(cpu=cpu, rss_kb=rss, stderr=errs[name].read())
            out[name] = r
        return out
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()


def run_alone(server, offcpu, variants, seconds, base=None, base_variants=("default",),
              turn=0, timer_only=False):
    """As run_once, but each tracer alone on the load, one after the other
    (the order reversed every other round). Attached together, tracers
    share the cache: the one that runs second at a switch finds what the
    first read (a thread's stack) already there, which decided an A/B of
    two builds on the 1,000-thread load."""
    tracers = tracers_of(offcpu, variants, base, base_variants, timer_only)
    order = list(tracers.items())
    if turn % 2:
        order.reverse()
    out = {}
    server.start_load()
    try:
        time.sleep(1.0)
        for name, (cmd, prefix) in order:
            err = tempfile.TemporaryFile("w+")
            proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)
            try:
                ids = sl.wait_progs(proc, prefix)
                time.sleep(0.5)
                p0 = sl.bpf_progs()
                time.sleep(seconds)
                p1 = sl.bpf_progs()
                proc.send_signal(signal.SIGINT)
                cpu, rss = sl.wait_rusage(proc)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
            err.seek(0)
            r = sl.bpf_cost(ids, prefix, p0, p1)
            r.update(cpu=cpu, rss_kb=rss, stderr=err.read())
            if proc.returncode or not r["switches"]:
                # Its figures are not a traced window's: say why, once.
                tail = " | ".join(r["stderr"].strip().splitlines()[-3:])
                print(f"bench: {name} exited {proc.returncode} with "
                      f"{r['switches']} switches counted: {tail}", file=sys.stderr)
            out[name] = r
    finally:
        server.stop_load()
    return out


def pairs_of(stderr):
    m = re.search(r"collected (\d+) thread/stack pairs", stderr)
    return int(m.group(1)) if m else 0


def per_pairs(name, runs):
    """offcpu's CPU and peak RSS for each 1,000 thread/stack pairs it
    collected, medians over the runs: runs of one load differ in how many
    distinct stacks they meet (8 s of pgbench: 19,000 to 29,000 pairs), and
    with them, more than from one build to another, in CPU and RSS."""
    per = [(r[name]["cpu"], r[name]["rss_kb"], pairs_of(r[name]["stderr"]))
           for r in runs]
    per = [(c, k, n) for c, k, n in per if n]
    if not per:
        return
    cpu_ms = sl.median_of([c * 1e6 / n for c, _, n in per])
    rss_kib = sl.median_of([k * 1e3 / n for _, k, n in per])
    pairs = sl.median_of([n for _, _, n in per])
    print(f"      per 1,000 thread/stack pairs: CPU {cpu_ms:.1f} ms, peak RSS "
          f"{rss_kib:.0f} KiB ({pairs:.0f} pairs, median)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(os.path.dirname(__file__), "..", "..",
                                                    "build"))
    ap.add_argument("--load", default="redis", choices=("redis", "postgres", "sleepers", "pipe", "churn"))
    ap.add_argument("--seconds", type=float, default=8)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--base", help="another build's offcpu, run beside as 'base build'")
    ap.add_argument("--base-variants", default="default",
                    help="the variants the base build runs (comma separated)")
    ap.add_argument("--stderr", action="store_true", help="print each variant's -v stderr")
    ap.add_argument("--alone", action="store_true",
                    help="each tracer alone on the load, in turns, not all attached at once")
    ap.add_argument("--timer-only", action="store_true",
                    help=f"add '{TIMER_ONLY}': what timing each switch costs, no stacks")
    args = ap.parse_args()
    if args.timer_only and not os.path.exists("/usr/bin/bpftrace"):
        sys.exit("server_breakdown: --timer-only needs bpftrace (apt-get install bpftrace)")
    variants = args.variants.split(",")
    base_variants = args.base_variants.split(",")
    for v in variants + base_variants:
        if v not in VARIANTS:
            sys.exit(f"server_breakdown: unknown variant {v!r}; one of {', '.join(VARIANTS)}")
    offcpu = os.path.join(os.path.abspath(args.build), "offcpu")
    subprocess.run(["sysctl", "-qw", "kernel.bpf_stats_enabled=1"], check=True)
    if args.load == "redis":
        server = sl.Redis()
    elif args.load == "pipe":
        server = Pipe()
    elif args.load == "sleepers":
        server = Sleepers(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    elif args.load == "churn":
        server = Churn(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    else:
        pg = sl.Postgres.available()
        if not pg:
            sys.exit("server_breakdown: postgres/pgbench not installed")
        server = sl.Postgres(pg)
    runs = []
    try:
        for turn in range(args.repeat):
            if args.alone:
                runs.append(run_alone(server, offcpu, variants, args.seconds, args.base,
                                      base_variants, turn, args.timer_only))
            else:
                runs.append(run_once(server, offcpu, variants, args.seconds, args.base,
                                     base_variants, turn, args.timer_only))
    finally:
        server.close()
        subprocess.run(["sysctl", "-qw", "kernel.bpf_stats_enabled=0"])
    together = "in turns, each alone for" if args.alone else "in the same"
    print(f"{server.describe()}: {len(variants)} offcpu variants and libbpf-tools {together} "
          f"{args.seconds} s, median of {len(runs)}; load average "
          f"{os.getloadavg()[0]:.1f}")
    if args.base:
        variants += ["base build" + ("" if v == "default" else " " + v) for v in base_variants]
    for name in variants + ["libbpf-tools"] + ([TIMER_ONLY] if args.timer_only else []):
        ns = sl.median_of([r[name]["ns"] for r in runs])
        ratio = sl.median_of([r[name]["ns"] / r["libbpf-tools"]["ns"] for r in runs])
        cpu = sl.median_of([r[name]["cpu"] for r in runs])
        cpu_ratio = sl.median_of([r[name]["cpu"] / r["libbpf-tools"]["cpu"] for r in runs])
        rss = sl.median_of([r[name]["rss_kb"] for r in runs]) / 1024
        rss_ratio = sl.median_of([r[name]["rss_kb"] / r["libbpf-tools"]["rss_kb"] for r in runs])
        # The timeline's budget is against the same build's default, run by
        # run.
        own, ref = "", "base build" if name.startswith("base build") else "default"
        if ref in variants and name not in (ref, "libbpf-tools", TIMER_ONLY):
            own = f"  {sl.median_of([r[name]['ns'] / r[ref]['ns'] for r in runs]):5.2f}x " \
                  f"its {ref}"
        print(f"  {name:18} {ns:8.0f} ns/switch  {ratio:5.2f}x  CPU {cpu:5.2f} s "
              f"({cpu_ratio:4.2f}x)  peak RSS {rss:6.1f} MiB ({rss_ratio:4.2f}x){own}")
        mid = sorted(runs, key=lambda r: r[name]["ns"])[len(runs) // 2][name]
        parts = [f"{p} {c} x {n / c:.0f}" for p, (n, c) in sorted(mid["per_prog"].items()) if c]
        print("      " + "; ".join(parts))
        if name not in ("libbpf-tools", TIMER_ONLY):
            print("      " + causes(mid["stderr"]))
            per_pairs(name, runs)
        if args.stderr and name not in ("libbpf-tools", TIMER_ONLY):
            for line in mid["stderr"].splitlines():
                print("      | " + line)


if __name__ == "__main__":
    main()
