/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* The fork hook (--children, -- COMMAND): children of traced processes
 * are traced too. */
#ifndef OFFCPU_CHILDREN_BPF_H
#define OFFCPU_CHILDREN_BPF_H

#include "settings.bpf.h"
#include "stack_store.bpf.h"
#include "task_filter.bpf.h"

/* ---- Children (--children, -- COMMAND) ---- */

/* A traced process forked a new one: trace it too, from its first
 * instruction (threads share the tgid and are traced already). */
static __always_inline void on_fork(__u32 parent_tgid, __u32 child_tgid) {
  if (parent_tgid == child_tgid ||
      !bpf_map_lookup_elem(&filter_tgids, &parent_tgid))
    return;
  __u8 one = 1;
  /* Full only with 65,536 traced processes alive (each leaves at exit):
   * the child is not traced, counted. */
  if (bpf_map_update_elem(&filter_tgids, &child_tgid, &one, BPF_ANY))
    count_loss(OFFCPU_LOST_CHILD_UNTRACED);
}

#endif /* OFFCPU_CHILDREN_BPF_H */
