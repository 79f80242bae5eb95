/* The off-CPU programs through their light skeleton (bpftool gen skeleton
 * -L): a loader program run by the kernel creates the maps and loads the
 * programs, resolving CO-RE relocations and BTF ids itself, so user space
 * never parses the kernel's 5.5 MB BTF (libbpf 1.1 holds it twice while
 * parsing: ~11 MB, the largest part of offcpu's memory). Needs 5.18+ (the
 * programs' own needs); where it fails the regular skeleton is used.
 * Written in C: the generated header is C only. Maps and programs are
 * reached through the skeleton's own fields, from the lists in
 * collect/offcpu_objects.h, so a renamed one fails to compile here rather
 * than falling back at run time. */
#ifndef OFFCPU_LIGHT_LOADER_H
#define OFFCPU_LIGHT_LOADER_H

#include <stddef.h>

#include "collect/offcpu_objects.h"

#ifdef __cplusplus
extern "C" {
#endif

struct offcpu_light;

/* direct_loads: the object that reads kernel memory by plain loads (6.8+,
 * OffcpuPlan::direct_loads); else the one with probe reads. */
struct offcpu_light *offcpu_light_open(int direct_loads);
/* The object with plain loads whose programs return at once, for the split
 * load's maps (collect/split_loader.h): 6.8+ as well. */
struct offcpu_light *offcpu_light_open_maps(void);
void offcpu_light_destroy(struct offcpu_light *l);
/* The .rodata to fill in before loading, and its size (the same layout as
 * the regular skeleton's: both come from one object). */
void *offcpu_light_rodata(struct offcpu_light *l, size_t *size);
/* .bss, mapped once loaded. */
void *offcpu_light_bss(struct offcpu_light *l, size_t *size);
void offcpu_light_set_sizes(struct offcpu_light *l,
                            const struct offcpu_map_sizes *sizes);
/* 0, or a negative errno. With `log` (of `log_size` bytes, else NULL), the
 * kernel's verifier writes the log of the program it refused there (the
 * loader hands every program the same buffer; the kernel keeps a log's
 * tail when it is longer): how a failed load is explained under -v. */
int offcpu_light_load(struct offcpu_light *l, char *log, size_t log_size);
/* The descriptors of all the object's maps, its internal ones too, in the
 * object's order (that of libbpf's bpf_object__for_each_map over the same
 * object): at most `max` written; returns how many maps it has. */
size_t offcpu_light_map_fds(struct offcpu_light *l, int *fds, size_t max);
/* Every map's and program's descriptor (the raw_tp programs: -1, the
 * light objects have none). */
void offcpu_light_get_fds(struct offcpu_light *l, struct offcpu_fds *fds);

#ifdef __cplusplus
}
#endif

#endif
