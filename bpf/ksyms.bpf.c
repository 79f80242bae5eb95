// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Resolves the kernel addresses the kernel-stack walker needs, in the kernel
 * (bpf_kallsyms_lookup_name, 5.16+), run once through BPF_PROG_TEST_RUN.
 * Much cheaper at start-up than having /proc/kallsyms formatted (~50 ms for
 * 120,000 lines). Unknown names stay 0. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#include "offcpu/shared.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Comes with the ORC layout filled in; the addresses are written here. */
struct offcpu_kernel_text found = {};

#define RESOLVE(field, name)                                                   \
  do {                                                                         \
    static const char sym[] = name;                                            \
    __u64 addr = 0;                                                            \
    if (bpf_kallsyms_lookup_name(sym, sizeof(sym), 0, &addr) == 0)             \
      found.field = addr;                                                      \
  } while (0)

/* Each timer function as the kernel prints it ("hrtimer_wakeup+0x0/0x30"):
 * its size, which bpf_kallsyms_lookup_name does not give; user space reads
 * it from here. */
char timer_fn_text[OFFCPU_TIMER_FNS][OFFCPU_NAME_LEN];

static __always_inline void print_timer_fn(__u32 i) {
  static const char fmt[] = "%pS";
  __u64 arg = found.timer_fn_start[i & (OFFCPU_TIMER_FNS - 1)];
  if (arg)
    bpf_snprintf(timer_fn_text[i & (OFFCPU_TIMER_FNS - 1)], OFFCPU_NAME_LEN,
                 fmt, &arg, sizeof(arg));
}

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
  RESOLVE(irqentry_start, "__irqentry_text_start");
  RESOLVE(irqentry_end, "__irqentry_text_end");
  RESOLVE(rethook_ret, "arch_rethook_trampoline");
  if (!found.rethook_ret)
    RESOLVE(rethook_ret, "kretprobe_trampoline");
  RESOLVE(timer_fn_start[0], "hrtimer_wakeup");
  RESOLVE(timer_fn_start[1], "call_timer_fn");
  print_timer_fn(0);
  print_timer_fn(1);
  return 0;
}

/* Names kernel addresses with the kernel's own symbol printer (%pS:
 * "func+0x1c/0x60 [module]"), a batch per run: offcpu needs a few hundred
 * names, and /proc/kallsyms costs ~50 ms of kernel time to format. */
__u64 name_addrs[OFFCPU_NAME_BATCH];
__u32 name_count = 0;
char names[OFFCPU_NAME_BATCH][OFFCPU_NAME_LEN];

static long name_one(__u32 i, void *ctx) {
  __u64 idx = i;
  asm volatile("" : "+r"(idx));
  if (idx >= OFFCPU_NAME_BATCH)
    return 1;
  static const char fmt[] = "%pS";
  __u64 arg = name_addrs[idx];
  bpf_snprintf(names[idx], OFFCPU_NAME_LEN, fmt, &arg, sizeof(arg));
  return 0;
}

SEC("syscall")
int name_kernel_addresses(void *ctx) {
  __u32 n = name_count;
  if (n > OFFCPU_NAME_BATCH)
    n = OFFCPU_NAME_BATCH;
  bpf_loop(n, name_one, NULL, 0);
  return 0;
}
