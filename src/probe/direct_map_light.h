/* Where the kernel maps all of RAM, found by bpf/direct_map.bpf.c (its
 * light skeleton, run once). Written in C: the generated header is C only. */
#ifndef OFFCPU_DIRECT_MAP_LIGHT_H
#define OFFCPU_DIRECT_MAP_LIGHT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The direct map's base and the page-table depth (4 or 5): 0, -ENOENT when
 * no base fits (memory encryption), or a negative errno (no
 * bpf_rdonly_cast before 6.2). */
int offcpu_find_direct_map(uint64_t *base, uint32_t *levels);

/* The same search over every candidate, for tests: the first that passed
 * in base and levels, how many passed every check (passed: 1 on a sound
 * search), and how many translated the page table's own address but not
 * the caller's memory (table_only: what a check on the table alone would
 * have taken). */
int offcpu_count_direct_map_candidates(uint64_t *base, uint32_t *levels,
                                       uint32_t *passed, uint32_t *table_only);

#ifdef __cplusplus
}
#endif

#endif
