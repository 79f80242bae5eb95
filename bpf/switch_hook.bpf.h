/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The sched_switch hook: ends the wait of the task switched in, opens one
 * for the task switched out. */
#ifndef OFFCPU_SWITCH_HOOK_BPF_H
#define OFFCPU_SWITCH_HOOK_BPF_H

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

/* With -m above its default most waits end shorter (a pipe's, a lock's
 * hand-off) and are dropped at their switch-in: a thread's user stack is
 * then left for the switch-in without even looking for its memo, which the
 * switch-in's walk does for the waits that pass (through the page table).
 * Only for a thread walked whole before (a memo kept): the first walk of a
 * new thread stays at switch-out, where a walk without its process's
 * tables can be finished by the rewalk while it blocks. */
static __always_inline bool uw_defer_blind(struct uw_memo_set *ms) {
  if (!uw_defer || min_block_ns <= 1000 || !ms)
    return false;
  __u32 nr = 0;
  for (__u32 i = 0; i < UW_MEMO_WAYS; i++)
    nr |= ms->way[i].nr;
  return nr != 0;
}

/* A dying thread's last switch-out (--children): if it was its process's
 * last thread (signal->live dropped to 0 in do_exit), the process leaves
 * the traced set, so that a new process given its PID later (PIDs are
 * reused) is not traced for it. Here rather than in a hook of its own on
 * sched_process_exit: the switch hook already tells a dying task apart, and
 * the light object has no room for another program. A process reaped
 * before its last switch-out (its parent ignores SIGCHLD) frees its PID a
 * few microseconds early: reusing it first takes the whole PID space. */
static __always_inline void leave_traced_set(struct task_struct *t,
                                             __u32 tgid) {
  if (BPF_CORE_READ(t, signal, live.counter) == 0)
    bpf_map_delete_elem(&filter_tgids, &tgid);
}

/* The user stack of `prev`, being switched out, for its new wait `rec`:
 * walked now, or left for its switch-in (uw_can_defer), taken then only if
 * the wait passes -m/-M. `ts`: its storage (NULL: a hash map's record). */
static __always_inline void
take_switch_out_user_stack(void *ctx, struct task_struct *prev, __u32 tgid,
                           struct offcpu_task *ts, struct offcpu_start *rec,
                           bool trusted) {
  bool reused = false;
  struct uw_memo_set *memo = ts ? &ts->memo : NULL;
  __u32 way = 0;
  bool blind = trusted && user_fp_walk && uw_defer_blind(memo);
  if (blind || (trusted && user_fp_walk && uw_can_defer(prev, memo, &way))) {
    /* Taken at switch-in if the wait passes -m/-M. */
    rec->user_stack = OFFCPU_STACK_MISSED;
    rec->flags |= OFFCPU_USTACK_DEFERRED |
                  (blind ? OFFCPU_USTACK_DEFERRED_ANY
                         : ((way & 1) ? OFFCPU_USTACK_DEFERRED_WAY1 : 0) |
                               ((way & 2) ? OFFCPU_USTACK_DEFERRED_WAY2 : 0));
    uw_count(uw_stats_of(SCRATCH_HOOK), UW_STAT_DEFERRED);
    reused = true; /* announced when its memo was walked */
  } else if (trusted && user_fp_walk) {
    /* Preempted (still running): counted apart (UW_STAT_CAUSE_PREEMPTED). */
    if (!rec->state)
      rec->flags |= OFFCPU_USTACK_PREEMPTED;
    rec->user_stack =
        walk_user_stack_hook(bpf_get_current_task_btf(), &rec->flags, memo,
                             &reused, false, SCRATCH_HOOK);
  } else
    rec->user_stack = take_current_stack(ctx, BPF_F_USER_STACK);
  /* A reused stack was announced when it was walked. */
  if (!reused && !announce(prev, tgid, rec->user_stack))
    uw_memo_forget(memo);
}

/* The values, as the verifier sees them, without what the paths to here
 * taught it (see on_switch); the values themselves are unchanged. */
static __always_inline void forget_bounds(__u64 *now, __u64 *clock, __u64 *stop,
                                          bool *open) {
  __u32 zero = 0;
  struct reuse_span *buf = bpf_map_lookup_elem(&reuse_span_buf, &zero);
  if (!buf)
    return;
  __u64 *w = (__u64 *)buf->b;
  w[0] = *now;
  w[1] = *clock;
  w[2] = *stop;
  w[3] = *open;
  *now = load_u64(&w[0]);
  *clock = load_u64(&w[1]);
  *stop = load_u64(&w[2]);
  *open = load_u64(&w[3]) & 1;
}

static __always_inline void on_switch(void *ctx, struct task_struct *prev,
                                      struct task_struct *next,
                                      unsigned int prev_state, bool trusted) {
  __u64 clock;
  __u64 now = switch_time(prev, trusted, &clock);
  __u64 stop = stop_ns;
  /* Near the window's end, ktime itself: the run queue's clock may lag by
   * up to a tick (see switch_time), and the flush relies on every hook
   * that saw the window open having begun before its end. */
  if (stop && now + SWITCH_CLOCK_NEAR_STOP_NS > stop)
    now = bpf_ktime_get_ns();
  /* Before the window's end: waits may be held (see charge). The flush at
   * stop runs after every hook that read an earlier time has returned. */
  bool open = !stop || now < stop;

  /* The task switched in: close its wait, if one is open. */
  __u32 next_pid = TASK_FIELD(trusted, next, pid);
  if (next_pid != 0) {
    struct offcpu_start *rec = find_start(next, next_pid, trusted);
    if (rec && rec->start_ns)
      end_wait(next, next_pid, rec, open ? now : stop,
               (struct wait_end_mode){.trusted = trusted,
                                      .frozen = true,
                                      .open = open,
                                      .slot = SCRATCH_HOOK});
  }

  /* For the verifier: each way through the switch-in leaves its own
   * bounds on these (a wait too short, one charged, one held...), and the
   * switch-out below was checked once per way: 50,000 instructions, most of
   * the start-up. Read back from per-CPU memory, they are the same unknown
   * numbers on every way, and it is checked about once (28,000 in all). A
   * per-CPU array lookup is inlined: a few ns. */
  forget_bounds(&now, &clock, &stop, &open);
  /* The task switched out. A dying task's last switch-out (it has no
   * switch-in to end a wait): what it holds is added now, before its
   * storage goes with it. Whatever the filters say now: they may have
   * changed since it held (a process renamed, -n). */
  bool dying = prev_state & TASK_DEAD;
  if (dying && trusted && hold_waits) {
    struct offcpu_task *d = bpf_task_storage_get(&starts_task, prev, 0, 0);
    if (d)
      charge(NULL, 0, 0, 0, &d->held);
  }
  /* A wait of its still open was ended by a switch-in the hook did not see
   * (above): end it first. */
  __u32 pid = TASK_FIELD(trusted, prev, pid);
  __u32 tgid = TASK_FIELD(trusted, prev, tgid);
  bool traced = passes_task_filters(prev, pid, tgid, trusted);
  if (follow_children && dying)
    leave_traced_set(prev, tgid);
  if (!traced)
    return;
  /* With task storage, one lookup serves the open wait, the stack memos
   * and the new record. */
  struct offcpu_task *ts = NULL;
  struct offcpu_start *prev_open;
  if (trusted && use_task_storage) {
    /* Without storage (the kernel could not create it now), the new wait
     * is spilled to the hash map (see spill_start). */
    ts = bpf_task_storage_get(&starts_task, prev, 0,
                              BPF_LOCAL_STORAGE_GET_F_CREATE);
    prev_open = ts && ts->start.start_ns ? &ts->start : spilled_start(pid);
  } else {
    prev_open = find_start(prev, pid, trusted);
  }
  /* Its mode's `open & !dying`, not `&&`: a branch there gave the verifier
   * two ways through the whole end of the wait (8,600 instructions of the
   * hook's 54,000). */
  if (prev_open && prev_open->start_ns)
    end_unseen_wait(
        prev, pid, prev_open, now, clock ? clock : rq_clock_of(prev), stop,
        (struct wait_end_mode){
            .trusted = trusted, .open = open & !dying, .slot = SCRATCH_HOOK});

  /* Open a wait if it passes the filters. */
  if (dying || !open || !passes_state_filter(prev_state))
    return;

  /* Built per CPU (wait_scratch), not on the BPF stack. */
  struct wait_scratch *sc = wait_scratch_of(SCRATCH_HOOK);
  if (!sc)
    return; /* never: an array's index in range */
  struct offcpu_start *rec = &sc->rec;
  __builtin_memset(rec, 0, sizeof(*rec));
  rec->start_ns = now;
  rec->cgroup = key_cgroup ? task_cgroup_id(prev) : 0;
  rec->pcount = task_pcount(prev, trusted);
  rec->tgid = tgid;
  rec->state = prev_state;
  if (want_user_stacks && !(TASK_FIELD(trusted, prev, flags) & PF_KTHREAD))
    take_switch_out_user_stack(ctx, prev, tgid, ts, rec, trusted);
  if (want_kernel_stacks && !(trusted && kstack_at_switch_in))
    rec->kernel_stack = take_current_stack(ctx, 0);
  if (ts)
    ts->start = *rec;
  else if (!save_start(prev, pid, rec, trusted))
    count_loss(OFFCPU_LOST_START_STORE);
}

#endif /* OFFCPU_SWITCH_HOOK_BPF_H */
