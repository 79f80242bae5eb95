/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* User-space lock waits (offcpu lock --futex): the time a thread spends
 * asleep inside a futex system call that waits, by the futex word's
 * address, with the thread whose wakeup ended the sleep (the holder that
 * called FUTEX_WAKE or FUTEX_UNLOCK_PI).
 *
 * All from sched_switch, no system-call tracepoint: a thread going to
 * sleep inside a system call still has the call's number and arguments in
 * the registers it saved on entry (orig_ax, di, si), so the switch-out
 * says whether it is a futex wait, on which word, with which op; its
 * switch-in ends the wait. The time is then exactly the off-CPU part of
 * the call: not its own work, not a PI lock's optimistic spinning, not a
 * call that never slept (the word had changed: EAGAIN). The per-call
 * tracepoints (syscalls:sys_enter_futex/sys_exit_futex) would add two
 * programs and a hash update and delete to every futex call, wakes and
 * uncontended ones included, and raw_syscalls a program to every system
 * call of the machine; measured in tools/bench/futex_lock.sh.
 *
 * A wait in progress lives in the thread's task storage (5.11+; freed with
 * the thread, no table to fill), beside the memo that lets a thread
 * blocking again at the same place reuse its user stack; at stop, the
 * futex_open iterator reads back the waits still asleep. */
#ifndef OFFCPU_FUTEX_BPF_H
#define OFFCPU_FUTEX_BPF_H

#include "announce.bpf.h"
#include "offcpu/shared.h"
#include "sched_clock.bpf.h"
#include "settings.bpf.h"
#include "stack_store.bpf.h"
#include "task_filter.bpf.h"
#include "user_unwind.bpf.h"
#include "waker.bpf.h"

/* A thread's waits are added up in its task storage, under its last few
 * keys, and reach the totals' map only when a key leaves these slots, at
 * the drain (futex_open, each -i interval and the end) or when the thread
 * exits. The map has --max-entries keys (65,536: a megabyte of buckets,
 * 16 MiB of elements), and an update there cost a futex wait ~500 ns of
 * cache and TLB misses; the thread's storage was just read. A thread
 * mostly waits on one word from one place, woken by one of a few holders:
 * one key per holder. */
#define FUTEX_ACC_SLOTS 4

struct futex_acc {
  struct offcpu_futex_key key; /* all 0: never used */
  struct rwsem_value val;      /* count 0: nothing pending */
};

struct futex_task {
  struct offcpu_futex_start w;
  /* The slots' values against the drain and the exit, which move them to
   * the map (a switch-in takes it only during a drain: futex_draining);
   * their keys change only at the thread's own switch-ins. */
  struct bpf_spin_lock lock;
  __u32 evict; /* the slot a new key takes next when none is free */
  struct futex_acc acc[FUTEX_ACC_SLOTS];
  struct uw_memo_set memo;  /* its last user walks, reused while they hold */
  struct waker_last holder; /* the last holder that woke it (no --wakers) */
};

struct {
  __uint(type, BPF_MAP_TYPE_TASK_STORAGE);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __type(key, int);
  __type(value, struct futex_task);
} futex_tasks SEC(".maps");

/* Totals by (process, thread, futex word, user stack, holder): bounded by
 * --max-entries; a wait that finds it full is counted as
 * OFFCPU_LOST_AGG_MAP_FULL (reported with the option that fixes it). */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 1); /* sized by the loader */
  __type(key, struct offcpu_futex_key);
  __type(value, struct rwsem_value);
} futex_waits SEC(".maps");

/* What a key enters the map with. */
struct rwsem_value futex_zero = {};

/* Set by user space for the drain's pass over the threads (futex_open),
 * and waited out before it (every program run that read it clear has
 * ended): only then can another CPU move a thread's slots while it is
 * switched in, so only then do the switch-ins take the thread's lock.
 * Left set where user space cannot wait (no membarrier). */
__u32 futex_draining = 0;

static __always_inline void futex_add_wait(struct rwsem_value *v, __u64 ns) {
  v->total_ns += ns;
  v->count++;
  if (ns > v->max_ns)
    v->max_ns = ns;
  v->hist[offcpu_hist_slot(ns)]++;
}

/* Slot `a`'s pending waits into the map's value `to` (NULL: the map was
 * full, they are lost and counted), under the thread's lock. A key's
 * values are only written under its thread's lock: plain adds. */
static __always_inline void futex_move(struct futex_acc *a,
                                       struct rwsem_value *to) {
  if (!to) {
    __sync_fetch_and_add(&lost[OFFCPU_LOST_AGG_MAP_FULL], a->val.count);
  } else {
    to->total_ns += a->val.total_ns;
    to->count += a->val.count;
    if (a->val.max_ns > to->max_ns)
      to->max_ns = a->val.max_ns;
    for (__u32 i = 0; i < OFFCPU_HIST_BUCKETS; i++)
      to->hist[i] += a->val.hist[i];
  }
  __builtin_memset(&a->val, 0, sizeof(a->val));
}

/* A wait of `ns` into slot `a`; `fresh`: the slot takes key `k`, its
 * pending waits moved to the map's value `to` first (unless the drain moved
 * them meanwhile). */
static __always_inline void futex_add_to_slot(struct futex_acc *a,
                                              const struct offcpu_futex_key *k,
                                              struct rwsem_value *to,
                                              bool fresh, __u64 ns) {
  if (fresh) {
    if (a->val.count)
      futex_move(a, to);
    a->key = *k;
  }
  futex_add_wait(&a->val, ns);
}

/* Every slot's pending waits into the map: at the drain (another CPU may
 * switch the thread in meanwhile and give a slot another key: then that
 * switch-in moved its waits) and at the thread's exit. */
static __always_inline void futex_flush(struct futex_task *ft) {
  for (__u32 i = 0; i < FUTEX_ACC_SLOTS; i++) {
    struct futex_acc *a = &ft->acc[i];
    if (!a->val.count)
      continue;
    struct offcpu_futex_key key = a->key;
    struct rwsem_value *to =
        lookup_or_insert(&futex_waits, &key, &futex_zero, -1);
    bpf_spin_lock(&ft->lock);
    if (a->val.count && same_words(&a->key, &key, sizeof(key)))
      futex_move(a, to);
    bpf_spin_unlock(&ft->lock);
  }
}

/* The kind of futex wait the current system call of `t` is (its saved
 * registers), with its futex word; OFFCPU_LOCK_KINDS if none. */
static __always_inline __u32 futex_call_of(struct task_struct *t, __u64 *word) {
  struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(t);
  long nr = regs->orig_ax;
  *word = regs->di;
  if (nr == OFFCPU_NR_FUTEX)
    return offcpu_futex_kind_of(regs->si);
  if (nr == OFFCPU_NR_FUTEX_WAIT)
    return OFFCPU_LOCK_FUTEX;
  if (nr != OFFCPU_NR_FUTEX_WAITV)
    return OFFCPU_LOCK_KINDS;
  /* struct futex_waitv {u64 val; u64 uaddr; u32 flags, reserved}: the
   * first word (which one wakes it is known only at the call's return). */
  __u64 first = 0;
  bpf_probe_read_user(&first, sizeof(first), (void *)(regs->di + 8));
  *word = first;
  return OFFCPU_LOCK_FUTEX;
}

/* Whether `t` is inside a futex system call (its saved call number): two
 * loads, where the task storage lookup is a helper call and a chain of
 * them. */
static __always_inline bool in_futex_syscall(struct task_struct *t) {
  long nr = ((struct pt_regs *)bpf_task_pt_regs(t))->orig_ax;
  return nr == OFFCPU_NR_FUTEX || nr == OFFCPU_NR_FUTEX_WAIT ||
         nr == OFFCPU_NR_FUTEX_WAITV;
}

/* The futex wait `t` is asleep in, or NULL. One process traced: the
 * other tasks' switches and wakeups, most of the machine's, are told
 * apart by their tgid, without the storage lookup; the traced ones' that
 * are not inside a futex call (a sleep, a timer's wakeup), by their call
 * number: a wait is asleep in its call from switch-out to switch-in. */
static __always_inline struct futex_task *futex_wait_of(struct task_struct *t) {
  if (!maybe_traced(t->tgid) || !in_futex_syscall(t))
    return NULL;
  struct futex_task *ft = bpf_task_storage_get(&futex_tasks, t, 0, 0);
  return ft && ft->w.since_ns ? ft : NULL;
}

/* Whether the current task is inside a futex call of `kind`: a PI
 * futex's rt_mutex contention is that wait, counted as futex:pi. */
static __always_inline bool in_futex_call(__u32 kind) {
  __u64 word;
  return futex_call_of(bpf_get_current_task_btf(), &word) == kind;
}

/* A thread going to sleep (the current task, switching out): a futex wait
 * begins if its system call is one that waits, of a kind traced. Its user
 * stack is walked now, from the registers saved at the call's entry. */
static __always_inline void futex_sleeps(struct task_struct *prev) {
  __u32 pid = prev->pid, tgid = prev->tgid;
  if (!maybe_traced(tgid))
    return;
  /* The state field, not sched_switch's prev_state argument (5.18+): one
   * program for every kernel; a wakeup racing with the switch shows as
   * TASK_WAKING, still a sleep. Preempted, stopped, traced: no wait. */
  unsigned int state =
      bpf_core_field_exists(prev->__state) ? prev->__state : task_state(prev);
  if (state == OFFCPU_TASK_DEAD) {
    /* Its last switch-out: its storage goes with it, its waits not. */
    struct futex_task *ft = bpf_task_storage_get(&futex_tasks, prev, 0, 0);
    if (ft)
      futex_flush(ft);
    return;
  }
  __u32 cls = offcpu_state_class(state);
  if (cls != OFFCPU_STATE_S && cls != OFFCPU_STATE_D)
    return;
  __u64 word;
  __u32 kind = futex_call_of(prev, &word);
  if (kind >= OFFCPU_LOCK_KINDS || !(lock_kinds & (1u << kind)))
    return;
  if (!passes_task_filters(prev, pid, tgid, true))
    return;
  struct futex_task *ft = bpf_task_storage_get(&futex_tasks, prev, 0,
                                               BPF_LOCAL_STORAGE_GET_F_CREATE);
  if (!ft) {
    count_loss(OFFCPU_LOST_START_STORE);
    return;
  }
  struct offcpu_futex_key *w = &ft->w.key;
  w->uaddr = word;
  w->holder = 0;
  w->tgid = tgid;
  w->pid = pid;
  w->kind = kind;
  read_comm(w->comm, prev, true); /* plain loads, no helper call */
  w->user_stack = 0;
  if (want_user_stacks) {
    __u32 partial = 0; /* not walked again later */
    bool reused = false;
    w->user_stack = user_fp_walk
                        ? walk_user_stack_hook(prev, &partial, &ft->memo,
                                               &reused, false, SCRATCH_HOOK)
                        : OFFCPU_STACK_MISSED;
    /* A reused stack was announced when it was walked. */
    if (!reused && !announce(prev, tgid, w->user_stack))
      uw_memo_forget(&ft->memo);
  }
  /* The run queue's clock, as the main program's switch hook: a few loads
   * where bpf_ktime_get_ns costs 45-85 ns here (sched_clock.bpf.h). */
  __u64 clock;
  __u64 since = switch_time(prev, true, &clock), stop = stop_ns;
  /* After the window (see wait_end): none opens. */
  ft->w.since_ns = stop && since >= stop ? 0 : since;
}

/* A futex waiter switched back in (in place of `prev`): its sleep is
 * charged. */
static __always_inline void futex_wakes(struct futex_task *ft,
                                        struct task_struct *prev) {
  struct offcpu_futex_start *w = &ft->w;
  __u64 clock;
  __u64 now = switch_time(prev, true, &clock), stop = stop_ns;
  if (stop && now > stop)
    now = stop; /* charged up to the window's end */
  __u64 ns = now > w->since_ns ? now - w->since_ns : 0;
  w->since_ns = 0;
  if (!ns || ns < min_wait_ns || ns > max_block_ns)
    return;
  /* Its pad stays 0 from the storage's creation. */
  if (!w->key.holder)
    w->key.holder = OFFCPU_WAKER_UNSEEN;
  /* The slot with this key; else a free one, or the next in turn, whose
   * waits go to the map first. Only this thread's switch-ins set keys (one
   * at a time): read without the lock. */
  __u32 i;
  for (i = 0; i < FUTEX_ACC_SLOTS; i++)
    if (same_words(&ft->acc[i].key, &w->key, sizeof(w->key)))
      break;
  struct rwsem_value *to = NULL;
  bool fresh = i >= FUTEX_ACC_SLOTS;
  if (fresh) {
    for (i = 0; i < FUTEX_ACC_SLOTS; i++)
      if (!ft->acc[i].val.count)
        break;
    if (i >= FUTEX_ACC_SLOTS)
      i = ft->evict++;
    i &= FUTEX_ACC_SLOTS - 1;
    if (ft->acc[i].val.count)
      to = lookup_or_insert(&futex_waits, &ft->acc[i].key, &futex_zero, -1);
  }
  struct futex_acc *a = &ft->acc[i & (FUTEX_ACC_SLOTS - 1)];
  if (*(volatile __u32 *)&futex_draining) {
    bpf_spin_lock(&ft->lock);
    futex_add_to_slot(a, &w->key, to, fresh, ns);
    bpf_spin_unlock(&ft->lock);
  } else {
    futex_add_to_slot(a, &w->key, to, fresh, ns);
  }
}

/* The holder without its stacks (no --wakers): who it was, stored once
 * per distinct thread in the wakers map like a full waker; the waiter's
 * memo answers for the holder that woke it last. */
static __always_inline __u64 futex_light_holder(struct futex_task *ft) {
  struct offcpu_waker w = {};
  w.kind = OFFCPU_WAKER_TASK;
  current_waker(&w, true);
  return store_waker(&w, &ft->holder);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(futex_switch, bool preempt, struct task_struct *prev,
             struct task_struct *next) {
  futex_sleeps(prev);
  struct futex_task *ft = futex_wait_of(next);
  if (ft)
    futex_wakes(ft, prev);
  return 0;
}

/* Whether the current task can be releasing a futex: inside a call that
 * wakes futex waiters (its saved call number). Not so for a wakeup from a
 * timeout's timer or another interrupt (the task it interrupted is no
 * holder: in user mode its orig_ax is the interrupt's, an idle CPU's task
 * is the idle task), nor for a signal's sender. An interrupt that finds a
 * task inside a futex call of its own is taken for that task's release;
 * offcpu's own threads, the most frequent such callers here, are told
 * apart (self_tgid). */
static __always_inline bool in_futex_release(void) {
  struct task_struct *t = bpf_get_current_task_btf();
  long nr = ((struct pt_regs *)bpf_task_pt_regs(t))->orig_ax;
  return t->pid && t->tgid != self_tgid &&
         (nr == OFFCPU_NR_FUTEX || nr == OFFCPU_NR_FUTEX_WAKE ||
          nr == OFFCPU_NR_FUTEX_REQUEUE || nr == OFFCPU_NR_EXIT ||
          nr == OFFCPU_NR_EXIT_GROUP);
}

/* A sleeping waiter being woken: the first wakeup of its wait names the
 * holder (the thread in FUTEX_WAKE or FUTEX_UNLOCK_PI releasing it). With
 * --wakers, with its stacks, which tell a timer or an interrupt apart;
 * without, a wakeup from outside a releasing call names none. */
SEC("tp_btf/sched_waking")
int BPF_PROG(futex_waking, struct task_struct *p) {
  struct futex_task *ft = futex_wait_of(p);
  if (!ft || ft->w.key.holder)
    return 0;
  if (want_wakers)
    ft->w.key.holder = take_waker(ctx, NULL, false, true, 1);
  else
    ft->w.key.holder =
        in_futex_release() ? futex_light_holder(ft) : OFFCPU_WAKER_UNSEEN;
  return 0;
}

/* Run by user space at each drain: every thread's pending waits into the
 * map; and every wait still asleep, which the stop (after the hooks are
 * detached) charges up to the end. A retried pass finds nothing pending. */
SEC("iter/task")
int futex_open(struct bpf_iter__task *ctx) {
  struct task_struct *task = ctx->task;
  if (!task)
    return 0;
  struct futex_task *ft = bpf_task_storage_get(&futex_tasks, task, 0, 0);
  if (!ft)
    return 0;
  futex_flush(ft);
  if (ft->w.since_ns)
    bpf_seq_write(ctx->meta->seq, &ft->w, sizeof(ft->w));
  return 0;
}

#endif /* OFFCPU_FUTEX_BPF_H */
