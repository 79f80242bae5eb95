#!/usr/bin/env python3
"""Writes a large folded-stacks file for `offcpu flamegraph` benchmarks.

The stacks are walks through a fixed random call graph (a few thousand
distinct functions, deep stacks, kernel frames marked _[k]), drawn from a
set of distinct stacks with a skewed popularity, as a long whole-system
profile concatenated from many runs looks. Same seed, same bytes.

  tools/bench/gen_folded.py --lines 914000 > /tmp/big.folded     # ~200 MB
  /usr/bin/time -f '%e s %M KB' offcpu flamegraph /tmp/big.folded > /dev/null
"""
import argparse
import random
import sys


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lines", type=int, default=914000)
    ap.add_argument("--functions", type=int, default=4000)
    ap.add_argument("--stacks", type=int, default=40000,
                    help="distinct stacks the lines are drawn from")
    ap.add_argument("--min-depth", type=int, default=14)
    ap.add_argument("--max-depth", type=int, default=30)
    ap.add_argument("--seed", type=int, default=27)
    a = ap.parse_args()
    rnd = random.Random(a.seed)

    parts = ["http", "db", "pool", "io", "json", "lock", "buf", "rpc", "ssl",
             "cache", "alloc", "sched", "net", "log", "task", "str"]
    names = []
    for i in range(a.functions):
        names.append("%s_%d" % (rnd.choice(parts), i))
    kernel = ["k_%s_%d" % (rnd.choice(parts), i) for i in range(300)]
    # Each function calls a few others: the walks share their prefixes.
    callees = [rnd.sample(range(a.functions), rnd.randint(1, 4))
               for _ in range(a.functions)]
    kcallees = [rnd.sample(range(len(kernel)), rnd.randint(1, 3))
                for _ in range(len(kernel))]
    comms = ["worker-%d" % i for i in range(40)] + ["postgres", "redis-server",
                                                    "nginx", "python3"]
    entries = rnd.sample(range(a.functions), 30)

    stacks = []
    for _ in range(a.stacks):
        depth = rnd.randint(a.min_depth, a.max_depth)
        f = rnd.choice(entries)
        frames = [rnd.choice(comms)]
        for _ in range(depth - 6):
            frames.append(names[f])
            f = rnd.choice(callees[f])
        k = rnd.randrange(len(kernel))
        for _ in range(6):
            frames.append(kernel[k] + "_[k]")
            k = rnd.choice(kcallees[k])
        stacks.append(";".join(frames))

    out = sys.stdout
    buf = []
    for _ in range(a.lines):
        # Popularity falls off as in real profiles: a few stacks dominate.
        s = stacks[min(int(rnd.paretovariate(1.1)) - 1, a.stacks - 1)
                   if rnd.random() < 0.3 else rnd.randrange(a.stacks)]
        buf.append("%s %d\n" % (s, rnd.randint(1, 50000)))
        if len(buf) >= 10000:
            out.write("".join(buf))
            buf = []
    out.write("".join(buf))


if __name__ == "__main__":
    main()
