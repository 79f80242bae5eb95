/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* User-space lock waits (offcpu lock --futex): the time a thread spends
 * asleep inside a futex system call that waits, by the futex word's
 * address, with the thread whose wakeup ended the sleep (the holder that
 * called FUTEX_WAKE or FUTEX_UNLOCK_PI).
 *
 * The system call's entry and exit mark the wait; sched_switch measures
 * the part of it spent asleep (from a switch-out in a sleeping state to the
 * next switch-in), so the time is off-CPU time: not the call's own work,
 * not a PI lock's optimistic spinning on its owner, not the time it ran
 * preempted. A call that never slept (the word had changed: EAGAIN) is no
 * wait. The user stack is walked at the first sleep, when the wait is known
 * to be one.
 *
 * Entry and exit come from the per-system-call tracepoints
 * (syscalls:sys_enter_futex...), which run only for futex calls; the
 * raw_syscalls ones would run a program on every system call of the
 * machine to keep one in a few hundred (futex_waitv: 5.16+, futex_wait: 6.7+;
 * attached where present). They need tracefs (CONFIG_FTRACE_SYSCALLS,
 * every distribution kernel). */
#ifndef OFFCPU_FUTEX_BPF_H
#define OFFCPU_FUTEX_BPF_H

#include "announce.bpf.h"
#include "offcpu/shared.h"
#include "settings.bpf.h"
#include "stack_store.bpf.h"
#include "task_filter.bpf.h"
#include "user_unwind.bpf.h"
#include "waker.bpf.h"

/* Waits in progress by thread id: bounded (a thread that finds it full is
 * not traced, counted as OFFCPU_LOST_START_STORE), and readable from user
 * space at stop, where the sleeps still open are charged. */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 16384);
  __type(key, __u32);
  __type(value, struct offcpu_futex_start);
} futex_starts SEC(".maps");

/* Totals by (process, thread, futex word, user stack, holder): bounded by
 * --max-entries; a wait that finds it full is counted as
 * OFFCPU_LOST_AGG_MAP_FULL (reported with the option that fixes it). */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 1); /* sized by the loader */
  __type(key, struct rwsem_key);
  __type(value, struct rwsem_value);
} futex_waits SEC(".maps");

/* Whether thread `pid` is in a futex wait of `kind` (a PI futex's rt_mutex
 * contention is that wait, already counted as futex:pi). */
static __always_inline bool in_futex_wait(__u32 pid, __u32 kind) {
  struct offcpu_futex_start *w = bpf_map_lookup_elem(&futex_starts, &pid);
  return w && w->kind == kind;
}

/* The futex word a futex_waitv call was woken on: its return value is the
 * index of that entry in the array (struct futex_waitv: val, uaddr, flags,
 * reserved; uaddr at byte 8). A timeout or a signal: the first entry. */
static __always_inline __u64 waitv_word(__u64 array, long ret) {
  __u64 word = 0;
  __u64 at = ret > 0 && ret < 128 ? (__u64)ret : 0;
  bpf_probe_read_user(&word, sizeof(word), (void *)(array + at * 32 + 8));
  return word;
}

static __always_inline void futex_enter(__u64 uaddr, __u32 kind, __u64 waitv) {
  if (kind >= OFFCPU_LOCK_KINDS || !(lock_kinds & (1u << kind)))
    return;
  struct task_struct *task = bpf_get_current_task_btf();
  __u64 id = bpf_get_current_pid_tgid();
  __u32 pid = (__u32)id, tgid = id >> 32;
  if (!passes_task_filters(task, pid, tgid, true))
    return;
  struct offcpu_futex_start w = {};
  w.uaddr = waitv ? waitv_word(waitv, 0) : uaddr;
  w.waitv = waitv;
  w.tgid = tgid;
  w.kind = kind;
  bpf_get_current_comm(&w.comm, sizeof(w.comm));
  /* BPF_ANY: a call left without its exit seen (the thread was killed
   * in it) is replaced by the next. */
  if (bpf_map_update_elem(&futex_starts, &pid, &w, BPF_ANY))
    count_loss(OFFCPU_LOST_START_STORE);
}

static __always_inline void futex_charge(struct rwsem_key *key, __u64 ns) {
  if (ns < min_wait_ns || ns > max_block_ns)
    return;
  struct rwsem_value zero = {};
  struct rwsem_value *val =
      lookup_or_insert(&futex_waits, key, &zero, OFFCPU_LOST_AGG_MAP_FULL);
  if (!val)
    return;
  __sync_fetch_and_add(&val->total_ns, ns);
  __sync_fetch_and_add(&val->count, 1);
  if (ns > val->max_ns) /* racy by design: a max, not a sum */
    val->max_ns = ns;
  __sync_fetch_and_add(&val->hist[offcpu_hist_slot(ns)], 1);
}

static __always_inline void futex_exit(long ret) {
  __u32 pid = (__u32)bpf_get_current_pid_tgid();
  struct offcpu_futex_start *w = bpf_map_lookup_elem(&futex_starts, &pid);
  if (!w)
    return;
  __u64 asleep = w->asleep_ns;
  if (asleep) {
    __u64 word = w->waitv ? waitv_word(w->waitv, ret) : w->uaddr;
    struct rwsem_key key = offcpu_futex_key_of(w, pid, word);
    futex_charge(&key, asleep);
  }
  bpf_map_delete_elem(&futex_starts, &pid);
}

/* The holder without its stacks (no --wakers): who it was, stored once
 * per distinct thread in the wakers map like a full waker. */
static __always_inline __u64 futex_light_holder(void) {
  struct offcpu_waker w = {};
  __u64 id = bpf_get_current_pid_tgid();
  w.pid = (__u32)id;
  w.tgid = id >> 32;
  w.kind = OFFCPU_WAKER_TASK;
  bpf_get_current_comm(&w.comm, sizeof(w.comm));
  __u64 comm[2];
  __builtin_memcpy(comm, w.comm, sizeof(comm));
  __u64 h = mix64(((__u64)w.pid << 32 | w.tgid) ^ 0x686f6c646572ULL);
  h = mix64(h ^ comm[0]) + 1;
  h = mix64(h ^ comm[1]);
  if (h < OFFCPU_WAKER_FIRST_ID)
    h += OFFCPU_WAKER_FIRST_ID;
  if (!bpf_map_lookup_elem(&wakers, &h)) {
    long err = bpf_map_update_elem(&wakers, &h, &w, BPF_NOEXIST);
    if (err && err != -OFFCPU_EEXIST) {
      count_loss(OFFCPU_LOST_WAKER_STORE);
      return OFFCPU_WAKER_LOST;
    }
  }
  return h;
}

/* ---- system call entry and exit ---- */

SEC("tracepoint/syscalls/sys_enter_futex")
int futex_sys_enter(struct trace_event_raw_sys_enter *ctx) {
  futex_enter(ctx->args[0], offcpu_futex_kind_of(ctx->args[1]), 0);
  return 0;
}

SEC("tracepoint/syscalls/sys_exit_futex")
int futex_sys_exit(struct trace_event_raw_sys_exit *ctx) {
  futex_exit(ctx->ret);
  return 0;
}

SEC("tracepoint/syscalls/sys_enter_futex_waitv")
int futex_waitv_enter(struct trace_event_raw_sys_enter *ctx) {
  futex_enter(0, OFFCPU_LOCK_FUTEX, ctx->args[0]);
  return 0;
}

SEC("tracepoint/syscalls/sys_exit_futex_waitv")
int futex_waitv_exit(struct trace_event_raw_sys_exit *ctx) {
  futex_exit(ctx->ret);
  return 0;
}

/* futex_wait(2), 6.7+: one word, the futex2 flags. */
SEC("tracepoint/syscalls/sys_enter_futex_wait")
int futex2_wait_enter(struct trace_event_raw_sys_enter *ctx) {
  futex_enter(ctx->args[0], OFFCPU_LOCK_FUTEX, 0);
  return 0;
}

SEC("tracepoint/syscalls/sys_exit_futex_wait")
int futex2_wait_exit(struct trace_event_raw_sys_exit *ctx) {
  futex_exit(ctx->ret);
  return 0;
}

/* ---- the sleeps inside ---- */

/* A waiter going to sleep: the sleep's start, and at the first one its
 * user stack (the thread is still current, its stack frozen in the call). */
static __always_inline void futex_sleeps(void *ctx, struct task_struct *prev) {
  __u32 pid = prev->pid;
  struct offcpu_futex_start *w = bpf_map_lookup_elem(&futex_starts, &pid);
  if (!w || w->since_ns)
    return;
  /* Preempted (runnable): not a sleep. The state field, not sched_switch's
   * prev_state argument (5.18+): one program for every kernel; a wakeup
   * racing with the switch shows as TASK_WAKING, still not 0. */
  unsigned int state =
      bpf_core_field_exists(prev->__state) ? prev->__state : task_state(prev);
  if (!state)
    return;
  w->since_ns = bpf_ktime_get_ns();
  if (!want_user_stacks || w->user_stack)
    return;
  __u32 partial = 0; /* not walked again later */
  w->user_stack = user_fp_walk ? walk_user_stack(prev, false, &partial)
                               : take_current_stack(ctx, BPF_F_USER_STACK);
  announce(prev, w->tgid, w->user_stack);
}

SEC("tp_btf/sched_switch")
int BPF_PROG(futex_switch, bool preempt, struct task_struct *prev,
             struct task_struct *next) {
  /* The clock is read only for a waiter (45-85 ns a read here). */
  futex_sleeps(ctx, prev);
  __u32 pid = next->pid;
  struct offcpu_futex_start *w = bpf_map_lookup_elem(&futex_starts, &pid);
  if (w && w->since_ns) {
    __u64 now = bpf_ktime_get_ns();
    w->asleep_ns += now > w->since_ns ? now - w->since_ns : 0;
    w->since_ns = 0;
  }
  return 0;
}

/* A sleeping waiter being woken: the first wakeup of its wait names the
 * holder (the thread in FUTEX_WAKE or FUTEX_UNLOCK_PI releasing it; a
 * timer or signal otherwise). With --wakers, with its stacks. */
SEC("tp_btf/sched_waking")
int BPF_PROG(futex_waking, struct task_struct *p) {
  __u32 pid = p->pid;
  struct offcpu_futex_start *w = bpf_map_lookup_elem(&futex_starts, &pid);
  if (!w || !w->since_ns || w->holder)
    return 0;
  w->holder = want_wakers ? take_waker(ctx, NULL, false) : futex_light_holder();
  return 0;
}

#endif /* OFFCPU_FUTEX_BPF_H */
