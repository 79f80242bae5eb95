/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* CPython frames (issue #32): after the native walk of a Python thread's
 * user stack, the interpreter's own chain of frames is walked in its memory
 * and stored after the native frames (two tagged words a frame, layout in
 * include/offcpu/python.h). User space names them and puts them in place
 * of the interpreter's C frames.
 *
 * The thread's state is found by its native thread id among its
 * interpreter's threads (3.11+ record it; a blocked thread has released
 * the GIL, so the runtime's "current" thread is someone else), then kept
 * per thread and checked with one read. Every read is bounded and may
 * fail: a process whose memory is garbage costs a bounded walk and a
 * counted fault, never more. */
#ifndef OFFCPU_PYTHON_BPF_H
#define OFFCPU_PYTHON_BPF_H

#include <bpf/bpf_helpers.h>

#include "direct_load.bpf.h"
#include "offcpu/python.h"
#include "offcpu/shared.h"
#include "settings.bpf.h"
#include "stack_store.bpf.h"

/* Filled by user space, once per process seen blocking (a Python it knows,
 * or runtime 0 for any other process). */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(map_flags, BPF_F_NO_PREALLOC); /* written by user space only */
  __uint(max_entries, 16384);
  __type(key, __u32);
  __type(value, struct offcpu_py_proc);
} py_procs SEC(".maps");

/* Thread id -> its PyThreadState's address, found before. */
struct {
  __uint(type, BPF_MAP_TYPE_LRU_HASH);
  __uint(max_entries, 8192);
  __type(key, __u32);
  __type(value, __u64);
} py_threads SEC(".maps");

struct py_stats {
  __u64 v[OFFCPU_PY_STAT_NR];
};

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct py_stats);
} py_stat_map SEC(".maps");

/* Reads of the walked process's memory: through its page tables where the
 * object has plain loads and the walk has them (pgd), else by a probe read
 * of the current task, or a copy from another task (sleepable iterators). */
struct py_reader {
  struct task_struct *task;
  __u64 pgd;        /* 0: not through the page tables */
  __u64 page, base; /* the last page translated, and where it is (0: not) */
  __u32 frozen;     /* the task is not current: no probe read can reach it */
  __u32 pad;
};

static __always_inline int py_word(struct py_reader *r, __u64 addr, __u64 *out,
                                   bool other_task) {
#ifdef OFFCPU_DIRECT_LOADS
  if (!other_task && r->pgd) {
    __u64 page = addr & ~4095ull, in = addr & 4095;
    if (page != r->page) {
      r->page = page;
      r->base = pt_lookup(uw_direct_base, uw_pt_levels, r->pgd, page, true);
    }
    if (r->base && in <= 4096 - sizeof(__u64)) {
      *out = kernel_word(r->base + in);
      return 0;
    }
    if (r->frozen)
      return -1;
  }
#endif
  /* Not from the sleepable iterators (other_task): the task's pointer,
   * kept in the walk's map, is no longer one the verifier trusts to copy
   * from. Their waits (open at start, walked again) keep native frames. */
  if (r->frozen || other_task)
    return -1;
  return bpf_probe_read_user(out, sizeof(*out), (void *)addr);
}

struct py_walk {
  struct py_reader r;
  struct offcpu_py_proc p;
  __u64 frame;  /* the next frame to store (0: the chain ended) */
  __u64 tstate; /* while searching: the next thread state */
  __u32 tid;
  __u32 n, max; /* the next slot in s->ips; the stack's room */
  __u32 stored;
  __u32 end; /* enum offcpu_py_stat of a walk that stopped early; 0: none */
  __u32 searching; /* looking for the thread's state (py_step) */
};

/* One step of the search for the thread's state. */
static __always_inline long py_find_step(struct py_walk *w, bool other_task) {
  __u64 ts = w->tstate, tid = 0;
  if (!ts)
    return 1;
  if (py_word(&w->r, ts + w->p.ts_native_tid, &tid, other_task)) {
    w->tstate = 0;
    w->end = OFFCPU_PY_FAULT;
    return 1;
  }
  if ((__u32)tid == w->tid)
    return 1; /* found: w->tstate */
  if (py_word(&w->r, ts + w->p.ts_next, &w->tstate, other_task)) {
    w->tstate = 0;
    w->end = OFFCPU_PY_FAULT;
    return 1;
  }
  return 0;
}

/* What bpf_loop hands its callbacks: on the BPF stack, as the kernel wants
 * a loop's context; the walk itself is in py_walks. */
struct py_loop {
  struct py_walk *w;
  struct offcpu_stack *s; /* pointers kept in a map are plain numbers */
};

/* One frame of the chain into the stack: its code and instruction. */
static __always_inline long
py_frame_step(struct py_walk *w, struct offcpu_stack *s, bool other_task) {
  __u64 fr = w->frame, code = 0, prev = 0, instr = 0, entry = 0;
  if (!fr)
    return 1;
  __u64 n = w->n;
  same_register(n);
  if (n + 2 > w->max || n >= OFFCPU_MAX_STACK_DEPTH - 1 ||
      w->stored >= OFFCPU_PY_MAX_FRAMES) {
    w->end = w->stored ? OFFCPU_PY_DEPTH : OFFCPU_PY_NO_ROOM;
    return 1;
  }
  if (py_word(&w->r, fr + w->p.frame_code, &code, other_task) ||
      py_word(&w->r, fr + w->p.frame_previous, &prev, other_task) ||
      py_word(&w->r, fr + w->p.frame_instr, &instr, other_task) ||
      (w->p.frame_entry != 0xffff &&
       py_word(&w->r, fr + w->p.frame_entry, &entry, other_task))) {
    w->end = OFFCPU_PY_FAULT;
    return 1;
  }
  /* The instruction as an index from the start of the bytecode, if it lies
   * in the code object's first 4 GiB (else unknown: 0). */
  __u64 at = instr - (code + w->p.code_bytecode);
  __u64 index = at < (1ull << 32) - 2 ? at / 2 + 1 : 0;
  s->ips[n] = OFFCPU_PY_CODE_TAG | (code & OFFCPU_PY_ADDR_MASK);
  s->ips[n + 1] = OFFCPU_PY_INSTR_TAG | index |
                  ((entry & 0xff) ? OFFCPU_PY_INSTR_ENTRY : 0);
  w->n = n + 2;
  w->stored++;
  w->frame = prev == fr ? 0 : prev; /* a frame that is its own caller */
  return 0;
}

/* The first frame of thread state `ts`'s chain; 0 if it has none. */
static __always_inline __u64 py_first_frame(struct py_walk *w, __u64 ts,
                                            bool other_task) {
  __u64 holder = ts, frame = 0;
  if (w->p.ts_cframe != 0xffff &&
      py_word(&w->r, ts + w->p.ts_cframe, &holder, other_task))
    return 0;
  if (!holder ||
      py_word(&w->r, holder + w->p.frame_current, &frame, other_task))
    return 0;
  return frame;
}

/* The one bpf_loop callback of the walk (every BPF function counts against
 * the light loader's limit of 32, see bpf_objects_test): the search for
 * the thread's state while w->searching, then its chain, frame by frame. */
static long py_step(__u32 i, void *data) {
  struct py_loop *l = data;
  struct py_walk *w = l->w;
  if (!w->searching)
    return py_frame_step(w, l->s, false);
  if (i < OFFCPU_PY_MAX_THREADS && !py_find_step(w, false))
    return 0;
  if (i >= OFFCPU_PY_MAX_THREADS)
    w->tstate = 0; /* not among the first threads: given up */
  w->searching = 0;
  if (!w->tstate) {
    if (!w->end)
      w->end = OFFCPU_PY_NO_THREAD;
    return 1;
  }
  bpf_map_update_elem(&py_threads, &w->tid, &w->tstate, BPF_ANY);
  w->frame = py_first_frame(w, w->tstate, false);
  return 0;
}

/* The thread's PyThreadState, if the one found before is still the
 * thread's: then w->frame is its first frame. Else sets up the search
 * among the interpreter's threads (w->searching), which py_step does. */
static __always_inline void py_thread_state(struct py_walk *w,
                                            bool other_task) {
  __u64 *known = bpf_map_lookup_elem(&py_threads, &w->tid);
  __u64 tid = 0;
  if (known && *known &&
      !py_word(&w->r, *known + w->p.ts_native_tid, &tid, other_task) &&
      (__u32)tid == w->tid) {
    w->frame = py_first_frame(w, *known, other_task);
    return;
  }
  /* The main interpreter's threads (subinterpreters are not searched). */
  __u64 interp = 0;
  if (py_word(&w->r, w->p.runtime + w->p.interp_head, &interp, other_task) ||
      !interp ||
      py_word(&w->r, interp + w->p.interp_threads, &w->tstate, other_task)) {
    w->end = OFFCPU_PY_FAULT;
    return;
  }
  w->searching = 1;
}

static __always_inline void py_count(const struct py_walk *w) {
  __u32 zero = 0;
  struct py_stats *st = bpf_map_lookup_elem(&py_stat_map, &zero);
  if (!st)
    return;
  st->v[OFFCPU_PY_CHAINS]++;
  st->v[OFFCPU_PY_FRAMES] += w->stored;
  /* Constant indexes: the verifier bounds them without help. */
  __u32 end = w->end;
  st->v[OFFCPU_PY_NO_THREAD] += end == OFFCPU_PY_NO_THREAD;
  st->v[OFFCPU_PY_FAULT] += end == OFFCPU_PY_FAULT;
  st->v[OFFCPU_PY_DEPTH] += end == OFFCPU_PY_DEPTH;
  st->v[OFFCPU_PY_NO_ROOM] += end == OFFCPU_PY_NO_ROOM;
}

/* The per-process record of `tgid`: NULL unless it is a Python process
 * whose runtime user space found. */
static __always_inline const struct offcpu_py_proc *py_proc_of(__u32 tgid) {
  if (!python_frames)
    return NULL;
  struct offcpu_py_proc *p = bpf_map_lookup_elem(&py_procs, &tgid);
  return p && p->runtime ? p : NULL;
}

/* The walk's state, per CPU and context (SCRATCH_HOOK, SCRATCH_ITER): the
 * BPF stack has no room left under the native walk's. */
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 2);
  __type(key, __u32);
  __type(value, struct py_walk);
} py_walks SEC(".maps");

/* Appends thread `t`'s Python frames to `s`, after its `n` native frames
 * (of `max` at most). Returns the new count. */
static __always_inline __u32 py_append(struct task_struct *t,
                                       const struct offcpu_py_proc *p,
                                       struct offcpu_stack *s, __u32 n,
                                       __u32 max, __u64 pgd, bool frozen,
                                       bool other_task, __u32 slot) {
  struct py_walk *w = bpf_map_lookup_elem(&py_walks, &slot);
  if (!w)
    return n;
  __builtin_memset(w, 0, sizeof(*w));
  w->r.task = t;
  w->r.pgd = pgd;
  w->r.frozen = frozen;
  w->p = *p;
  w->tid = t->pid;
  w->n = n;
  w->max = max;
  py_thread_state(w, other_task);
  if (w->frame || w->searching) {
    struct py_loop l = {.w = w, .s = s};
    bpf_loop(OFFCPU_PY_MAX_FRAMES + 1 +
                 (w->searching ? OFFCPU_PY_MAX_THREADS : 0),
             py_step, &l, 0);
    if (w->frame && !w->end)
      w->end = OFFCPU_PY_DEPTH;
  }
  py_count(w);
  return w->n;
}

#endif /* OFFCPU_PYTHON_BPF_H */
