// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Off-CPU time, aggregated in the kernel by (process, thread, comm, stacks).
 *
 * A task's wait starts when it is switched out and ends when it is switched
 * back in. Everything a filter can reject is rejected before a stack is
 * walked. Task iterators close the gaps at the window's edges: two open a
 * wait for every task already off CPU when tracing starts (then fill in its
 * user stack), one charges the waits still open when it stops. */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

/* The modules, each a header that includes what it uses, from the bottom
 * up:
 *   settings.bpf.h      the settings the loader writes (.rodata)
 *   stack_store.bpf.h   stacks, hashed and stored once; loss counters
 *   user_unwind.bpf.h   user stacks: unwind tables, frame pointers, memos
 *   kernel_unwind.bpf.h kernel stacks with the kernel's ORC tables
 *   task_filter.bpf.h   which tasks are traced
 *   wait_state.bpf.h    per-thread state: the open wait, held waits
 *   charge.bpf.h        a wait into the aggregation map
 *   sched_clock.bpf.h   times from the scheduler's clock; the window
 *   end_wait.bpf.h      ending a wait (and one whose switch-in was unseen)
 *   switch_hook.bpf.h   sched_switch: ends and opens waits
 *   waking.bpf.h        sched_waking: when and by whom a wait was woken
 *   children.bpf.h      sched_process_fork: children traced too
 *   window_edges.bpf.h  the task iterators at the window's start and stop
 * This file holds the tracepoint programs, one pair (tp_btf, raw_tp) per
 * hook. */
/* The Python walk as a global function (python.bpf.h). */
#define OFFCPU_PY_WALK_GLOBAL
#include "children.bpf.h"
#include "switch_hook.bpf.h"
#include "task_filter.bpf.h"
#include "waking.bpf.h"
#include "window_edges.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

SEC("tp_btf/sched_waking")
int BPF_PROG(offcpu_waking_btf, struct task_struct *p) {
  if (MAPS_ONLY)
    return 0;
  on_waking(ctx, p, true);
  return 0;
}

#ifndef OFFCPU_LIGHT_OBJECT /* the light skeleton serves tp_btf plans only */
/* The raw_tp plan's counterpart (kernels with BTF but no working tp_btf). */
SEC("raw_tp/sched_waking")
int BPF_PROG(offcpu_waking_raw, struct task_struct *p) {
  on_waking(ctx, p, false);
  return 0;
}
#endif

SEC("tp_btf/sched_process_fork")
int BPF_PROG(offcpu_fork_btf, struct task_struct *parent,
             struct task_struct *child) {
  if (MAPS_ONLY)
    return 0;
  on_fork(parent->tgid, child->tgid);
  return 0;
}

#ifndef OFFCPU_LIGHT_OBJECT /* the light skeleton serves tp_btf plans only */
SEC("raw_tp/sched_process_fork")
int BPF_PROG(offcpu_fork_raw, struct task_struct *parent,
             struct task_struct *child) {
  on_fork(BPF_CORE_READ(parent, tgid), BPF_CORE_READ(child, tgid));
  return 0;
}
#endif

/* Preferred: BTF-enabled tracepoint (5.5+), typed and trusted pointers. */
SEC("tp_btf/sched_switch")
int BPF_PROG(offcpu_switch_btf, bool preempt, struct task_struct *prev,
             struct task_struct *next) {
  if (MAPS_ONLY)
    return 0;
  unsigned int prev_state =
      has_prev_state_arg ? (unsigned int)ctx[3] : task_state(prev);
  on_switch(ctx, prev, next, prev_state, true);
  return 0;
}

#ifndef OFFCPU_LIGHT_OBJECT /* the light skeleton serves tp_btf plans only */
/* Fallback for kernels without BTF-enabled tracepoints (< 5.5) or where
 * tp_btf fails to load: pointers are read with probe reads. */
SEC("raw_tp/sched_switch")
int BPF_PROG(offcpu_switch_raw, bool preempt, struct task_struct *prev,
             struct task_struct *next) {
  unsigned int prev_state =
      has_prev_state_arg ? (unsigned int)ctx[3] : task_state(prev);
  on_switch(ctx, prev, next, prev_state, false);
  return 0;
}
#endif
