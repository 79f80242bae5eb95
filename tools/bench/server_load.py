"""The server load of tools/bench/bench.py (issue 27): redis-server under
redis-benchmark with 50 clients, and postgres under pgbench where it is
installed, with offcpu and libbpf-tools' offcputime attached whole-system
in the same seconds.

The pipe benchmark repeats two stacks; a server's threads block in many
places, wake each other across processes and come and go, which is where
stack memos miss and per-thread state is cold. Both tools see the same
switches here, so their ratio holds however busy the machine is.

For each tool it measures:
  - BPF ns per switch: the run time of every program the tool attached,
    over the run count of its sched_switch program, in the same seconds
    (kernel.bpf_stats_enabled=1); the programs are the ones the tool's
    process holds (/proc/PID/fdinfo), not others of the same name;
  - its CPU (user + system, start-up and output included) per second
    traced, and its peak RSS (wait4's rusage of that process);
  - offcpu's own account of its stack memos (-v), and what it lost.
"""
import glob
import json
import os
import pwd
import re
import shutil
import signal
import subprocess
import tempfile
import time

LIBBPF_TOOLS = "/usr/sbin/offcputime"
PG_BIN = "/usr/lib/postgresql/*/bin"
# offcpu's task iterators run at start and stop, not per switch.
ITERATORS = ("offcpu_seed_", "offcpu_flush")


def bpf_progs():
    out = subprocess.run(["bpftool", "prog", "show", "-j"], check=True,
                         capture_output=True, text=True).stdout
    return {p["id"]: p for p in json.loads(out)}


def progs_held_by(pid):
    """Ids of the BPF programs process `pid` holds a descriptor of (programs
    and links name their program in fdinfo)."""
    ids = set()
    for info in glob.glob(f"/proc/{pid}/fdinfo/*"):
        try:
            with open(info) as f:
                m = re.search(r"^prog_id:\s+(\d+)", f.read(), re.M)
        except OSError:
            continue
        if m:
            ids.add(int(m.group(1)))
    return ids


def wait_progs(proc, switch_prefix, timeout=120.0):
    """The programs of tracer `proc` once its sched_switch program runs (a
    loaded host takes tens of seconds to load several tracers at once)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"tracer exited with {proc.returncode} before attaching")
        ids = progs_held_by(proc.pid)
        progs = bpf_progs()
        if any(progs.get(i, {}).get("name", "").startswith(switch_prefix)
               and progs[i].get("run_cnt", 0) > 0 for i in ids):
            return ids
        time.sleep(0.05)
    raise RuntimeError(f"no {switch_prefix}* program of PID {proc.pid} ran")


def start_tracers(tracers, procs, errs, ids, turn=0):
    """Starts `tracers` ({name: (argv, switch program prefix)}) one after
    the other, each attached before the next starts, in their order, reversed
    on odd turns. At a switch the program attached first runs first and
    takes the cache misses on the task's state the others then find warm (an
    A/B of one build against itself measured 534 vs 412 ns per switch): in
    a fixed or racing order one tool would always have the warm place.
    Fills procs, errs and ids as it goes (the caller kills what it
    started)."""
    order = list(tracers.items())
    if turn % 2:
        order.reverse()
    for name, (cmd, prefix) in order:
        errs[name] = tempfile.TemporaryFile("w+")
        procs[name] = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=errs[name])
        ids[name] = wait_progs(procs[name], prefix)


def bpf_cost(ids, switch_prefix, p0, p1):
    """ns of BPF per switch between snapshots p0 and p1, switches, and the
    task iterators' time apart."""
    def delta(i, k):
        return p1.get(i, {}).get(k, 0) - p0.get(i, {}).get(k, 0)
    live = [i for i in ids if i in p0 and i in p1]
    passes = [i for i in live if p1[i].get("name", "").startswith(ITERATORS)]
    run_ns = sum(delta(i, "run_time_ns") for i in live if i not in passes)
    switches = max([delta(i, "run_cnt") for i in live
                    if p1[i].get("name", "").startswith(switch_prefix)] or [0])
    per_prog = {p1[i].get("name", str(i)): (delta(i, "run_time_ns"), delta(i, "run_cnt"))
                for i in live}
    return {"ns": run_ns / switches if switches else float("nan"), "switches": switches,
            "passes_ns": sum(delta(i, "run_time_ns") for i in passes), "per_prog": per_prog}


def wait_rusage(proc, timeout=120.0):
    """(CPU s, peak RSS KiB) of the child `proc`, once it exits."""
    deadline = time.time() + timeout
    while True:
        pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            return ru.ru_utime + ru.ru_stime, ru.ru_maxrss
        if time.time() > deadline:
            proc.kill()
            deadline = time.time() + 10
        time.sleep(0.02)


# ---- The servers ----

def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Redis:
    name = "redis"

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="offcpu-bench-redis-")
        self.port = free_port()
        self.server = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
             "--save", "", "--appendonly", "no", "--dir", self.dir],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        for _ in range(200):
            r = subprocess.run(["redis-cli", "-p", str(self.port), "ping"],
                               capture_output=True, text=True)
            if r.stdout.strip() == "PONG":
                break
            time.sleep(0.05)
        else:
            self.close()
            raise RuntimeError("redis-server did not answer")
        self.client = None

    def describe(self):
        return "redis-server, redis-benchmark -c 50 (SET, GET, LPUSH, LPOP)"

    def commands(self):
        out = subprocess.run(["redis-cli", "-p", str(self.port), "info", "stats"],
                             capture_output=True, text=True).stdout
        m = re.search(r"total_commands_processed:(\d+)", out)
        return int(m.group(1)) if m else 0

    def start_load(self):
        self.c0, self.t0 = self.commands(), time.monotonic()
        self.client = subprocess.Popen(
            ["redis-benchmark", "-p", str(self.port), "-c", "50", "-n", "100000",
             "-t", "set,get,lpush,lpop", "-l", "-q"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)

    def stop_load(self):
        """Ops per second since start_load."""
        c1, t1 = self.commands(), time.monotonic()
        os.killpg(self.client.pid, signal.SIGKILL)
        self.client.wait()
        return (c1 - self.c0) / (t1 - self.t0)

    def close(self):
        if self.client and self.client.poll() is None:
            os.killpg(self.client.pid, signal.SIGKILL)
            self.client.wait()
        os.killpg(self.server.pid, signal.SIGKILL)
        self.server.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


class Postgres:
    """A throwaway cluster in a temporary directory, run as the postgres
    user (the server refuses root), reached by a Unix socket there."""
    name = "postgres"

    @staticmethod
    def available():
        bins = sorted(glob.glob(PG_BIN))
        if not bins or not shutil.which("pgbench") and not os.path.exists(
                os.path.join(bins[-1], "pgbench")):
            return None
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return None
        return bins[-1]

    def __init__(self, bindir, scale=10):
        self.bin = bindir
        user = pwd.getpwnam("postgres")
        self.dir = tempfile.mkdtemp(prefix="offcpu-bench-pg-")
        os.chown(self.dir, user.pw_uid, user.pw_gid)
        self.data = os.path.join(self.dir, "data")
        self.port = str(free_port())
        self.client = None
        self.as_pg = ["runuser", "-u", "postgres", "--"]
        self.pg(["initdb", "-D", self.data, "-A", "trust", "-U", "postgres", "--no-sync"])
        self.pg(["pg_ctl", "-D", self.data, "-l", os.path.join(self.dir, "log"), "-w",
                 "-o", f"-p {self.port} -k {self.dir} -c listen_addresses=''", "start"])
        self.started = True
        self.pgbench(["-i", "-q", "-s", str(scale)])

    def pg(self, cmd, **kw):
        return subprocess.run(self.as_pg + [os.path.join(self.bin, cmd[0])] + cmd[1:],
                              check=True, capture_output=True, text=True, cwd=self.dir, **kw)

    def pgbench_cmd(self, args):
        exe = os.path.join(self.bin, "pgbench")
        if not os.path.exists(exe):
            exe = shutil.which("pgbench")
        return self.as_pg + [exe, "-h", self.dir, "-p", self.port, "-U", "postgres"] + args + [
            "postgres"]

    def pgbench(self, args):
        return subprocess.run(self.pgbench_cmd(args), check=True, capture_output=True,
                              text=True, cwd=self.dir)

    def describe(self):
        return "postgres, pgbench -c 8 -j 2 (TPC-B like, scale 10)"

    def start_load(self, seconds=3600):
        # -P 1: a progress line a second on stderr, which is all there is to
        # read when it is interrupted.
        self.client = subprocess.Popen(
            self.pgbench_cmd(["-c", "8", "-j", "2", "-P", "1", "-T", str(seconds)]),
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=self.dir,
            start_new_session=True)

    def stop_load(self):
        """Transactions per second: the mean of pgbench's progress lines."""
        os.killpg(self.client.pid, signal.SIGINT)
        try:
            err = self.client.communicate(timeout=30)[1]
        except subprocess.TimeoutExpired:
            # Seen once: pgbench deaf to SIGINT for a minute. Its progress
            # lines so far are still in the pipe.
            os.killpg(self.client.pid, signal.SIGKILL)
            err = self.client.communicate()[1]
        tps = [float(x) for x in re.findall(r"progress: [0-9.]+ s, ([0-9.]+) tps", err)]
        return sum(tps) / len(tps) if tps else float("nan")

    def close(self):
        if self.client and self.client.poll() is None:
            os.killpg(self.client.pid, signal.SIGKILL)
            self.client.wait()
        if getattr(self, "started", False):
            subprocess.run(self.as_pg + [os.path.join(self.bin, "pg_ctl"), "-D", self.data,
                                         "-m", "immediate", "stop"],
                           capture_output=True, cwd=self.dir)
        shutil.rmtree(self.dir, ignore_errors=True)


# ---- One traced run ----

def traced_run(server, offcpu, seconds, offcpu_args=(), turn=0):
    """Both tools attached whole-system, the load run for `seconds` while
    they are, then both stopped with SIGINT at once; offcpu attached first
    on even turns, libbpf-tools on odd ones (start_tracers)."""
    tracers = {
        "offcpu": ([offcpu, "-v", "-f"] + list(offcpu_args) + ["3600"], "offcpu_switch"),
        "libbpf-tools": ([LIBBPF_TOOLS, "3600"], "sched_switch"),
    }
    procs, errs, ids = {}, {}, {}
    try:
        start_tracers(tracers, procs, errs, ids, turn)
        time.sleep(0.5)  # past the start-up passes over blocked threads
        server.start_load()
        time.sleep(1.0)  # the load's own start-up (connections, forks) left out
        p0, t0 = bpf_progs(), time.monotonic()
        time.sleep(seconds)
        p1, t1 = bpf_progs(), time.monotonic()
        ops = server.stop_load()
        for p in procs.values():
            p.send_signal(signal.SIGINT)
        traced = time.monotonic() - t0
        out = {"ops": ops, "seconds": t1 - t0}
        for name, (_, prefix) in tracers.items():
            cpu, rss = wait_rusage(procs[name])
            errs[name].seek(0)
            r = bpf_cost(ids[name], prefix, p0, p1)
            # Whole run: start-up and output included, over the seconds
            # traced (from attach to SIGINT, about the same for both).
            r.update(cpu=cpu, rss_kb=rss, traced_s=traced, stderr=errs[name].read(),
                     rc=procs[name].returncode)
            out[name] = r
        return out
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()


def memo_rates(stderr):
    """offcpu -v's stack reuse line: (user reused, user walked again,
    kernel reused, kernel walked again)."""
    m = re.search(r"stack reuse: user (\d+) reused, (\d+) walked again.*?"
                  r"kernel (\d+) reused, (\d+) walked again", stderr)
    return tuple(int(x) for x in m.groups()) if m else None


def run_server_loads(offcpu, seconds, repeat, log=print):
    """Every server load that can run here: {name: [runs]}."""
    loads = []
    if shutil.which("redis-server") and shutil.which("redis-benchmark"):
        loads.append(("redis", Redis))
    else:
        log("bench: redis-server/redis-benchmark not found (apt-get install redis-server "
            "redis-tools): no redis load")
    pg = Postgres.available()
    if pg:
        loads.append(("postgres", lambda: Postgres(pg)))
    else:
        log("bench: postgres not found (apt-get install postgresql postgresql-contrib): "
            "no pgbench load")
    results = {}
    for name, make in loads:
        server = make()
        try:
            results[name] = {"describe": server.describe(), "runs": [], "timeline": []}
            for turn in range(max(1, repeat)):
                results[name]["runs"].append(traced_run(server, offcpu, seconds, (), turn))
                # The timeline (issue 29) at its default threshold right
                # after, each pair within the same minute: budget 1.3x.
                results[name]["timeline"].append(traced_run(
                    server, offcpu, seconds, ["-o", "/tmp/offcpu-bench-trace.json"], turn))
        finally:
            server.close()
    return results


def median_of(values):
    v = sorted(values)
    return v[len(v) // 2] if v else float("nan")


def print_server_table(results, seconds):
    """The table of the server loads; each figure the median of the runs."""
    for name, res in results.items():
        runs = res["runs"]
        print(f"{res['describe']}: both tools whole-system in the same {seconds} s, "
              f"median of {len(runs)} runs")
        print(f"  {'':14} {'BPF ns/switch':>14} {'switches':>9} {'CPU s/s traced':>15} "
              f"{'CPU s':>7} {'peak RSS MiB':>13}")
        for tool in ("offcpu", "libbpf-tools"):
            print(f"  {tool:14} {median_of([r[tool]['ns'] for r in runs]):>14.0f} "
                  f"{median_of([r[tool]['switches'] for r in runs]):>9} "
                  f"{median_of([r[tool]['cpu'] / r[tool]['traced_s'] for r in runs]):>15.3f} "
                  f"{median_of([r[tool]['cpu'] for r in runs]):>7.2f} "
                  f"{median_of([r[tool]['rss_kb'] for r in runs]) / 1024:>13.1f}")
        tl = res.get("timeline", [])
        if tl:
            print(f"  {'offcpu -o trace.json':14} "
                  f"{median_of([r['offcpu']['ns'] for r in tl]):>14.0f} "
                  f"{median_of([r['offcpu']['switches'] for r in tl]):>9} "
                  f"{median_of([r['offcpu']['cpu'] / r['offcpu']['traced_s'] for r in tl]):>15.3f} "
                  f"{median_of([r['offcpu']['cpu'] for r in tl]):>7.2f} "
                  f"{median_of([r['offcpu']['rss_kb'] for r in tl]) / 1024:>13.1f}")
        ns = median_of([r["offcpu"]["ns"] / r["libbpf-tools"]["ns"] for r in runs])
        cpu = median_of([r["offcpu"]["cpu"] / r["libbpf-tools"]["cpu"] for r in runs])
        rss = median_of([r["offcpu"]["rss_kb"] / r["libbpf-tools"]["rss_kb"] for r in runs])
        print(f"  load throughput while traced: {median_of([r['ops'] for r in runs]):.0f} "
              f"{'commands' if name == 'redis' else 'transactions'}/s")

        def goal(text, value, limit):
            print(f"  {text:37}{value:.2f}  (goal <= {limit}: "
                  f"{'met' if value <= limit else 'NOT met'})")
        goal("offcpu/libbpf-tools, BPF ns/switch", ns, 0.25)
        if tl:
            # Each timeline run against the default run just before it.
            goal("timeline/offcpu, BPF ns/switch",
                 median_of([t["offcpu"]["ns"] / r["offcpu"]["ns"] for r, t in zip(runs, tl)]),
                 1.3)
        goal("offcpu/libbpf-tools, CPU", cpu, 2)
        goal("offcpu/libbpf-tools, peak RSS", rss, 2)
        # Per program, from the median run by cost: where offcpu's time goes.
        mid = sorted(runs, key=lambda r: r["offcpu"]["ns"])[len(runs) // 2]
        for what, of in (("", runs), (" -o trace.json", tl)):
            if not of:
                continue
            m = sorted(of, key=lambda r: r["offcpu"]["ns"])[len(of) // 2]
            parts = []
            for prog, (ns_, cnt) in sorted(m["offcpu"]["per_prog"].items()):
                if cnt:
                    parts.append(f"{prog} {cnt} runs x {ns_ / cnt:.0f} ns")
            print(f"  offcpu{what}'s programs (median run): " + "; ".join(parts))
        memo = memo_rates(mid["offcpu"]["stderr"])
        if memo:
            ur, uw, kr, kw = memo

            def rate(a, b):
                return f"{a / (a + b) * 100:.0f}%" if a + b else "n/a"
            print(f"  offcpu's stack memos (-v): user {rate(ur, uw)} reused ({ur} of {ur + uw}),"
                  f" kernel {rate(kr, kw)} ({kr} of {kr + kw})")
        lost = [l.split("warning: ", 1)[1] for l in mid["offcpu"]["stderr"].splitlines()
                if "warning:" in l]
        if lost:
            print("  offcpu's warnings (median run): " + " | ".join(w[:160] for w in lost))
        print()
