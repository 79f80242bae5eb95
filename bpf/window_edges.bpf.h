/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The task iterators at the window's edges: waits in progress at start,
 * their user stacks, and the waits still open at stop. */
#ifndef OFFCPU_WINDOW_EDGES_BPF_H
#define OFFCPU_WINDOW_EDGES_BPF_H

#include "announce.bpf.h"
#include "charge.bpf.h"
#include "end_wait.bpf.h"
#include "kernel_unwind.bpf.h"
#include "offcpu/shared.h"
#include "sched_clock.bpf.h"
#include "settings.bpf.h"
#include "stack_store.bpf.h"
#include "task_filter.bpf.h"
#include "user_unwind.bpf.h"
#include "wait_state.bpf.h"

/* Waits already in progress when tracing starts, in two passes. Without
 * them a thread blocked for the whole window (the one the user most needs
 * to see) would never show up.
 *
 * 1. offcpu_seed_open (right after attach, not sleepable, fast): every task
 *    off CPU without a record gets one, starting when the window opened.
 *    No record and off CPU means off CPU since before the window opened: had
 *    it run since, its switch-out would have left a record.
 * 2. offcpu_seed_stacks (sleepable, 5.18+): fills in the user stacks of
 *    those records, walking each task's frame pointers in its own memory.
 *    That can fault and sleep, so it is kept out of pass 1: a task waking
 *    during a slow pass 1 would lose the start of its wait. One waking
 *    between the passes keeps its time and shows [Missed User Stack],
 *    unless its stack is left for its switch-in (edges_later: pass 2's
 *    program is verified after the attach, tens of ms later; the switch-in
 *    walks the frozen stack through the page tables). */
#define OFFCPU_START_SEEDED 0x100u /* offcpu_start.flags only */

/* Waits still open at stop that no pass charged: the flush failed to load
 * after the attach (edges_later). For the warning. */
__u64 edges_open_lost = 0;
/* Set by user space: offcpu_seed_open runs as that stop pass. */
__u32 release_pass = 0;

/* At stop, in place of the flush when it failed to load after the attach:
 * what `task` holds is added (as the flush would), a wait still open is
 * counted. */
static __always_inline void release_without_flush(struct task_struct *task,
                                                  __u32 pid) {
  struct offcpu_start *rec = find_start(task, pid, true);
  if (!rec)
    return;
  struct offcpu_task *ts = task_of(rec, true);
  if (hold_waits && ts)
    charge(NULL, 0, 0, 0, &ts->held);
  if (rec->start_ns)
    __sync_fetch_and_add(&edges_open_lost, 1);
}

SEC("iter/task")
int offcpu_seed_open(struct bpf_iter__task *ctx) {
  struct task_struct *task = ctx->task;
  if (!task || MAPS_ONLY)
    return 0;
  __u32 pid = task->pid;
  __u32 tgid = task->tgid;
  if (edges_later && release_pass) {
    if (pid)
      release_without_flush(task, pid);
    return 0;
  }
  if (task->on_cpu || !passes_task_filters(task, pid, tgid, true))
    return 0;
  unsigned int state = task_state(task);
  if ((state & TASK_DEAD) || !passes_state_filter(state))
    return 0;
  struct offcpu_start *old = find_start(task, pid, true);
  if (old && old->start_ns) /* switched out after attach: already open */
    return 0;

  __u64 start = window_start_ns ? window_start_ns : bpf_ktime_get_ns();
  __u64 born = task->start_time;
  if (born > start)
    start = born;
  struct offcpu_start rec = {
      .start_ns = start,
      .cgroup = key_cgroup ? task_cgroup_id(task) : 0,
      .pcount = task_pcount(task, true),
      .tgid = tgid,
      .state = state,
      .flags = OFFCPU_START_SEEDED,
  };
  if (want_user_stacks && !(task->flags & PF_KTHREAD) &&
      TASK_FIELDS(task)->mm) {
    rec.user_stack = OFFCPU_STACK_MISSED; /* until pass 2 walks it */
    if (edges_later) {
      rec.flags |= OFFCPU_USTACK_DEFERRED | OFFCPU_USTACK_DEFERRED_ANY;
      uw_count(uw_stats_of(SCRATCH_ITER), UW_STAT_DEFERRED);
    }
  }
  if (want_kernel_stacks && !kstack_at_switch_in)
    rec.kernel_stack =
        take_frozen_kernel_stack(task, &rec.flags, SCRATCH_ITER, NULL);
  if (!save_start(task, pid, &rec, true))
    count_loss(OFFCPU_LOST_START_STORE);
  return 0;
}

/* Rewalks left for the next pass (mm_changing); user space reads and
 * resets it after each pass. */
__u64 rewalks_deferred = 0;

/* Whether task's memory map is being changed: its mmap lock held for
 * writing or waited for (the waiters bit: readers wait behind a writer).
 * rw_semaphore's count: bit 0 writer, bit 1 waiters. */
static __always_inline bool mm_changing(struct task_struct *task) {
  struct mm_struct *mm = TASK_FIELDS(task)->mm;
  if (!mm || !bpf_core_field_exists(mm->mmap_lock)) /* mmap_sem before 5.8 */
    return false;
  long count = BPF_CORE_READ(mm, mmap_lock.count.counter);
  return count & 3;
}

SEC("iter.s/task")
int offcpu_seed_stacks(struct bpf_iter__task *ctx) {
  struct task_struct *task = ctx->task;
  if (!task || MAPS_ONLY || edges_later)
    return 0;
  __u32 pid = task->pid;
  struct offcpu_start *rec = find_start(task, pid, true);
  if (!rec || !rec->start_ns)
    return 0;
  bool seeded = (rec->flags & OFFCPU_START_SEEDED) &&
                rec->user_stack == OFFCPU_STACK_MISSED;
  /* At stop, before the flush: stacks left for a switch-in that will not
   * come in the window (the switch hook takes them when it does). */
  bool deferred = (rec->flags & OFFCPU_USTACK_DEFERRED) && stop_ns;
  if (!seeded && !deferred && !(rec->flags & OFFCPU_USTACK_PARTIAL))
    return 0;
  /* Also run again once tables are installed: stacks walked without them
   * are taken again while their threads still sleep on them. Not before
   * its process has tables, unless its files' tables can be found from its
   * mappings (bpf_find_vma, which works here for every frame): else that
   * walk would be partial again (this pass runs at every install, and a
   * storm of new processes has many). */
  if (!seeded && !deferred && uw_tables && !uw_find_vma &&
      !uw_has_tables(task, rec->tgid))
    return 0;
  /* Reading the stack of a process whose memory map is changing would
   * sleep until the change is done (an exit, exec or fork of the process
   * holds its mmap lock for writing, and readers queue behind a writer):
   * on a busy host the holder, often at nice 0, may wait tens of ms for a
   * CPU while this pass waits on it and the stacks of every other partial
   * thread wait for this pass. Left for the next pass, soon. */
  if (!seeded && !deferred && mm_changing(task)) {
    __sync_fetch_and_add(&rewalks_deferred, 1);
    return 0;
  }
  __u64 start = rec->start_ns, pcount = task_pcount(task, true);
  __u32 flags = 0;
  __u64 stack = walk_user_stack(task, true, &flags);
  /* The task may have woken meanwhile (it ran: a new record, or a closed
   * one); then the walk may be of a moving stack and is dropped. Checked
   * right before the stores, the announcement after them. */
  if (rec->start_ns != start || task_pcount(task, true) != pcount)
    return 0;
  rec->user_stack = stack;
  /* A seeded wait's stack left for its switch-in (edges_later) stays left
   * for it if this walk could not be stored; at stop none comes. */
  if ((rec->flags & OFFCPU_USTACK_DEFERRED) &&
      (deferred || stack_stored(stack))) {
    /* The stack first: the switch hook reads the flag, then the stack (x86
     * keeps stores in order; the barrier keeps the compiler from moving
     * them). */
    asm volatile("" ::: "memory");
    rec->flags &= ~OFFCPU_USTACK_DEFERRED;
    uw_count(uw_stats_of(SCRATCH_ITER), UW_STAT_DEFER_TAKEN);
  }
  announce(task, rec->tgid, stack);
  if (!(flags & OFFCPU_USTACK_PARTIAL) &&
      (rec->flags & OFFCPU_USTACK_PARTIAL)) {
    rec->flags &= ~OFFCPU_USTACK_PARTIAL;
    uw_count(uw_stats_of(SCRATCH_ITER), UW_STAT_REWALKED);
  } else {
    rec->flags |= flags;
  }
  return 0;
}

/* Runs once at stop: charges every wait still open up to stop_ns. With
 * kernel stacks taken at switch-in it runs before the switch hook is
 * detached (see end_wait), otherwise after. */
SEC("iter/task")
int offcpu_flush(struct bpf_iter__task *ctx) {
  struct task_struct *task = ctx->task;
  if (!task || !stop_ns || MAPS_ONLY || edges_later)
    return 0;
  __u32 pid = task->pid;
  if (pid == 0)
    return 0;
  struct offcpu_start *rec = find_start(task, pid, true);
  if (!rec)
    return 0;
  /* What the task holds (see charge), which the switch hook, after the
   * window, may be releasing at the same time: whoever takes the count adds
   * the waits. */
  struct offcpu_task *ts = task_of(rec, true);
  if (hold_waits && ts)
    charge(NULL, 0, 0, 0, &ts->held);
  if (!rec->start_ns)
    return 0;
  /* Switched in unseen since the wait began, and on CPU ever since (its
   * switch-out would have ended the wait): the wait ended at its arrival.
   * This CPU's run-queue clock stands in for the task's (one clock, TSC
   * based; up to a tick stale here, unlike in the hook). */
  __u64 pc = task_pcount(task, true);
  if (pc && pc != rec->pcount)
    end_unseen_wait(
        task, pid, rec, bpf_ktime_get_ns(),
        rq_clock_of(bpf_get_current_task_btf()), stop_ns,
        (struct wait_end_mode){.trusted = true, .slot = SCRATCH_ITER});
  else {
    if (want_wakers && !rec->wake_ns)
      rec->waker = OFFCPU_WAKER_STILL_WAITING;
    end_wait(task, pid, rec, stop_ns,
             (struct wait_end_mode){
                 .trusted = true, .frozen = true, .slot = SCRATCH_ITER});
  }
  return 0;
}

#endif /* OFFCPU_WINDOW_EDGES_BPF_H */
