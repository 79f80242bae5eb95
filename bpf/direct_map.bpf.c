// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/* Finds where the kernel maps all of RAM (page_offset_base: randomized at
 * boot, and not a symbol the kernel exports without CONFIG_KALLSYMS_ALL),
 * and whether its page tables have 4 or 5 levels. Run once, through
 * BPF_PROG_TEST_RUN, by a process with an address space (offcpu).
 *
 * The process's top-level page table (mm->pgd) lies in that map, at the
 * base plus the table's physical address. The base is 1 GiB aligned (the
 * kernel randomizes it in such steps) and at most the table's physical
 * address below it; each candidate is tried by walking the page tables to
 * translate the table's own address. A wrong candidate sends the walk's
 * second read to the wrong physical memory, and a word there can pass for a
 * 1 GiB leaf that gives the right answer by chance (any small integer with
 * bits 0 and 7 set does: seen on a VM whose free memory held old data, in
 * about 1 run in 4). So a candidate must also translate the caller's own
 * user memory to the values the caller wrote there (check_addr/value):
 * what the profiler uses it for, and not matched by chance. Kernels with
 * memory encryption set a key bit in table entries: no candidate fits, and
 * offcpu reads user stacks by probe reads. 6.2+ (bpf_rdonly_cast). */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#define OFFCPU_DIRECT_LOADS
#include "direct_load.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define GIB (1ull << 30)
/* Candidates: a top-level table up to 64 TiB into physical memory. */
#define MAX_TRIES (1u << 16)
#define CHECKS 2

/* Set by the caller: words of its own memory (touched, so mapped) and
 * what they hold. */
__u64 check_addr[CHECKS] = {};
__u64 check_value[CHECKS] = {};
/* Set by the caller: try every candidate and count those that pass
 * (found_*: the first), for the test that only one does. */
__u32 count_all = 0;

__u64 found_base = 0;
__u32 found_levels = 0;
__u32 passed = 0;     /* candidates that passed every check */
__u32 table_only = 0; /* ... that translated the table but not user memory */

struct search {
  __u64 pgd;
};

static bool user_memory_reads(__u64 base, __u32 levels, __u64 pgd) {
  for (__u32 i = 0; i < CHECKS; i++) {
    __u64 at = pt_lookup(base, levels, pgd, check_addr[i], true);
    if (!at || kernel_word(at) != check_value[i])
      return false;
  }
  return true;
}

static long try_base(__u32 k, void *ctx) {
  struct search *s = ctx;
  __u64 top = s->pgd & ~(GIB - 1);
  __u64 base = top - (__u64)k * GIB;
  for (__u32 levels = 4; levels <= 5; levels++) {
    if (pt_lookup(base, levels, s->pgd, s->pgd, false) != s->pgd)
      continue;
    if (!user_memory_reads(base, levels, s->pgd)) {
      table_only++;
      continue;
    }
    if (!passed++) {
      found_base = base;
      found_levels = levels;
    }
    return count_all ? 0 : 1;
  }
  return 0;
}

SEC("syscall")
int find_direct_map(void *ctx) {
  struct task_struct *t = bpf_get_current_task_btf();
  struct search s = {.pgd = pgd_of(t->mm)};
  if (s.pgd && check_addr[0])
    bpf_loop(MAX_TRIES, try_base, &s, 0);
  return 0;
}
