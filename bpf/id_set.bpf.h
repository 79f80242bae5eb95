/* SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause) */
/* A set of PIDs or TIDs (u32 -> u8), filled by the loader before attach
 * (fill_id_set in src/collect/bpf_util.cpp), which also sizes it. */
#ifndef OFFCPU_ID_SET_BPF_H
#define OFFCPU_ID_SET_BPF_H

#define ID_SET_MAP(name)                                                       \
  struct {                                                                     \
    __uint(type, BPF_MAP_TYPE_HASH);                                           \
    __uint(max_entries, 1); /* resized by the loader */                        \
    __type(key, __u32);                                                        \
    __type(value, __u8);                                                       \
  } name SEC(".maps")

#endif /* OFFCPU_ID_SET_BPF_H */
