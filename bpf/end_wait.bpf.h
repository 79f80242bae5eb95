/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Ending a wait: -m/-M, the stacks left for the switch-in, the key, and
 * the charge; also waits whose switch-in the hook never saw. */
#ifndef OFFCPU_END_WAIT_BPF_H
#define OFFCPU_END_WAIT_BPF_H

#include "announce.bpf.h"
#include "charge.bpf.h"
#include "kernel_unwind.bpf.h"
#include "offcpu/shared.h"
#include "sched_clock.bpf.h"
#include "settings.bpf.h"
#include "stack_store.bpf.h"
#include "task_comm.bpf.h"
#include "timeline.bpf.h"
#include "user_unwind.bpf.h"
#include "wait_state.bpf.h"

/* A wait's key as it is charged, and a new wait's record, per CPU and
 * context (SCRATCH_*): off the BPF stack, whose 512 bytes the hook shares
 * with the walks it calls on kernels without private stacks (before 6.13,
 * and builds whose JIT has none). */
struct wait_scratch {
  struct offcpu_key key;
  struct offcpu_start rec;
  /* end_wait's scalars, here rather than spilled across its calls. */
  __u64 start, delta, runq;
  __u32 state, claim;
  __u32 flags; /* the record's, read before its user stack */
};

struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 2); /* SCRATCH_HOOK, SCRATCH_ITER */
  __type(key, __u32);
  __type(value, struct wait_scratch);
} wait_scratches SEC(".maps");

static __always_inline struct wait_scratch *wait_scratch_of(__u32 slot) {
  return bpf_map_lookup_elem(&wait_scratches, &slot);
}

/* Of a wait from `start` to `end` woken at `wake` (0: not seen), the part
 * spent runnable: all of it when the task was preempted (state 0). */
static __always_inline __u64 runnable_part(const struct offcpu_start *rec,
                                           __u64 wake, __u64 start, __u64 end) {
  if (rec->state == 0)
    return end - start;
  if (!wake || wake >= end)
    return 0;
  return end - (wake > start ? wake : start);
}

/* The user stack left for the switch-in (uw_can_defer) of a wait that
 * passed -m/-M: from the task's stack, unchanged since it blocked while
 * `frozen`; else (it ran unseen) missed, and counted. */
static __always_inline __u64 take_deferred_user_stack(struct task_struct *t,
                                                      __u32 tgid, __u32 flags,
                                                      struct uw_memo_set *ms,
                                                      bool frozen) {
  struct uw_stats *st = uw_stats_of(SCRATCH_HOOK);
  if (!frozen) {
    uw_count(st, UW_STAT_DEFER_LOST);
    return OFFCPU_STACK_MISSED;
  }
  uw_count(st, UW_STAT_DEFER_TAKEN);
  /* The memo it blocked with, if its words still hold (announced when it
   * was walked); with --verify-stack-reuse, compared with a walk. */
  __u64 memo =
      (flags & OFFCPU_USTACK_DEFERRED_ANY)
          ? OFFCPU_STACK_MISSED
          : uw_deferred_memo(
                ms, ((flags & OFFCPU_USTACK_DEFERRED_WAY1) ? 1 : 0) |
                        ((flags & OFFCPU_USTACK_DEFERRED_WAY2) ? 2 : 0));
  if (memo != OFFCPU_STACK_MISSED && !reuse_verify) {
    uw_count(st, UW_STAT_REUSED);
    return memo;
  }
  __u32 partial = 0; /* it runs next: not walked again */
  bool reused = false;
  __u64 stack =
      walk_user_stack_hook(t, &partial, ms, &reused, true, SCRATCH_HOOK);
  if (memo != OFFCPU_STACK_MISSED && memo != stack)
    uw_count(st, UW_STAT_REUSE_MISMATCH);
  if (!reused && !announce(t, tgid, stack))
    uw_memo_forget(ms);
  return stack;
}

/* Who ends a wait, and how. Constants at every call site: the compiler
 * keeps only the paths each caller takes. */
struct wait_end_mode {
  /* `t` is a BTF pointer the verifier trusts (tp_btf, iterators), not a
   * raw_tp's (whose paths are compiled out). */
  bool trusted;
  /* The task has not run since the wait began, so its kernel stack is still
   * the one it blocked on. */
  bool frozen;
  /* The switch hook runs before the window's end, so the task's storage
   * may hold the wait (see charge). */
  bool open;
  __u32 slot; /* the caller's scratch buffers (SCRATCH_*) */
};

/* Ends a wait: applies -m/-M, takes the kernel stack if it was deferred and
 * adds the wait to its key. */
static __always_inline void end_wait(struct task_struct *t, __u32 pid,
                                     struct offcpu_start *rec, __u64 end,
                                     struct wait_end_mode mode) {
  const bool trusted = mode.trusted, frozen = mode.frozen, open = mode.open;
  const __u32 slot = mode.slot;
  __u64 start = rec->start_ns;
  /* Claimed meanwhile by the other of hook and flush (see below): a start
   * of 0 would make a wait as long as the uptime. */
  if (!start)
    return;
  /* With stacks taken at switch-in, the flush at stop runs while the switch
   * hook is still attached (so no task runs off with its stack unwalked):
   * whichever of the two claims the record charges the wait, after walking
   * the stack, which was frozen if the claim succeeds. Not the hook while
   * the window is open: every hook that began before its end has returned
   * when the flush begins (see stop()), so the hook needs no atomic then. */
  bool claim = trusted && kstack_at_switch_in && use_task_storage && !open;
  __u64 delta = end > start ? end - start : 0;
  if (delta == 0 || delta < min_block_ns || delta > max_block_ns) {
    /* Outside -m/-M: nothing more to do, the common case with -m. */
    uw_partial_ended(rec->flags, slot, 0);
    if (claim)
      __sync_val_compare_and_swap(&rec->start_ns, start, 0);
    else
      forget_start(rec, pid, trusted);
    return;
  }

  /* The key and the wait's figures per CPU (wait_scratch), read back where
   * used: off the BPF stack, across the walks below. */
  struct wait_scratch *sc = wait_scratch_of(slot);
  if (!sc)
    return; /* never: an array's index in range */
  sc->start = start;
  sc->delta = delta;
  sc->claim = claim;
  struct offcpu_key *key = &sc->key;
  __builtin_memset(key, 0, sizeof(*key));
  key->tgid = rec->tgid;
  key->pid = pid;
  /* The flags before the stack: the rewalk iterator stores a deferred
   * stack, then clears the flag (offcpu_seed_stacks). */
  sc->flags = rec->flags;
  asm volatile("" ::: "memory");
  key->user_stack = rec->user_stack;
  key->kernel_stack = rec->kernel_stack;
  key->flags = rec->flags & OFFCPU_KSTACK_NOSCHED;
  key->cgroup = rec->cgroup;
  if (show_state)
    key->flags |= (offcpu_state_class(rec->state) + 1)
                  << OFFCPU_KEY_STATE_SHIFT;
  if (key_wakers)
    key->waker = waker_of(rec);
  sc->state = rec->state;
  sc->runq = 0;
  /* The timeline's events carry it, without a [runqueue] in the keys. */
  if ((split_runqueue || want_events) && end > start) {
    __u64 wake = rec->wake_ns;
    if (!wake && runq_from_sched_info && rec->state != 0)
      wake = queued_ktime(t, end, trusted);
    sc->runq = runnable_part(rec, wake, start, end);
  }
  if (!sc->claim)
    forget_start(rec, pid, trusted);
  /* Memos are the switch hook's alone: the flush iterator may walk the
   * same task at once. */
  struct offcpu_task *ts = slot == SCRATCH_HOOK ? task_of(rec, trusted) : NULL;
  /* The flush finds none still deferred but those of tasks that ran
   * unseen: the rewalk iterator takes the others first (see stop()). */
  if (trusted && (sc->flags & OFFCPU_USTACK_DEFERRED))
    key->user_stack =
        take_deferred_user_stack(t, rec->tgid, sc->flags, ts ? &ts->memo : NULL,
                                 frozen && slot == SCRATCH_HOOK);
  if (trusted && kstack_at_switch_in && want_kernel_stacks) {
    key->kernel_stack = frozen
                            ? take_frozen_kernel_stack(t, &key->flags, slot,
                                                       ts ? &ts->kmemo : NULL)
                            : OFFCPU_STACK_MISSED;
  }
  if (sc->claim &&
      __sync_val_compare_and_swap(&rec->start_ns, sc->start, 0) != sc->start)
    return;
  /* Counted by whoever charges the wait: with a claim, once. */
  uw_partial_ended(rec->flags, slot, sc->delta);
  read_comm(key->comm, t, trusted);
  /* The timeline: the wait as an event, and as this thread's last. */
  timeline_wait_ended(key, rec, task_of(rec, trusted), sc->start, sc->delta,
                      sc->runq);
  struct offcpu_held_set *held = hold_waits && ts ? &ts->held : NULL;
  if (held && !open) {
    /* After the window: what the task holds first, then no more holding. */
    charge(NULL, 0, 0, 0, held);
    held = NULL;
  }
  charge(key, sc->delta, sc->runq, sc->state, held);
}

/* ---- Switch-ins that sched_switch does not report ----
 * The hook ends every wait at the task's switch-in, so a wait still open
 * when its task is switched out again was ended by a switch the hook never
 * saw. Seen on the 6.18 VM kernels this project is developed on: no
 * sched_switch event at all (tp_btf, raw_tp and perf's tracepoint alike)
 * when the task switched out is a thread of the VM's init (global PID 1),
 * although rq->nr_switches and the next task's sched_info count the switch;
 * about 0.1% of waits there. Whatever the cause on other kernels, the
 * scheduler's own accounting tells when the task arrived: sched_info
 * (CONFIG_SCHED_INFO: schedstats or delay accounting, on in distribution
 * kernels) counts its switch-ins in pcount and stamps the last in
 * last_arrival, in rq_clock time (sched_clock), not bpf_ktime_get_ns time. */
__u64 switch_events[OFFCPU_EV_NR];

/* Ends an open wait of `t`, which is on CPU now although its switch-in was
 * never seen: at its arrival, clamped into the wait. Its kernel stack, if
 * it was to be walked at switch-in, is gone: the task has run since. */
static __always_inline void end_unseen_wait(struct task_struct *t, __u32 pid,
                                            struct offcpu_start *rec, __u64 now,
                                            __u64 clock, __u64 stop,
                                            struct wait_end_mode mode) {
  __u64 start = rec->start_ns;
  __u64 end = arrival_ktime(t, now, clock);
  /* At least start, then at most now (and stop, if set): a start after
   * those gives a wait of 0, dropped. Read back through per-CPU memory:
   * each clamp's ways would carry their own bounds on `end` into the
   * wait's end, checked once per way. */
  __u64 hi = stop && stop < now ? stop : now;
  end = end < start ? start : end;
  end = end > hi ? hi : end;
  struct wait_scratch *sc = wait_scratch_of(mode.slot);
  if (sc) {
    sc->delta = end;
    end = load_u64(&sc->delta);
  }
  __sync_fetch_and_add(&switch_events[OFFCPU_EV_UNSEEN_SWITCH_IN], 1);
  mode.frozen = false;
  end_wait(t, pid, rec, end, mode);
}

#endif /* OFFCPU_END_WAIT_BPF_H */
