// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* How long threads wait for kernel locks, by stack, kind and lock: the
 * programs of `offcpu lock` and of its preset `offcpu rwsem`.
 *
 * A wait is the time from the contention's begin to its end. Three ways to
 * see that, chosen by the loader:
 *   tp_btf lock:contention_begin / contention_end    (5.19+): every kind,
 *     from the tracepoint's flags
 *   fentry/fexit on rwsem_down_{write,read}_slowpath and
 *     __mutex_lock_slowpath                          (5.5+, BTF, trampolines)
 *   kprobe/kretprobe on the same (or older names)     (kernels with kprobes)
 * The last two are for kernels before 5.19, rwsem and mutex waits only. All
 * three feed the same begin/end pair below. User-space locks (--futex) are
 * futex.bpf.h's. */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "announce.bpf.h"
#include "children.bpf.h"
#include "futex.bpf.h"
#include "offcpu/shared.h"
#include "settings.bpf.h"
#include "stack_store.bpf.h"
#include "task_filter.bpf.h"
#include "user_unwind.bpf.h"
#include "waker.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Settings (settings.bpf.h): the task filters, lock_kinds, min_wait_ns,
 * max_block_ns,
 * want_user_stacks and want_kernel_stacks, and want_wakers (the holder's
 * release path that woke each waiter). */

/* Where each thread's open wait began (a thread waits for one lock at a
 * time): in its task storage where the plan has it (use_task_storage: BTF
 * programs on 5.11+), so that a begin or end costs no hash lookup and the
 * record goes with the task; start_ns 0 there is no wait open. Else (older
 * kernels, kprobe plans) in a hash map by thread id, full at 16,384
 * threads waiting at once (counted as OFFCPU_LOST_START_STORE). */
struct {
  __uint(type, BPF_MAP_TYPE_TASK_STORAGE);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __type(key, int);
  __type(value, struct rwsem_start);
} lock_starts_task SEC(".maps");

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 16384);
  __type(key, __u32);
  __type(value, struct rwsem_start);
} starts SEC(".maps");

/* The current task as a BTF pointer where task storage is used (every
 * program then is BTF-typed), else NULL: kprobe programs use the hash. */
static __always_inline struct task_struct *current_task_btf(void) {
  return use_task_storage ? bpf_get_current_task_btf() : NULL;
}

/* The open wait of `task` (thread `pid`), or NULL. `task` may be NULL where
 * the hash map is used. */
static __always_inline struct rwsem_start *open_wait(struct task_struct *task,
                                                     __u32 pid) {
  if (!use_task_storage)
    return bpf_map_lookup_elem(&starts, &pid);
  if (!task)
    return NULL;
  struct rwsem_start *rec = bpf_task_storage_get(&lock_starts_task, task, 0, 0);
  return rec && rec->start_ns ? rec : NULL;
}

static __always_inline void close_wait(struct rwsem_start *rec, __u32 pid) {
  if (use_task_storage)
    rec->start_ns = 0;
  else
    bpf_map_delete_elem(&starts, &pid);
}

/* Records a new wait of the current thread. */
static __always_inline void open_new_wait(const struct rwsem_start *rec,
                                          __u32 pid) {
  if (use_task_storage) {
    struct rwsem_start *ts =
        bpf_task_storage_get(&lock_starts_task, bpf_get_current_task_btf(), 0,
                             BPF_LOCAL_STORAGE_GET_F_CREATE);
    if (ts)
      *ts = *rec;
    else
      count_loss(OFFCPU_LOST_START_STORE);
    return;
  }
  if (bpf_map_update_elem(&starts, &pid, rec, BPF_NOEXIST) == -OFFCPU_E2BIG)
    count_loss(OFFCPU_LOST_START_STORE);
}

struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 65536);
  __type(key, struct rwsem_key);
  __type(value, struct rwsem_value);
} waits SEC(".maps");

struct mm_struct___pre58 {
  struct rw_semaphore mmap_sem;
} __attribute__((preserve_access_index));

/* The task's own mm->mmap_lock (named mmap_sem before 5.8). */
static __always_inline __u64 own_mmap_lock(struct task_struct *task) {
  struct mm_struct *mm = BPF_CORE_READ(task, mm);
  if (!mm)
    return 0;
  if (bpf_core_field_exists(mm->mmap_lock))
    return (__u64)mm + bpf_core_field_offset(mm->mmap_lock);
  struct mm_struct___pre58 *old = (void *)mm;
  return (__u64)mm + bpf_core_field_offset(old->mmap_sem);
}

/* The slab cache an address lies in (6.12+), for naming the lock by its
 * cache (`[ext4_inode_cache]`). Weak: kernels without the kfunc load the
 * object with lock_slab_caches off, the call dropped as dead code. */
extern struct kmem_cache *bpf_get_kmem_cache(__u64 addr) __ksym __weak;

/* Only the BTF-typed programs call it (kprobes are for kernels older than
 * it anyway). 0: not in a slab object, or not asked. */
static __always_inline __u64 slab_cache_of(__u64 lock) {
  if (!lock_slab_caches)
    return 0;
  return (__u64)bpf_get_kmem_cache(lock);
}

/* --holders: the task the lock's owner word names at contention begin. A
 * mutex's owner word is the owning task with 3 flag bits (MUTEX_FLAGS); a
 * rwsem's is its writer's with 2 (3 masked alike), bit 0 set when readers
 * own it (then it names a reader, maybe gone: not reported). */
static __always_inline void read_owner(struct rwsem_start *rec, __u64 lock,
                                       __u32 kind) {
  long word = 0;
  if (kind == OFFCPU_LOCK_MUTEX || kind == OFFCPU_LOCK_MUTEX_SPIN) {
    struct mutex *m = (void *)lock;
    if (!bpf_core_field_exists(m->owner))
      return; /* PREEMPT_RT: an rt_mutex inside */
    bpf_probe_read_kernel(&word, sizeof(word), &m->owner);
  } else if (kind == OFFCPU_LOCK_RWSEM_WRITE ||
             kind == OFFCPU_LOCK_RWSEM_READ) {
    struct rw_semaphore *sem = (void *)lock;
    bpf_probe_read_kernel(&word, sizeof(word), &sem->owner);
    if (word & 1)
      return;
  }
  struct task_struct *owner = (void *)(word & ~7L);
  if (!owner)
    return;
  rec->owner = BPF_CORE_READ(owner, pid);
  bpf_probe_read_kernel_str(rec->owner_comm, sizeof(rec->owner_comm),
                            owner->comm);
}

/* A wait's record as it begins and its key as it ends, per CPU: off the
 * BPF stack, whose 512 bytes a program shares with the user walk it calls
 * on kernels without private stacks. One entry per program that may be
 * preempted (fentry/fexit run with migration disabled only, and another
 * of them may run on the CPU meanwhile); the tracepoint and kprobe
 * programs run with preemption off and never nest in themselves: they
 * share the first two. */
#define LOCK_SCRATCH_BEGIN 0 /* contention_begin, kprobes */
#define LOCK_SCRATCH_END 1   /* contention_end, the kretprobe */
#define LOCK_SCRATCH_FENTRY_WRITE 2
#define LOCK_SCRATCH_FENTRY_READ 3
#define LOCK_SCRATCH_FENTRY_MUTEX 4
#define LOCK_SCRATCH_FEXIT_WRITE 5
#define LOCK_SCRATCH_FEXIT_READ 6
#define LOCK_SCRATCH_FEXIT_MUTEX 7
#define LOCK_SCRATCH_NR 8
struct lock_scratch {
  struct rwsem_start rec;
  struct rwsem_key key;
};

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, LOCK_SCRATCH_NR);
  __type(key, __u32);
  __type(value, struct lock_scratch);
} lock_scratches SEC(".maps");

/* fentry programs walking a stack on the CPU now (see wait_begin). */
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, __u32);
} fentry_walking SEC(".maps");

static __always_inline struct lock_scratch *lock_scratch_of(__u32 entry) {
  return bpf_map_lookup_elem(&lock_scratches, &entry);
}

/* Ends the wait `pid` has open, charging it; `lock` 0: whichever lock
 * (the slow-path probes' returns do not know it). A contention_end for
 * another lock ends a nested contention not traced (the spinlock inside a
 * mutex's slow path), not this one. */
static __always_inline void wait_end(__u32 pid, __u64 lock, __u32 scratch) {
  struct rwsem_start *rec = open_wait(current_task_btf(), pid);
  if (!rec || (lock && rec->lock != lock))
    return;
  /* Past the window's end (set at stop, before the programs are detached,
   * which takes milliseconds): charged up to it, as the stop charges the
   * waits still open. */
  __u64 now = bpf_ktime_get_ns(), stop = stop_ns;
  if (stop && now > stop)
    now = stop;
  __u64 delta = now > rec->start_ns ? now - rec->start_ns : 0;
  struct lock_scratch *sc = lock_scratch_of(scratch);
  if (!sc)
    return; /* never: an array's index in range */
  struct rwsem_key *key = &sc->key;
  rwsem_key_fill(key, rec, pid);
  if (want_wakers && !key->waker)
    key->waker = OFFCPU_WAKER_UNSEEN;
  close_wait(rec, pid);
  if (!delta || delta < min_wait_ns || delta > max_block_ns)
    return;

  /* futex_zero: a global, off the BPF stack, which a call chain shares. */
  struct rwsem_value *val =
      lookup_or_insert(&waits, key, &futex_zero, OFFCPU_LOST_AGG_MAP_FULL);
  if (!val)
    return;
  __sync_fetch_and_add(&val->total_ns, delta);
  __sync_fetch_and_add(&val->count, 1);
  if (delta > val->max_ns) /* racy by design: a max, not a sum */
    val->max_ns = delta;
  __sync_fetch_and_add(&val->hist[offcpu_hist_slot(delta)], 1);
}

/* ---- The kernel stack at a wait's begin, reused while it holds ----
 *
 * bpf_get_stack's walk is most of a begin's cost (2-6 us of 3.5-8 on the
 * 6.18 VM), and a thread contending again mostly does so from where it
 * did last time. The walk is the kernel's, so what it read is not known;
 * but every frame it returns, past the tracer's own below the program's
 * context, is a return address stored on the thread's stack above that
 * context (`ctx`, the tracepoint's arguments in bpf_trace_run's frame).
 * After a walk, where each lies is noted. A later begin with every noted
 * word where it was would walk the same frames: the tracer's frames below
 * ctx are the same code, and each frame's size is fixed by its return
 * address (ORC), so the next one lies where it was noted. Where it was is
 * counted from ctx, except for the words next to the stack's top, counted
 * from the top: system-call entry moves every frame below its own by a
 * random offset (CONFIG_RANDOMIZE_KSTACK_OFFSET, taken in do_syscall_64's
 * frame), while entry's return address stays just below the saved user
 * registers. Which count a word gets is fixed when it is noted, by its
 * place then: a check that tried both could match a stale copy of a
 * return address left by an earlier call. Contentions on an interrupt's
 * stack, or deeper than the span read, are walked each time. In task
 * storage (5.11+), as the wait itself. */
#define LK_MEMO_WORDS 48     /* frames noted; deeper stacks are walked */
#define LK_SPAN_WORDS 1024   /* 8 KiB of stack above the context read */
#define LK_THREAD_SIZE 16384 /* x86-64, arm64 (KASAN's 32 KiB: read less) */
#define LK_TRACER_FRAMES 4   /* frames below the context, at most */
/* Words this close to the top are counted from it: x86-64's pt_regs (21
 * words) and entry's return address into the system call's handler. */
#define LK_TOP_WORDS 24
/* A thread whose memo missed this many times in a row (its stack changes
 * from one wait to the next) notes one only every 64th begin: a missed
 * check and a noting cost ~2 us more than the walk alone. */
#define LK_MEMO_TRIES 4

struct lock_kmemo {
  __u64 stack;              /* the stored stack */
  __u32 n;                  /* words noted; 0: none */
  __u32 top;                /* words from ctx to the stack's top when noted */
  __u32 misses;             /* begins since the memo last held */
  __u32 from_ctx;           /* the first words, counted from ctx */
  __u16 off[LK_MEMO_WORDS]; /* from ctx, in words, when noted */
  __u64 val[LK_MEMO_WORDS];
};

/* A thread's memos: its last user walks (user_unwind.bpf.h's), reused
 * while they hold, and its last kernel stack. */
struct lock_memos {
  struct uw_memo_set user;
  struct lock_kmemo kernel;
};

struct {
  __uint(type, BPF_MAP_TYPE_TASK_STORAGE);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __type(key, int);
  __type(value, struct lock_memos);
} lock_memos SEC(".maps");

struct lock_span {
  __u64 w[LK_SPAN_WORDS];
};

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 2); /* SCRATCH_HOOK, SCRATCH_ITER (see take_stacks) */
  __type(key, __u32);
  __type(value, struct lock_span);
} lock_spans SEC(".maps");

/* Kernel stacks at begins: reused from a memo, walked (-v reports them). */
__u64 lock_kstacks_reused = 0, lock_kstacks_walked = 0;

struct lk_note {
  struct lock_span *span;
  struct offcpu_stack *s;
  struct lock_kmemo *m;
  __u32 room, nips, k, n;
};

/* One word of the span: the next frame's return address, or not. The
 * first frames (the tracer's, below the context) are not there: noting
 * starts at whichever of them is found first. */
static long lk_note_word(__u32 j, struct lk_note *c) {
  __u64 jj = j, k = c->k, n = c->n;
  same_register(jj);
  same_register(k);
  same_register(n);
  if (jj >= c->room || jj >= LK_SPAN_WORDS || k >= c->nips ||
      k >= OFFCPU_MAX_STACK_DEPTH || n >= LK_MEMO_WORDS)
    return 1;
  __u64 w = c->span->w[jj];
  if (w != c->s->ips[k]) {
    if (n)
      return 0;
    /* Nothing found yet: a later frame may be the first above ctx. */
    __u64 i;
    for (i = 1; i <= LK_TRACER_FRAMES; i++) {
      same_register(i);
      if (i >= c->nips || i >= OFFCPU_MAX_STACK_DEPTH)
        return 0;
      if (w == c->s->ips[i])
        break;
    }
    if (i > LK_TRACER_FRAMES)
      return 0;
    k = i;
  }
  c->m->off[n] = jj;
  c->m->val[n] = w;
  c->n = n + 1;
  c->k = k + 1;
  return 0;
}

/* The first `words` words above `ctx`. */
static __always_inline long lk_read_span(struct lock_span *span, __u64 words,
                                         void *ctx) {
  __u64 bytes = words * 8;
  same_register(bytes); /* the bound below must stay in this register */
  if (bytes > sizeof(span->w))
    bytes = sizeof(span->w);
  return bpf_probe_read_kernel(span->w, bytes, ctx);
}

/* Whether the memo's words are all where they were (the span read up to
 * `room` words; `top`: words from ctx to the top now). */
static __always_inline bool lk_memo_holds(struct lock_kmemo *m,
                                          struct lock_span *span, __u32 room,
                                          __u32 top) {
  for (__u32 i = 0; i < LK_MEMO_WORDS; i++) {
    if (i >= m->n)
      return true;
    __u64 at = m->off[i];
    if (i >= m->from_ctx)
      at = top - (m->top - at); /* as far from the top as then */
    same_register(at);
    if (at >= room || at >= LK_SPAN_WORDS || span->w[at] != m->val[i])
      return false;
  }
  return true;
}

/* Walks the current thread's kernel stack and notes its memo. */
static __always_inline __u64 lk_walk(void *ctx, struct lock_kmemo *m,
                                     struct lock_span *span, __u32 room,
                                     __u32 top, __u32 slot) {
  __sync_fetch_and_add(&lock_kstacks_walked, 1);
  m->n = 0;
  struct offcpu_stack *s = scratch_stack(slot);
  if (!s)
    return OFFCPU_STACK_MISSED;
  long bytes = bpf_get_stack(ctx, s->ips, stack_bytes() + sizeof(__u64), 0);
  __u32 kind = kernel_walk_cut(&bytes);
  __u64 id = store_stack_from(slot, s, bytes, kind);
  if (!stack_stored(id) || kind || bytes <= 0 || lk_read_span(span, room, ctx))
    return id;
  struct lk_note c = {
      .span = span, .s = s, .m = m, .room = room, .nips = bytes / 8};
  bpf_loop(LK_SPAN_WORDS, lk_note_word, &c, 0);
  /* Every frame above the context found, in order: a memo. */
  if (c.n && c.k == c.nips) {
    m->stack = id;
    m->top = top;
    m->from_ctx = 0;
    for (__u32 i = 0; i < LK_MEMO_WORDS && i < c.n; i++)
      if (top - m->off[i] > LK_TOP_WORDS)
        m->from_ctx = i + 1;
    m->n = c.n;
  }
  return id;
}

/* The current thread's kernel stack at a begin (`m`: its memo, NULL
 * where there is none), in the scratch of context `slot`. */
static __always_inline __u64 lock_kernel_stack(void *ctx, struct lock_kmemo *m,
                                               __u32 slot) {
  if (!m)
    return take_current_stack_in(ctx, 0, slot);
  struct task_struct *t = bpf_get_current_task_btf();
  struct lock_span *span = bpf_map_lookup_elem(&lock_spans, &slot);
  __u64 base = (__u64)ctx, bottom = (__u64)t->stack;
  if (!span || base < bottom || base >= bottom + LK_THREAD_SIZE)
    return take_current_stack_in(ctx, 0, slot);
  __u32 top = (bottom + LK_THREAD_SIZE - base) / 8;
  __u32 room = top < LK_SPAN_WORDS ? top : LK_SPAN_WORDS;
  __u32 n = m->n;
  if (n && n <= LK_MEMO_WORDS) {
    /* Up to the last word noted, where it would be now. */
    __u32 need =
        m->from_ctx < n ? top : m->off[(n - 1) & (LK_MEMO_WORDS - 1)] + 1;
    if (need <= room && !lk_read_span(span, need, ctx) &&
        lk_memo_holds(m, span, need, top)) {
      m->misses = 0;
      __sync_fetch_and_add(&lock_kstacks_reused, 1);
      return m->stack;
    }
  }
  if (m->misses++ >= LK_MEMO_TRIES && (m->misses & 63)) {
    __sync_fetch_and_add(&lock_kstacks_walked, 1);
    return take_current_stack_in(ctx, 0, slot);
  }
  return lk_walk(ctx, m, span, room, top, slot);
}

/* The thread's stacks for a new wait (0 where not wanted), in the
 * per-CPU scratch of context `slot`: SCRATCH_HOOK for the programs that
 * run with preemption off (tracepoints, kprobes), SCRATCH_ITER for the
 * fentry ones, which may be preempted mid-walk on a preemptible kernel
 * while a hook walks on the same CPU (this object's iterators walk no
 * stacks: that slot is theirs alone). */
static __always_inline void take_stacks(void *ctx, struct task_struct *task,
                                        __u32 tgid, struct rwsem_start *rec,
                                        bool typed, __u32 slot) {
  /* The thread's memos: BTF-typed programs with task storage. */
  struct lock_memos *m =
      typed && use_task_storage
          ? bpf_task_storage_get(&lock_memos, bpf_get_current_task_btf(), 0,
                                 BPF_LOCAL_STORAGE_GET_F_CREATE)
          : NULL;
  if (want_user_stacks) {
    __u32 partial = 0; /* taken again by the next wait, not rewalked */
    bool reused = false;
    struct task_struct *t = bpf_get_current_task_btf();
    if (!user_fp_walk)
      rec->user_stack = take_current_stack_in(ctx, BPF_F_USER_STACK, slot);
#ifdef OFFCPU_DIRECT_LOADS
    /* The memo walk is a global function only here; inlined, it would
     * not fit the program's 512-byte stack (the probe-reads object). */
    else if (m)
      rec->user_stack =
          walk_user_stack_hook(t, &partial, &m->user, &reused, false, slot);
#endif
    else
      rec->user_stack =
          walk_user_stack_memo(t, false, &partial, NULL, &reused, false, slot);
    /* A reused stack was announced when it was walked. */
    if (!reused && !announce(task, tgid, rec->user_stack) && m)
      uw_memo_forget(&m->user);
  }
  if (want_kernel_stacks)
    rec->kernel_stack = lock_kernel_stack(ctx, m ? &m->kernel : NULL, slot);
}

/* `typed`: called from a BTF-typed program (tp_btf, fentry), which may
 * call kfuncs. `scratch`: the program's entry of lock_scratches. */
static __always_inline void wait_begin(void *ctx, __u64 lock, __u32 kind,
                                       bool typed, __u32 scratch) {
  /* Read through probe reads: kprobe programs get no BTF task pointer. */
  struct task_struct *task = (struct task_struct *)bpf_get_current_task();
  __u64 id = bpf_get_current_pid_tgid();
  __u32 pid = (__u32)id, tgid = id >> 32;
  struct lock_scratch *sc = lock_scratch_of(scratch);
  if (!sc)
    return; /* never: an array's index in range */
  struct rwsem_start *rec = &sc->rec;
  __builtin_memset(rec, 0, sizeof(*rec));
  struct rwsem_start *open = open_wait(current_task_btf(), pid);
  if (open) {
    /* The same contention again (a retry in the slow path): keep it. */
    if (open->lock != lock || open->kind == kind)
      return;
    /* The same lock, another kind: a mutex waiter spinning between its
     * sleeps. The phase so far is charged as its own kind; the stacks are
     * the same. */
    rec->user_stack = open->user_stack;
    rec->kernel_stack = open->kernel_stack;
    wait_end(pid, lock, scratch);
  }
  if (!(lock_kinds & (1u << kind)))
    return;
  /* A PI futex's rt_mutex: the futex:pi wait it is part of counts it. */
  if (kind == OFFCPU_LOCK_RTMUTEX &&
      (lock_kinds & (1u << OFFCPU_LOCK_FUTEX_PI)) &&
      in_futex_call(OFFCPU_LOCK_FUTEX_PI))
    return;
  if (!open && !passes_task_filters(task, pid, tgid, false))
    return;

  rec->lock = lock;
  rec->tgid = tgid;
  rec->kind = kind;
  rec->flags = kind == OFFCPU_LOCK_RWSEM_WRITE  ? RWSEM_WAIT_WRITE
               : kind == OFFCPU_LOCK_RWSEM_READ ? RWSEM_WAIT_READ
                                                : 0;
  if (lock && lock == own_mmap_lock(task))
    rec->flags |= RWSEM_LOCK_IS_MMAP;
  else if (typed)
    rec->cache = slab_cache_of(lock);
  if (want_wakers && lock)
    read_owner(rec, lock, kind);
  if (key_cgroup)
    rec->cgroup = bpf_get_current_cgroup_id();
  bpf_get_current_comm(rec->comm, sizeof(rec->comm));
  if (!open && scratch < LOCK_SCRATCH_FENTRY_WRITE) {
    take_stacks(ctx, task, tgid, rec, typed, SCRATCH_HOOK);
  } else if (!open) {
    /* An fentry program: the other slot, one walk at a time per CPU. */
    __u32 zero = 0;
    __u32 *busy = bpf_map_lookup_elem(&fentry_walking, &zero);
    if (!busy)
      return;
    /* No fetching atomics before 5.12: add, then look. Whoever reads 1 is
     * alone in the slot until it subtracts; one preempted between its add
     * and its look makes the other read 2 (both may then skip: counted). */
    __sync_fetch_and_add(busy, 1);
    if (*(volatile __u32 *)busy == 1) {
      take_stacks(ctx, task, tgid, rec, typed, SCRATCH_ITER);
    } else {
      rec->user_stack = want_user_stacks ? OFFCPU_STACK_MISSED : 0;
      rec->kernel_stack = want_kernel_stacks ? OFFCPU_STACK_MISSED : 0;
      count_loss(OFFCPU_LOST_SCRATCH_BUSY);
    }
    __sync_fetch_and_add(busy, -1);
  }
  /* The wait's time starts once this program's own work (the stack walks,
   * microseconds) is done: a spinning wait is often shorter than that,
   * and charging it would report offcpu's cost as the lock's. */
  rec->start_ns = bpf_ktime_get_ns();
  __u64 stop = stop_ns;
  if (stop && rec->start_ns >= stop)
    return; /* after the window */
  open_new_wait(rec, pid);
}

/* A waiter being woken (--wakers): the first wakeup of its wait names the
 * waker, normally the holder releasing the lock (up_write, up_read). */
SEC("tp_btf/sched_waking")
int BPF_PROG(rwsem_waking, struct task_struct *p) {
  struct rwsem_start *rec = open_wait(p, p->pid);
  if (rec && !rec->waker)
    rec->waker = take_waker(ctx, NULL, false, true, 0);
  return 0;
}

/* ---- lock:contention_begin/end (5.19+) ---- */

SEC("tp_btf/contention_begin")
int BPF_PROG(rwsem_contention_begin, void *lock, unsigned int flags) {
  wait_begin(ctx, (__u64)lock, offcpu_lock_kind_of(flags), true,
             LOCK_SCRATCH_BEGIN);
  return 0;
}

SEC("tp_btf/contention_end")
int BPF_PROG(rwsem_contention_end, void *lock, int ret) {
  wait_end((__u32)bpf_get_current_pid_tgid(), (__u64)lock, LOCK_SCRATCH_END);
  return 0;
}

/* ---- fentry/fexit on the slow paths; targets set by the loader ---- */

SEC("fentry/rwsem_down_write_slowpath")
int BPF_PROG(rwsem_fentry_write, struct rw_semaphore *sem) {
  wait_begin(ctx, (__u64)sem, OFFCPU_LOCK_RWSEM_WRITE, true,
             LOCK_SCRATCH_FENTRY_WRITE);
  return 0;
}

SEC("fexit/rwsem_down_write_slowpath")
int BPF_PROG(rwsem_fexit_write, struct rw_semaphore *sem) {
  wait_end((__u32)bpf_get_current_pid_tgid(), 0, LOCK_SCRATCH_FEXIT_WRITE);
  return 0;
}

SEC("fentry/rwsem_down_read_slowpath")
int BPF_PROG(rwsem_fentry_read, struct rw_semaphore *sem) {
  wait_begin(ctx, (__u64)sem, OFFCPU_LOCK_RWSEM_READ, true,
             LOCK_SCRATCH_FENTRY_READ);
  return 0;
}

SEC("fexit/rwsem_down_read_slowpath")
int BPF_PROG(rwsem_fexit_read, struct rw_semaphore *sem) {
  wait_end((__u32)bpf_get_current_pid_tgid(), 0, LOCK_SCRATCH_FEXIT_READ);
  return 0;
}

/* The mutex slow path (offcpu lock before 5.19): entered once the fast
 * path's cmpxchg failed, left holding the lock. Spinning and sleeping are
 * one wait here: only the tracepoints tell them apart. */
SEC("fentry/__mutex_lock_slowpath")
int BPF_PROG(mutex_fentry, struct mutex *lock) {
  wait_begin(ctx, (__u64)lock, OFFCPU_LOCK_MUTEX, true,
             LOCK_SCRATCH_FENTRY_MUTEX);
  return 0;
}

SEC("fexit/__mutex_lock_slowpath")
int BPF_PROG(mutex_fexit, struct mutex *lock) {
  wait_end((__u32)bpf_get_current_pid_tgid(), 0, LOCK_SCRATCH_FEXIT_MUTEX);
  return 0;
}

/* ---- kprobe/kretprobe; attached by name by the loader ---- */

SEC("kprobe")
int BPF_KPROBE(rwsem_kprobe_write, struct rw_semaphore *sem) {
  wait_begin(ctx, (__u64)sem, OFFCPU_LOCK_RWSEM_WRITE, false,
             LOCK_SCRATCH_BEGIN);
  return 0;
}

SEC("kprobe")
int BPF_KPROBE(rwsem_kprobe_read, struct rw_semaphore *sem) {
  wait_begin(ctx, (__u64)sem, OFFCPU_LOCK_RWSEM_READ, false,
             LOCK_SCRATCH_BEGIN);
  return 0;
}

SEC("kprobe")
int BPF_KPROBE(mutex_kprobe, struct mutex *lock) {
  wait_begin(ctx, (__u64)lock, OFFCPU_LOCK_MUTEX, false, LOCK_SCRATCH_BEGIN);
  return 0;
}

SEC("kretprobe")
int BPF_KRETPROBE(rwsem_kretprobe) {
  wait_end((__u32)bpf_get_current_pid_tgid(), 0, LOCK_SCRATCH_END);
  return 0;
}

/* ---- --children, -- COMMAND: processes forked by traced ones ---- */

/* raw_tp with CO-RE reads: every kernel with BTF, whatever the plan. */
SEC("raw_tp/sched_process_fork")
int BPF_PROG(lock_fork, struct task_struct *parent, struct task_struct *child) {
  on_fork(BPF_CORE_READ(parent, tgid), BPF_CORE_READ(child, tgid));
  return 0;
}

/* The last thread of a process exits (signal->live reached 0 before the
 * tracepoint): its id leaves the filter, so that the map holds the live
 * processes only and a reused id is not traced. */
SEC("raw_tp/sched_process_exit")
int BPF_PROG(lock_exit, struct task_struct *p) {
  if (BPF_CORE_READ(p, signal, live.counter) == 0) {
    __u32 tgid = BPF_CORE_READ(p, tgid);
    bpf_map_delete_elem(&filter_tgids, &tgid);
  }
  return 0;
}

/* ---- Waits still open at stop (task storage) ---- */

/* Every thread's open wait: its tid as a __u64, then its struct
 * rwsem_start, for the stop to charge up to its end. */
SEC("iter/task")
int lock_open_waits(struct bpf_iter__task *ctx) {
  struct task_struct *task = ctx->task;
  if (!task)
    return 0;
  struct rwsem_start *rec = bpf_task_storage_get(&lock_starts_task, task, 0, 0);
  if (!rec || !rec->start_ns)
    return 0;
  __u64 tid = task->pid;
  bpf_seq_write(ctx->meta->seq, &tid, sizeof(tid));
  bpf_seq_write(ctx->meta->seq, rec, sizeof(*rec));
  return 0;
}

/* ---- Slab cache names (iter/kmem_cache, 6.12+) ---- */

/* Every slab cache's address and name, once at the end of a report: what
 * rwsem_key.cache is named by. Loaded only where the kernel has the
 * iterator (with lock_slab_caches). */
SEC("iter/kmem_cache")
int slab_names(struct bpf_iter__kmem_cache *ctx) {
  struct kmem_cache *s = ctx->s;
  if (!s)
    return 0;
  struct offcpu_slab_name rec = {};
  rec.cache = (__u64)s;
  bpf_probe_read_kernel_str(rec.name, sizeof(rec.name), s->name);
  bpf_seq_write(ctx->meta->seq, &rec, sizeof(rec));
  return 0;
}
