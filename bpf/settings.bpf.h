/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The off-CPU programs' settings, written by the loader into .rodata before
 * load, and the window's edges, written by user space into .bss. */
#ifndef OFFCPU_SETTINGS_BPF_H
#define OFFCPU_SETTINGS_BPF_H

/* Knobs: set by the loader in .rodata before load; the verifier treats them
 * as constants and drops the branches they disable. */
const volatile bool filter_tgid = false;
const volatile bool filter_tid = false;
const volatile bool user_threads_only = false;
const volatile bool kernel_threads_only = false;
const volatile bool want_user_stacks = true;
const volatile bool want_kernel_stacks = true;
const volatile __u64 min_block_ns = 1000;
const volatile __u64 max_block_ns = ~0ULL;
const volatile __s64 state_filter = -1; /* < 0: no state filter */
/* --state by name: a set of offcpu_state_class bits (0: not used). */
const volatile __u32 state_classes = 0;
/* --show-state: the state class is part of the key (an annotation frame). */
const volatile bool show_state = false;
/* --children, -- COMMAND: processes forked by traced ones are traced too
 * (the fork hook adds them to filter_tgids; they leave it at their last
 * switch-out). */
const volatile bool follow_children = false;
/* -n NAME: the process name (its main thread's comm), exact. */
const volatile bool filter_name = false;
const volatile char target_name[OFFCPU_COMM_LEN] = {};
/* --cgroup: only tasks in these cgroups (v2) or below; --per-cgroup: the
 * cgroup is part of the key. */
const volatile bool filter_cgroup = false;
const volatile bool key_cgroup = false;
/* --wakers: who woke each wait; --runqueue: when, to split the wait into
 * blocked and runnable time. --wakers needs the sched_waking hook, attached
 * only then; --runqueue reads when the task was queued from the scheduler's
 * own accounting at switch-in (runq_from_sched_info), and uses the hook
 * only on kernels without it. */
const volatile bool want_wakers = false;
const volatile bool split_runqueue = false;
const volatile bool runq_from_sched_info = false;
/* 5.18+ passes prev_state to sched_switch; older kernels read the task. */
const volatile bool has_prev_state_arg = true;
/* The kernel stack of a task being switched in is still frozen where it
 * blocked: with the ORC walker (kernel_unwind.bpf.h) it is taken then, only
 * for waits that passed -m/-M. Otherwise it is taken at switch-out. */
const volatile bool kstack_at_switch_in = false;
/* Task storage (5.11+) has no size limit and frees itself on exit; older
 * kernels use the starts_hash map, which can fill up. */
const volatile bool use_task_storage = true;
/* Waits held in the thread's task storage at its last two keys (see
 * charge): with task storage and the flush iterator that adds what threads
 * hold at stop. */
const volatile bool hold_waits = false;

/* Walk user frame pointers ourselves rather than through bpf_get_stack
 * (needs bpf_get_current_task_btf 5.11 and bpf_task_pt_regs 5.15). */
const volatile bool user_fp_walk = true;

/* Written by user space: when the window ends, set when it opens for a
 * timed run (so it ends on time however late user space wakes up on a busy
 * host), or at Ctrl-C. Waits end there; none opens after it. */
__u64 stop_ns = 0;
/* Written by user space right after attaching: when the window opened. */
__u64 window_start_ns = 0;

#endif /* OFFCPU_SETTINGS_BPF_H */
