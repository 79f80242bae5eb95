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

#include "offcpu/shared.h"
#include "stack_store.bpf.h"

/* Filled in by the loader when the walker is used (kwalk_orc). */
const volatile bool kwalk_orc = false;
const volatile struct offcpu_kernel_text ktext = {};
/* Test knob: hand over to the kernel's walk after this many frames. */
const volatile __u32 kwalk_limit = OFFCPU_MAX_STACK_DEPTH;
/* --verify-kernel-unwind: also take the kernel's walk and compare. */
const volatile bool kwalk_verify = false;

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
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 2 * ORC_CACHE_SLOTS);
  __type(key, __u32);
  __type(value, struct orc_slot);
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
 * again. The walk is a function of the task's saved stack pointer, its
 * stack page and the words it reads from that stack (the ORC tables do not
 * change): when the stack pointer and page are those of an earlier walk and
 * every word it read holds the same value, the walk would store the same
 * stack, so its id is reused (the words are checked against one copy of
 * the stack above the saved stack pointer). Walks the kernel's own walk had
 * to finish are not reused. Only the switch hook keeps memos. */
#define KW_MEMO_WORDS 32
#define KW_MEMO_WAYS 2

struct kw_memo {
  __u64 frame; /* thread.sp */
  __u64 stack_page;
  __u64 stack; /* the id the walk stored */
  __u32 nr;    /* words; 0: nothing to reuse */
  __u32 span;  /* bytes from frame that hold them */
  __u32 nosched;
  __u32 pad;
  __u16 off[KW_MEMO_WORDS];
  __u64 val[KW_MEMO_WORDS];
};

/* Kept by the caller with its other per-thread state. */
struct kw_memo_set {
  struct kw_memo way[KW_MEMO_WAYS];
  __u32 last;
  __u32 pad;
};

/* The words a walk read, per CPU and per context: the walk's global
 * functions cannot take a map value (the memo) as an argument. */
struct kw_notes {
  __u64 base;
  __u32 nr, span;
  __u32 off_limit; /* 0: not noting */
  __u32 bad;
  __u16 off[KW_MEMO_WORDS];
  __u64 val[KW_MEMO_WORDS];
};

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 2); /* SCRATCH_HOOK, SCRATCH_ITER */
  __type(key, __u32);
  __type(value, struct kw_notes);
} kw_notes_map SEC(".maps");

static __always_inline void kw_note(__u32 slot, __u64 addr, __u64 val) {
  struct kw_notes *n = bpf_map_lookup_elem(&kw_notes_map, &slot);
  if (!n || !n->off_limit || n->bad)
    return;
  __u64 off = addr - n->base; /* wraps above the limit when below base */
  __u64 i = n->nr;
  same_register(i);
  if (off > REUSE_SPAN - sizeof(__u64) || i >= KW_MEMO_WORDS) {
    n->bad = 1;
    return;
  }
  n->off[i] = off;
  n->val[i] = val;
  n->nr = i + 1;
  if (off + sizeof(__u64) > n->span)
    n->span = off + sizeof(__u64);
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

struct orc_search {
  __u64 addr;
  __u64 lo, hi; /* entries [lo, hi) are still candidates */
  __s64 found;  /* last entry known to start at or below addr */
};

/* One step of a binary search of the sorted ORC address table. */
static long orc_search_step(__u32 i, void *data) {
  struct orc_search *c = data;
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
  struct orc_slot *o = bpf_map_lookup_elem(&orc_cache, &idx);
  if (!o)
    return NULL;
  if (o->addr == addr)
    return o;

  count_kunwind(OFFCPU_KUNWIND_ORC_LOOKUPS);
  /* Bounds the verifier cannot know: with constants it would follow every
   * path of the search separately. */
  struct orc_search c = {
      .addr = addr,
      .lo = kwalk_unknown_zero,
      .hi = (ktext.orc_ip_end - ktext.orc_ip_start) / sizeof(__s32) +
            kwalk_unknown_zero,
      .found = -1,
  };
  bpf_loop(32, orc_search_step, &c, 0);
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
  return (ip >= ktext.sched_start && ip < ktext.sched_end) ||
         (ip >= ktext.lock_start && ip < ktext.lock_end);
}

#define KWALK_GOING 0
#define KWALK_DONE 1   /* reached the bottom: user entry or thread start */
#define KWALK_SPLICE 2 /* the kernel's walk must finish it */

/* Unwinder state: where the frame being unwound returns to and its
 * registers, and the bounds of the task's kernel stack. */
struct kframe {
  __u64 ip, sp, bp;
  __u64 stack_lo, stack_hi;
  __u32 signal; /* ip is not a return address: look it up as is */
  __u32 cache;  /* the caller's context: SCRATCH_HOOK or SCRATCH_ITER */
};

static __always_inline bool stack_word(const struct kframe *f, __u64 addr,
                                       __u64 *out) {
  if (addr < f->stack_lo || addr + sizeof(__u64) > f->stack_hi)
    return false;
  if (bpf_probe_read_kernel(out, sizeof(*out), (void *)addr))
    return false;
  kw_note(f->cache, addr, *out);
  return true;
}

/* A pt_regs word on the stack, noted like stack_word's. */
#define regs_word(f, dst, regs, field)                                         \
  (bpf_core_read(&(dst), sizeof(dst), &(regs)->field)                          \
       ? -1                                                                    \
       : (kw_note((f)->cache, (__u64) & (regs)->field, (dst)), 0))

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
  if (o->sp_reg == ORC_REG_SP)
    base = f->sp;
  else if (o->sp_reg == ORC_REG_BP)
    base = f->bp;
  else
    return KWALK_SPLICE; /* indirect or entry-code registers */
  __u64 cfa = base + o->sp_offset;

  __u64 next_ip, next_sp, next_bp = f->bp, regs_bp = 0;
  bool have_regs_bp = false;
  if (o->type == ORC_TYPE_CALL) {
    if (!stack_word(f, cfa - sizeof(__u64), &next_ip))
      return KWALK_SPLICE;
    next_sp = cfa;
  } else if (o->type == ORC_TYPE_REGS) {
    struct pt_regs *regs = (struct pt_regs *)cfa;
    __u64 cs;
    if (cfa < f->stack_lo ||
        cfa + bpf_core_type_size(struct pt_regs) > f->stack_hi)
      return KWALK_SPLICE;
    if (regs_word(f, cs, regs, cs))
      return KWALK_SPLICE;
    if ((cs & 3) == 3) /* entered from user space: the bottom */
      return KWALK_DONE;
    /* An interrupt that preempted kernel code: go on where it hit. */
    if (regs_word(f, next_ip, regs, ip) || regs_word(f, next_sp, regs, sp) ||
        regs_word(f, regs_bp, regs, bp))
      return KWALK_SPLICE;
    have_regs_bp = true;
  } else {
    return KWALK_SPLICE; /* REGS_PARTIAL: IRQ entry code, not a sleeper's */
  }

  if (o->bp_reg != ORC_REG_UNDEFINED) {
    /* Saved relative to the caller's SP, or to this frame's BP. */
    __u64 at;
    if (o->bp_reg == ORC_REG_PREV_SP)
      at = cfa;
    else if (o->bp_reg == ORC_REG_BP)
      at = f->bp;
    else
      return KWALK_SPLICE;
    if (!stack_word(f, at + o->bp_offset, &next_bp))
      return KWALK_SPLICE;
  } else if (have_regs_bp) {
    next_bp = regs_bp;
  }

  if (next_sp <= f->sp) /* bad data would loop: callers are above */
    return KWALK_SPLICE;
  f->signal = o->signal;
  f->ip = next_ip;
  f->sp = next_sp;
  f->bp = next_bp;
  return KWALK_GOING;
}

struct kwalk {
  struct offcpu_stack *s;
  struct kframe f;
  __u32 n; /* frames stored */
  __u32 max;
  __u8 status;
  __u8 stopped_in_sched; /* the last stored frame is a __sched one */
};

/* One frame: store its ip, then unwind to the caller. */
static long kwalk_step(__u32 i, void *data) {
  struct kwalk *w = data;
  __u64 ip = w->f.ip;
  __u64 n = i; /* one frame per iteration: the index is the count so far */
  same_register(n);
  if (n >= w->max || n >= OFFCPU_MAX_STACK_DEPTH) {
    w->status = KWALK_DONE; /* truncated, as the kernel's walk would be */
    return 1;
  }
  if (ip < OFFCPU_KERNEL_ADDR_MIN) {
    w->status = KWALK_DONE; /* not a kernel address: nothing more to store */
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
  w->stopped_in_sched = in_sched_text(ip);
  if (w->n >= kwalk_limit) {
    w->status = KWALK_SPLICE;
    return 1;
  }
  int status = kwalk_unwind(&w->f);
  if (status != KWALK_GOING) {
    w->status = status;
    return 1;
  }
  return 0;
}

struct splice_loop {
  struct offcpu_stack *out;
  const struct offcpu_stack *kernel;
  __u32 from; /* first kernel frame to append */
  __u32 m;    /* kernel frames */
  __u32 n;    /* frames already in out */
  __u32 max;
  __u32 copied; /* result */
};

static long splice_step(__u32 i, void *data) {
  struct splice_loop *c = data;
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

struct verify_loop {
  const struct offcpu_stack *own;
  const struct offcpu_stack *kernel;
  __u32 n; /* own frames */
  __u32 m; /* kernel frames */
  __u32 j; /* kernel frames matched */
  bool bad;
};

/* The kernel's list must be the own list without its __sched frames. */
static long verify_step(__u32 i, void *data) {
  struct verify_loop *c = data;
  __u64 idx = i, j = c->j;
  same_register(idx);
  same_register(j);
  if (idx >= c->n || idx >= OFFCPU_MAX_STACK_DEPTH)
    return 1;
  __u64 ip = c->own->ips[idx];
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

/* The own walk from frame *f into s: frames stored, how it ended. A global
 * function, as are the two below, so the verifier checks each once rather
 * than once per path through the code around it. */
struct kwalk_result {
  __u32 n;
  __u32 status;
  __u32 stopped_in_sched;
  __u32 pad;
};

__noinline int kwalk_frames(const struct kframe *f, struct offcpu_stack *s,
                            __u32 max, struct kwalk_result *r) {
  if (!f || !s || !r)
    return 0;
  /* A bounded loop rather than bpf_loop: a callback per frame is an
   * indirect call, dear with retpolines. */
  struct kwalk w = {.s = s, .f = *f, .max = max, .status = KWALK_SPLICE};
  for (__u32 i = 0; i < OFFCPU_MAX_STACK_DEPTH + 1; i++)
    if (kwalk_step(i, &w))
      break;
  r->n = w.n;
  r->status = w.status;
  r->stopped_in_sched = w.stopped_in_sched;
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
  struct verify_loop v = {
      .own = own, .kernel = kernel, .n = r->n, .m = m, .j = kwalk_unknown_zero};
  bpf_loop(OFFCPU_MAX_STACK_DEPTH, verify_step, &v, 0);
  /* A complete own walk must account for every kernel frame (both are cut
   * at the same depth, so a truncated one only for its prefix). */
  if (r->status != KWALK_SPLICE && r->n < max && v.j != m)
    v.bad = true;
  if (v.bad) {
    count_kunwind(OFFCPU_KUNWIND_MISMATCH);
    /* Trust the kernel: its frames, flagged as lacking __sched ones. */
    struct splice_loop c = {.out = own, .kernel = kernel, .m = m, .max = max};
    bpf_loop(OFFCPU_MAX_STACK_DEPTH, splice_step, &c, 0);
    return c.copied | 1ULL << 32;
  }
  if (r->status != KWALK_SPLICE) {
    count_kunwind(OFFCPU_KUNWIND_VERIFIED);
    return r->n;
  }
  count_kunwind(OFFCPU_KUNWIND_SPLICED);
  struct splice_loop c = {
      .out = own, .kernel = kernel, .from = v.j, .m = m, .n = r->n, .max = max};
  bpf_loop(OFFCPU_MAX_STACK_DEPTH, splice_step, &c, 0);
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
 * missing from it. */
static __always_inline __u32 walk_kernel_stack(struct task_struct *t,
                                               struct offcpu_stack *s,
                                               __u32 max, bool *partial,
                                               __u32 slot) {
  *partial = false;
  __u64 frame = BPF_CORE_READ(t, thread.sp);
  struct inactive_task_frame *itf = (struct inactive_task_frame *)frame;
  struct pt_regs *top = (struct pt_regs *)bpf_task_pt_regs(t);
  struct kframe f = {
      .ip = BPF_CORE_READ(itf, ret_addr),
      .sp = frame + bpf_core_type_size(struct inactive_task_frame),
      .bp = BPF_CORE_READ(itf, bp),
      .stack_lo = (__u64)BPF_CORE_READ(t, stack),
      .stack_hi = (__u64)top + bpf_core_type_size(struct pt_regs),
      .cache = slot,
  };
  if (!frame || !top || f.sp <= f.stack_lo || f.sp >= f.stack_hi)
    return 0;
  kw_note(slot, (__u64)&itf->ret_addr, f.ip);
  kw_note(slot, (__u64)&itf->bp, f.bp);
  /* A task that has never run starts in ret_from_fork, not after a call. */
  f.signal = f.ip == ktext.fork_ret;
  struct kwalk_result r = {};
  kwalk_frames(&f, s, max, &r);
  if (r.status != KWALK_SPLICE && !kwalk_verify)
    return r.n;
  /* Finished or checked by the kernel's walk: not a function of the noted
   * words alone. */
  kw_notes_stop(slot);

  struct offcpu_stack *k = bpf_map_lookup_elem(&kernel_walk_scratch, &slot);
  if (!k)
    return 0;
  long bytes = bpf_get_task_stack(t, k->ips, stack_bytes(), 0);
  __u64 res = kwalk_splice(s, k, bytes, &r, max);
  *partial = res >> 32;
  return (__u32)res;
}

/* Every word of the memo still holds its value on the task's stack. A
 * global function: verified once. */
__noinline int kw_memo_holds(const struct kw_memo *m) {
  if (!m)
    return 0;
  __u32 span = m->span, zero = 0;
  if (span == 0 || span > REUSE_SPAN)
    return 0;
  struct reuse_span *buf = bpf_map_lookup_elem(&reuse_span_buf, &zero);
  if (!buf || bpf_probe_read_kernel(buf->b, span, (void *)m->frame))
    return 0;
  /* A plain bounded loop, as uw_memo_holds'. */
  __u32 nr = m->nr;
  for (__u32 i = 0; i < KW_MEMO_WORDS; i++) {
    if (i >= nr)
      return 1;
    __u64 off = m->off[i];
    same_register(off);
    if (off > REUSE_SPAN - sizeof(__u64))
      return 0;
    __u64 now;
    __builtin_memcpy(&now, &buf->b[off], sizeof(now));
    if (now != m->val[i])
      return 0;
  }
  return 1;
}

/* Keeps the notes of a walk in a memo. A global function: verified once. */
__noinline int kw_memo_keep(struct kw_memo *m, __u32 slot) {
  if (!m)
    return 0;
  struct kw_notes *n = bpf_map_lookup_elem(&kw_notes_map, &slot);
  if (!n || n->bad || !n->off_limit || !n->nr || n->nr > KW_MEMO_WORDS)
    return 0;
  __builtin_memcpy(m->off, n->off, sizeof(m->off));
  __builtin_memcpy(m->val, n->val, sizeof(m->val));
  m->span = n->span;
  m->nr = n->nr;
  return 1;
}

/* Kernel stack of a task that is off CPU: the ORC walk where available,
 * else bpf_get_task_stack (5.9+), flagged as lacking __sched frames. Either
 * starts at __schedule: none of the tracer's own frames are in it. `ms`:
 * the task's kernel stack memos (the switch hook only; NULL: none). */
static __always_inline __u64 take_frozen_kernel_stack(struct task_struct *t,
                                                      __u32 *flags, __u32 slot,
                                                      struct kw_memo_set *ms) {
  struct offcpu_stack *s = scratch_stack(slot);
  if (!s)
    return OFFCPU_STACK_MISSED;
  if (kwalk_orc) {
    struct kw_memo *m = NULL;
    __u32 way = 0;
    __u64 memo_stack = OFFCPU_STACK_MISSED;
    __u64 frame = BPF_CORE_READ(t, thread.sp);
    __u64 page = (__u64)BPF_CORE_READ(t, stack);
    struct uw_stats *st = uw_stats_of(slot);
    if (!reuse_stacks || kwalk_verify)
      ms = NULL;
    if (ms) {
      for (__u32 i = 0; i < KW_MEMO_WAYS; i++) {
        struct kw_memo *c = &ms->way[i];
        if (c->nr && c->frame == frame && c->stack_page == page) {
          m = c;
          way = i;
          break;
        }
      }
      if (m) {
        if (kw_memo_holds(m)) {
          uw_count(st, UW_STAT_KREUSED);
          ms->last = way;
          if (!reuse_verify) {
            if (m->nosched)
              *flags |= OFFCPU_KSTACK_NOSCHED;
            return m->stack;
          }
          memo_stack = m->stack;
        } else {
          uw_count(st, UW_STAT_KREUSE_CHANGED);
        }
      } else {
        way = ms->last ^ 1;
        if (way >= KW_MEMO_WAYS)
          way = 0;
        m = &ms->way[way];
      }
      m->nr = 0;
    }
    struct kw_notes *n = bpf_map_lookup_elem(&kw_notes_map, &slot);
    if (n) {
      n->base = frame;
      n->nr = 0;
      n->span = 0;
      n->bad = 0;
      n->off_limit = m ? REUSE_SPAN : 0;
    }
    bool partial = false;
    __u32 nr =
        walk_kernel_stack(t, s, stack_bytes() / sizeof(__u64), &partial, slot);
    if (partial)
      *flags |= OFFCPU_KSTACK_NOSCHED;
    __u64 id = store_stack(s, (long)nr * sizeof(__u64), false);
    if (memo_stack != OFFCPU_STACK_MISSED && memo_stack != id)
      uw_count(st, UW_STAT_KREUSE_MISMATCH);
    if (m && id != OFFCPU_STACK_MISSED && kw_memo_keep(m, slot)) {
      m->frame = frame;
      m->stack_page = page;
      m->stack = id;
      m->nosched = partial;
      ms->last = way;
    }
    return id;
  }
  *flags |= OFFCPU_KSTACK_NOSCHED;
  long bytes = bpf_get_task_stack(t, s->ips, stack_bytes(), 0);
  return store_stack(s, bytes, false);
}

#endif /* OFFCPU_KERNEL_UNWIND_BPF_H */
