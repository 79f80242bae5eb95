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

/* Start times keyed by thread id: a thread waits for one lock at a time. */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 16384);
  __type(key, __u32);
  __type(value, struct rwsem_start);
} starts SEC(".maps");

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

/* Ends the wait `pid` has open, charging it; `lock` 0: whichever lock
 * (the slow-path probes' returns do not know it). A contention_end for
 * another lock ends a nested contention not traced (the spinlock inside a
 * mutex's slow path), not this one. */
static __always_inline void wait_end(__u32 pid, __u64 lock) {
  struct rwsem_start *rec = bpf_map_lookup_elem(&starts, &pid);
  if (!rec || (lock && rec->lock != lock))
    return;
  __u64 now = bpf_ktime_get_ns();
  __u64 delta = now > rec->start_ns ? now - rec->start_ns : 0;
  struct rwsem_key key = rwsem_key_of(rec, pid);
  if (want_wakers && !key.waker)
    key.waker = OFFCPU_WAKER_UNSEEN;
  bpf_map_delete_elem(&starts, &pid);
  if (delta < min_wait_ns || delta > max_block_ns)
    return;

  struct rwsem_value zero = {};
  struct rwsem_value *val =
      lookup_or_insert(&waits, &key, &zero, OFFCPU_LOST_AGG_MAP_FULL);
  if (!val)
    return;
  __sync_fetch_and_add(&val->total_ns, delta);
  __sync_fetch_and_add(&val->count, 1);
  if (delta > val->max_ns) /* racy by design: a max, not a sum */
    val->max_ns = delta;
  __sync_fetch_and_add(&val->hist[offcpu_hist_slot(delta)], 1);
}

/* The thread's stacks for a new wait (0 where not wanted). */
static __always_inline void take_stacks(void *ctx, struct task_struct *task,
                                        __u32 tgid, struct rwsem_start *rec) {
  if (want_user_stacks) {
    __u32 partial = 0; /* taken again by the next wait, not rewalked */
    rec->user_stack = user_fp_walk ? walk_user_stack(bpf_get_current_task_btf(),
                                                     false, &partial)
                                   : take_current_stack(ctx, BPF_F_USER_STACK);
    announce(task, tgid, rec->user_stack);
  }
  if (want_kernel_stacks)
    rec->kernel_stack = take_current_stack(ctx, 0);
}

static __always_inline void wait_begin(void *ctx, __u64 lock, __u32 kind) {
  /* Read through probe reads: kprobe programs get no BTF task pointer. */
  struct task_struct *task = (struct task_struct *)bpf_get_current_task();
  __u64 id = bpf_get_current_pid_tgid();
  __u32 pid = (__u32)id, tgid = id >> 32;
  struct rwsem_start rec = {};
  struct rwsem_start *open = bpf_map_lookup_elem(&starts, &pid);
  if (open) {
    /* The same contention again (a retry in the slow path): keep it. */
    if (open->lock != lock || open->kind == kind)
      return;
    /* The same lock, another kind: a mutex waiter spinning between its
     * sleeps. The phase so far is charged as its own kind; the stacks are
     * the same. */
    rec.user_stack = open->user_stack;
    rec.kernel_stack = open->kernel_stack;
    wait_end(pid, lock);
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

  rec.start_ns = bpf_ktime_get_ns();
  rec.lock = lock;
  rec.tgid = tgid;
  rec.kind = kind;
  rec.flags = kind == OFFCPU_LOCK_RWSEM_WRITE  ? RWSEM_WAIT_WRITE
              : kind == OFFCPU_LOCK_RWSEM_READ ? RWSEM_WAIT_READ
                                               : 0;
  if (lock && lock == own_mmap_lock(task))
    rec.flags |= RWSEM_LOCK_IS_MMAP;
  bpf_get_current_comm(&rec.comm, sizeof(rec.comm));
  if (!open)
    take_stacks(ctx, task, tgid, &rec);
  if (bpf_map_update_elem(&starts, &pid, &rec, BPF_NOEXIST) == -OFFCPU_E2BIG)
    count_loss(OFFCPU_LOST_START_STORE);
}

/* A waiter being woken (--wakers): the first wakeup of its wait names the
 * waker, normally the holder releasing the lock (up_write, up_read). */
SEC("tp_btf/sched_waking")
int BPF_PROG(rwsem_waking, struct task_struct *p) {
  __u32 pid = p->pid;
  struct rwsem_start *rec = bpf_map_lookup_elem(&starts, &pid);
  if (rec && !rec->waker)
    rec->waker = take_waker(ctx, NULL, false);
  return 0;
}

/* ---- lock:contention_begin/end (5.19+) ---- */

SEC("tp_btf/contention_begin")
int BPF_PROG(rwsem_contention_begin, void *lock, unsigned int flags) {
  wait_begin(ctx, (__u64)lock, offcpu_lock_kind_of(flags));
  return 0;
}

SEC("tp_btf/contention_end")
int BPF_PROG(rwsem_contention_end, void *lock, int ret) {
  wait_end((__u32)bpf_get_current_pid_tgid(), (__u64)lock);
  return 0;
}

/* ---- fentry/fexit on the slow paths; targets set by the loader ---- */

SEC("fentry/rwsem_down_write_slowpath")
int BPF_PROG(rwsem_fentry_write, struct rw_semaphore *sem) {
  wait_begin(ctx, (__u64)sem, OFFCPU_LOCK_RWSEM_WRITE);
  return 0;
}

SEC("fexit/rwsem_down_write_slowpath")
int BPF_PROG(rwsem_fexit_write, struct rw_semaphore *sem) {
  wait_end((__u32)bpf_get_current_pid_tgid(), 0);
  return 0;
}

SEC("fentry/rwsem_down_read_slowpath")
int BPF_PROG(rwsem_fentry_read, struct rw_semaphore *sem) {
  wait_begin(ctx, (__u64)sem, OFFCPU_LOCK_RWSEM_READ);
  return 0;
}

SEC("fexit/rwsem_down_read_slowpath")
int BPF_PROG(rwsem_fexit_read, struct rw_semaphore *sem) {
  wait_end((__u32)bpf_get_current_pid_tgid(), 0);
  return 0;
}

/* The mutex slow path (offcpu lock before 5.19): entered once the fast
 * path's cmpxchg failed, left holding the lock. Spinning and sleeping are
 * one wait here: only the tracepoints tell them apart. */
SEC("fentry/__mutex_lock_slowpath")
int BPF_PROG(mutex_fentry, struct mutex *lock) {
  wait_begin(ctx, (__u64)lock, OFFCPU_LOCK_MUTEX);
  return 0;
}

SEC("fexit/__mutex_lock_slowpath")
int BPF_PROG(mutex_fexit, struct mutex *lock) {
  wait_end((__u32)bpf_get_current_pid_tgid(), 0);
  return 0;
}

/* ---- kprobe/kretprobe; attached by name by the loader ---- */

SEC("kprobe")
int BPF_KPROBE(rwsem_kprobe_write, struct rw_semaphore *sem) {
  wait_begin(ctx, (__u64)sem, OFFCPU_LOCK_RWSEM_WRITE);
  return 0;
}

SEC("kprobe")
int BPF_KPROBE(rwsem_kprobe_read, struct rw_semaphore *sem) {
  wait_begin(ctx, (__u64)sem, OFFCPU_LOCK_RWSEM_READ);
  return 0;
}

SEC("kprobe")
int BPF_KPROBE(mutex_kprobe, struct mutex *lock) {
  wait_begin(ctx, (__u64)lock, OFFCPU_LOCK_MUTEX);
  return 0;
}

SEC("kretprobe")
int BPF_KRETPROBE(rwsem_kretprobe) {
  wait_end((__u32)bpf_get_current_pid_tgid(), 0);
  return 0;
}
