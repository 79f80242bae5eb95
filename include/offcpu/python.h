/* CPython frames in user stacks (issue #32): what user space tells the BPF
 * walker of a Python process, and how Python frames are stored among a user
 * stack's addresses. Shared by bpf/python.bpf.h and src/symbolize/python.*. */
#ifndef OFFCPU_PYTHON_H
#define OFFCPU_PYTHON_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

/* A Python frame takes two words of a stored user stack, after the native
 * frames (which end at the root): first the code object's address, then
 * the instruction. Both are tagged in their top 16 bits, a range that is
 * neither user (below 2^47) nor kernel (0xffff8...) space, so nothing that
 * reads a user stack as addresses takes them for code. */
#define OFFCPU_PY_TAG_MASK 0xffff000000000000ULL
#define OFFCPU_PY_CODE_TAG 0x7079000000000000ULL  /* | code object address */
#define OFFCPU_PY_INSTR_TAG 0x7078000000000000ULL /* | see below */
/* The instruction word: bits 0-31 the index of the instruction the frame
 * runs (in 16-bit code units from the start of its bytecode) plus one, 0 if
 * unknown; bits 32-39 the frame's byte at offset frame_entry, as read (3.11:
 * is_entry, a new call of _PyEval_EvalFrameDefault began there; 3.12 and
 * 3.13: owner, 3 on the shim frame each such call pushes). User space reads
 * it per version. */
#define OFFCPU_PY_INSTR_MARK_SHIFT 32
#define OFFCPU_PY_OWNED_BY_CSTACK 3 /* 3.12+: FRAME_OWNED_BY_CSTACK */
#define OFFCPU_PY_ADDR_MASK 0x0000ffffffffffffULL

/* Frames of one Python chain walked at most (each costs a few reads). */
#define OFFCPU_PY_MAX_FRAMES 48
/* Threads of an interpreter searched for the one blocking, at most. */
#define OFFCPU_PY_MAX_THREADS 64

/* What the walker needs of one Python process (the py_procs map, keyed by
 * process id, filled by user space once per process). `runtime` 0: the
 * process was looked at and is not a Python it knows: walked as native
 * code, with no further lookup for its threads. Offsets are in bytes;
 * 0xffff: the field does not exist in this version. */
struct offcpu_py_proc {
  __u64 runtime;        /* &_PyRuntime in the process */
  __u16 interp_head;    /* _PyRuntime.interpreters.head */
  __u16 interp_threads; /* PyInterpreterState.threads.head */
  __u16 ts_next;        /* PyThreadState.next */
  __u16 ts_native_tid;  /* PyThreadState.native_thread_id */
  __u16 ts_cframe;      /* PyThreadState.cframe (0xffff: none, 3.13) */
  __u16 frame_current;  /* _PyCFrame.current_frame (3.13: in tstate) */
  __u16 frame_code;     /* _PyInterpreterFrame.f_code */
  __u16 frame_previous; /* .previous */
  __u16 frame_instr;    /* .prev_instr (3.13 instr_ptr, 3.10 f_lasti) */
  __u16 frame_entry;    /* .is_entry or .owner (a byte; 0xffff: none) */
  __u16 code_bytecode;  /* PyCodeObject.co_code_adaptive */
  __u16 flags;          /* OFFCPU_PY_F_* */
  __u16 pad[4];
};

/* 3.10: frame_instr is f_lasti, an int index of the last instruction (-1
 * before the first), not a pointer into the bytecode. */
#define OFFCPU_PY_F_LASTI 1
/* 3.10: thread states record no native thread id; ts_native_tid is then
 * thread_id, the creating thread's pthread_t, which on x86-64 glibc is the
 * thread's fs base. */
#define OFFCPU_PY_F_PTHREAD 2

/* Counters of the Python walker (-v), indexes of the py_stats array. */
enum offcpu_py_stat {
  OFFCPU_PY_CHAINS = 0, /* Python chains walked */
  OFFCPU_PY_FRAMES,     /* Python frames stored */
  OFFCPU_PY_NO_THREAD,  /* no thread state for the thread (not Python's) */
  OFFCPU_PY_FAULT,      /* a read of the interpreter's memory failed */
  OFFCPU_PY_DEPTH,      /* chain longer than the limit: cut */
  OFFCPU_PY_NO_ROOM,    /* no room left in the stack after native frames */
  OFFCPU_PY_CHECKED,    /* chains walked only to check a thread's memo */
  OFFCPU_PY_STAT_NR,
};

#endif /* OFFCPU_PYTHON_H */
