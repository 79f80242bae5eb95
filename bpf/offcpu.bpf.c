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

#include "id_set.bpf.h"
#include "kernel_unwind.bpf.h"
#include "offcpu/shared.h"
#include "stack_store.bpf.h"
/* After stack_store.bpf.h: counts its losses there. */
#include "announce.bpf.h"
#include "task_comm.bpf.h"
#include "user_unwind.bpf.h"

#define PF_KTHREAD 0x00200000
#define TASK_DEAD 0x00000080

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* The modules, in the order they use each other. */
#include "settings.bpf.h"

#include "task_filter.bpf.h"

#include "wait_state.bpf.h"

#include "charge.bpf.h"

#include "sched_clock.bpf.h"

#include "end_wait.bpf.h"

#include "switch_hook.bpf.h"

#include "waking.bpf.h"

#include "children.bpf.h"

SEC("tp_btf/sched_waking")
int BPF_PROG(offcpu_waking_btf, struct task_struct *p) {
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

#include "window_edges.bpf.h"
