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
 * per thread (in its task storage, beside its stack memos) and checked
 * with one read. Every read is bounded and may fail: a process whose
 * memory is garbage costs a bounded walk and a counted fault, never more.
 *
 * What a walk costs is its reads. The object with plain loads reads the
 * interpreter's memory through the thread's page tables, as it reads user
 * stacks (a frame's fields are then loads from a page already translated:
 * a thread's frames sit together in its data stack); the object with probe
 * reads reads each frame's fields in one probe read. And a thread that
 * blocks where it blocked before reuses its last stack: its memo (in
 * user_unwind.bpf.h) holds the signature of the Python chain it was walked
 * with, so the native walk is skipped when the chain, walked alone (no
 * store, no hash of the whole stack), signs the same. */
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

/* Thread id -> its PyThreadState's address, found before: for walks
 * without the thread's task storage (--no-stack-reuse). */
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
 * of the current task. */
struct py_reader {
  __u64 pgd;        /* 0: not through the page tables */
  __u64 page, base; /* the last page translated, and where it is (0: not) */
  __u32 frozen;     /* the task is not current: no probe read can reach it */
  __u32 pad;
};

/* The direct-map address of user address `addr`'s page through the
 * reader's page tables (the last page's kept); 0 if not so readable. */
static __always_inline __u64 py_page(struct py_reader *r, __u64 addr) {
#ifdef OFFCPU_DIRECT_LOADS
  __u64 page = addr & ~4095ull;
  if (page != r->page) {
    r->page = page;
    r->base = pt_lookup(uw_direct_base, uw_pt_levels, r->pgd, page, true);
  }
  return r->base;
#else
  return 0;
#endif
}

static __always_inline int py_word(struct py_reader *r, __u64 addr,
                                   __u64 *out) {
#ifdef OFFCPU_DIRECT_LOADS
  if (r->pgd) {
    __u64 in = addr & 4095, base = py_page(r, addr);
    if (base && in <= 4096 - sizeof(__u64)) {
      __u64 v = kernel_word(base + in);
      /* Not one load with the probe read's reload of *out below: the
       * verifier refuses an instruction that loads through two kinds of
       * pointer ("same insn cannot be used with different pointers"). */
      same_register(v);
      *out = v;
      return 0;
    }
    if (r->frozen)
      return -1;
  }
#endif
  if (r->frozen)
    return -1;
  return bpf_probe_read_user(out, sizeof(*out), (void *)addr);
}

/* A frame's fields in one probe read: the bytes from the lowest of their
 * offsets to the end of the highest (3.11's: 32 to 69). */
#define PY_FRAME_WINDOW 64

struct py_walk {
  struct py_reader r;
  struct offcpu_py_proc p;
  __u64 frame;  /* the next frame to walk (0: the chain ended) */
  __u64 tstate; /* while searching: the next thread state */
  __u64 sig;    /* the chain's signature so far */
  __u64 fsbase; /* the thread's pthread_t (3.10's thread_id) */
  __u32 tid;
  __u32 n, max; /* the next slot in s->ips; the stack's room */
  __u32 frames; /* walked */
  __u32 end;    /* enum offcpu_py_stat of a walk that stopped early; 0: none */
  __u32 searching; /* looking for the thread's state (py_step) */
  __u32 store;     /* the frames go into a stack (else: signed only) */
  __u32 lo, span;  /* the frame window's first byte and length (0: none) */
  __u32 keeps;     /* the caller keeps the thread's state (else py_threads) */
  __u32 slot;      /* the caller's scratch (SCRATCH_*): its stack, storing */
  __u64 known;     /* what the caller keeps: in, and out once found */
  /* Words read by py_word between two uses, here rather than on the BPF
   * stack (the user walk, this walk and its loop share 512 bytes). */
  __u64 word, word2;
  /* The frame being read (py_frame_step): here, not on the BPF stack,
   * whose 512 bytes the hook, the user walk and this callback share on
   * kernels without private stacks. */
  __u64 code, prev, instr, entry;
  __u8 buf[PY_FRAME_WINDOW];
};

/* The signature's step: the stack hash's (stack_store.bpf.h). */
static __always_inline __u64 py_mix(__u64 h, __u64 x) {
  h = (h ^ x) * 0x9e3779b97f4a7c15ULL;
  return h ^ (h >> 29);
}

/* Whether a thread state's id word names the walked thread: its native
 * id (3.11+), or 3.10's pthread_t, the thread's fs base. */
static __always_inline bool py_is_thread(const struct py_walk *w, __u64 id) {
  if (w->p.flags & OFFCPU_PY_F_PTHREAD)
    return id == w->fsbase;
  return (__u32)id == w->tid;
}

/* One step of the search for the thread's state. */
static __always_inline long py_find_step(struct py_walk *w) {
  __u64 ts = w->tstate;
  if (!ts)
    return 1;
  w->word = 0;
  if (py_word(&w->r, ts + w->p.ts_native_tid, &w->word)) {
    w->tstate = 0;
    w->end = OFFCPU_PY_FAULT;
    return 1;
  }
  if (py_is_thread(w, w->word))
    return 1; /* found: w->tstate */
  if (py_word(&w->r, ts + w->p.ts_next, &w->tstate)) {
    w->tstate = 0;
    w->end = OFFCPU_PY_FAULT;
    return 1;
  }
  return 0;
}

/* What bpf_loop hands its callback: on the BPF stack, as the kernel wants
 * a loop's context; the walk itself is in py_walks. Only the walk: the
 * stack the frames go into is looked up per frame (a per-CPU array's
 * lookup is inlined), 8 bytes less of the 512 a chain of calls shares. */
struct py_loop {
  struct py_walk *w;
};

/* Field `off` of the frame read into w->buf (a u64, or its low byte). */
static __always_inline __u64 py_field(const struct py_walk *w, __u32 off,
                                      bool byte) {
  __u64 at = off - w->lo; /* lo is the lowest offset: no wrap */
  same_register(at);
  if (byte)
    return at < PY_FRAME_WINDOW ? w->buf[at] : 0;
  return at <= PY_FRAME_WINDOW - sizeof(__u64) ? load_u64(&w->buf[at]) : 0;
}

/* Frame `fr`'s code object, caller, instruction and is_entry flag. */
static __always_inline int py_frame_read(struct py_walk *w, __u64 fr,
                                         __u64 *code, __u64 *prev, __u64 *instr,
                                         __u64 *entry) {
  __u32 span = w->span;
  if (!w->r.pgd && !w->r.frozen && span && span <= PY_FRAME_WINDOW) {
    if (bpf_probe_read_user(w->buf, span, (void *)(fr + w->lo)))
      return -1;
    *code = py_field(w, w->p.frame_code, false);
    *prev = py_field(w, w->p.frame_previous, false);
    *instr = py_field(w, w->p.frame_instr, false);
    *entry =
        w->p.frame_entry != 0xffff ? py_field(w, w->p.frame_entry, true) : 0;
    return 0;
  }
  if (py_word(&w->r, fr + w->p.frame_code, code) ||
      py_word(&w->r, fr + w->p.frame_previous, prev) ||
      py_word(&w->r, fr + w->p.frame_instr, instr))
    return -1;
  *entry = 0;
  if (w->p.frame_entry != 0xffff &&
      py_word(&w->r, fr + w->p.frame_entry, entry))
    return -1;
  *entry &= 0xff;
  return 0;
}

/* One frame of the chain: its code and instruction into the signature
 * and, storing, into the stack. */
static __always_inline long py_frame_step(struct py_walk *w,
                                          struct offcpu_stack *s) {
  __u64 fr = w->frame;
  if (!fr)
    return 1;
  __u64 n = w->n;
  same_register(n);
  if (w->frames >= OFFCPU_PY_MAX_FRAMES || n + 2 > w->max ||
      n >= OFFCPU_MAX_STACK_DEPTH - 1) {
    w->end = w->frames ? OFFCPU_PY_DEPTH : OFFCPU_PY_NO_ROOM;
    return 1;
  }
  w->code = w->prev = w->instr = w->entry = 0;
  if (py_frame_read(w, fr, &w->code, &w->prev, &w->instr, &w->entry)) {
    w->end = OFFCPU_PY_FAULT;
    return 1;
  }
  __u64 code = w->code, prev = w->prev, instr = w->instr, entry = w->entry;
  /* The instruction as an index from the start of the bytecode, if it lies
   * in the code object's first 4 GiB (else unknown: 0); 3.10 keeps the
   * index itself (f_lasti, an int). */
  __u64 at = instr - (code + w->p.code_bytecode);
  __u64 index = at < (1ull << 32) - 2 ? at / 2 + 1 : 0;
  if (w->p.flags & OFFCPU_PY_F_LASTI)
    index = (__s32)instr >= 0 ? (__u32)instr + 1 : 0;
  __u64 cw = OFFCPU_PY_CODE_TAG | (code & OFFCPU_PY_ADDR_MASK);
  __u64 iw = OFFCPU_PY_INSTR_TAG | index |
             ((entry & 0xff) << OFFCPU_PY_INSTR_MARK_SHIFT);
  if (s) {
    s->ips[n] = cw;
    s->ips[n + 1] = iw;
  }
  w->n = n + 2;
  w->sig = py_mix(py_mix(w->sig, cw), iw);
  w->frames++;
  w->frame = prev == fr ? 0 : prev; /* a frame that is its own caller */
  return 0;
}

/* The first frame of thread state `ts`'s chain; 0 if it has none. */
static __always_inline __u64 py_first_frame(struct py_walk *w, __u64 ts) {
  w->word = ts; /* the frame's holder */
  w->word2 = 0;
  if (w->p.ts_cframe != 0xffff && py_word(&w->r, ts + w->p.ts_cframe, &w->word))
    return 0;
  __u64 holder = w->word;
  if (!holder || py_word(&w->r, holder + w->p.frame_current, &w->word2))
    return 0;
  return w->word2;
}

/* The one bpf_loop callback of the walk (every BPF function counts against
 * the light loader's limit of 32, see bpf_objects_test): the search for
 * the thread's state while w->searching, then its chain, frame by frame. */
static long py_step(__u32 i, void *data) {
  struct py_loop *l = data;
  struct py_walk *w = l->w;
  if (!w->searching) {
    if (!w->store)
      return py_frame_step(w, NULL);
    struct stack_scratch_buf *b = bpf_map_lookup_elem(&stack_scratch, &w->slot);
    if (!b) {
      w->end = OFFCPU_PY_NO_ROOM; /* never: the slot is the caller's */
      return 1;
    }
    return py_frame_step(w, &b->s);
  }
  if (i < OFFCPU_PY_MAX_THREADS && !py_find_step(w))
    return 0;
  if (i >= OFFCPU_PY_MAX_THREADS)
    w->tstate = 0; /* not among the first threads: given up */
  w->searching = 0;
  if (!w->tstate) {
    if (!w->end)
      w->end = OFFCPU_PY_NO_THREAD;
    return 1;
  }
  if (w->keeps)
    w->known = w->tstate;
  else
    bpf_map_update_elem(&py_threads, &w->tid, &w->tstate, BPF_ANY);
  w->frame = py_first_frame(w, w->tstate);
  return 0;
}

/* The thread's PyThreadState, if the one found before (w->known, else in
 * py_threads) is still the thread's: then w->frame is its first frame.
 * Else sets up the search among the interpreter's threads (w->searching),
 * which py_step does. */
static __always_inline void py_thread_state(struct py_walk *w) {
  __u64 ts = 0;
  if (w->keeps) {
    ts = w->known;
  } else {
    __u64 *kept = bpf_map_lookup_elem(&py_threads, &w->tid);
    ts = kept ? *kept : 0;
  }
  w->word = 0;
  if (ts && !py_word(&w->r, ts + w->p.ts_native_tid, &w->word) &&
      py_is_thread(w, w->word)) {
    w->frame = py_first_frame(w, ts);
    return;
  }
  /* The main interpreter's threads (subinterpreters are not searched). */
  w->word = 0;
  if (py_word(&w->r, w->p.runtime + w->p.interp_head, &w->word) || !w->word ||
      py_word(&w->r, w->word + w->p.interp_threads, &w->tstate)) {
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
  /* Constant indexes: the verifier bounds them without help. */
  if (!w->store) {
    st->v[OFFCPU_PY_CHECKED]++;
    return;
  }
  st->v[OFFCPU_PY_CHAINS]++;
  st->v[OFFCPU_PY_FRAMES] += w->frames;
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

#define PY_SIG_UNSURE 1ull

/* Widens the window [*lo, *hi) to a field of `len` bytes at `off` (0xffff:
 * the version has no such field). */
static __always_inline void py_window_add(__u32 off, __u32 len, __u32 *lo,
                                          __u32 *hi) {
  if (off == 0xffff)
    return;
  *lo = off < *lo ? off : *lo;
  *hi = off + len > *hi ? off + len : *hi;
}

/* The walk set up in py_walks[slot] (py_walk_chain): the thread's state
 * found, its chain walked (into the slot's scratch stack if w->store) and
 * signed. In offcpu's objects a global function: the verifier
 * checks it and its loop once, not once for every way the user walks reach
 * it (inline, this walk was 19,000 of the switch hook's 76,000 instructions
 * verified, its loop's callback checked 14 times). The lock objects
 * (rwsem.bpf.c) are at the light loader's 32 functions: inline there. */
#ifdef OFFCPU_PY_WALK_GLOBAL
__noinline int
#else
static __always_inline int
#endif
py_walk_run(__u32 slot) {
  struct py_walk *w = bpf_map_lookup_elem(&py_walks, &slot);
  if (!w)
    return 0;
  py_thread_state(w);
  if (w->frame || w->searching) {
    struct py_loop l = {.w = w};
    bpf_loop(OFFCPU_PY_MAX_FRAMES + 1 +
                 (w->searching ? OFFCPU_PY_MAX_THREADS : 0),
             py_step, &l, 0);
    if (w->frame && !w->end)
      w->end = OFFCPU_PY_DEPTH;
  }
  w->sig = py_mix(w->sig, w->end);
  if (w->end == OFFCPU_PY_FAULT || w->sig <= PY_SIG_UNSURE)
    w->sig = PY_SIG_UNSURE;
  return 0;
}

/* Walks thread `t`'s chain (process record `p`; `pgd`, `frozen`: how its
 * memory is read, see py_reader): stored, `store`, into the scratch stack
 * of `slot` after its `n` native frames (of `max` at most), else only
 * signed. `known`: where its thread state is kept (NULL: py_threads). The
 * signature is never 0 (0 is a memo's "no Python chain"); PY_SIG_UNSURE:
 * a read failed, not a chain to reuse. Returns the walk (NULL: no
 * scratch). */
static __always_inline struct py_walk *
py_walk_chain(struct task_struct *t, const struct offcpu_py_proc *p, bool store,
              __u32 n, __u32 max, __u64 pgd, bool frozen, __u32 slot,
              __u64 *known) {
  struct py_walk *w = bpf_map_lookup_elem(&py_walks, &slot);
  if (!w)
    return NULL;
  __builtin_memset(w, 0, sizeof(*w));
  w->r.pgd = pgd;
  w->r.frozen = frozen;
  w->p = *p;
  w->tid = t->pid;
  /* Saved at the thread's last switch-out or set at its clone; a thread
   * that moves its own fs base later (none that glibc starts) is not
   * found (x86-64 only, as the rest of the walk). */
  if (p->flags & OFFCPU_PY_F_PTHREAD)
    w->fsbase = t->thread.fsbase;
  w->n = n;
  w->max = max;
  w->store = store;
  w->slot = slot;
  w->keeps = known != NULL;
  w->known = known ? *known : 0;
  w->sig = 0x7079000000000000ULL; /* "py" */
  /* The frame's fields' window, for the probe reads. */
  __u32 lo = w->p.frame_code, hi = lo + 8;
  py_window_add(w->p.frame_previous, 8, &lo, &hi);
  py_window_add(w->p.frame_instr, 8, &lo, &hi);
  py_window_add(w->p.frame_entry, 1, &lo, &hi);
  w->lo = lo;
  w->span = hi - lo <= PY_FRAME_WINDOW ? hi - lo : 0;
  /* Here, not in the walk's function: its frame is on the 512 bytes too. */
  py_walk_run(slot);
  py_count(w);
  if (known)
    *known = w->known;
  return w;
}

/* Appends thread `t`'s Python frames to `s`, the scratch stack of `slot`
 * (see py_walk_chain); returns the new count and sets *sig to the chain's
 * signature. */
static __always_inline __u32 py_append(struct task_struct *t,
                                       const struct offcpu_py_proc *p,
                                       struct offcpu_stack *s, __u32 n,
                                       __u32 max, __u64 pgd, bool frozen,
                                       __u32 slot, __u64 *known, __u64 *sig) {
  struct py_walk *w =
      py_walk_chain(t, p, s != NULL, n, max, pgd, frozen, slot, known);
  *sig = w ? w->sig : PY_SIG_UNSURE;
  return w ? w->n : n;
}

/* The signature of thread `t`'s chain now, walked without storing, for
 * its memos (process `tgid`); PY_SIG_UNSURE if unknown. */
static __always_inline __u64 py_chain_sig(struct task_struct *t, __u32 tgid,
                                          __u64 pgd, bool frozen, __u32 slot,
                                          __u64 *known) {
  const struct offcpu_py_proc *p = py_proc_of(tgid);
  if (!p)
    return PY_SIG_UNSURE;
  struct py_walk *w = py_walk_chain(t, p, false, 0, OFFCPU_MAX_STACK_DEPTH, pgd,
                                    frozen, slot, known);
  return w ? w->sig : PY_SIG_UNSURE;
}

#endif /* OFFCPU_PYTHON_BPF_H */
