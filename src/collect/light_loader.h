/* The off-CPU programs through their light skeleton (bpftool gen skeleton
 * -L): a loader program run by the kernel creates the maps and loads the
 * programs, resolving CO-RE relocations and BTF ids itself, so user space
 * never parses the kernel's 5.5 MB BTF (libbpf 1.1 holds it twice while
 * parsing: ~11 MB, the largest part of offcpu's memory). Needs 5.18+ (the
 * programs' own needs); where it fails the regular skeleton is used.
 * A C interface: the generated header is C only. */
#ifndef OFFCPU_LIGHT_LOADER_H
#define OFFCPU_LIGHT_LOADER_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

struct offcpu_light;

struct offcpu_light *offcpu_light_open(void);
void offcpu_light_destroy(struct offcpu_light *l);
/* The .rodata to fill in before loading, and its size (the same layout as
 * the regular skeleton's: both come from one object). */
void *offcpu_light_rodata(struct offcpu_light *l, size_t *size);
/* .bss, mapped once loaded. */
void *offcpu_light_bss(struct offcpu_light *l, size_t *size);
/* -1 for an unknown name. */
int offcpu_light_set_max_entries(struct offcpu_light *l, const char *map,
                                 unsigned int n);
/* 0, or a negative errno. */
int offcpu_light_load(struct offcpu_light *l);
int offcpu_light_map_fd(struct offcpu_light *l, const char *map);
int offcpu_light_prog_fd(struct offcpu_light *l, const char *prog);

#ifdef __cplusplus
}
#endif

#endif
