/* Kernel memory by plain loads (the light object built with
 * OFFCPU_DIRECT_LOADS, for 6.2+ kernels). bpf_probe_read_kernel costs a
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

/* The 8 bytes of kernel memory at addr; 0 if it is not mapped. Typed as the
 * first word of a pt_regs: any kernel struct that starts with an unsigned
 * long would do. */
static __always_inline __u64 kernel_word(__u64 addr) {
  const struct pt_regs *p =
      bpf_rdonly_cast((void *)addr, bpf_core_type_id_kernel(struct pt_regs));
  return p->r15;
}
#endif

#endif
