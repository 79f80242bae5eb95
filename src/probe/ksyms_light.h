/* The kernel addresses the kernel-stack walker needs, resolved by
 * bpf/ksyms.bpf.c's lookup program loaded through its light skeleton: at
 * start-up, where the regular skeleton would have libbpf probe the kernel's
 * features first (a dozen test loads, ~5 ms). Written in C: the generated
 * header is C only. */
#ifndef OFFCPU_KSYMS_LIGHT_H
#define OFFCPU_KSYMS_LIGHT_H

#include "offcpu/shared.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Fills in the addresses of *text (its ORC layout fields are kept); 0, or a
 * negative errno. */
int offcpu_resolve_kernel_text(struct offcpu_kernel_text *text);

#ifdef __cplusplus
}
#endif

#endif
