/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Times from the scheduler's own clock and accounting: the time of a
 * switch, when a task was queued and when it last arrived on a CPU. */
#ifndef OFFCPU_SCHED_CLOCK_BPF_H
#define OFFCPU_SCHED_CLOCK_BPF_H

#include "direct_load.bpf.h"
#include "offcpu/shared.h"
#include "task_filter.bpf.h"

/* Written by user space: when the window ends, set when it opens for a
 * timed run (so it ends on time however late user space wakes up on a busy
 * host), or at Ctrl-C. Waits end there; none opens after it. */
__u64 stop_ns = 0;
/* Written by user space right after attaching: when the window opened. */
__u64 window_start_ns = 0;

/* When `t`, runnable, was queued, in ktime (`now`: the ktime matching its
 * run queue's clock); 0 where unknown. The scheduler keeps
 * sched_info.last_queued (rq_clock time) from the enqueue until the task
 * runs, and __schedule has just updated this run queue's clock when the
 * switch hook runs. Per-group run queues link to their CPU's (cfs_rq->rq,
 * CONFIG_FAIR_GROUP_SCHED, on in distribution kernels). */
static __always_inline __u64 queued_ktime(struct task_struct *t, __u64 now,
                                          bool trusted) {
  if (!bpf_core_field_exists(t->sched_info.last_queued) ||
      !bpf_core_field_exists(((struct cfs_rq *)0)->rq))
    return 0;
  __u64 queued = TASK_FIELD(trusted, t, sched_info.last_queued);
  if (!queued)
    return 0;
  __u64 clock = trusted ? TASK_FIELDS(t)->se.cfs_rq->rq->clock
                        : BPF_CORE_READ(t, se.cfs_rq, rq, clock);
  if (clock < queued || now < clock - queued)
    return 0;
  return now - (clock - queued);
}

static __always_inline __u64 task_pcount(struct task_struct *t, bool trusted) {
  if (!bpf_core_field_exists(t->sched_info.pcount))
    return 0;
  return TASK_FIELD(trusted, t, sched_info.pcount);
}

/* The clock of the run queue `t` is on (rq_clock: sched_clock, refreshed by
 * update_rq_clock at the top of __schedule and at every tick); 0 where the
 * kernel has no per-group cfs_rq->rq link (CONFIG_FAIR_GROUP_SCHED off).
 * Reached through the task: `runqueues` is not a ksym without
 * CONFIG_KALLSYMS_ALL. */
static __always_inline __u64 rq_clock_of(struct task_struct *t) {
  if (!bpf_core_field_exists(((struct cfs_rq *)0)->rq))
    return 0;
  struct rq *rq = BPF_CORE_READ(t, se.cfs_rq, rq);
  return rq ? BPF_CORE_READ(rq, clock) : 0;
}

/* ---- The time of a switch ----
 * bpf_ktime_get_ns costs 45-85 ns in the switch hook on the VMs this was
 * measured on (the timekeeper's line is cold there), a quarter of the hook
 * with -m. The scheduler has just read a clock: __schedule updates its run
 * queue's (rq->clock, sched_clock) before it picks the next task. The hook
 * takes that, plus this CPU's offset to ktime, measured with
 * bpf_ktime_get_ns at most once a millisecond (the two clocks drift apart
 * by NTP's slew at most, 500 ppm: half a microsecond a millisecond). The
 * kernel's own per-task scheduler statistics (schedstat, delay accounting)
 * read the same clock at the same place, and share its one caveat: after a
 * wakeup that preempts, __schedule may skip the update (the enqueue just
 * read the clock), and the switch is stamped then, microseconds earlier.
 * Without a trusted task (raw_tp) or the cfs_rq->rq link
 * (CONFIG_FAIR_GROUP_SCHED off): bpf_ktime_get_ns. */
struct switch_clock {
  __u64 base; /* rq->clock when `off` was measured */
  __u64 off;  /* ktime - rq->clock, then */
};
struct {
  __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
  __uint(max_entries, 1);
  __type(key, __u32);
  __type(value, struct switch_clock);
} switch_clocks SEC(".maps");

#define SWITCH_CLOCK_RESYNC_NS 1000000
/* Longer than a tick at HZ=100, the longest a run queue's clock goes
 * without an update on a CPU that is not idle. */
#define SWITCH_CLOCK_NEAR_STOP_NS 20000000

/* Now, in ktime, at a switch away from `prev` (the current task); its run
 * queue's clock in *clock (0: not read). */
static __always_inline __u64 switch_time(struct task_struct *prev, bool trusted,
                                         __u64 *clock) {
  *clock = 0;
  if (!trusted || !bpf_core_field_exists(((struct cfs_rq *)0)->rq))
    return bpf_ktime_get_ns();
  struct cfs_rq *cq = TASK_FIELDS(prev)->se.cfs_rq;
  struct rq *rq = cq ? cq->rq : NULL;
  __u32 zero = 0;
  struct switch_clock *c =
      rq ? bpf_map_lookup_elem(&switch_clocks, &zero) : NULL;
  if (!c)
    return bpf_ktime_get_ns();
  __u64 rq_now = rq->clock;
  *clock = rq_now;
  if (rq_now - c->base < SWITCH_CLOCK_RESYNC_NS)
    return rq_now + c->off;
  __u64 now = bpf_ktime_get_ns();
  c->base = rq_now;
  c->off = now - rq_now;
  return now;
}

/* When `t`, on CPU now (ktime `now`, its run queue's clock `clock`), last
 * arrived, in ktime: now - (clock - last_arrival), or, without sched_info
 * or a clock, now minus the CPU time it has had since it was picked. */
static __always_inline __u64 arrival_ktime(struct task_struct *t, __u64 now,
                                           __u64 clock) {
  __u64 ran = 0;
  __u64 arrived = 0;
  if (bpf_core_field_exists(t->sched_info.last_arrival))
    arrived = BPF_CORE_READ(t, sched_info.last_arrival);
  if (clock && arrived && clock >= arrived)
    ran = clock - arrived;
  else
    ran = BPF_CORE_READ(t, se.sum_exec_runtime) -
          BPF_CORE_READ(t, se.prev_sum_exec_runtime);
  return now > ran ? now - ran : 0;
}

#endif /* OFFCPU_SCHED_CLOCK_BPF_H */
