// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Resolves the kernel addresses the kernel-stack walker needs, in the kernel
 * (bpf_kallsyms_lookup_name, 5.16+), run once through BPF_PROG_TEST_RUN.
 * Much cheaper at start-up than having /proc/kallsyms formatted (~50 ms for
 * 120,000 lines). Unknown names stay 0. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#include "offcpu/shared.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct offcpu_kernel_text found = {};

#define RESOLVE(field, name)                                                   \
  do {                                                                         \
    static const char sym[] = name;                                            \
    __u64 addr = 0;                                                            \
    if (bpf_kallsyms_lookup_name(sym, sizeof(sym), 0, &addr) == 0)             \
      found.field = addr;                                                      \
  } while (0)

SEC("syscall")
int resolve_kernel_text(void *ctx) {
  RESOLVE(text_start, "_stext");
  RESOLVE(text_end, "_etext");
  RESOLVE(sched_start, "__sched_text_start");
  RESOLVE(sched_end, "__sched_text_end");
  RESOLVE(lock_start, "__lock_text_start");
  RESOLVE(lock_end, "__lock_text_end");
  RESOLVE(orc_ip_start, "__start_orc_unwind_ip");
  RESOLVE(orc_ip_end, "__stop_orc_unwind_ip");
  RESOLVE(orc_start, "__start_orc_unwind");
  RESOLVE(fork_ret, "ret_from_fork_asm");
  if (!found.fork_ret)
    RESOLVE(fork_ret, "ret_from_fork");
  RESOLVE(graph_ret, "return_to_handler");
  RESOLVE(rethook_ret, "arch_rethook_trampoline");
  if (!found.rethook_ret)
    RESOLVE(rethook_ret, "kretprobe_trampoline");
  return 0;
}
