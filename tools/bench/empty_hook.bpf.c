// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* The floor for bench.py: a sched_switch hook that does nothing. What it
 * costs is the tracepoint's dispatch to BPF, which every tracer pays. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

SEC("tp_btf/sched_switch")
int BPF_PROG(bench_empty_switch, bool preempt, struct task_struct *prev,
             struct task_struct *next) {
  return 0;
}
