/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The sched_waking hook (--wakers, --runqueue): when and by whom a wait
 * was woken. */
#ifndef OFFCPU_WAKING_BPF_H
#define OFFCPU_WAKING_BPF_H

#include "offcpu/shared.h"
#include "settings.bpf.h"
#include "stack_store.bpf.h"
#include "task_filter.bpf.h"
#include "timeline.bpf.h"
#include "wait_state.bpf.h"
/* Wakers' kernel stacks walked with ORC, as the waits'. */
#ifndef OFFCPU_WAKER_ORC
#define OFFCPU_WAKER_ORC
#endif
#include "waker.bpf.h"

/* --wakers: each waker's stack memos (see take_waker). Task storage:
 * memory only for threads that wake a traced wait. */
struct {
  __uint(type, BPF_MAP_TYPE_TASK_STORAGE);
  __uint(map_flags, BPF_F_NO_PREALLOC);
  __type(key, int);
  __type(value, struct waker_memo_set);
} waker_memos SEC(".maps");

static __always_inline struct waker_memo_set *
current_waker_memos(bool trusted) {
  if (!trusted || !use_task_storage || !reuse_stacks)
    return NULL;
  return bpf_task_storage_get(&waker_memos, bpf_get_current_task_btf(), 0,
                              BPF_LOCAL_STORAGE_GET_F_CREATE);
}

/* Words above the program's caller's frame searched for a timer
 * function's return address: the tracepoint's frames and try_to_wake_up's
 * lie between (about 300 bytes on 6.x). */
#define TIMER_SCAN_WORDS 64
#define TIMER_SCAN_BYTES (TIMER_SCAN_WORDS * 8)

/* Whether one of the first n words at w is a return address into a timer
 * function (ktext.timer_fn_*); a function's start (a pointer to it) is
 * not. */
static __always_inline bool has_timer_return(const __u64 *w, __u32 n) {
  const __u64 h0 = ktext.timer_fn_start[0], h1 = ktext.timer_fn_end[0];
  const __u64 c0 = ktext.timer_fn_start[1], c1 = ktext.timer_fn_end[1];
  for (__u32 i = 0; i < TIMER_SCAN_WORDS; i++) {
    if (i >= n)
      break;
    __u64 v = w[i];
    if ((v > h0 && v < h1) || (v > c0 && v < c1))
      return true;
  }
  return false;
}

/* For the timeline alone: a wakeup made in an interrupt gets a mark,
 * OFFCPU_WAKER_TIMER or _IRQ, and no stacks; 0 when the current task made
 * it (which includes a softirq it ran on its own stack, at a
 * local_bh_enable). Told apart by where this runs: x86-64 runs interrupt
 * handlers, and the softirqs after them, on the CPU's interrupt stack,
 * never on the task's. A timer's, by a return address into a timer
 * function (ktext.timer_fn_*) among the words above the tracepoint's
 * frame, which hold the callers of try_to_wake_up: a read and a scan, where
 * a kernel stack walk costs as much as the rest of the hook. Only the words
 * read are searched (none left in the buffer by an earlier use).
 * Except from user mode: an interrupt taken there runs on the task's stack.
 * *task is set where the current task surely made the wakeup: a user
 * task on its stack in a system call or an exception with an error code
 * (orig_ax >= 0; interrupts and the other exceptions save a negative one);
 * else 0 is returned unsure, and the waker's kernel stack walk tells. */
static __always_inline __u64 interrupt_waker(void *ctx, bool *task) {
  if (!kwalk_orc || !ktext.text_start)
    return 0; /* no ORC (and no live frame): the stack walk says */
  struct task_struct *t = bpf_get_current_task_btf();
  struct pt_regs *top = (struct pt_regs *)bpf_task_pt_regs(t);
  __u64 lo = (__u64)BPF_CORE_READ(t, stack);
  __u64 hi = (__u64)top + bpf_core_type_size(struct pt_regs);
  __u64 at = address_of(ctx);
  if (!top || (at >= lo && at < hi)) {
    /* The idle task and kernel threads never entered from user mode: the
     * registers at their stack's top are not a system call's (a timer's
     * wakeup was named swapper/1, -U --wakers). */
    *task = top && t->pid != 0 && !(t->flags & PF_KTHREAD) &&
            (long)BPF_CORE_READ(top, orig_ax) >= 0;
    return 0;
  }
  struct offcpu_stack *s = scratch_stack(SCRATCH_HOOK);
  if (!s)
    return OFFCPU_WAKER_IRQ;
  /* The words up to the end of this frame's page first, which is mapped:
   * a read past the interrupt stack's top faults into its guard page, and
   * a fault costs more than the rest of the hook. A shallow interrupt (from
   * user mode or idle) ends in that page, whose last word then holds the
   * stack pointer the interrupt left (x86-64's call_on_irqstack), one in
   * the task's stack: only otherwise is the next page read. */
  __u64 first = 4096 - (at & 4095);
  if (first > TIMER_SCAN_BYTES)
    first = TIMER_SCAN_BYTES;
  same_register(first); /* the size the verifier saw bounded */
  if (first > TIMER_SCAN_BYTES)
    return OFFCPU_WAKER_IRQ;
  if (!bpf_probe_read_kernel(s->ips, first, (void *)at) &&
      has_timer_return(s->ips, first / sizeof(__u64)))
    return OFFCPU_WAKER_TIMER;
  __u64 last = s->ips[(first / sizeof(__u64) - 1) & (TIMER_SCAN_WORDS - 1)];
  if (first < TIMER_SCAN_BYTES && last >= lo && last < hi)
    return OFFCPU_WAKER_IRQ; /* the interrupt stack's top: nothing above */
  __u64 rest = TIMER_SCAN_BYTES - first;
  same_register(rest);
  if (rest == 0 || rest > TIMER_SCAN_BYTES)
    return OFFCPU_WAKER_IRQ;
  if (!bpf_probe_read_kernel(s->ips, rest, (void *)(at + first)) &&
      has_timer_return(s->ips, rest / sizeof(__u64)))
    return OFFCPU_WAKER_TIMER;
  return OFFCPU_WAKER_IRQ;
}

/* A task being woken: if one of our waits is open, note when (the start of
 * its run-queue time) and, with --wakers, who woke it. The first wakeup of
 * a wait counts; a task already runnable is not woken again. */
static __always_inline void on_waking(void *ctx, struct task_struct *p,
                                      bool trusted) {
  __u32 pid = TASK_FIELD(trusted, p, pid);
  if (pid == 0)
    return;
  struct offcpu_start *rec = find_start(p, pid, trusted);
  if (!rec || !rec->start_ns || rec->wake_ns)
    return;
  /* The time serves --runqueue and -m/-M. With neither set (-m at its
   * default of 1 us), none is read (bpf_ktime_get_ns costs up to 85 ns
   * here): a wait woken within 1 us is dropped at its switch-in anyway
   * unless it queued long enough to pass, and then its waker is right. */
  bool timed = split_runqueue || min_block_ns > 1000 || max_block_ns != ~0ULL ||
               want_events;
  __u64 now = timed ? bpf_ktime_get_ns() : 1; /* 1: woken, time not read */
  rec->wake_ns = now;
  if (!want_wakers)
    return;
  if (timed) {
    __u64 waited = now > rec->start_ns ? now - rec->start_ns : 0;
    if (waited > max_block_ns)
      return; /* too long to be counted: no waker needed */
    /* For the timeline alone, only waits that will be events need one:
     * a waker's stacks are most of this hook's cost. */
    __u64 least = key_wakers ? min_block_ns : events_min_ns;
    if (waited < least) {
      rec->waker = OFFCPU_WAKER_TOO_SHORT;
      return;
    }
  }
  /* For the timeline alone, or with no kernel stacks shown (-U): an
   * interrupt is told apart without walking a stack, where it can be. */
  bool task = false; /* the current task surely made the wakeup */
  if (!key_wakers || !want_kernel_stacks) {
    /* No hop either: the current task is whichever the interrupt hit. */
    __u64 mark = interrupt_waker(ctx, &task);
    if (mark) {
      rec->waker = mark;
      return;
    }
  }
  /* With -U the kernel stack is walked only where it tells an interrupt
   * apart (its frames are not shown). */
  rec->waker = take_waker(ctx, current_waker_memos(trusted), trusted,
                          want_kernel_stacks || !task, 0);
  copy_hop(task_of(rec, trusted));
}

#endif /* OFFCPU_WAKING_BPF_H */
