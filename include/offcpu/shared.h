/* Structs and constants that cross the BPF/user-space boundary.
 * Included by the bpf/ programs (after vmlinux.h) and by the C++ loader; this
 * is the only definition of each layout. Plain fixed-width types only. */
#ifndef OFFCPU_SHARED_H
#define OFFCPU_SHARED_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define OFFCPU_COMM_LEN 16
/* Deepest stack we store. perf's default sysctl kernel.perf_event_max_stack
 * is 127, and BCC's --perf-max-stack-depth defaults to it too. */
#define OFFCPU_MAX_STACK_DEPTH 127

/* x86-64 kernel addresses start here (the top half of the address space,
 * 4- and 5-level paging alike); user addresses are below. */
#define OFFCPU_KERNEL_ADDR_MIN 0xffff800000000000ULL

/* Stack ids are 64-bit content hashes of the frames, never below
 * OFFCPU_STACK_FIRST_ID. */
#define OFFCPU_NO_STACK 0ULL     /* none taken: kernel thread, or not asked */
#define OFFCPU_STACK_MISSED 1ULL /* asked, but the walk or its store failed */
/* Walked, but the stack storage was full (or down to the share kept for the
 * stop pass): user space adds up the time of the waits that carry it, then
 * shows it as a missed stack. */
#define OFFCPU_STACK_FULL 2ULL
#define OFFCPU_STACK_FIRST_ID 3ULL /* real ids are at least this */
/* Bit 0 of a stored stack's id: which map holds it (see struct
 * offcpu_short_stack). */
#define OFFCPU_STACK_DEEP 1ULL

/* Who may use the map room kept for the window's edges: `reserve_open` in
 * BPF .bss (see window_stack_limit in bpf/stack_store.bpf.h). */
#define OFFCPU_RESERVE_ITER 1u /* the task iterators */
#define OFFCPU_RESERVE_HOOK 2u /* the tracing hooks too */

/* Why an event was lost; indexes the `lost` counters in BPF .bss. */
enum offcpu_loss {
  OFFCPU_LOST_STACK_MAP_FULL = 0, /* stacks map reached max_entries */
  OFFCPU_LOST_STACK_COLLISION,    /* two different stacks, same hash */
  OFFCPU_LOST_AGG_MAP_FULL,       /* aggregation map reached max_entries */
  OFFCPU_LOST_START_STORE,        /* could not record when a task blocked */
  OFFCPU_LOST_USER_STACK_WALK,    /* user stack walk failed or empty */
  OFFCPU_LOST_KERNEL_STACK_WALK,  /* kernel stack walk failed or empty */
  OFFCPU_LOST_ANNOUNCE,           /* announcement ring full: told later */
  OFFCPU_LOST_WAKER_STORE,        /* wakers map full (--wakers) */
  OFFCPU_LOST_CHILD_UNTRACED,     /* a child not traced: the set was full */
  /* Waits a thread's storage held for the aggregation map when the thread
   * was freed with its last switch-out unseen: filled in by user space
   * from offcpu_charged.held_waits, not counted by the programs. */
  OFFCPU_LOST_HELD,
  /* Waits that found the aggregation map full and their process's
   * overflow bucket (counts_overflow) full too: lost with their time. */
  OFFCPU_LOST_OVERFLOW_FULL,
  /* Timeline events (waits of --events-min or more) that found the events
   * ring full: user space fell behind. The aggregates still have them. */
  OFFCPU_LOST_EVENT_RING,
  /* offcpu lock's fentry programs (kernels before 5.19): a wait whose
   * stacks were not taken because another of them was preempted mid-walk
   * on the same CPU, holding the scratch they share. */
  OFFCPU_LOST_SCRATCH_BUSY,
  OFFCPU_LOST_NR,
};

/* offcpu_key.flags */
/* The kernel stack came from bpf_get_task_stack() alone, which leaves out
 * the scheduler's own (__sched) frames: schedule, do_nanosleep, mutex_lock...
 * (waits already in progress at start on kernels without the ORC walker). */
#define OFFCPU_KSTACK_NOSCHED 1u

/* What the BPF kernel-stack walker (bpf/kernel_unwind.bpf.h) needs to know
 * about the running kernel: addresses resolved by bpf/ksyms.bpf.c, the ORC
 * entry layout read from BTF by user space. x86-64 kernels with ORC only. */
#define OFFCPU_TIMER_FNS 2
struct offcpu_kernel_text {
  __u64 text_start, text_end;   /* _stext, _etext: where ORC tables apply */
  __u64 sched_start, sched_end; /* __sched_text_start/end */
  __u64 lock_start, lock_end;   /* __lock_text_start/end */
  __u64 orc_ip_start;           /* __start_orc_unwind_ip: s32 self-relative */
  __u64 orc_ip_end;             /* __stop_orc_unwind_ip */
  __u64 orc_start;              /* __start_orc_unwind: 6-byte entries */
  __u64 fork_ret;               /* ret_from_fork_asm (6.6+) or ret_from_fork */
  __u64 graph_ret;              /* return_to_handler: ftrace graph trampoline */
  __u64 rethook_ret;            /* arch_rethook_trampoline / kretprobe's */
  /* __irqentry_text_start/end: interrupt entry code. A wakeup whose stack
   * passes through it was made by an interrupt, not by the task it hit. */
  __u64 irqentry_start, irqentry_end;
  /* Bit positions in the 16-bit word that follows the two offsets. */
  __u8 type_shift, type_bits;
  __u8 signal_shift; /* 0xff: no signal bit (before 6.3) */
  __u8 end_shift;    /* 0xff: no end bit (6.4+: END_OF_STACK type instead) */
  __u8 old_types;    /* CALL=0 REGS=1 REGS_PARTIAL=2 (kernels with `end`) */
  __u8 pad[3];
  /* Where the callers of timer callbacks lie (hrtimer_wakeup, which ends
   * sleeps, and call_timer_fn, which runs the timer wheel's): a wakeup in
   * an interrupt with a return address into one was a timer's. 0: unknown.
   * Ends from the sizes the kernel prints (%pS). */
  __u64 timer_fn_start[OFFCPU_TIMER_FNS];
  __u64 timer_fn_end[OFFCPU_TIMER_FNS];
};

/* Kernel addresses named per run of bpf/ksyms.bpf.c's namer, and the room
 * for each name ("func+0x1c/0x60 [module]"). */
#define OFFCPU_NAME_BATCH 512
#define OFFCPU_NAME_LEN 128

/* Counters of the kernel-stack walker, for -v; rare events only (a shared
 * counter bumped on every switch would cost more than the walk saves). */
enum offcpu_kunwind {
  OFFCPU_KUNWIND_SPLICED = 0, /* finished by the kernel's walk (module...) */
  OFFCPU_KUNWIND_MISMATCH,    /* own and kernel's walks disagreed */
  OFFCPU_KUNWIND_VERIFIED,    /* --verify-kernel-unwind: walks compared */
  OFFCPU_KUNWIND_ORC_LOOKUPS, /* ORC table searches (cache misses) */
  OFFCPU_KUNWIND_LIVE,        /* wakers' stacks walked (or reused) in BPF */
  OFFCPU_KUNWIND_LIVE_KERNEL, /* wakers' stacks the kernel's walk took */
  OFFCPU_KUNWIND_NR,
};

/* Classes of the task state a wait began in, for --state S,D,... and the
 * per-state totals. */
enum offcpu_state_class {
  OFFCPU_STATE_R = 0, /* runnable: preempted (TASK_RUNNING) */
  OFFCPU_STATE_S,     /* interruptible sleep */
  OFFCPU_STATE_D,     /* uninterruptible, not TASK_IDLE */
  OFFCPU_STATE_I,     /* TASK_IDLE (uninterruptible + noload: idle kworkers) */
  OFFCPU_STATE_T,     /* stopped, traced, parked and the rest */
  OFFCPU_STATE_NR,
};

#define OFFCPU_TASK_INTERRUPTIBLE 0x1
#define OFFCPU_TASK_UNINTERRUPTIBLE 0x2
#define OFFCPU_TASK_IDLE 0x402 /* TASK_UNINTERRUPTIBLE | TASK_NOLOAD */
#define OFFCPU_TASK_DEAD 0x80  /* a task's last switch-out (4.14+) */

static inline __attribute__((always_inline)) unsigned int
offcpu_state_class(unsigned int state) {
  if (state == 0)
    return OFFCPU_STATE_R;
  if ((state & OFFCPU_TASK_IDLE) == OFFCPU_TASK_IDLE)
    return OFFCPU_STATE_I;
  if (state & OFFCPU_TASK_UNINTERRUPTIBLE)
    return OFFCPU_STATE_D;
  if (state & OFFCPU_TASK_INTERRUPTIBLE)
    return OFFCPU_STATE_S;
  return OFFCPU_STATE_T;
}

/* Per-CPU counters of the switch hook, for the progress line and the
 * per-state totals (one lookup per charged wait). */
struct offcpu_charged {
  __u64 waits;
  __u64 state_ns[OFFCPU_STATE_NR];
  /* Waits held in threads' storage and not yet added to the aggregation
   * map (see charge() in bpf/offcpu.bpf.c): added where a wait is held,
   * taken away on the CPU that adds them to the map, so one CPU's count
   * may wrap below 0; the sum over CPUs is what is still held. */
  __u64 held_waits;
  __u64 held_ns; /* their time, kept alike */
};

/* Waits that found the aggregation map full, summed by process and thread
 * name (an offcpu_totals each): a thread churner filling the map keeps the
 * time of the others' waits and its own, shown without stacks. */
struct offcpu_overflow_key {
  __u32 tgid;
  char comm[OFFCPU_COMM_LEN];
};

/* What woke a wait (--wakers): the waking task with its stacks, or the
 * interrupt that did (kernel frames up to the interrupt entry only). Kept
 * in the wakers map under a 64-bit hash of its fields, like stacks. */
#define OFFCPU_WAKER_NONE 0ULL      /* not asked for */
#define OFFCPU_WAKER_UNSEEN 1ULL    /* no wakeup seen: timeout lost, seeded */
#define OFFCPU_WAKER_PREEMPTED 2ULL /* runnable all along: nobody woke it */
#define OFFCPU_WAKER_LOST 3ULL      /* the wakers map was full */
#define OFFCPU_WAKER_TOO_SHORT 4ULL /* shorter than -m at wakeup: not taken */
#define OFFCPU_WAKER_STILL_WAITING 5ULL /* not woken when tracing ended */
/* An interrupt woke it, a timer's or another's (the timeline alone: its
 * wakers are not kept with their stacks, see waking.bpf.h). */
#define OFFCPU_WAKER_TIMER 6ULL
#define OFFCPU_WAKER_IRQ 7ULL
#define OFFCPU_WAKER_FIRST_ID 16ULL /* real ids are at least this */

#define OFFCPU_WAKER_TASK 0u
#define OFFCPU_WAKER_INTERRUPT 1u

struct offcpu_waker {
  __u32 pid;
  __u32 tgid;
  __u64 user_stack;
  __u64 kernel_stack;
  __u32 kind; /* OFFCPU_WAKER_TASK or _INTERRUPT */
  __u32 pad;
  char comm[OFFCPU_COMM_LEN];
};

/* Where a task's current off-CPU wait began (task storage or hash map). */
struct offcpu_start {
  __u64 start_ns;
  __u64 cgroup;       /* --per-cgroup: the cgroup it blocked in */
  __u64 user_stack;   /* id in the stacks map, taken at switch-out */
  __u64 kernel_stack; /* only when kernel stacks are taken at switch-out */
  __u64 wake_ns;      /* when it was woken (--wakers, --runqueue); 0: not */
  __u64 waker;        /* id in the wakers map, or OFFCPU_WAKER_* */
  /* The kernel's count of the task's switch-ins (sched_info.pcount) when
   * the wait began: a switch-in sched_switch did not report moves it. */
  __u64 pcount;
  __u32 tgid;
  __u32 state; /* task state when it went off CPU */
  __u32 flags; /* OFFCPU_KSTACK_* */
  __u32 pad;
};

/* Events of the switch hook worth reporting that are not losses; indexes
 * the `switch_events` counters in BPF .bss. */
enum offcpu_switch_event {
  /* Waits whose end the kernel did not report through sched_switch and
   * that were ended from its scheduler accounting instead (see
   * end_unseen_wait in bpf/offcpu.bpf.c). */
  OFFCPU_EV_UNSEEN_SWITCH_IN = 0,
  OFFCPU_EV_NR,
};

/* Announced through a ring buffer the first time a process blocks on a
 * user stack: user space reads its maps while the stack is current. */
struct offcpu_new_stack {
  __u32 tgid;
  /* The process it was forked from, if it has not exec'd since (the same
   * image: its maps can stand in once this one is gone); else 0. */
  __u32 parent;
  __u64 user_stack;
};

/* Aggregation key: one per (process, thread, name, stacks[, waker]). */
struct offcpu_key {
  __u32 tgid;
  __u32 pid;
  __u64 user_stack;
  __u64 kernel_stack;
  __u64 waker;  /* --wakers: id in the wakers map or OFFCPU_WAKER_* */
  __u64 cgroup; /* --per-cgroup: the task's cgroup v2 id */
  __u32 flags;  /* OFFCPU_KSTACK_*, state class with --show-state */
  __u32 pad;
  char comm[OFFCPU_COMM_LEN];
};

/* offcpu_key.flags: the state class (+1) in bits 8-11 with --show-state. */
#define OFFCPU_KEY_STATE_SHIFT 8
#define OFFCPU_KEY_STATE_MASK 0xf00u

/* The latency distribution kept per key: a log2 histogram of the waits'
 * lengths in microseconds. Bucket 0 holds waits under 2 us (-m's default is
 * 1 us), bucket i waits of [2^i, 2^(i+1)) us, and the last one everything
 * from 2^31 us (36 min) up: 32 buckets cover 1 us to over an hour with a
 * factor of two of resolution, as BCC's *dist tools print them. Counts are
 * 32-bit (128 bytes a key, not 256): a bucket of one thread's key wraps
 * only after 4 billion waits, which user space detects (the buckets then
 * no longer add up to `count`). */
#define OFFCPU_HIST_BUCKETS 32

/* The bucket of a wait of `ns` nanoseconds: floor(log2(us)), at most the
 * last. Without a division (a 64-bit divide is the costliest instruction
 * the switch hook would run): with 2^l <= ns < 2^(l+1), ns / 1000 lies in
 * (2^(l-10), 2^(l-8)), so its log2 is l - 10 or l - 9, told apart by one
 * compare. Without a branch either: a compare is a branch in BPF, and each
 * way's bucket, a different constant, was checked by the verifier through
 * the rest of the program (a compare of values under 2^63 is the sign of
 * their difference: the first step's shift leaves v under 2^32, and the
 * largest shift of 1000 is by 54). */
static inline __attribute__((always_inline)) __u32
offcpu_hist_bucket(__u64 ns) {
  __u64 v = ns | 1, l = 0, s;
  s = (((__u64)0 - (v >> 32)) >> 63) << 5; /* 32 if v >> 32: any v */
  v >>= s;
  l |= s;
  s = ((0xFFFFULL - v) >> 63) << 4;
  v >>= s;
  l |= s;
  s = ((0xFFULL - v) >> 63) << 3;
  v >>= s;
  l |= s;
  s = ((0xFULL - v) >> 63) << 2;
  v >>= s;
  l |= s;
  s = ((0x3ULL - v) >> 63) << 1;
  v >>= s;
  l |= s;
  l |= v >> 1;
  /* At least 10: under 2000 ns is bucket 0, below. */
  l += (10 - l) & ((__u64)0 - ((l - 10) >> 63));
  __u64 b = l - 10 + ((((1000ULL << (l - 9)) - 1) - ns) >> 63);
  __u64 over = ((__u64)(OFFCPU_HIST_BUCKETS - 1) - b) >> 63;
  b = (b & (over - 1)) | ((OFFCPU_HIST_BUCKETS - 1) & ((__u64)0 - over));
  __u64 small = ((ns - 2000) >> 63) & ~(ns >> 63); /* ns < 2000 */
  return (__u32)(b & (small - 1));
}

#ifdef __bpf__
/* offcpu_hist_bucket as an index the verifier can bound: the compiler sees
 * the clamp is redundant and may test a copy of the value, not the register
 * it then indexes with; the barrier hides the range, the mask restores it. */
static inline __attribute__((always_inline)) __u32 offcpu_hist_slot(__u64 ns) {
  __u32 b = offcpu_hist_bucket(ns);
  asm volatile("" : "+r"(b));
  return b & (OFFCPU_HIST_BUCKETS - 1);
}
#endif

/* What the aggregation map holds per key. */
struct offcpu_value {
  __u64 total_ns;
  __u64 count;
  __u64 runq_ns; /* --runqueue: the part spent runnable, waiting for a CPU */
  __u64 max_ns;  /* the longest wait */
  __u32 hist[OFFCPU_HIST_BUCKETS]; /* waits per offcpu_hist_bucket */
};

/* The overflow map's value (see offcpu_overflow_key): totals only. Its
 * waits have no stacks to show a distribution under, and it is
 * preallocated: 128 bytes of histogram a key would be 2 MiB of kernel
 * memory held for nothing. */
struct offcpu_totals {
  __u64 total_ns;
  __u64 count;
  __u64 runq_ns;
};

/* offcpu_stack.flags; part of the stack's identity (and of its hash). */
#define OFFCPU_STACK_USER 1u /* a user stack: kept apart from kernel ones */
/* Cut at the depth limit (--perf-max-stack-depth): frames on its root side
 * are missing. Set only when a walk reaches the limit with a caller left. */
#define OFFCPU_STACK_TRUNCATED 2u

/* A stored stack: frames leaf first, as the kernel returns them. */
struct offcpu_stack {
  __u32 nr;
  __u32 flags; /* OFFCPU_STACK_* */
  __u64 ips[OFFCPU_MAX_STACK_DEPTH];
};

/* Stacks of at most this many frames, most of them, are stored in the
 * `stacks` map, whose values are the first bytes of a struct offcpu_stack;
 * deeper ones in `deep_stacks`, a quarter of its size, with
 * OFFCPU_STACK_DEEP set in their ids. Both maps are preallocated, so one
 * map of 1 KiB values held 72 MB of kernel memory for 65,536 stacks; the
 * two hold 40 MB. Under pgbench 3 of 3,932 distinct user stacks had more
 * than 32 frames (after inlined frames were added), no kernel stack did;
 * a Python stack of 16 Python frames has (each is two words). */
#define OFFCPU_SHORT_STACK_DEPTH 32
struct offcpu_short_stack {
  __u32 nr;
  __u32 flags;
  __u64 ips[OFFCPU_SHORT_STACK_DEPTH];
};

/* ---- offcpu lock, offcpu rwsem ---- */

/* lock:contention_begin's flags (the kernel's include/trace/events/lock.h,
 * plain defines there, so not in BTF). */
#define OFFCPU_LCB_F_SPIN 0x01u
#define OFFCPU_LCB_F_READ 0x02u
#define OFFCPU_LCB_F_WRITE 0x04u
#define OFFCPU_LCB_F_RT 0x08u
#define OFFCPU_LCB_F_PERCPU 0x10u
#define OFFCPU_LCB_F_MUTEX 0x20u

/* What a contention waited for: a kind of lock and its side. The spinning
 * ones (on CPU) are traced only when asked for (offcpu lock --spin), so
 * their time is never mixed into the sleeping kinds'. */
enum offcpu_lock_kind {
  OFFCPU_LOCK_SEMAPHORE,      /* flags 0: down() */
  OFFCPU_LOCK_MUTEX,          /* sleeping in the mutex slow path */
  OFFCPU_LOCK_RWSEM_READ,     /* rw_semaphore */
  OFFCPU_LOCK_RWSEM_WRITE,    /* (mmap_lock, i_rwsem...) */
  OFFCPU_LOCK_RTMUTEX,        /* rt_mutex (futex PI, PREEMPT_RT locks) */
  OFFCPU_LOCK_RWLOCK_RT_READ, /* PREEMPT_RT rwlocks and rwsems */
  OFFCPU_LOCK_RWLOCK_RT_WRITE,
  OFFCPU_LOCK_PERCPU_READ, /* percpu_rw_semaphore */
  OFFCPU_LOCK_PERCPU_WRITE,
  OFFCPU_LOCK_OTHER, /* flags no kernel so far combines */
  /* ---- spinning, on CPU ---- */
  OFFCPU_LOCK_MUTEX_SPIN, /* a mutex waiter spinning on its owner */
  OFFCPU_LOCK_SPINLOCK,
  OFFCPU_LOCK_RWLOCK_READ,
  OFFCPU_LOCK_RWLOCK_WRITE,
  /* ---- user space (offcpu lock --futex): futex waits, off CPU ---- */
  OFFCPU_LOCK_FUTEX,    /* FUTEX_WAIT, WAIT_BITSET, futex_waitv, futex_wait */
  OFFCPU_LOCK_FUTEX_PI, /* FUTEX_LOCK_PI, LOCK_PI2, WAIT_REQUEUE_PI */
  OFFCPU_LOCK_KINDS
};

#define OFFCPU_LOCK_SPINNING                                                   \
  ((1u << OFFCPU_LOCK_MUTEX_SPIN) | (1u << OFFCPU_LOCK_SPINLOCK) |             \
   (1u << OFFCPU_LOCK_RWLOCK_READ) | (1u << OFFCPU_LOCK_RWLOCK_WRITE))
#define OFFCPU_LOCK_FUTEXES                                                    \
  ((1u << OFFCPU_LOCK_FUTEX) | (1u << OFFCPU_LOCK_FUTEX_PI))
/* The kernel's sleeping kinds: what offcpu lock traces by default. */
#define OFFCPU_LOCK_SLEEPING                                                   \
  (((1u << OFFCPU_LOCK_KINDS) - 1) & ~OFFCPU_LOCK_SPINNING &                   \
   ~OFFCPU_LOCK_FUTEXES)

/* The kind of a contention_begin's flags (kernel/locking/: mutex.c passes
 * MUTEX, with SPIN while spinning; rwsem.c READ or WRITE; rtmutex.c RT;
 * rwbase_rt.c RT with a side; percpu-rwsem.c PERCPU with a side;
 * semaphore.c 0; qspinlock.c SPIN; qrwlock.c SPIN with a side). */
static inline __attribute__((always_inline)) __u32
offcpu_lock_kind_of(__u32 f) {
  __u32 side = f & (OFFCPU_LCB_F_READ | OFFCPU_LCB_F_WRITE);
  if (f & OFFCPU_LCB_F_MUTEX)
    return f & OFFCPU_LCB_F_SPIN ? OFFCPU_LOCK_MUTEX_SPIN : OFFCPU_LOCK_MUTEX;
  if (f & OFFCPU_LCB_F_SPIN)
    return side == OFFCPU_LCB_F_READ    ? OFFCPU_LOCK_RWLOCK_READ
           : side == OFFCPU_LCB_F_WRITE ? OFFCPU_LOCK_RWLOCK_WRITE
                                        : OFFCPU_LOCK_SPINLOCK;
  if (f & OFFCPU_LCB_F_RT)
    return side == OFFCPU_LCB_F_READ    ? OFFCPU_LOCK_RWLOCK_RT_READ
           : side == OFFCPU_LCB_F_WRITE ? OFFCPU_LOCK_RWLOCK_RT_WRITE
                                        : OFFCPU_LOCK_RTMUTEX;
  if (f & OFFCPU_LCB_F_PERCPU)
    return side == OFFCPU_LCB_F_READ    ? OFFCPU_LOCK_PERCPU_READ
           : side == OFFCPU_LCB_F_WRITE ? OFFCPU_LOCK_PERCPU_WRITE
                                        : OFFCPU_LOCK_OTHER;
  if (side == OFFCPU_LCB_F_READ)
    return OFFCPU_LOCK_RWSEM_READ;
  if (side == OFFCPU_LCB_F_WRITE)
    return OFFCPU_LOCK_RWSEM_WRITE;
  return f == 0 ? OFFCPU_LOCK_SEMAPHORE : OFFCPU_LOCK_OTHER;
}

/* rwsem_key.flags */
#define RWSEM_WAIT_WRITE 1u
#define RWSEM_WAIT_READ 2u
#define RWSEM_LOCK_IS_MMAP 4u /* the waiting task's own mm->mmap_lock */

/* A wait in progress, keyed by thread id. */
struct rwsem_start {
  __u64 start_ns;
  __u64 lock;
  __u64 user_stack;
  __u64 kernel_stack;
  __u64 waker;  /* --wakers: the first wakeup's waker (offcpu_waker id) */
  __u64 cache;  /* the slab cache the lock lies in (kmem_cache *), or 0 */
  __u64 cgroup; /* offcpu lock --by cgroup: the waiter's cgroup v2 id */
  __u32 tgid;
  __u32 flags;
  char comm[OFFCPU_COMM_LEN];
  __u32 kind;  /* offcpu_lock_kind */
  __u32 owner; /* --holders: the owner word's task at begin (tid), or 0 */
  char owner_comm[OFFCPU_COMM_LEN];
};

struct rwsem_key {
  __u32 tgid;
  __u32 pid;
  __u64 user_stack;
  __u64 kernel_stack;
  __u64 lock;
  __u64 waker;  /* --wakers: id in the wakers map or OFFCPU_WAKER_* */
  __u64 cache;  /* slab cache (kmem_cache *) named by the slab_names iter */
  __u64 cgroup; /* --by cgroup (key_cgroup): the waiter's cgroup v2 id */
  __u32 flags;
  __u32 kind; /* offcpu_lock_kind */
  char comm[OFFCPU_COMM_LEN];
  __u32 owner; /* --holders: the lock's recorded owner at begin, or 0 */
  __u32 pad;
  char owner_comm[OFFCPU_COMM_LEN];
};

/* One slab cache, as the slab_names iterator (iter/kmem_cache, 6.12+)
 * writes it: the address rwsem_key.cache holds and its name. */
#define OFFCPU_SLAB_NAME_LEN 32
struct offcpu_slab_name {
  __u64 cache;
  char name[OFFCPU_SLAB_NAME_LEN];
};

struct rwsem_value {
  __u64 total_ns;
  __u64 count;
  __u64 max_ns;
  __u32 hist[OFFCPU_HIST_BUCKETS]; /* waits per offcpu_hist_bucket */
};

/* The aggregation key of a wait that began as `s`, of thread `pid`: built
 * alike by the BPF program when the wait ends and by user space for waits
 * still open at stop. */
static inline __attribute__((always_inline)) void
rwsem_key_fill(struct rwsem_key *k, const struct rwsem_start *s, __u32 pid) {
  __builtin_memset(k, 0, sizeof(*k));
  k->tgid = s->tgid;
  k->pid = pid;
  k->user_stack = s->user_stack;
  k->kernel_stack = s->kernel_stack;
  k->lock = s->lock;
  k->waker = s->waker;
  k->cache = s->cache;
  k->cgroup = s->cgroup;
  k->flags = s->flags;
  k->kind = s->kind;
  __builtin_memcpy(k->comm, s->comm, sizeof(k->comm));
  k->owner = s->owner;
  __builtin_memcpy(k->owner_comm, s->owner_comm, sizeof(k->owner_comm));
}

static inline __attribute__((always_inline)) struct rwsem_key
rwsem_key_of(const struct rwsem_start *s, __u32 pid) {
  struct rwsem_key k;
  rwsem_key_fill(&k, s, pid);
  return k;
}

/* futex(2)'s commands (include/uapi/linux/futex.h, plain defines there)
 * that wait; the op's low 7 bits, without FUTEX_PRIVATE_FLAG (128) and
 * FUTEX_CLOCK_REALTIME (256). */
#define OFFCPU_FUTEX_CMD_MASK 0x7fu
#define OFFCPU_FUTEX_WAIT 0u
#define OFFCPU_FUTEX_LOCK_PI 6u
#define OFFCPU_FUTEX_WAIT_BITSET 9u
#define OFFCPU_FUTEX_WAIT_REQUEUE_PI 11u
#define OFFCPU_FUTEX_LOCK_PI2 13u

/* The lock kind of a futex(2) op, or OFFCPU_LOCK_KINDS if it does not
 * wait (a wake, a requeue, a trylock). */
static inline __attribute__((always_inline)) __u32
offcpu_futex_kind_of(__u64 op) {
  __u32 cmd = (__u32)op & OFFCPU_FUTEX_CMD_MASK;
  if (cmd == OFFCPU_FUTEX_WAIT || cmd == OFFCPU_FUTEX_WAIT_BITSET)
    return OFFCPU_LOCK_FUTEX;
  if (cmd == OFFCPU_FUTEX_LOCK_PI || cmd == OFFCPU_FUTEX_LOCK_PI2 ||
      cmd == OFFCPU_FUTEX_WAIT_REQUEUE_PI)
    return OFFCPU_LOCK_FUTEX_PI;
  return OFFCPU_LOCK_KINDS;
}

/* The x86-64 system calls that wait on futexes, as the task's saved
 * orig_ax holds them while it sleeps inside one. futex_waitv and futex_wait
 * have these numbers on every architecture (and in 32-bit processes). */
#define OFFCPU_NR_FUTEX 202
#define OFFCPU_NR_FUTEX_WAITV 449 /* 5.16+ */
#define OFFCPU_NR_FUTEX_WAIT 455  /* 6.7+ */
/* And those a holder wakes a waiter from: a futex call (FUTEX_WAKE,
 * FUTEX_UNLOCK_PI, a requeue), futex_wake and futex_requeue (6.7+), and a
 * thread's exit (its clear_child_tid word, which pthread_join waits on, and
 * its robust list). */
#define OFFCPU_NR_FUTEX_WAKE 454    /* 6.7+ */
#define OFFCPU_NR_FUTEX_REQUEUE 456 /* 6.7+ */
#define OFFCPU_NR_EXIT 60
#define OFFCPU_NR_EXIT_GROUP 231

/* What a futex wait's totals are kept by in the futex_waits map: 56
 * bytes, where a rwsem_key is 104; a wait's end hashes and compares its
 * key, and the element holding it spans fewer cache lines. No kernel
 * stack: it is always the futex call's. */
struct offcpu_futex_key {
  __u64 uaddr;      /* the futex word (futex_waitv: its first) */
  __u64 user_stack; /* walked as it went to sleep */
  __u64 holder;     /* who woke it: an offcpu_waker id, or 0 */
  __u32 tgid;
  __u32 pid;
  __u32 kind; /* OFFCPU_LOCK_FUTEX or _FUTEX_PI */
  __u32 pad;
  char comm[OFFCPU_COMM_LEN];
};

/* A futex wait in progress (offcpu lock --futex): a thread asleep inside a
 * futex call since `since_ns`, kept in its task storage; its key is the
 * map's key when it ends (looked up in place, not copied), and the stop
 * pass's iterator reads it back. */
struct offcpu_futex_start {
  struct offcpu_futex_key key;
  __u64 since_ns; /* when it went to sleep; 0: not asleep in one */
};

/* The report's key of futex wait key `f`, for the map's keys and for the
 * waits still asleep at stop (`unwoken`: the holder marker when no wakeup
 * was seen). */
static inline __attribute__((always_inline)) struct rwsem_key
offcpu_futex_key_of(const struct offcpu_futex_key *f, __u64 unwoken) {
  struct rwsem_key k;
  __builtin_memset(&k, 0, sizeof(k));
  k.tgid = f->tgid;
  k.pid = f->pid;
  k.user_stack = f->user_stack;
  k.lock = f->uaddr;
  k.waker = f->holder ? f->holder : unwoken;
  k.kind = f->kind;
  __builtin_memcpy(k.comm, f->comm, sizeof(k.comm));
  return k;
}

#endif /* OFFCPU_SHARED_H */
