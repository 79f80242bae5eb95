#!/usr/bin/env python3
"""Fails if a BPF program's deepest call chain needs more than 512 bytes of
stack, as the verifier counts it on kernels without private stacks (before
6.13, and builds whose JIT has none): each function's frame rounded up to
16 bytes, summed along every chain of calls and bpf_loop callbacks from the
program. A kernel with private stacks loads such a program anyway, so the
development machine may not show it; Ubuntu 24.04's 6.8 and Debian 13's
6.12 refuse it.

The frame of a function is the deepest r10 offset its code uses, read from
llvm-objdump's listing: what the compiler allocated, at least what the
verifier counts (only the offsets its paths touch).

Usage: tools/bpf-stack-depth.py LLVM_OBJDUMP OBJECT|DIR... [--list]
(a directory: its *.bpf.o)
"""
import collections
import glob
import os
import re
import subprocess
import sys

LIMIT = 512


def frames_and_calls(objdump, obj):
    """Each function's frame and the functions it calls or passes as a
    callback, and which functions are programs (outside .text)."""
    out = subprocess.run([objdump, "-dr", "--no-show-raw-insn", obj],
                         check=True, capture_output=True, text=True).stdout
    frame = collections.defaultdict(int)
    calls = collections.defaultdict(set)
    programs, text_at = set(), {}
    section = cur = None
    imm = None
    for line in out.splitlines():
        m = re.match(r"^Disassembly of section (\S+):", line)
        if m:
            section = m.group(1)
            continue
        m = re.match(r"^([0-9a-f]+) <([^>]+)>:", line)
        if m:
            if not m.group(2).startswith("LBB"):
                cur = m.group(2)
                frame[cur] += 0
                if section == ".text":
                    text_at[int(m.group(1), 16)] = cur
                else:
                    programs.add(cur)
            continue
        if cur is None:
            continue
        for off in re.findall(r"r10 - (\d+)\)", line):
            frame[cur] = max(frame[cur], int(off))
        m = re.match(r"\s+[0-9a-f]+:\s+r\d+ = (\d+) ll", line)
        if m:
            imm = int(m.group(1))
        m = re.search(r"R_BPF_64_32\s+(\S+)", line)
        if m and m.group(1) != ".text":
            calls[cur].add(m.group(1))  # a call (kfuncs are dropped below)
        if re.search(r"R_BPF_64_64\s+\.text", line) and imm is not None:
            calls[cur].add(("at", imm))  # a callback's address
    for f in calls:
        calls[f] = {text_at.get(c[1], "") if isinstance(c, tuple) else c
                    for c in calls[f]} & set(frame)
    return frame, calls, programs


def deepest(f, frame, calls, seen=()):
    """The deepest chain from f: (bytes, [functions])."""
    own = (frame[f] + 15) // 16 * 16
    best, path = 0, []
    for g in calls[f]:
        if g not in seen:
            d, p = deepest(g, frame, calls, seen + (f,))
            if d > best:
                best, path = d, p
    return own + best, [f"{f}({frame[f]})"] + path


def main():
    args = [a for a in sys.argv[1:] if a != "--list"]
    listing = "--list" in sys.argv
    if len(args) < 2:
        sys.exit(__doc__)
    objects = []
    for a in args[1:]:
        objects += (sorted(glob.glob(os.path.join(a, "*.bpf.o")))
                    if os.path.isdir(a) else [a])
    if not objects:
        sys.exit("no BPF objects in " + " ".join(args[1:]))
    bad = 0
    for obj in objects:
        frame, calls, programs = frames_and_calls(args[0], obj)
        for prog in sorted(programs):
            d, path = deepest(prog, frame, calls)
            if d > LIMIT or listing:
                print(f"{obj}: {prog}: {d} bytes: {' -> '.join(path)}")
            bad += d > LIMIT
    if bad:
        print(f"{bad} programs over the {LIMIT}-byte stack of kernels "
              "without private stacks", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
