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
  __u64 w[2];
  __builtin_memcpy(w, t->comm, sizeof(w));
  bool ended;
  w[0] = below_nul(w[0], &ended);
  w[1] = ended ? 0 : below_nul(w[1], &ended);
  __builtin_memcpy(dst, w, sizeof(w));
}

#endif /* OFFCPU_TASK_COMM_BPF_H */
