/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Kernel stack of a task that is off CPU, walked in BPF with the kernel's own
 * ORC unwind tables (x86-64, CONFIG_UNWINDER_ORC: the default).
 *
 * Why: taking the kernel stack at switch-out costs ~2 us on every context
 * switch (most of it unwinding the tracer's own frames), before anyone knows
 * whether the wait will pass -m. bpf_get_task_stack() can take it later, when
 * the task is switched back in, but it drops every __sched function
 * (schedule, do_nanosleep, mutex_lock, down_write...): the frames that say
 * what kind of wait it was. The stack stays frozen while the task is off
 * CPU, so walking it here at switch-in gives the full stack, and only for
 * waits that count.
 *
 * The walk follows the kernel's unwinder (arch/x86/kernel/unwind_orc.c) for
 * the frames a sleeping task has: calls, and the register frames of syscall
 * entry and of interrupts that preempted kernel code. Where it cannot go on
 * (module code, which has its own ORC tables; ftrace or kretprobe return
 * trampolines; unusual ORC entries), the kernel's walk finishes it: the
 * frames of bpf_get_task_stack() after the same point are appended. */
#ifndef OFFCPU_KERNEL_UNWIND_BPF_H
#define OFFCPU_KERNEL_UNWIND_BPF_H

#include "direct_load.bpf.h"
#include "offcpu/shared.h"
#include "settings.bpf.h"
#include "stack_store.bpf.h"

__u64 kunwind_stats[OFFCPU_KUNWIND_NR];

/* Always 0, but the verifier cannot know. A loop variable that starts from
 * a known constant is tracked exactly, so every iteration (and every path of
 * a binary search) would be verified separately; 6.7+ also verifies bpf_loop
 * callbacks until their states converge. */
__u32 kwalk_unknown_zero = 0;

static __always_inline void count_kunwind(int what) {
  if (what >= 0 && what < OFFCPU_KUNWIND_NR)
    __sync_fetch_and_add(&kunwind_stats[what], 1);
}

/* arch/x86/include/asm/orc_types.h; these values have not changed. */
#define ORC_REG_UNDEFINED 0
#define ORC_REG_PREV_SP 1
#define ORC_REG_BP 4
#define ORC_REG_SP 5
/* Entry types as numbered since 6.4; older layouts are mapped onto them. */
#define ORC_TYPE_UNDEFINED 0
#define ORC_TYPE_END_OF_STACK 1
#define ORC_TYPE_CALL 2
#define ORC_TYPE_REGS 3
#define ORC_TYPE_REGS_PARTIAL 4

/* A decoded ORC entry, cached by the address it was looked up for. */
struct orc_slot {
  __u64 addr;
  __s16 sp_offset;
  __s16 bp_offset;
  __u8 sp_reg;
  __u8 bp_reg;
  __u8 type;
  __u8 signal;
};

/* Direct-mapped and per CPU: a lookup is an array access, no locking, and a
 * sleeping task's stack only ever holds a few hundred distinct addresses.
 * One cache per context (SCRATCH_HOOK, SCRATCH_ITER), like the scratch
 * buffers: the switch hook preempting an iterator mid-update on the same CPU
 * must not mix two entries. */
#define ORC_CACHE_SLOTS 4096
#define ORC_CHUNK_SLOTS (PERCPU_CHUNK_BYTES / sizeof(struct orc_slot))
struct orc_chunk {
  struct orc_slot s[ORC_CHUNK_SLOTS];
};
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 2 * ORC_CACHE_SLOTS / ORC_CHUNK_SLOTS);
  __type(key, __u32);
  __type(value, struct orc_chunk);
} orc_cache SEC(".maps");

/* Frames of the kernel's own walk, for splicing and verifying. */
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 2); /* SCRATCH_HOOK, SCRATCH_ITER */
  __type(key, __u32);
  __type(value, struct offcpu_stack);
} kernel_walk_scratch SEC(".maps");

/* ---- Reusing a thread's last kernel stack ----
 * A thread that blocks in a loop blocks on the same kernel stack again and
 * again. The walk is a function of the task's saved stack pointer and the
 * words it reads from its stack (the ORC tables do not change), so a walk
 * whose words all hold again would store the same stack: its id is reused.
 *
 * With CONFIG_RANDOMIZE_KSTACK_OFFSET (on by default in Debian's and
 * Ubuntu's kernels) every system call moves the frames below its entry by
 * a random amount, so the same wait rarely has the same stack pointer
 * twice. The memo therefore describes its words relative to the stack
 * pointer: those below the boundary (the stack pointer where the walk
 * last found a frame addressed from its frame pointer: do_syscall_64,
 * whose alloca is the gap) move with it, as do the values that point
 * there; those above (the system call's entry frame and registers) stay.
 * A memo is reused only if its relocation is consistent with how the walk
 * computed each address it read (from the stack pointer, or from a value
 * it read: the `src` of each note), so the walk on the moved stack would
 * read exactly the words checked; where it is not, only the same stack
 * pointer reuses it. Saved frame pointers the walk never used as a base
 * are not compared: in a kernel built without frame pointers they are
 * whatever the callers kept in rbp, and the walk would ignore them again.
 * Walks the kernel's own walk had to finish are not reused. Only the
 * switch hook keeps memos. */
#define KW_MEMO_WORDS 32
/* Eight: a postgres backend under pgbench blocks at 9-18 kernel stacks
 * (epoll, futex, three fdatasync paths, preemption by each interrupt
 * vector...) and with four a fifth of its walks were capacity misses. */
#define KW_MEMO_WAYS 8

/* Note classes (kw_memo.cls). */
#define KW_ADDR_FIXED 1 /* the address is above the boundary: it stays */
#define KW_VAL_MOVES 2  /* the value points below the boundary: it moves */
#define KW_BOUND_ONLY 4 /* only its place must be on the stack: not kept */

struct kw_memo {
  __u64 frame; /* thread.sp of the walk */
  __u64 top;   /* the end of the task's stack (it keeps it for life) */
  __u64 stack; /* the id the walk stored */
  __u32 nr;    /* words; 0: nothing to reuse */
  __u32 nosched;
  __u32 moving_end; /* end of the moving words, from frame */
  __u32 fixed_span; /* bytes below the stack's top that hold fixed words */
  __u32 boundary;   /* from frame */
  __u32 exact;      /* reused at the same stack pointer only */
  /* Moving words: from frame; fixed ones: below the top of the stack. */
  __u16 off[KW_MEMO_WORDS];
  __u8 cls[KW_MEMO_WORDS];
  __u64 val[KW_MEMO_WORDS];
};

/* Kept by the caller with its other per-thread state. */
struct kw_memo_set {
  struct kw_memo way[KW_MEMO_WAYS];
  __u32 last;
  __u32 next; /* the way to replace next (not the last one used) */
};

/* The words a walk read, per CPU and per context: the walk's global
 * functions cannot take a map value (the memo) as an argument. */
#define KW_SRC_FRAME 0xff /* note.src: computed from the stack pointer */
/* What a word's value does in the walk (kw_notes.kind). */
#define KW_VALUE 0 /* it steers the walk: a return address, cs, sp */
#define KW_BP 1    /* a saved frame pointer: steers only if used */
#define KW_PLACE 2 /* only its place must be on the stack */
struct kw_notes {
  __u64 base; /* thread.sp */
  __u64 stack_lo, stack_hi;
  __u64 boundary; /* 0: not found */
  __u32 nr;
  __u32 on; /* 0: not noting */
  __u32 bad;
  __u32 used; /* notes whose value some later address was computed from */
  __u16 off[KW_MEMO_WORDS];
  __u8 src[KW_MEMO_WORDS]; /* the note whose value the address came from */
  __u8 kind[KW_MEMO_WORDS];
  __u64 val[KW_MEMO_WORDS];
};

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 2); /* SCRATCH_HOOK, SCRATCH_ITER */
  __type(key, __u32);
  __type(value, struct kw_notes);
} kw_notes_map SEC(".maps");

/* Notes the word at addr; returns its index, the `src` of addresses later
 * computed from its value (KW_SRC_FRAME when not noting). */
static __always_inline __u32 kw_note(__u32 slot, __u64 addr, __u64 val,
                                     __u32 src, __u8 kind) {
  struct kw_notes *n = bpf_map_lookup_elem(&kw_notes_map, &slot);
  if (!n || !n->on || n->bad)
    return KW_SRC_FRAME;
  __u64 off = addr - n->base; /* wraps above the limit when below base */
  __u64 i = n->nr;
  same_register(i);
  if (off > REUSE_SPAN - sizeof(__u64) || i >= KW_MEMO_WORDS) {
    n->bad = 1;
    return KW_SRC_FRAME;
  }
  n->off[i] = off;
  n->val[i] = val;
  n->src[i] = src;
  n->kind[i] = kind;
  n->nr = i + 1;
  if (src < KW_MEMO_WORDS)
    n->used |= 1u << src;
  return i;
}

/* The walk found a frame addressed from the frame pointer at sp: the last
 * one is the system call's (__schedule's comes first). */
static __always_inline void kw_note_boundary(__u32 slot, __u64 sp) {
  struct kw_notes *n = bpf_map_lookup_elem(&kw_notes_map, &slot);
  if (n && n->on)
    n->boundary = sp;
}

struct orc_raw {
  __s16 sp_offset;
  __s16 bp_offset;
  __u16 bits;
};

static __always_inline void orc_decode(struct orc_slot *o,
                                       const struct orc_raw *raw) {
  __u16 bits = raw->bits;
  __u8 type = (bits >> ktext.type_shift) & ((1u << ktext.type_bits) - 1);
  o->sp_offset = raw->sp_offset;
  o->bp_offset = raw->bp_offset;
  o->sp_reg = bits & 0xf;
  o->bp_reg = (bits >> 4) & 0xf;
  if (ktext.old_types) {
    /* Before 6.4: CALL 0, REGS 1, REGS_PARTIAL 2; an undefined SP with the
     * `end` bit marked the bottom of a stack. */
    bool end = ktext.end_shift < 16 && ((bits >> ktext.end_shift) & 1);
    if (o->sp_reg == ORC_REG_UNDEFINED)
      type = end ? ORC_TYPE_END_OF_STACK : ORC_TYPE_UNDEFINED;
    else
      type += ORC_TYPE_CALL;
  }
  o->type = type;
  if (ktext.signal_shift < 16)
    o->signal = (bits >> ktext.signal_shift) & 1;
  else /* before 6.3 every register frame was a signal frame */
    o->signal = type == ORC_TYPE_REGS || type == ORC_TYPE_REGS_PARTIAL;
}

/* The kernel walk's leaf loops (the ORC table's search, kwalk_splice's
 * two over frames, live_calibrate's two) and charge's merge of a histogram
 * share one callback, kloop_leaf_step: libbpf 1.1's light-skeleton loader
 * holds at most 32 BPF functions. What a loop does is its context's first
 * word, a constant the verifier sees in each caller's frame (the other
 * ways are never checked there). */
enum {
  KLOOP_ORC_SEARCH = 1,
  KLOOP_VERIFY,
  KLOOP_SPLICE,
  KLOOP_FIND_WORD,
  KLOOP_SAME,
  KLOOP_HIST_ADD
};
static long kloop_leaf_step(__u32 i, void *data);

struct orc_search {
  __u64 kind; /* KLOOP_ORC_SEARCH */
  __u64 addr;
  __u64 lo, hi; /* entries [lo, hi) are still candidates */
  __s64 found;  /* last entry known to start at or below addr */
};

/* One step of a binary search of the sorted ORC address table. */
static __always_inline long orc_search_step(struct orc_search *c) {
  if (c->lo >= c->hi)
    return 1;
  __u64 mid = c->lo + (c->hi - c->lo) / 2;
  __u64 at = ktext.orc_ip_start + mid * sizeof(__s32);
  __s32 rel;
  if (bpf_probe_read_kernel(&rel, sizeof(rel), (void *)at)) {
    c->found = -1;
    c->lo = c->hi = 0;
    return 1;
  }
  if (at + (__s64)rel <= c->addr) {
    c->found = mid;
    c->lo = mid + 1;
  } else {
    c->hi = mid;
  }
  return 0;
}

/* The ORC entry covering `addr` in core kernel text: the last table entry
 * whose address is <= addr (the table is sorted at build time). */
static __always_inline struct orc_slot *orc_find(__u64 addr, __u32 cache) {
  __u32 idx =
      (mix64(addr) & (ORC_CACHE_SLOTS - 1)) + (cache ? ORC_CACHE_SLOTS : 0);
  __u32 chunk = idx / ORC_CHUNK_SLOTS;
  struct orc_chunk *ch = bpf_map_lookup_elem(&orc_cache, &chunk);
  if (!ch)
    return NULL;
  struct orc_slot *o = &ch->s[idx & (ORC_CHUNK_SLOTS - 1)];
  if (o->addr == addr)
    return o;

  count_kunwind(OFFCPU_KUNWIND_ORC_LOOKUPS);
  /* Bounds the verifier cannot know: with constants it would follow every
   * path of the search separately. */
  struct orc_search c = {
      .kind = KLOOP_ORC_SEARCH,
      .addr = addr,
      .lo = kwalk_unknown_zero,
      .hi = (ktext.orc_ip_end - ktext.orc_ip_start) / sizeof(__s32) +
            kwalk_unknown_zero,
      .found = -1,
  };
  bpf_loop(32, kloop_leaf_step, &c, 0);
  __s64 found = c.found;
  if (found < 0 || c.lo < c.hi)
    return NULL;
  struct orc_raw raw;
  if (bpf_probe_read_kernel(&raw, sizeof(raw),
                            (void *)(ktext.orc_start + found * sizeof(raw))))
    return NULL;
  orc_decode(o, &raw);
  o->addr = addr;
  return o;
}

static __always_inline bool in_sched_text(__u64 ip) {
  return in_range(ip, ktext.sched_start, ktext.sched_end) |
         in_range(ip, ktext.lock_start, ktext.lock_end);
}

#define KWALK_GOING 0
#define KWALK_DONE 1   /* reached the bottom: user entry or thread start */
#define KWALK_SPLICE 2 /* the kernel's walk must finish it */

/* Unwinder state: where the frame being unwound returns to and its
 * registers, and the bounds of the task's kernel stack. */
struct kframe {
  __u64 ip, sp, bp;
  __u64 stack_lo, stack_hi;
  __u32 signal;         /* ip is not a return address: look it up as is */
  __u32 cache;          /* the caller's context: SCRATCH_HOOK or SCRATCH_ITER */
  __u32 sp_src, bp_src; /* the notes sp and bp came from (kw_note) */
};

/* Reads the stack word at addr, computed from the value of note `src`;
 * *note: its own note. */
static __always_inline bool stack_word(const struct kframe *f, __u64 addr,
                                       __u32 src, __u8 kind, __u64 *out,
                                       __u32 *note) {
  if (addr < f->stack_lo || addr + sizeof(__u64) > f->stack_hi)
    return false;
  if (bpf_probe_read_kernel(out, sizeof(*out), (void *)addr))
    return false;
  *note = kw_note(f->cache, addr, *out, src, kind);
  return true;
}

/* A pt_regs word on the stack, noted like stack_word's. */
#define regs_word(f, dst, regs, field, src, kind, note)                        \
  (bpf_core_read(&(dst), sizeof(dst), &(regs)->field)                          \
       ? -1                                                                    \
       : ((note) = kw_note((f)->cache, (__u64) & (regs)->field, (dst), (src),  \
                           (kind)),                                            \
          0))

/* Moves *f from a frame to its caller; returns KWALK_*. A global function:
 * the verifier checks it once, not at every place a walk can reach it. */
__noinline int kwalk_unwind(struct kframe *f) {
  if (!f)
    return KWALK_SPLICE;
  __u64 ip = f->ip;
  if (ip < ktext.text_start || ip >= ktext.text_end)
    return KWALK_SPLICE; /* module code: its ORC tables are its own */

  /* A return address points after its call, which may be the last
   * instruction of the function: look up the call itself. */
  struct orc_slot *o = orc_find(f->signal ? ip : ip - 1, f->cache);
  if (!o || o->type == ORC_TYPE_UNDEFINED)
    return KWALK_SPLICE;
  if (o->type == ORC_TYPE_END_OF_STACK)
    return KWALK_DONE;

  __u64 base;
  __u32 src;
  if (o->sp_reg == ORC_REG_SP) {
    base = f->sp;
    src = f->sp_src;
  } else if (o->sp_reg == ORC_REG_BP) {
    base = f->bp;
    src = f->bp_src;
    kw_note_boundary(f->cache, f->sp);
  } else {
    return KWALK_SPLICE; /* indirect or entry-code registers */
  }
  __u64 cfa = base + o->sp_offset;

  __u64 next_ip, next_sp, next_bp = f->bp, regs_bp = 0;
  __u32 next_sp_src = src, next_bp_src = f->bp_src, regs_bp_src = 0, note;
  bool have_regs_bp = false;
  if (o->type == ORC_TYPE_CALL) {
    if (!stack_word(f, cfa - sizeof(__u64), src, KW_VALUE, &next_ip, &note))
      return KWALK_SPLICE;
    next_sp = cfa;
  } else if (o->type == ORC_TYPE_REGS) {
    struct pt_regs *regs = (struct pt_regs *)cfa;
    __u64 cs;
    __u64 regs_end = cfa + bpf_core_type_size(struct pt_regs);
    if (cfa < f->stack_lo || regs_end > f->stack_hi)
      return KWALK_SPLICE;
    /* That check holds on a moved stack if this place is on it. */
    kw_note(f->cache, regs_end - sizeof(__u64), 0, src, KW_PLACE);
    if (regs_word(f, cs, regs, cs, src, KW_VALUE, note))
      return KWALK_SPLICE;
    if ((cs & 3) == 3) /* entered from user space: the bottom */
      return KWALK_DONE;
    /* An interrupt that preempted kernel code: go on where it hit. */
    if (regs_word(f, next_ip, regs, ip, src, KW_VALUE, note) ||
        regs_word(f, next_sp, regs, sp, src, KW_VALUE, next_sp_src) ||
        regs_word(f, regs_bp, regs, bp, src, KW_BP, regs_bp_src))
      return KWALK_SPLICE;
    have_regs_bp = true;
  } else {
    return KWALK_SPLICE; /* REGS_PARTIAL: IRQ entry code, not a sleeper's */
  }

  if (o->bp_reg != ORC_REG_UNDEFINED) {
    /* Saved relative to the caller's SP, or to this frame's BP. */
    __u64 at;
    __u32 at_src;
    if (o->bp_reg == ORC_REG_PREV_SP) {
      at = cfa;
      at_src = src;
    } else if (o->bp_reg == ORC_REG_BP) {
      at = f->bp;
      at_src = f->bp_src;
    } else {
      return KWALK_SPLICE;
    }
    if (!stack_word(f, at + o->bp_offset, at_src, KW_BP, &next_bp,
                    &next_bp_src))
      return KWALK_SPLICE;
  } else if (have_regs_bp) {
    next_bp = regs_bp;
    next_bp_src = regs_bp_src;
  }

  if (next_sp <= f->sp) /* bad data would loop: callers are above */
    return KWALK_SPLICE;
  f->signal = o->signal;
  f->ip = next_ip;
  f->sp = next_sp;
  f->bp = next_bp;
  f->sp_src = next_sp_src;
  f->bp_src = next_bp_src;
  return KWALK_GOING;
}

struct kwalk {
  struct offcpu_stack *s;
  struct kframe *f; /* the caller's, per CPU: unwound in place */
  __u32 n;          /* frames stored */
  __u32 max;
  __u8 status;
  __u8 stopped_in_sched; /* the last stored frame is a __sched one */
  __u8 cut;              /* stopped at the limit with a kernel caller left */
  __u8 irq;              /* a stored frame is in interrupt entry code */
};

/* One frame: store its ip, then unwind to the caller. */
static long kwalk_step(__u32 i, void *data) {
  struct kwalk *w = data;
  __u64 ip = w->f->ip;
  __u64 n = i; /* one frame per iteration: the index is the count so far */
  same_register(n);
  if (ip < OFFCPU_KERNEL_ADDR_MIN) {
    w->status = KWALK_DONE; /* not a kernel address: nothing more to store */
    return 1;
  }
  if (n >= w->max || n >= OFFCPU_MAX_STACK_DEPTH) {
    w->status = KWALK_DONE; /* truncated, as the kernel's walk would be */
    w->cut = 1;
    return 1;
  }
  /* ftrace's function-graph tracer or a kretprobe replaced this return
   * address; the kernel's walk knows the original. */
  if (ip == ktext.graph_ret || ip == ktext.rethook_ret) {
    w->status = KWALK_SPLICE;
    return 1;
  }
  w->s->ips[n] = ip;
  w->n = n + 1;
  /* Checked here, once per frame walked, rather than by a loop over the
   * frames afterwards: a bounded loop is checked by the verifier once per
   * frame and per path to it (26,000 instructions of the waking hook). */
  w->irq |= in_range(ip, ktext.irqentry_start, ktext.irqentry_end);
  w->stopped_in_sched = in_sched_text(ip);
  /* (A knob at or past the depth limit is the limit: the walk goes on to
   * see whether it cuts the stack.) */
  if (w->n >= kwalk_limit && kwalk_limit < w->max) {
    w->status = KWALK_SPLICE;
    return 1;
  }
  int status = kwalk_unwind(w->f);
  if (status != KWALK_GOING) {
    w->status = status;
    return 1;
  }
  return 0;
}

/* kwalk_splice's loops over frames: with KLOOP_VERIFY, the kernel's list
 * must be the own list (`out`, n frames) without its __sched frames (j:
 * kernel frames matched); with KLOOP_SPLICE, the kernel's frames from
 * `from` are appended to out after its n frames. */
struct splice_loop {
  __u64 kind; /* KLOOP_VERIFY or KLOOP_SPLICE */
  struct offcpu_stack *out;
  const struct offcpu_stack *kernel;
  __u32 from; /* first kernel frame to append */
  __u32 m;    /* kernel frames */
  __u32 n;    /* frames already in out */
  __u32 max;
  __u32 copied; /* result */
  __u32 j;      /* verify: kernel frames matched */
  bool bad;     /* verify: result */
};

static __always_inline long verify_frame(__u32 i, struct splice_loop *c) {
  __u64 idx = i, j = c->j;
  same_register(idx);
  same_register(j);
  if (idx >= c->n || idx >= OFFCPU_MAX_STACK_DEPTH)
    return 1;
  __u64 ip = c->out->ips[idx];
  if (in_sched_text(ip))
    return 0;
  if (j >= c->m || j >= OFFCPU_MAX_STACK_DEPTH) {
    c->bad = true;
    return 1;
  }
  if (c->kernel->ips[j] != ip) {
    c->bad = true;
    return 1;
  }
  c->j = j + 1;
  return 0;
}

static __always_inline long splice_frame(__u32 i, struct splice_loop *c) {
  __u64 from = (__u64)c->from + i, n = (__u64)c->n + i;
  same_register(from);
  same_register(n);
  if (from >= c->m || from >= OFFCPU_MAX_STACK_DEPTH || n >= c->max ||
      n >= OFFCPU_MAX_STACK_DEPTH)
    return 1;
  c->out->ips[n] = c->kernel->ips[from];
  c->copied = i + 1;
  return 0;
}

/* live_calibrate's search: the highest of `words` (below the context) that
 * holds `want`, from the top down, word 0 excluded (the saved rbp lies
 * below the return address). */
#define LIVE_SCAN_WORDS 128 /* words below the context searched */
struct word_find {
  __u64 kind; /* KLOOP_FIND_WORD */
  const __u64 *words;
  __u64 want;
  __s64 found; /* -1: not there */
};

static __always_inline long find_word_step(__u32 i, struct word_find *c) {
  __u64 w = LIVE_SCAN_WORDS - 1 - (__u64)i;
  same_register(w);
  if (w < 1 || w >= LIVE_SCAN_WORDS)
    return 1;
  if (c->words[w] != c->want)
    return 0;
  c->found = w;
  return 1;
}

/* live_calibrate's check: own's n frames are the kernel's from `from`. */
struct frames_same {
  __u64 kind; /* KLOOP_SAME */
  const struct offcpu_stack *own, *kernel;
  __u32 n, from;
  __u32 bad; /* result */
};

static __always_inline long same_frame_step(__u32 i, struct frames_same *c) {
  __u64 a = i, b = (__u64)c->from + i;
  same_register(a);
  same_register(b);
  if (a >= c->n || a >= OFFCPU_MAX_STACK_DEPTH)
    return 1;
  if (b >= OFFCPU_MAX_STACK_DEPTH || c->own->ips[a] != c->kernel->ips[b]) {
    c->bad = 1;
    return 1;
  }
  return 0;
}

/* charge's merge of a histogram into another (charge.bpf.h). */
struct hist_add {
  __u64 kind; /* KLOOP_HIST_ADD */
  __u32 *to;
  const __u32 *from;
};

static __always_inline long hist_add_step(__u32 i, struct hist_add *c) {
  __u64 b = i;
  same_register(b);
  if (b >= OFFCPU_HIST_BUCKETS)
    return 1;
  __u32 n = c->from[b];
  if (n)
    __sync_fetch_and_add(&c->to[b], n);
  return 0;
}

static long kloop_leaf_step(__u32 i, void *data) {
  __u64 kind = *(__u64 *)data;
  if (kind == KLOOP_ORC_SEARCH)
    return orc_search_step(data);
  if (kind == KLOOP_VERIFY)
    return verify_frame(i, data);
  if (kind == KLOOP_FIND_WORD)
    return find_word_step(i, data);
  if (kind == KLOOP_SAME)
    return same_frame_step(i, data);
  if (kind == KLOOP_HIST_ADD)
    return hist_add_step(i, data);
  return splice_frame(i, data);
}

/* The own walk from frame *f into s: frames stored, how it ended. A global
 * function, as are the two below, so the verifier checks each once rather
 * than once per path through the code around it. */
struct kwalk_result {
  __u32 n;
  __u32 status;
  __u32 stopped_in_sched;
  __u32 cut; /* cut at the limit: a caller was left */
  __u32 irq; /* through interrupt entry code */
};

/* A walk's first frame and its result, per CPU and context (SCRATCH_*):
 * off the BPF stack, whose 512 bytes the hook and the walk's global
 * functions share on kernels without private stacks. */
struct kw_walk_state {
  struct kframe f;
  struct kwalk_result r;
};

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 2); /* SCRATCH_HOOK, SCRATCH_ITER */
  __type(key, __u32);
  __type(value, struct kw_walk_state);
} kw_walk_states SEC(".maps");

/* The walk state of context `slot`, its frame set to these bounds and
 * registers (the rest zero), its result cleared; NULL: none. */
static __always_inline struct kw_walk_state *
kw_walk_state_of(__u32 slot, __u64 ip, __u64 sp, __u64 bp, __u64 lo, __u64 hi) {
  struct kw_walk_state *ws = bpf_map_lookup_elem(&kw_walk_states, &slot);
  if (!ws)
    return NULL;
  __builtin_memset(ws, 0, sizeof(*ws));
  ws->f.ip = ip;
  ws->f.sp = sp;
  ws->f.bp = bp;
  ws->f.stack_lo = lo;
  ws->f.stack_hi = hi;
  ws->f.cache = slot;
  ws->f.sp_src = KW_SRC_FRAME;
  return ws;
}

__noinline int kwalk_frames(struct kframe *f, struct offcpu_stack *s, __u32 max,
                            struct kwalk_result *r) {
  if (!f || !s || !r)
    return 0;
  struct kwalk w = {.s = s, .f = f, .max = max, .status = KWALK_SPLICE};
  /* bpf_loop where there is one: the verifier checks a bounded loop once
   * per frame (128 times, the largest part of the switch program's load
   * time) and a bpf_loop body until it converges. The kernel inlines the
   * loop, so a frame costs a direct call more; the walk only runs when a
   * memo does not serve. */
  if (use_bpf_loop) {
    bpf_loop(OFFCPU_MAX_STACK_DEPTH + 1, kwalk_step, &w, 0);
  } else {
    for (__u32 i = 0; i < OFFCPU_MAX_STACK_DEPTH + 1; i++)
      if (kwalk_step(i, &w))
        break;
  }
  r->n = w.n;
  r->status = w.status;
  r->stopped_in_sched = w.stopped_in_sched;
  r->cut = w.cut;
  r->irq = w.irq;
  /* Kept with the frames: take_kernel_stack stores it with them. */
  s->flags = w.cut ? OFFCPU_STACK_TRUNCATED : 0;
  return 0;
}

/* Checks the own walk (r, frames in own) against the kernel's (`bytes` of
 * frames in kernel, without __sched ones) and, where the own walk handed
 * over, appends the kernel's frames from that point. Returns the frame count
 * in own; bit 32 set when __sched frames may be missing from them. */
__noinline __u64 kwalk_splice(struct offcpu_stack *own,
                              const struct offcpu_stack *kernel, long bytes,
                              const struct kwalk_result *r, __u32 max) {
  if (!own || !kernel || !r)
    return 0;
  __u32 m = bytes > 0 ? bytes / sizeof(__u64) : 0;
  struct splice_loop v = {.out = own,
                          .kernel = kernel,
                          .n = r->n,
                          .m = m,
                          .j = kwalk_unknown_zero,
                          .kind = KLOOP_VERIFY};
  bpf_loop(OFFCPU_MAX_STACK_DEPTH, kloop_leaf_step, &v, 0);
  /* A complete own walk must account for every kernel frame (both are cut
   * at the same depth, so a truncated one only for its prefix). */
  if (r->status != KWALK_SPLICE && r->n < max && v.j != m)
    v.bad = true;
  if (v.bad) {
    count_kunwind(OFFCPU_KUNWIND_MISMATCH);
    /* Trust the kernel: its frames, flagged as lacking __sched ones. */
    struct splice_loop c = {
        .kind = KLOOP_SPLICE, .out = own, .kernel = kernel, .m = m, .max = max};
    bpf_loop(OFFCPU_MAX_STACK_DEPTH, kloop_leaf_step, &c, 0);
    return c.copied | 1ULL << 32;
  }
  if (r->status != KWALK_SPLICE) {
    count_kunwind(OFFCPU_KUNWIND_VERIFIED);
    return r->n;
  }
  count_kunwind(OFFCPU_KUNWIND_SPLICED);
  struct splice_loop c = {.kind = KLOOP_SPLICE,
                          .out = own,
                          .kernel = kernel,
                          .from = v.j,
                          .m = m,
                          .n = r->n,
                          .max = max};
  bpf_loop(OFFCPU_MAX_STACK_DEPTH, kloop_leaf_step, &c, 0);
  /* Had the own walk stopped inside __sched text, __sched frames between
   * it and the kernel's next frame would be missing. */
  return (r->n + c.copied) | (__u64)(r->stopped_in_sched != 0) << 32;
}

/* The walk is not to be kept as a memo. */
static __always_inline void kw_notes_stop(__u32 slot) {
  struct kw_notes *n = bpf_map_lookup_elem(&kw_notes_map, &slot);
  if (n)
    n->bad = 1;
}

/* Walks the kernel stack of task `t`, which is off CPU, into s. Returns the
 * number of frames, 0 on failure; *partial is set when __sched frames may be
 * missing from it. `note`: keep the words it reads for a memo. */
static __always_inline __u32 walk_kernel_stack(struct task_struct *t,
                                               struct offcpu_stack *s,
                                               __u32 max, bool *partial,
                                               __u32 slot, bool note) {
  *partial = false;
  __u64 frame = BPF_CORE_READ(t, thread.sp);
  struct inactive_task_frame *itf = (struct inactive_task_frame *)frame;
  struct pt_regs *top = (struct pt_regs *)bpf_task_pt_regs(t);
  struct kw_walk_state *ws =
      kw_walk_state_of(slot, BPF_CORE_READ(itf, ret_addr),
                       frame + bpf_core_type_size(struct inactive_task_frame),
                       BPF_CORE_READ(itf, bp), (__u64)BPF_CORE_READ(t, stack),
                       (__u64)top + bpf_core_type_size(struct pt_regs));
  if (!ws)
    return 0;
  struct kframe *f = &ws->f;
  struct kwalk_result *r = &ws->r;
  if (!frame || !top || f->sp <= f->stack_lo || f->sp >= f->stack_hi)
    return 0;
  struct kw_notes *n = bpf_map_lookup_elem(&kw_notes_map, &slot);
  if (n) {
    n->base = frame;
    n->stack_lo = f->stack_lo;
    n->stack_hi = f->stack_hi;
    n->boundary = 0;
    n->nr = 0;
    n->bad = 0;
    n->used = 0;
    n->on = note;
  }
  kw_note(slot, (__u64)&itf->ret_addr, f->ip, KW_SRC_FRAME, KW_VALUE);
  f->bp_src = kw_note(slot, (__u64)&itf->bp, f->bp, KW_SRC_FRAME, KW_BP);
  /* A task that has never run starts in ret_from_fork, not after a call. */
  f->signal = f->ip == ktext.fork_ret;
  kwalk_frames(f, s, max, r);
  if (r->status != KWALK_SPLICE && !kwalk_verify)
    return r->n;
  /* Finished or checked by the kernel's walk: not a function of the noted
   * words alone. */
  kw_notes_stop(slot);

  struct offcpu_stack *k = bpf_map_lookup_elem(&kernel_walk_scratch, &slot);
  if (!k)
    return 0;
  long bytes = bpf_get_task_stack(t, k->ips, stack_bytes(), 0);
  __u64 res = kwalk_splice(s, k, bytes, r, max);
  *partial = res >> 32;
  return (__u32)res;
}

/* The address a pointer holds, as a number: a pointer cannot be read as
 * one, but one pointer minus another is one for privileged programs (the
 * current task's BTF pointer, whose address is known). */
static __always_inline __u64 address_of(const void *p) {
  struct task_struct *t = bpf_get_current_task_btf();
  __u64 off;
  asm volatile("%0 = %1; %0 -= %2" : "=&r"(off) : "r"(p), "r"(t));
  return off + bpf_get_current_task();
}

/* Where a tracepoint program's caller left its frame on the stack, from
 * the program's context: the context is the tracepoint's arguments, an
 * array in the frame of bpf_trace_runN, which calls the program; the
 * call's return address and the rbp the program's prologue pushes lie a
 * fixed distance below it (the program's own stack may be elsewhere: a
 * private stack, 6.13+). The distance is found once, where the kernel's
 * own walk of the same stack shows the return address, and checked at
 * every use (the walk must find that return address there). */
__u64 live_ctx_delta = 0; /* context - frame; 0: not known */
__u64 live_ret = 0;       /* the return address at frame + 8 */
__u32 live_state = 0;     /* LIVE_* */
__u32 live_tries = 0;     /* calibrations that could not decide */
#define LIVE_UNKNOWN 0
#define LIVE_FOUND 1
#define LIVE_CANNOT 2 /* not found, or the walks disagreed: the kernel's */
#define LIVE_MAX_TRIES 64

static __always_inline __u32 walk_live_kernel_stack(struct task_struct *t,
                                                    __u64 fp, __u64 ret,
                                                    struct offcpu_stack *s,
                                                    __u32 max, __u32 slot,
                                                    bool note);

/* Finds live_ctx_delta for the context ctx of this program, the first time
 * (racing CPUs find the same). */
static __always_inline void live_calibrate(void *ctx, struct task_struct *t) {
  __u32 slot = SCRATCH_HOOK, zero = 0;
  struct offcpu_stack *k = bpf_map_lookup_elem(&kernel_walk_scratch, &slot);
  struct offcpu_stack *s = scratch_stack(slot);
  struct reuse_span *buf = bpf_map_lookup_elem(&reuse_span_buf, &zero);
  if (!k || !s || !buf)
    return;
  long bytes = bpf_get_stack(ctx, k->ips, stack_bytes(), 0);
  __u32 m = bytes > 0 ? bytes / sizeof(__u64) : 0;
  /* The first core kernel address is the return into bpf_trace_runN: the
   * frames before it are the program's (JIT code). */
  __u32 j = 0;
  for (; j < 8; j++) {
    __u64 idx = j;
    same_register(idx);
    if (idx >= m || idx >= OFFCPU_MAX_STACK_DEPTH) {
      live_state = LIVE_CANNOT;
      return;
    }
    __u64 ip = k->ips[idx];
    if (in_range(ip, ktext.text_start, ktext.text_end))
      break;
  }
  if (j >= 8) {
    live_state = LIVE_CANNOT;
    return;
  }
  /* j holds a different constant on each way out of its loop, and a
   * branch on a known constant makes the verifier track it exactly: the
   * rest of this function (the 128-word search below) would be checked
   * once per way out. Read back from the per-CPU buffer, it is just a
   * number in range. The same for `found` after its loop. */
  __u64 *forget = (__u64 *)&buf->b[LIVE_SCAN_WORDS * sizeof(__u64)];
  forget[0] = j;
  j = load_u64(&forget[0]);
  __u64 c = address_of(ctx);
  __u64 below = c - LIVE_SCAN_WORDS * sizeof(__u64);
  if (bpf_probe_read_kernel(buf->b, LIVE_SCAN_WORDS * sizeof(__u64),
                            (void *)below)) {
    live_state = LIVE_CANNOT;
    return;
  }
  /* The loops through the kernel walk's leaf callback: as bounded loops,
   * the verifier checked each of their 127 steps on every way here, a
   * fifth of the waking hook's load for what runs once a run. */
  __u64 want = k->ips[j & 7];
  /* One place for both loops' contexts: with it the waking hook's deepest
   * chain takes the whole 512-byte stack (bpf-stack-depth.py). */
  union {
    struct word_find f;
    struct frames_same v;
  } lc = {.f = {.kind = KLOOP_FIND_WORD,
                .words = (const __u64 *)buf->b,
                .want = want,
                .found = -1}};
  bpf_loop(LIVE_SCAN_WORDS, kloop_leaf_step, &lc.f, 0);
  __s64 found = lc.f.found;
  if (found < 1) { /* the saved rbp is the word below */
    live_state = LIVE_CANNOT;
    return;
  }
  forget[1] = found;
  found = load_u64(&forget[1]);
  if (found < 1 || found >= LIVE_SCAN_WORDS) {
    live_state = LIVE_CANNOT;
    return;
  }
  __u64 fp = below + (found - 1) * sizeof(__u64);
  __u32 n = walk_live_kernel_stack(t, fp, want, s,
                                   stack_bytes() / sizeof(__u64), slot, false);
  /* Not on the task's stack (an interrupt's), or through module code: no
   * verdict from this one. */
  if (!n) {
    if (++live_tries >= LIVE_MAX_TRIES) /* racy: a try more or less */
      live_state = LIVE_CANNOT;
    return;
  }
  /* Our walk must give the kernel's frames from the return address on,
   * all of them. */
  lc.v = (struct frames_same){
      .kind = KLOOP_SAME, .own = s, .kernel = k, .n = n, .from = j & 7};
  bpf_loop(OFFCPU_MAX_STACK_DEPTH, kloop_leaf_step, &lc.v, 0);
  if (n + (j & 7) != m || lc.v.bad) {
    live_state = LIVE_CANNOT;
    return;
  }
  /* In this order: a reader that sees FOUND sees the rest (a torn reading
   * would only fail the return address check). */
  *(volatile __u64 *)&live_ret = want;
  *(volatile __u64 *)&live_ctx_delta = c - fp;
  *(volatile __u32 *)&live_state = LIVE_FOUND;
}

/* The frame the walk of the current task's live stack starts from (see
 * live_ctx_delta); 0: the kernel's walker must do. */
static __always_inline __u64 live_frame(void *ctx, struct task_struct *t) {
  if (live_state == LIVE_UNKNOWN)
    live_calibrate(ctx, t);
  if (live_state != LIVE_FOUND)
    return 0;
  return address_of(ctx) - live_ctx_delta;
}

/* Walks the kernel stack of the current task t, running this program,
 * from its caller's frame fp (the saved rbp, then the return address,
 * which must be `ret`), into s. Returns the frame count; 0 where it cannot
 * start or finish on t's own stack (the stack of an interrupt, module
 * code...), and the caller asks the kernel's walker instead. `note`: keep
 * the words it reads for a memo, with fp as the base. */
static __always_inline __u32 walk_live_kernel_stack(struct task_struct *t,
                                                    __u64 fp, __u64 ret,
                                                    struct offcpu_stack *s,
                                                    __u32 max, __u32 slot,
                                                    bool note) {
  struct pt_regs *top = (struct pt_regs *)bpf_task_pt_regs(t);
  __u64 lo = (__u64)BPF_CORE_READ(t, stack);
  __u64 hi = (__u64)top + bpf_core_type_size(struct pt_regs);
  if (!top || fp < lo || fp + 2 * sizeof(__u64) > hi)
    return 0;
  __u64 w[2]; /* the saved rbp and the return address */
  if (bpf_probe_read_kernel(w, sizeof(w), (void *)fp) || w[1] != ret)
    return 0;
  struct kw_walk_state *ws =
      kw_walk_state_of(slot, w[1], fp + sizeof(w), w[0], lo, hi);
  if (!ws)
    return 0;
  struct kframe *f = &ws->f;
  struct kwalk_result *r = &ws->r;
  struct kw_notes *n = bpf_map_lookup_elem(&kw_notes_map, &slot);
  if (n) {
    n->base = fp;
    n->stack_lo = lo;
    n->stack_hi = hi;
    n->boundary = 0;
    n->nr = 0;
    n->bad = 0;
    n->used = 0;
    n->on = note;
  }
  f->bp_src = kw_note(slot, fp, w[0], KW_SRC_FRAME, KW_BP);
  kw_note(slot, fp + sizeof(__u64), w[1], KW_SRC_FRAME, KW_VALUE);
  kwalk_frames(f, s, max, r);
  if (r->status != KWALK_DONE)
    return 0;
  /* Through interrupt entry code: the kernel's walk, which the caller cuts
   * there (the frames below are of whatever the interrupt hit). */
  if (r->irq)
    return 0;
  return r->n;
}

/* The two regions a kernel memo's words are in, each read in one go into
 * half of the reuse buffer: from the saved stack pointer up, and below the
 * top of the stack (the system call's frame and registers). */
#define KW_REGION (REUSE_SPAN / 2)

/* The walk of memo m would read the same words again on the task's stack,
 * now at `frame` (moved by the difference from the memo's, see above). A
 * global function: verified once. */
__noinline int kw_memo_holds(const struct kw_memo *m, __u64 frame) {
  if (!m)
    return 0;
  __u64 hi = m->top;
  __u32 nr = m->nr;
  if (!nr)
    return 0;
  /* Not `delta && exact`: a branch on delta would have the verifier check
   * the loop below twice, once for delta 0. */
  if (m->exact && frame != m->frame)
    return 0;
  __s64 delta = (__s64)(frame - m->frame);
  __u32 moving = m->moving_end, fixed = m->fixed_span;
  if (moving > KW_REGION || fixed > KW_REGION)
    return 0;
  /* The moving words must stay below the fixed ones. */
  if (frame + m->boundary > hi - fixed || frame + moving > hi)
    return 0;
#ifndef OFFCPU_DIRECT_LOADS
  __u32 zero = 0;
  struct reuse_span *buf = bpf_map_lookup_elem(&reuse_span_buf, &zero);
  if (!buf)
    return 0;
  /* Sizes may be 0 (then nothing is read): no branch on them, or the
   * verifier would check the loop once with and once without. */
  if (bpf_probe_read_kernel(buf->b, moving, (void *)frame) ||
      bpf_probe_read_kernel(&buf->b[KW_REGION], fixed, (void *)(hi - fixed)))
    return 0;
#endif
  /* A plain bounded loop, as uw_memo_holds', with no branch in its body but
   * the word count, the bounds check and the first difference (a quarter
   * of the checks at the pipe benchmark's switches try the wrong way of two
   * first, and differ from the first word): the verifier walks a bounded
   * loop once per iteration and path, and this one runs at every
   * switch-in. */
  for (__u32 i = 0; i < KW_MEMO_WORDS; i++) {
    if (i >= nr)
      break;
    __u64 cls = m->cls[i];
    __u64 off = m->off[i];
    __u64 is_fixed = (__u64)0 - (__u64)((cls & KW_ADDR_FIXED) != 0);
#ifdef OFFCPU_DIRECT_LOADS
    /* Each word where it is: a word of the stack's guard page reads 0 and
     * differs from the return address or frame noted there. */
    __u64 now =
        kernel_word(((frame + off) & ~is_fixed) | ((hi - off) & is_fixed));
#else
    __u64 at = (off & ~is_fixed) | ((KW_REGION + fixed - off) & is_fixed);
    same_register(at);
    if (at > REUSE_SPAN - sizeof(__u64))
      return 0;
    __u64 now = load_u64(&buf->b[at]);
#endif
    __u64 moves = (__u64)0 - (__u64)((cls & KW_VAL_MOVES) != 0);
    if (now != m->val[i] + (delta & moves))
      return 0;
  }
  return 1;
}

/* What kw_memo_keep gathers over the words. */
struct kw_keep {
  __u64 lo, hi, base, bound;
  __u32 used; /* saved frame pointers the walk went on to use as a base */
  __u32 exact, moving_end, fixed_span, too_far;
  __u32 nr; /* words kept: those whose value is compared */
  __u32 pad;
};

/* Classifies word i of the notes into the memo; 1 past the last word. A
 * global function: the verifier checks it once, not once per word. */
__noinline int kw_keep_word(struct kw_memo *m, const struct kw_notes *n,
                            struct kw_keep *k, __u32 word) {
  __u64 i = word;
  same_register(i); /* one register for the checks and the indexing */
  if (!m || !n || !k || i >= KW_MEMO_WORDS || i >= n->nr)
    return 1;
  __u64 addr = k->base + n->off[i];
  bool fixed = addr >= k->bound;
  /* Where the walk got the address: from the stack pointer (which moves)
   * or from an earlier word's value, which tells whether it moves. */
  bool base_moves = true;
  __u32 src = n->src[i];
  if (src != KW_SRC_FRAME) {
    __u64 v = n->val[src & (KW_MEMO_WORDS - 1)];
    if (src >= i || v < k->lo || v >= k->hi)
      k->exact = 1;
    base_moves = v < k->bound;
  }
  if (base_moves == fixed)
    k->exact = 1;
  __u64 val = n->val[i];
  __u8 cls = fixed ? KW_ADDR_FIXED : 0;
  __u8 kind = n->kind[i];
  if (kind == KW_PLACE || (kind == KW_BP && !(k->used & (1u << i))))
    cls |= KW_BOUND_ONLY;
  else if (val >= k->lo && val < k->bound)
    cls |= KW_VAL_MOVES;
  /* Fixed words by their distance below the top, moving ones from the
   * stack pointer: each region must fit its half of the buffer. */
  __u64 off = fixed ? k->hi - addr : addr - k->base;
  __u64 end = fixed ? off : off + sizeof(__u64);
  if (end > KW_REGION || (fixed && off < sizeof(__u64))) {
    k->too_far = 1;
    return 0;
  }
  if (fixed) {
    if (end > k->fixed_span)
      k->fixed_span = end;
  } else if (end > k->moving_end) {
    k->moving_end = end;
  }
  /* A word whose place only matters is in the spans, which the check
   * bounds by the stack: nothing to compare (about a third of the words). */
  if (cls & KW_BOUND_ONLY)
    return 0;
  __u64 o = k->nr;
  same_register(o);
  if (o >= KW_MEMO_WORDS)
    return 1;
  m->off[o] = off;
  m->cls[o] = cls;
  m->val[o] = val;
  k->nr = o + 1;
  return 0;
}

/* Keeps the notes of a walk in a memo: which words move with the stack
 * pointer, which stay, and whether that agrees with how each address was
 * computed (else the memo serves the same stack pointer only). A global
 * function: verified once. */
__noinline int kw_memo_keep(struct kw_memo *m, __u32 slot) {
  if (!m)
    return 0;
  struct kw_notes *n = bpf_map_lookup_elem(&kw_notes_map, &slot);
  if (!n || n->bad || !n->on || !n->nr || n->nr > KW_MEMO_WORDS)
    return 0;
  struct kw_keep k = {
      .lo = n->stack_lo,
      .hi = n->stack_hi,
      .base = n->base,
      .bound = n->boundary ? n->boundary : n->stack_hi,
      .used = n->used,
  };
  /* The word count is read in kw_keep_word rather than compared here: an
   * exit at each count would give the verifier a state per count. */
  for (__u32 i = 0; i < KW_MEMO_WORDS; i++)
    if (kw_keep_word(m, n, &k, i))
      break;
  if (k.too_far)
    return 0;
  m->top = k.hi;
  m->exact = k.exact;
  m->boundary = k.bound - k.base;
  m->moving_end = k.moving_end;
  m->fixed_span = k.fixed_span;
  m->nr = k.nr;
  return k.nr != 0;
}

/* Kernel stack of a task that is off CPU: the ORC walk where available,
 * else bpf_get_task_stack (5.9+), flagged as lacking __sched frames. Either
 * starts at __schedule: none of the tracer's own frames are in it. `ms`:
 * the task's kernel stack memos (the tracing hooks only; NULL: none).
 * `live`: t is the current task, walked instead from live_fp, the frame of
 * the program's caller (see live_frame; memos then relative to it); where
 * the ORC walk does not serve, *flags gets KSTACK_ASK_KERNEL and nothing is
 * stored. */
#define KSTACK_ASK_KERNEL 0x80000000u
static __always_inline __u64 take_kernel_stack(struct task_struct *t,
                                               __u32 *flags, __u32 slot,
                                               struct kw_memo_set *ms,
                                               bool live, __u64 live_fp) {
  struct offcpu_stack *s = scratch_stack(slot);
  if (!s)
    return OFFCPU_STACK_MISSED;
  if (kwalk_orc) {
    struct kw_memo *m = NULL;
    __u32 way = 0;
    __u64 memo_stack = OFFCPU_STACK_MISSED;
    struct uw_stats *st = uw_stats_of(slot);
    if (!reuse_stacks || kwalk_verify)
      ms = NULL;
    if (ms) {
      /* The switch hook's task pointer is trusted: a plain load. */
      __u64 frame = live ? live_fp : t->thread.sp;
      /* Not 0 once a way held words (a count, not a flag set on a branch:
       * the verifier would check each step twice). */
      __u64 tried = 0;
      /* The way used last first. An empty way fails kw_memo_holds at its
       * first check: asked anyway, as a skip would be another branch. */
      for (__u32 k = 0; k < KW_MEMO_WAYS; k++) {
        way = (ms->last ^ k) & (KW_MEMO_WAYS - 1);
        struct kw_memo *c = &ms->way[way];
        tried |= c->nr;
        if (kw_memo_holds(c, frame)) {
          m = c;
          break;
        }
      }
      if (m) {
        uw_count(st, UW_STAT_KREUSED);
        ms->last = way;
        if (!reuse_verify) {
          if (m->nosched)
            *flags |= OFFCPU_KSTACK_NOSCHED;
          return m->stack;
        }
        memo_stack = m->stack;
      } else {
        if (tried)
          uw_count(st, UW_STAT_KREUSE_CHANGED);
        /* Each way in turn, never the one used last. */
        way = ms->next & (KW_MEMO_WAYS - 1);
        if (way == ms->last)
          way = (way + 1) & (KW_MEMO_WAYS - 1);
        ms->next = way + 1;
        m = &ms->way[way];
      }
      m->nr = 0;
    }
    bool partial = false;
    __u32 max = stack_bytes() / sizeof(__u64);
    __u32 nr = live ? walk_live_kernel_stack(t, live_fp, live_ret, s, max, slot,
                                             m != NULL)
                    : walk_kernel_stack(t, s, max, &partial, slot, m != NULL);
    if (live && !nr) {
      *flags |= KSTACK_ASK_KERNEL;
      return OFFCPU_STACK_MISSED;
    }
    if (partial)
      *flags |= OFFCPU_KSTACK_NOSCHED;
    /* Set by the walk (kwalk_frames), whichever way it went. */
    __u32 cut = s->flags & OFFCPU_STACK_TRUNCATED;
    __u64 id = store_stack_from(slot, s, (long)nr * sizeof(__u64), cut);
    if (memo_stack != OFFCPU_STACK_MISSED && memo_stack != id)
      uw_count(st, UW_STAT_KREUSE_MISMATCH);
    if (m)
      uw_count(st, UW_STAT_KWALKS);
    if (m && stack_stored(id)) {
      if (kw_memo_keep(m, slot)) {
        m->frame = live ? live_fp : t->thread.sp;
        m->stack = id;
        m->nosched = partial;
        ms->last = way;
      } else {
        uw_count(st, UW_STAT_KMEMO_UNKEPT);
      }
    }
    return id;
  }
  if (live) {
    *flags |= KSTACK_ASK_KERNEL;
    return OFFCPU_STACK_MISSED;
  }
  *flags |= OFFCPU_KSTACK_NOSCHED;
  long bytes = bpf_get_task_stack(t, s->ips, stack_bytes() + sizeof(__u64), 0);
  __u32 cut = kernel_walk_cut(&bytes);
  return store_stack_from(slot, s, bytes, cut);
}

/* Kernel stack of a task that is off CPU (see take_kernel_stack). */
static __always_inline __u64 take_frozen_kernel_stack(struct task_struct *t,
                                                      __u32 *flags, __u32 slot,
                                                      struct kw_memo_set *ms) {
  return take_kernel_stack(t, flags, slot, ms, false, 0);
}

/* Kernel stack of the current task, from the frame of the tracepoint
 * program's caller (tracing hooks only: SCRATCH_HOOK); *served is false
 * where the ORC walk does not serve and the kernel's walker must. */
static __always_inline __u64 take_live_kernel_stack(void *ctx,
                                                    struct kw_memo_set *ms,
                                                    bool *served) {
  __u32 flags = 0;
  *served = false;
  if (!kwalk_orc || kwalk_verify)
    return OFFCPU_STACK_MISSED;
  struct task_struct *t = bpf_get_current_task_btf();
  __u64 fp = live_frame(ctx, t);
  if (!fp)
    return OFFCPU_STACK_MISSED;
  __u64 id = take_kernel_stack(t, &flags, SCRATCH_HOOK, ms, true, fp);
  *served = !(flags & KSTACK_ASK_KERNEL);
  return id;
}

#endif /* OFFCPU_KERNEL_UNWIND_BPF_H */
