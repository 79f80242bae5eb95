"""What bpftool 7.1 does not print of a loaded BPF program: the instructions
the verifier processed and when the load began (bpf_prog_info's
verified_insns, 5.16+, and load_time), read with the bpf(2) system call.
Consecutive programs of one loader began their loads one after the other,
so the gap between two load times is the first one's verification: where
offcpu's start-up goes, program by program.
"""
import ctypes
import os
import struct

_libc = ctypes.CDLL(None, use_errno=True)
_SYS_BPF = 321  # x86-64
_BPF_PROG_GET_FD_BY_ID = 13
_BPF_OBJ_GET_INFO_BY_FD = 15
_INFO_SIZE = 256
# Offsets in struct bpf_prog_info (include/uapi/linux/bpf.h).
_LOAD_TIME = 40
_NAME = 64
_VERIFIED_INSNS = 216


def _bpf(cmd, attr):
    buf = ctypes.create_string_buffer(attr, 128)
    return _libc.syscall(_SYS_BPF, cmd, buf, 128)


def prog_info(prog_id):
    """(name, load time in ns since boot, verified instructions) of a program,
    or None if it is gone."""
    fd = _bpf(_BPF_PROG_GET_FD_BY_ID, struct.pack("I", prog_id))
    if fd < 0:
        return None
    try:
        info = ctypes.create_string_buffer(_INFO_SIZE)
        if _bpf(_BPF_OBJ_GET_INFO_BY_FD,
                struct.pack("IIQ", fd, _INFO_SIZE, ctypes.addressof(info))) < 0:
            return None
        raw = info.raw
        return (raw[_NAME:_NAME + 16].split(b"\0")[0].decode(),
                struct.unpack_from("Q", raw, _LOAD_TIME)[0],
                struct.unpack_from("I", raw, _VERIFIED_INSNS)[0])
    finally:
        os.close(fd)


def load_report(prog_ids):
    """[(name, verified instructions, ms until the next program's load
    began; None for the last)] in load order."""
    rows = sorted((i for i in (prog_info(p) for p in prog_ids) if i), key=lambda r: r[1])
    out = []
    for k, (name, t, insns) in enumerate(rows):
        nxt = rows[k + 1][1] if k + 1 < len(rows) else None
        out.append((name, insns, (nxt - t) / 1e6 if nxt else None))
    return out
