/* The timeline of long waits (-o x.json, x.perfetto-trace, --top-waits):
 * what the BPF side sends user space for every wait at least
 * --events-min long, through the `events` ring buffer. Shared by
 * bpf/timeline.bpf.h and src/collect/timeline_events.cpp; plain
 * fixed-width types only. */
#ifndef OFFCPU_TIMELINE_H
#define OFFCPU_TIMELINE_H

#include "offcpu/shared.h"

/* A thread's last wait, as it ended: kept in its task storage at every
 * switch-in (so a wake-chain hop costs no map lookup at switch time), and
 * copied into the wait of the task it wakes next (sched_waking). */
struct offcpu_hop {
  __u64 start_ns; /* CLOCK_MONOTONIC (ktime) */
  __u64 end_ns;   /* 0: none */
  __u64 waker;    /* id in the wakers map, or OFFCPU_WAKER_* */
  __u64 user_stack;
  __u64 kernel_stack;
  __u32 pid;   /* the thread whose wait it was */
  __u32 state; /* task state it began in */
};

/* One long wait: 128 bytes, 136 in the ring with its header. */
struct offcpu_event {
  __u64 start_ns;    /* CLOCK_MONOTONIC (ktime), when it went off CPU */
  __u64 duration_ns; /* to its switch-in (or the window's end) */
  __u64 runq_ns;     /* of which runnable, waiting for a CPU */
  __u64 user_stack;  /* ids in the stacks map, as the aggregation keys */
  __u64 kernel_stack;
  __u64 waker; /* id in the wakers map, or OFFCPU_WAKER_* */
  __u32 tgid;
  __u32 pid;
  __u32 state; /* task state it began in */
  __u32 flags; /* OFFCPU_KSTACK_* */
  char comm[OFFCPU_COMM_LEN];
  /* The waker's own last wait before it woke this one (end_ns 0: none);
   * user space keeps it only when the waker is a task and hop.pid is it. */
  struct offcpu_hop hop;
};

#endif /* OFFCPU_TIMELINE_H */
