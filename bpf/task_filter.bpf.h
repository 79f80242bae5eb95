/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* Which tasks are traced: the process, thread, name, cgroup and state
 * filters, all applied before a stack is walked. */
#ifndef OFFCPU_TASK_FILTER_BPF_H
#define OFFCPU_TASK_FILTER_BPF_H

#include "id_set.bpf.h"
#include "offcpu/shared.h"
#include "settings.bpf.h"

#define PF_KTHREAD 0x00200000
#define TASK_DEAD 0x00000080

/* A task field: a plain load through a trusted BTF pointer (tp_btf,
 * iterators), a probe read otherwise (raw_tp). `trusted` is a compile-time
 * constant, so only one of the two is emitted. */
#define TASK_FIELD(trusted, t, field)                                          \
  ((trusted) ? (t)->field : BPF_CORE_READ(t, field))

ID_SET_MAP(filter_tgids);

ID_SET_MAP(filter_tids);

/* --cgroup: cgroup v2 ids (u64 -> u8), filled by the loader. */
struct {
  __uint(type, BPF_MAP_TYPE_HASH);
  __uint(max_entries, 1); /* resized by the loader */
  __type(key, __u64);
  __type(value, __u8);
} filter_cgroups SEC(".maps");

/* Cgroups nest at most this deep below a --cgroup for a task to match. */
#define CGROUP_MAX_DEPTH 16

static __always_inline __u64 task_cgroup_id(struct task_struct *t) {
  return BPF_CORE_READ(t, cgroups, dfl_cgrp, kn, id);
}

/* The task's cgroup or one of its ancestors is in filter_cgroups. */
static __always_inline bool in_filter_cgroups(struct task_struct *t) {
  struct cgroup *cg = BPF_CORE_READ(t, cgroups, dfl_cgrp);
  for (int i = 0; i < CGROUP_MAX_DEPTH && cg; i++) {
    __u64 id = BPF_CORE_READ(cg, kn, id);
    if (bpf_map_lookup_elem(&filter_cgroups, &id))
      return true;
    /* self is the cgroup's first member: its parent css is the parent. */
    cg = (struct cgroup *)BPF_CORE_READ(cg, self.parent);
  }
  return false;
}

/* The process name is its main thread's comm (threads rename themselves);
 * with match_thread_name, the thread's own. */
static __always_inline bool name_matches(struct task_struct *t) {
  char comm[OFFCPU_COMM_LEN];
  if (match_thread_name)
    BPF_CORE_READ_STR_INTO(&comm, t, comm);
  else
    BPF_CORE_READ_STR_INTO(&comm, t, group_leader, comm);
  for (int i = 0; i < OFFCPU_COMM_LEN; i++) {
    if (comm[i] != target_name[i])
      return false;
    if (comm[i] == 0)
      return true;
  }
  return true;
}

struct task_struct___pre514 {
  long state;
} __attribute__((preserve_access_index));

/* The task's state field was renamed from state to __state in 5.14. */
static __always_inline unsigned int task_state(struct task_struct *t) {
  if (bpf_core_field_exists(t->__state))
    return BPF_CORE_READ(t, __state);
  return BPF_CORE_READ((struct task_struct___pre514 *)t, state);
}

/* False when the task of process `tgid` is surely not traced, told by a
 * compare alone (one process traced, only_tgid, and this is another):
 * before any lookup, in hooks that run for every task of the machine. */
static __always_inline bool maybe_traced(__u32 tgid) {
  return !only_tgid || tgid == only_tgid;
}

static __always_inline bool passes_task_filters(struct task_struct *t,
                                                __u32 pid, __u32 tgid,
                                                bool trusted) {
  if (pid == 0) /* the idle task, one per CPU */
    return false;
  /* One process traced: filter_tgids holds it alone, no lookup needed. */
  if (only_tgid ? tgid != only_tgid
                : filter_tgid && !bpf_map_lookup_elem(&filter_tgids, &tgid))
    return false;
  if (filter_tid && !bpf_map_lookup_elem(&filter_tids, &pid))
    return false;
  if (user_threads_only || kernel_threads_only) {
    bool kthread = TASK_FIELD(trusted, t, flags) & PF_KTHREAD;
    if (user_threads_only && kthread)
      return false;
    if (kernel_threads_only && !kthread)
      return false;
  }
  if (filter_name && !name_matches(t))
    return false;
  if (filter_cgroup && !in_filter_cgroups(t))
    return false;
  return true;
}

/* BCC semantics: --state 0 means preempted while runnable, any other value
 * is a bitmask tested against the state the task blocked in. By name, the
 * classes are exact: D does not include TASK_IDLE. */
static __always_inline bool passes_state_filter(unsigned int state) {
  if (state_classes)
    return state_classes & (1u << offcpu_state_class(state));
  if (state_filter < 0)
    return true;
  if (state_filter == 0)
    return state == 0;
  return (state & (__u64)state_filter) != 0;
}

#endif /* OFFCPU_TASK_FILTER_BPF_H */
