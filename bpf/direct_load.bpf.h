/* Kernel memory by plain loads (the light object built with
 * OFFCPU_DIRECT_LOADS, for 6.8+ kernels). bpf_probe_read_kernel costs a
 * helper call and a copy loop each time (~35 ns for 8 bytes on the
 * development VM); a load through a pointer typed by bpf_rdonly_cast is one
 * instruction the JIT guards: it loads only kernel addresses and yields 0
 * where the address is unmapped (an exception-table entry), the same
 * protection the probe read has. The verifier turns the kfunc call into a
 * register move. The other objects must load on kernels without the kfunc,
 * so they never name it. */
#ifndef OFFCPU_DIRECT_LOAD_BPF_H
#define OFFCPU_DIRECT_LOAD_BPF_H

#ifdef OFFCPU_DIRECT_LOADS
#include <bpf/bpf_core_read.h>

extern void *bpf_rdonly_cast(const void *obj, __u32 btf_id) __ksym;

/* Task `t` for reading its fields, as a pointer the verifier does not
 * trust. A load of a pointer field through a trusted pointer (a tp_btf
 * argument, bpf_get_current_task_btf) makes the verifier look for the
 * field's trust annotations: up to four searches by name through the
 * kernel's whole BTF, at every visit of that load on every path. They were
 * 3-5% of a default run's CPU (perf: btf_nested_type_is_trusted). The
 * load's code is the same either way (the JIT guards both); helpers that
 * want a trusted task still get `t` itself. */
#define TASK_FIELDS(t)                                                         \
  ((struct task_struct *)bpf_rdonly_cast(                                      \
      (t), bpf_core_type_id_kernel(struct task_struct)))

/* A tag the verifier reads on global functions' pointer arguments (6.8+;
 * libbpf 1.1's headers predate them). */
#define __arg_trusted __attribute__((btf_decl_tag("arg:trusted")))

/* The 8 bytes of kernel memory at addr; 0 if it is not mapped. Typed as the
 * first word of a pt_regs: any kernel struct that starts with an unsigned
 * long would do. */
static __always_inline __u64 kernel_word(__u64 addr) {
  const struct pt_regs *p =
      bpf_rdonly_cast((void *)addr, bpf_core_type_id_kernel(struct pt_regs));
  return p->r15;
}

/* The address of mm's top-level page table, as a number (a pointer the
 * verifier tracks allows no arithmetic). */
static __always_inline __u64 pgd_of(struct mm_struct *mm) {
  return mm ? kernel_word((__u64)&mm->pgd) : 0;
}

/* x86-64 page-table entry bits. */
#define PT_PRESENT (1ull << 0)
#define PT_USER (1ull << 2)
#define PT_PWT (1ull << 3)
#define PT_PCD (1ull << 4)
#define PT_HUGE (1ull << 7) /* a leaf above the last level; PAT at it */
#define PT_SPECIAL                                                             \
  (1ull << 9) /* pfn mappings: device memory, no struct page                   \
               */
#define PT_PAT_HUGE (1ull << 12)
#define PT_ADDR 0x000ffffffffff000ull

/* The address in the kernel's direct map (of all RAM, at `base`) of the
 * byte at `addr` in the address space whose top-level table is at `pgd`,
 * walking its `levels` (4 or 5) levels of page tables; 0 where it is not
 * mapped. `user`: a user address, only in ordinary write-back memory with
 * a page behind it (never device memory: pfn mappings are special, and
 * uncached or write-combining ones carry cache bits). Not the software bits
 * above 52: their meaning changes (bit 58 was ZONE_DEVICE's until 6.16 and
 * is set on ordinary stack pages in 6.18); device memory with pages (PCI
 * peer-to-peer) reaches user space only through a root-only file. Read without
 * locks, as the kernel's lockless get_user_pages walks: with interrupts off
 * (the switch hook), the tables cannot be freed meanwhile; a page remapped
 * since reads as whatever it holds, which the caller compares with what it
 * expects, as it does a probe read's result. A global function: verified
 * once per program, where inlined it was verified at each use and on each
 * path to it (11,000 instructions of uw_walk_hook's, in the switch and the
 * waking hooks alike); a call costs a few ns, once per page walked. */
__noinline __u64 pt_lookup(__u64 base, __u32 levels, __u64 pgd, __u64 addr,
                           __u32 user) {
  const __u64 need = PT_PRESENT | (user ? PT_USER : 0);
  __u64 table = pgd, e;
  if (levels == 5) {
    e = kernel_word(table + ((addr >> 48) & 511) * 8);
    if ((e & need) != need)
      return 0;
    table = base + (e & PT_ADDR);
  }
  e = kernel_word(table + ((addr >> 39) & 511) * 8);
  if ((e & need) != need)
    return 0;
  e = kernel_word(base + (e & PT_ADDR) + ((addr >> 30) & 511) * 8);
  if ((e & need) != need)
    return 0;
  __u64 within = (1ull << 30) - 1, pat = PT_PAT_HUGE;
  if (!(e & PT_HUGE)) {
    e = kernel_word(base + (e & PT_ADDR) + ((addr >> 21) & 511) * 8);
    if ((e & need) != need)
      return 0;
    within = (1ull << 21) - 1;
    if (!(e & PT_HUGE)) {
      e = kernel_word(base + (e & PT_ADDR) + ((addr >> 12) & 511) * 8);
      if ((e & need) != need)
        return 0;
      within = 4095;
      pat = PT_HUGE;
    }
  }
  if (user && (e & (PT_PWT | PT_PCD | PT_SPECIAL | pat)))
    return 0;
  return base + ((e & PT_ADDR & ~within) | (addr & within));
}
#else
/* Without the kfunc the task stays trusted (the searches are the price). */
#define TASK_FIELDS(t) (t)
#endif

#endif
