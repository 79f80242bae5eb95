/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* A task's comm, read for a key: shared by the switch hook and the waker. */
#ifndef OFFCPU_TASK_COMM_BPF_H
#define OFFCPU_TASK_COMM_BPF_H

#include "offcpu/shared.h"

/* The bytes of `w` below its first zero byte (little-endian); *ended says
 * whether it had one. Bytes of an older, longer name may follow the NUL. */
static __always_inline __u64 below_nul(__u64 w, bool *ended) {
  __u64 z = (w - 0x0101010101010101ULL) & ~w & 0x8080808080808080ULL;
  *ended = z != 0;
  if (!z)
    return w;
  return w & (((z & -z) >> 7) - 1);
}

/* The task's comm, zero-padded. Through a BTF pointer: two plain loads,
 * where a string helper call would cost more than the rest of the key. */
static __always_inline void read_comm(char *dst, struct task_struct *t,
                                      bool trusted) {
  if (!trusted) {
    BPF_CORE_READ_STR_INTO((char(*)[OFFCPU_COMM_LEN])dst, t, comm);
    return;
  }
  /* Word loads and stores: copied as char arrays, the 16 bytes were 16
   * loads and 16 stores with their shifts, checked by the verifier on
   * every way to each of the hook's calls. Both comms are 8-aligned (the
   * task's follows pointers; each key's follows 64-bit fields), which the
   * verifier requires of a destination on the BPF stack. */
  const __u64 *src = (const __u64 *)t->comm;
  __u64 w0 = src[0], w1 = src[1];
  bool ended;
  w0 = below_nul(w0, &ended);
  w1 = ended ? 0 : below_nul(w1, &ended);
  __u64 *out = (__u64 *)dst;
  out[0] = w0;
  out[1] = w1;
}

#endif /* OFFCPU_TASK_COMM_BPF_H */
