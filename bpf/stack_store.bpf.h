/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Stack capture and deduplication shared by offcpu's BPF programs.
 *
 * Stacks are walked into a per-CPU buffer and stored in a hash map keyed by
 * a 64-bit hash of their frames. Unlike BPF_MAP_TYPE_STACK_TRACE, whose
 * buckets are indexed by a 32-bit hash and drop the second of two colliding
 * stacks (-EEXIST), a full 64-bit key makes a collision practically
 * impossible; the few cheap checks below still count one if it happens. */
#ifndef OFFCPU_STACK_STORE_BPF_H
#define OFFCPU_STACK_STORE_BPF_H

#include "offcpu/shared.h"
#include "offcpu/unwind.h"
#include "settings.bpf.h"

/* Events lost, by enum offcpu_loss; read by user space at the end. */
__u64 lost[OFFCPU_LOST_NR];
/* The off-CPU time those events carried, where the program knows it. */
__u64 lost_ns[OFFCPU_LOST_NR];

/* Stacks stored so far in each map (bumped on an insert only, not per
 * switch). */
__u64 stacks_stored = 0;
__u64 deep_stacks_stored = 0;
/* Who may use the share kept for the edges now, set by user space:
 * OFFCPU_RESERVE_ITER while the passes at start run, both from the stop
 * on. */
__u32 reserve_open = 0;

/* Preallocated: the kernel's allocator for maps that are not holds one
 * element per CPU until its refill runs, which needs interrupts on; the
 * switch hook stores two stacks with them off, and rwsem waits are traced
 * under the lock's spinlock. Tried: stacks lost as "storage full". Two
 * maps by depth (see struct offcpu_short_stack), so that most stacks do
 * not hold 1 KiB each. */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 16384); /* --stack-storage-size */
  __type(key, __u64);
  __type(value, struct offcpu_short_stack);
} stacks SEC(".maps");
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 4096); /* a quarter of it (deep_stack_storage) */
  __type(key, __u64);
  __type(value, struct offcpu_stack);
} deep_stacks SEC(".maps");

/* Per-CPU work buffers, one per context that can run on a CPU at once:
 * SCRATCH_HOOK for the tracing hooks, SCRATCH_ITER for task iterators. An
 * iterator can be preempted (and the sleepable one sleeps on page faults),
 * and the sched_switch hook then runs on that same CPU. */
#define SCRATCH_HOOK 0
#define SCRATCH_ITER 1
/* A stack and one frame's room past it: the kernel's walk is asked for a
 * frame more than the limit, to tell a stack cut by it (see
 * take_current_stack). */
struct stack_scratch_buf {
  struct offcpu_stack s;
  __u64 spare;
};
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 2);
  __type(key, __u32);
  __type(value, struct stack_scratch_buf);
} stack_scratch SEC(".maps");

/* Counters of the stack walkers, by cause (enum uw_stat), per CPU; one
 * slot per context (SCRATCH_HOOK, SCRATCH_ITER), as the scratch buffers: a
 * hook preempting an iterator on the same CPU must not mix. */
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 2);
  __type(key, __u32);
  __type(value, struct uw_stats);
} uw_stat_map SEC(".maps");

static __always_inline struct uw_stats *uw_stats_of(__u32 slot) {
  return bpf_map_lookup_elem(&uw_stat_map, &slot);
}

static __always_inline void uw_count(struct uw_stats *st, int what) {
  if (st && what >= 0 && what < UW_STAT_NR)
    st->v[what]++;
}

/* A per-CPU array allocates each element on its own, one per-CPU
 * allocation under a global lock each: two caches of 8192 small elements
 * took ~20 ms of start-up. Caches are therefore a few chunks of slots, each
 * chunk as large as a per-CPU value may be (PCPU_MIN_UNIT_SIZE). */
#define PERCPU_CHUNK_BYTES 32768

/* Stack reuse (user_unwind.bpf.h, kernel_unwind.bpf.h) checks a thread's
 * memo against a copy of the stack words it holds: for a user stack up to
 * this many bytes above the stack pointer, for a kernel stack half of it
 * above the stack pointer and half below the top. The tracing hooks only. */
#define REUSE_SPAN 8192
struct reuse_span {
  __u8 b[REUSE_SPAN];
};

/* The 8 bytes at p in one load, aligned or not (BPF on x86 allows it; the
 * compiler, not knowing the alignment of a byte array, would load bytes). */
static __always_inline __u64 load_u64(const void *p) {
  __u64 v;
  asm volatile("%0 = *(u64 *)(%1 + 0)" : "=r"(v) : "r"(p));
  return v;
}

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct reuse_span);
} reuse_span_buf SEC(".maps");

/* Errnos the programs tell apart (as the helpers return them, negated). */
#define OFFCPU_EEXIST 17
#define OFFCPU_E2BIG 7

static __always_inline void count_loss(int cause) {
  if (cause >= 0 && cause < OFFCPU_LOST_NR)
    __sync_fetch_and_add(&lost[cause], 1);
}

/* The value of `key` in a hash map, inserted as `zero` if absent (another
 * CPU may insert it first, which is fine); NULL when the map is full,
 * counted as `loss`. The aggregation step of every program. */
static __always_inline void *lookup_or_insert(void *map, const void *key,
                                              const void *zero, int loss) {
  void *val = bpf_map_lookup_elem(map, key);
  if (val)
    return val;
  long err = bpf_map_update_elem(map, key, zero, BPF_NOEXIST);
  if (err && err != -OFFCPU_EEXIST) {
    count_loss(loss);
    return NULL;
  }
  return bpf_map_lookup_elem(map, key);
}

static __always_inline __u32 stack_bytes(void) {
  __u32 depth = stack_depth;
  if (depth > OFFCPU_MAX_STACK_DEPTH)
    depth = OFFCPU_MAX_STACK_DEPTH;
  return depth * sizeof(__u64);
}

static __always_inline struct offcpu_stack *scratch_stack(__u32 slot) {
  struct stack_scratch_buf *b = bpf_map_lookup_elem(&stack_scratch, &slot);
  return b ? &b->s : NULL;
}

/* Whether a and b, structs of `size` bytes shared with user space (a
 * multiple of 8, no implicit padding), hold the same words: one pass with
 * no branch per word. */
static __always_inline bool same_words(const void *a, const void *b,
                                       __u32 size) {
  const __u64 *x = a, *y = b;
  __u64 differ = 0;
  for (__u32 i = 0; i < size / sizeof(__u64); i++)
    differ |= x[i] ^ y[i];
  return differ == 0;
}

static __always_inline __u64 mix64(__u64 h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  h ^= h >> 33;
  return h;
}

struct hash_loop {
  struct offcpu_stack *s;
  __u64 h; /* the hash so far; for find_irq_entry, the frames to keep */
  __u32 nr;
  __u32 find_irq_entry; /* search for interrupt entry code instead */
};

/* Keeps the compiler from bounds-checking one copy of an index and then
 * indexing with another, unchecked one, which the verifier rejects. */
#define same_register(x) asm volatile("" : "+r"(x))

/* 1 if start <= ip < end, without a branch: ip - start (mod 2^64) is
 * below end - start exactly then. The compare is the sign of the
 * difference, true while both are under 2^63: an x past it is never in a
 * range, and a range past it (end below start: a symbol not found) holds
 * nothing. A compare is a branch in BPF, and a bpf_loop body whose
 * context gets a different constant on each way is checked again until
 * they agree. */
static __always_inline __u64 in_range(__u64 ip, __u64 start, __u64 end) {
  __u64 x = ip - start, len = end - start;
  return ((x - len) >> 63) & ~(x >> 63) & ~(len >> 63);
}

/* One frame into the stack's hash: cheap, as the verifier checks the
 * bounded loop below once per frame (the id is mixed once at the end). */
static __always_inline long hash_step(__u32 i, struct hash_loop *c) {
  __u64 idx = i;
  same_register(idx);
  if (idx >= c->nr || idx >= OFFCPU_MAX_STACK_DEPTH)
    return 1;
  __u64 h = (c->h ^ c->s->ips[idx]) * 0x9e3779b97f4a7c15ULL;
  c->h = h ^ (h >> 29);
  return 0;
}

/* A frame of a waker's stack checked for interrupt entry code: c->h becomes
 * the frames to keep, through the first such frame (0: none is). */
static __always_inline long irq_entry_step(__u32 i, struct hash_loop *c) {
  __u64 idx = i;
  same_register(idx);
  if (idx >= c->nr || idx >= OFFCPU_MAX_STACK_DEPTH)
    return 1;
  __u64 ip = c->s->ips[idx];
  if (in_range(ip, irqentry_start, irqentry_end)) {
    c->h = idx + 1;
    return 1;
  }
  return 0;
}

/* One bpf_loop body for both loops over a stack's frames: each callback
 * counts against the light loader's 32 functions (see bpf_objects_test). */
static long hash_step_cb(__u32 i, void *data) {
  struct hash_loop *c = data;
  return c->find_irq_entry ? irq_entry_step(i, c) : hash_step(i, c);
}

/* Stores the `bytes` of frames in *s, with `flags` (OFFCPU_STACK_*);
 * returns its id or OFFCPU_STACK_MISSED. `looped`: hash with bpf_loop (a
 * call per frame, one loop body for the verifier) rather than a bounded
 * loop (checked once per possible frame). */
static __always_inline __u64 store_stack_impl(struct offcpu_stack *s,
                                              long bytes, __u32 flags,
                                              bool looped, bool hook,
                                              bool cut_irq) {
  if (!s)
    return OFFCPU_STACK_MISSED;
  if (bytes <= 0) {
    count_loss((flags & OFFCPU_STACK_USER) ? OFFCPU_LOST_USER_STACK_WALK
                                           : OFFCPU_LOST_KERNEL_STACK_WALK);
    return OFFCPU_STACK_MISSED;
  }
  __u32 nr = bytes / sizeof(__u64);
  if (nr > OFFCPU_MAX_STACK_DEPTH)
    nr = OFFCPU_MAX_STACK_DEPTH;

  struct hash_loop c = {.s = s, .nr = nr < 48 ? nr : 48, .find_irq_entry = 1};
  if (cut_irq && cut_irq_stacks && irqentry_start) {
    /* Through the first interrupt entry frame among the first 48, if one
     * is: the frames below it are of whatever the interrupt hit. */
    if (looped) {
      bpf_loop(48, hash_step_cb, &c, 0);
    } else {
      for (int i = 0; i < 48; i++)
        if (irq_entry_step(i, &c))
          break;
    }
    /* Each way out of the bounded loop leaves its own constant, and the
     * rest would be checked once per way: read back through the stack's
     * header (written below), it is one unknown number. */
    *(volatile __u64 *)s = c.h;
    c.h = load_u64(s);
    if (c.h)
      nr = c.h & 63;
  }
  s->nr = nr;
  s->flags = flags;

  c.h = 0x9e3779b97f4a7c15ULL ^ ((__u64)nr << 2) ^ flags;
  c.nr = nr;
  c.find_irq_entry = 0;
  if (looped) {
    bpf_loop(OFFCPU_MAX_STACK_DEPTH, hash_step_cb, &c, 0);
  } else {
    for (int i = 0; i < OFFCPU_MAX_STACK_DEPTH; i++)
      if (hash_step(i, &c))
        break;
  }
  /* Bit 0 names the map (the hash covers nr: a stack is in one only);
   * adding 4 keeps it. */
  const bool deep = nr > OFFCPU_SHORT_STACK_DEPTH;
  __u64 h = (mix64(c.h) & ~OFFCPU_STACK_DEEP) | (deep ? OFFCPU_STACK_DEEP : 0);
  if (h < OFFCPU_STACK_FIRST_ID)
    h += 4;

  /* A short stack is a prefix of struct offcpu_stack. */
  struct offcpu_short_stack *old = deep ? bpf_map_lookup_elem(&deep_stacks, &h)
                                        : bpf_map_lookup_elem(&stacks, &h);
  if (old) {
    if (old->nr != nr || old->flags != s->flags || old->ips[0] != s->ips[0]) {
      count_loss(OFFCPU_LOST_STACK_COLLISION);
      return OFFCPU_STACK_MISSED;
    }
    return h;
  }
  __u64 *stored = deep ? &deep_stacks_stored : &stacks_stored;
  const __u32 limit = deep ? window_deep_stack_limit : window_stack_limit;
  if (limit &&
      !(reserve_open & (hook ? OFFCPU_RESERVE_HOOK : OFFCPU_RESERVE_ITER)) &&
      *stored >= limit) {
    count_loss(OFFCPU_LOST_STACK_MAP_FULL);
    return OFFCPU_STACK_FULL;
  }
  long err = deep ? bpf_map_update_elem(&deep_stacks, &h, s, BPF_NOEXIST)
                  : bpf_map_update_elem(&stacks, &h, s, BPF_NOEXIST);
  if (!err)
    __sync_fetch_and_add(stored, 1);
  else if (err != -OFFCPU_EEXIST) { /* EEXIST: stored by another CPU */
    count_loss(OFFCPU_LOST_STACK_MAP_FULL);
    return OFFCPU_STACK_FULL;
  }
  return h;
}

/* Whether `id` names a stored stack (not none, missed or lost). */
static __always_inline bool stack_stored(__u64 id) {
  return id >= OFFCPU_STACK_FIRST_ID;
}

/* A global function: the verifier checks it once per program, not once
 * for every path that leads to one of its callers. The hash runs in
 * bpf_loop where there is one, for the hooks too: a call per frame (a few
 * ns, where the walk that gave the frames took microseconds) against a
 * bounded loop the verifier checked once per possible frame in every
 * program that stores stacks (1,300-2,000 instructions each). One function
 * for hooks and iterators: each counts against the light loader's 32 (see
 * bpf_objects_test). */
__noinline __u64 store_stack_in(struct offcpu_stack *s, long bytes, __u32 flags,
                                __u32 iter, __u32 cut_irq) {
  return store_stack_impl(s, bytes, flags, use_bpf_loop, !iter, cut_irq);
}

static __always_inline __u64 store_stack(struct offcpu_stack *s, long bytes,
                                         __u32 flags) {
  return store_stack_in(s, bytes, flags, 0, 0);
}

/* A waking context's kernel stack from the kernel's walk, cut after its
 * first interrupt entry frame if it has one among the first 48 (see
 * stack_cut_at_irq). Searched here, in the global function, rather than
 * in the hook: there the search's loop body was checked once for each of
 * the ~20 ways to it (2,500 instructions). */
static __always_inline __u64 store_stack_cut_irq(struct offcpu_stack *s,
                                                 long bytes) {
  return store_stack_in(s, bytes, 0, 0, 1);
}

/* Whether the stack store_stack_cut_irq stored in *s ends with its first
 * interrupt entry frame: the search looks at the first 48 and keeps
 * through the first it finds, so with 48 frames or fewer kept the last is
 * one exactly when it cut there (also when that frame was the walk's last:
 * an interrupt that hit user mode). */
static __always_inline bool stack_cut_at_irq(const struct offcpu_stack *s) {
  __u64 nr = s->nr;
  same_register(nr);
  if (nr == 0 || nr > 48)
    return false;
  return in_range(s->ips[(nr - 1) & 63], /* nr <= 48 */
                  irqentry_start, irqentry_end);
}

/* The store for the context of scratch slot `slot`. */
static __always_inline __u64 store_stack_from(__u32 slot,
                                              struct offcpu_stack *s,
                                              long bytes, __u32 flags) {
  return store_stack_in(s, bytes, flags, slot == SCRATCH_ITER, 0);
}

/* Whether a stack the kernel's walk returned (bpf_get_stack and
 * bpf_get_task_stack, asked for a frame more than the limit: the scratch
 * buffer's spare) was cut; *bytes is trimmed to the limit. That walk also
 * stops at the sysctl kernel.perf_event_max_stack (127 by default) however
 * much room it is given: at the maximum depth, a stack that fills it is
 * taken as cut (one exactly that deep is rare). */
static __always_inline __u32 kernel_walk_cut(long *bytes) {
  long limit = stack_bytes();
  if (*bytes > limit) {
    *bytes = limit;
    return OFFCPU_STACK_TRUNCATED;
  }
  if (*bytes == limit && stack_depth >= OFFCPU_MAX_STACK_DEPTH)
    return OFFCPU_STACK_TRUNCATED;
  return 0;
}

/* Stack of the current task: user (BPF_F_USER_STACK) or kernel, in the
 * scratch of context `slot`. */
static __always_inline __u64 take_current_stack_in(void *ctx, __u64 flags,
                                                   __u32 slot) {
  struct offcpu_stack *s = scratch_stack(slot);
  if (!s)
    return OFFCPU_STACK_MISSED;
  __u32 kind = (flags & BPF_F_USER_STACK) ? OFFCPU_STACK_USER : 0;
  long bytes = bpf_get_stack(ctx, s->ips, stack_bytes() + sizeof(__u64), flags);
  kind |= kernel_walk_cut(&bytes);
  return store_stack_from(slot, s, bytes, kind);
}

/* The same, from a tracing hook (SCRATCH_HOOK). */
static __always_inline __u64 take_current_stack(void *ctx, __u64 flags) {
  return take_current_stack_in(ctx, flags, SCRATCH_HOOK);
}

struct walk_loop {
  struct offcpu_stack *s;
  struct task_struct *task;
  __u64 fp;
  __u32 max;
  __u32 n;
  __u32 cut; /* OFFCPU_STACK_TRUNCATED: a caller was left at the limit */
};

/* One frame: the saved frame pointer and the return address above it. */
static __always_inline long walk_step(__u32 i, struct walk_loop *c,
                                      bool other_task) {
  __u64 frame[2];
  __u64 idx = i;
  same_register(idx);
  if (idx == 0)
    return 0; /* frame 0 is the user IP, already stored */
  if (idx > c->max || idx > OFFCPU_MAX_STACK_DEPTH || !c->fp)
    return 1;
  long err = other_task
                 ? bpf_copy_from_user_task(frame, sizeof(frame), (void *)c->fp,
                                           c->task, 0)
                 : bpf_probe_read_user(frame, sizeof(frame), (void *)c->fp);
  if (err || !frame[1])
    return 1;
  /* One frame past the limit was read only to know whether there is one. */
  if (idx >= c->max || idx >= OFFCPU_MAX_STACK_DEPTH) {
    c->cut = OFFCPU_STACK_TRUNCATED;
    return 1;
  }
  c->s->ips[idx] = frame[1];
  c->n = idx + 1;
  if (frame[0] <= c->fp) /* stacks grow down: callers are above */
    return 1;
  c->fp = frame[0];
  return 0;
}

static long walk_step_current(__u32 i, void *data) {
  return walk_step(i, data, false);
}

static long walk_step_other(__u32 i, void *data) {
  return walk_step(i, data, true);
}

/* User stack by walking frame pointers from the task's saved user registers,
 * as perf does. Reads the current task's memory directly (bpf_probe_read_user,
 * no faulting), or another task's with bpf_copy_from_user_task (sleepable
 * programs only). Cheaper than bpf_get_stack(BPF_F_USER_STACK), which goes
 * through perf's callchain buffers. Needs bpf_task_pt_regs (5.15+). */
static __always_inline __u64 walk_user_stack_fp(struct task_struct *t,
                                                bool other_task) {
  /* Another task's stack is walked from an iterator only. */
  struct offcpu_stack *s =
      scratch_stack(other_task ? SCRATCH_ITER : SCRATCH_HOOK);
  if (!s)
    return OFFCPU_STACK_MISSED;
  struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(t);
  if (!regs)
    return OFFCPU_STACK_MISSED;
  struct walk_loop c = {
      .s = s,
      .task = t,
      .fp = regs->bp, /* a BTF pointer: a plain load */
      .max = stack_bytes() / sizeof(__u64),
  };
  __u32 slot = other_task ? SCRATCH_ITER : SCRATCH_HOOK;
  s->ips[0] = regs->ip;
  if (!s->ips[0])
    return store_stack_from(slot, s, 0, OFFCPU_STACK_USER);
  c.n = 1;
  /* A step more than the limit: it only looks for a caller past it. */
  if (use_bpf_loop) {
    bpf_loop(OFFCPU_MAX_STACK_DEPTH + 1,
             other_task ? walk_step_other : walk_step_current, &c, 0);
  } else {
    for (int i = 1; i <= OFFCPU_MAX_STACK_DEPTH; i++)
      if (walk_step(i, &c, other_task))
        break;
  }
  return store_stack_from(slot, s, (long)c.n * sizeof(__u64),
                          OFFCPU_STACK_USER | c.cut);
}

#endif /* OFFCPU_STACK_STORE_BPF_H */
