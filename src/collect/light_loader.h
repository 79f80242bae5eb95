/* The off-CPU programs through their light skeleton (bpftool gen skeleton
 * -L): a loader program run by the kernel creates the maps and loads the
 * programs, resolving CO-RE relocations and BTF ids itself, so user space
 * never parses the kernel's 5.5 MB BTF (libbpf 1.1 holds it twice while
 * parsing: ~11 MB, the largest part of offcpu's memory). Needs 5.18+ (the
 * programs' own needs); where it fails the regular skeleton is used.
 * Written by hand in C: the generated header is C only. Maps and programs
 * are reached through the skeleton's own fields, so a renamed one fails to
 * compile here rather than falling back at run time. */
#ifndef OFFCPU_LIGHT_LOADER_H
#define OFFCPU_LIGHT_LOADER_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Sizes of the maps the command line sizes; both loaders take these. */
struct offcpu_map_sizes {
  unsigned int filter_tgids, filter_tids, filter_cgroups, stacks, counts,
      starts_hash, wakers;
  unsigned int uw_files, uw_pages, uw_rows, uw_rules; /* user unwind tables */
};

/* Descriptors of what a session uses once loaded. */
struct offcpu_light_fds {
  int switch_btf, waking_btf, fork_btf, seed_open, seed_stacks, flush;
  int stacks, counts, counts_overflow, waits_charged, new_processes,
      filter_tgids, filter_tids, filter_cgroups, wakers;
  int uw_procs, uw_files, uw_pages, uw_rows, uw_rules, uw_requests, uw_stats;
  int uw_file_ids;
};

struct offcpu_light;

/* direct_loads: the object that reads kernel memory by plain loads (6.8+,
 * OffcpuPlan::direct_loads); else the one with probe reads. */
struct offcpu_light *offcpu_light_open(int direct_loads);
void offcpu_light_destroy(struct offcpu_light *l);
/* The .rodata to fill in before loading, and its size (the same layout as
 * the regular skeleton's: both come from one object). */
void *offcpu_light_rodata(struct offcpu_light *l, size_t *size);
/* .bss, mapped once loaded. */
void *offcpu_light_bss(struct offcpu_light *l, size_t *size);
void offcpu_light_set_sizes(struct offcpu_light *l,
                            const struct offcpu_map_sizes *sizes);
/* 0, or a negative errno. */
int offcpu_light_load(struct offcpu_light *l);
void offcpu_light_get_fds(struct offcpu_light *l, struct offcpu_light_fds *fds);

#ifdef __cplusplus
}
#endif

#endif
