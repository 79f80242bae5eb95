#!/usr/bin/env python3
"""Fails if a BPF program's deepest call chain needs more than 512 bytes of
stack, as the verifier counts it on kernels without private stacks (before
6.13, and builds whose JIT has none): the frames of a chain of calls and
bpf_loop callbacks from the program, summed. Each frame is rounded up to 32
bytes and counts at least 32, as 6.8 counts it (6.9+ round to 16 when
JITed): the stricter rule. A kernel with private stacks loads a program
over the limit anyway, so the development machine may not show it; Ubuntu
24.04's 6.8 and Debian 13's 6.12 refuse it.

A function's frame is the deepest stack offset its code uses, from
llvm-objdump's listing: r10-relative loads and stores, and pointers made
from r10 (a helper's or bpf_loop's argument). That is what the compiler
allocated, at least what the verifier counts (the offsets its paths touch).
Calls are pseudo calls (by relocation against a function, or against
.text, or by offset within .text) and functions passed as callbacks
(ld_imm64 relocated against a function or .text); a call or callback
whose target cannot be found fails the check rather than being dropped.

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
ROUND = 32

INSN = re.compile(r"^\s+(\d+):\s+((?:[0-9a-f]{2} ){7}(?:[0-9a-f]{2} ){0,8}[0-9a-f]{2})\s+(.*)$")
RELOC = re.compile(r"^\s+[0-9a-f]+:\s+(R_BPF_\w+)\s+(\S+)")


class Unresolved(Exception):
    pass


def listing(objdump, obj):
    """(section, index, raw bytes, text) per instruction, and each
    instruction's relocation, from llvm-objdump; function symbols by
    section and index."""
    out = subprocess.run([objdump, "-dr", obj], check=True,
                         capture_output=True, text=True).stdout
    insns, funcs, section = [], [], None
    for line in out.splitlines():
        m = re.match(r"^Disassembly of section (\S+):", line)
        if m:
            section = m.group(1)
            continue
        m = re.match(r"^([0-9a-f]+) <([^>]+)>:", line)
        if m:
            if not m.group(2).startswith("LBB"):
                funcs.append((section, int(m.group(1), 16) // 8, m.group(2)))
            continue
        m = INSN.match(line)
        if m:
            raw = bytes.fromhex(m.group(2).replace(" ", ""))[:8]
            insns.append([section, int(m.group(1)), raw, m.group(3), None])
            continue
        m = RELOC.match(line)
        if m and insns:
            insns[-1][4] = (m.group(1), m.group(2))
    return insns, funcs


def frames_and_calls(objdump, obj):
    insns, funcs = listing(objdump, obj)
    at = {(s, i): name for s, i, name in funcs}
    names = {name for _, _, name in funcs}
    frame = collections.defaultdict(int)
    calls = collections.defaultdict(set)
    programs = {name for s, _, name in funcs if s != ".text"}
    cur, r10_copy = None, set()

    def text_target(off_bytes, what):
        name = at.get((".text", off_bytes // 8))
        if name is None:
            raise Unresolved(f"{obj}: {cur}: {what} at .text+{off_bytes}")
        return name

    for section, idx, raw, text, reloc in insns:
        cur = at.get((section, idx), cur)
        for off in re.findall(r"r10 - (\d+)\)", text):
            frame[cur] = max(frame[cur], int(off))
        # A pointer into the stack: rN = r10, then rN += -K.
        m = re.match(r"r(\d+) = r10$", text)
        if m:
            r10_copy.add(m.group(1))
            continue
        m = re.match(r"r(\d+) \+= -(\d+)$", text)
        if m and m.group(1) in r10_copy:
            frame[cur] = max(frame[cur], int(m.group(2)))
        m = re.match(r"r(\d+) ", text)
        if m:
            r10_copy.discard(m.group(1))
        opcode, regs = raw[0], raw[1]
        imm = int.from_bytes(raw[4:8], "little", signed=True)
        if opcode == 0x85 and regs >> 4 == 1:  # a call of a BPF function
            if reloc and reloc[1] != ".text":
                target = reloc[1]
                if target not in names:
                    continue  # a kfunc: the kernel's, not on this stack
            elif reloc:
                target = text_target((imm + 1) * 8, "call")
            elif section == ".text":
                target = text_target((idx + imm + 1) * 8, "call")
            else:
                raise Unresolved(f"{obj}: {cur}: call without target")
            calls[cur].add(target)
        elif opcode == 0x18 and reloc and reloc[1] == ".text":
            # A function's address (a callback) as .text plus its byte
            # offset in the immediate: how clang refers to a static one.
            calls[cur].add(text_target(imm, "callback"))
        elif opcode == 0x18 and reloc and reloc[1] in names:
            calls[cur].add(reloc[1])  # address of a function, as a callback
    return frame, calls, programs


def deepest(f, frame, calls, seen=()):
    """The deepest chain from f: (bytes, [functions])."""
    own = (max(frame[f], 1) + ROUND - 1) // ROUND * ROUND
    best, path = 0, []
    for g in calls[f]:
        if g not in seen:
            d, p = deepest(g, frame, calls, seen + (f,))
            if d > best:
                best, path = d, p
    return own + best, [f"{f}({frame[f]})"] + path


def main():
    args = [a for a in sys.argv[1:] if a != "--list"]
    show = "--list" in sys.argv
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
        try:
            frame, calls, programs = frames_and_calls(args[0], obj)
        except Unresolved as e:
            print(f"cannot follow {e}", file=sys.stderr)
            bad += 1
            continue
        for prog in sorted(programs):
            d, path = deepest(prog, frame, calls)
            if d > LIMIT or show:
                print(f"{obj}: {prog}: {d} bytes: {' -> '.join(path)}")
            bad += d > LIMIT
    if bad:
        print(f"{bad} programs over the {LIMIT}-byte stack of kernels "
              "without private stacks (or not followed)", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
