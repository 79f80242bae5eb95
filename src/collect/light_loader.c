#include "collect/light_loader.h"

#include <errno.h>
#include <linux/types.h>
#include <stdlib.h>

#include "offcpu/shared.h"

#include "offcpu.dlskel.h"
#include "offcpu.lskel.h"

/* Two light objects of one source: offcpu_lbpf (probe reads) and
 * offcpu_dbpf (plain loads of kernel memory, 6.8+). They differ in code
 * only, so one set of accessors serves both: SKEL_DO runs `op` on whichever
 * this loader holds. */
struct offcpu_light {
  struct offcpu_lbpf *plain;
  struct offcpu_dbpf *direct;
};

#define SKEL_DO(l, op)                                                         \
  do {                                                                         \
    if ((l)->direct) {                                                         \
      struct offcpu_dbpf *sk = (l)->direct;                                    \
      op;                                                                      \
    } else {                                                                   \
      struct offcpu_lbpf *sk = (l)->plain;                                     \
      op;                                                                      \
    }                                                                          \
  } while (0)

struct offcpu_light *offcpu_light_open(int direct_loads) {
  struct offcpu_light *l = calloc(1, sizeof(*l));
  if (!l)
    return NULL;
  if (direct_loads)
    l->direct = offcpu_dbpf__open();
  else
    l->plain = offcpu_lbpf__open();
  if (!l->direct && !l->plain) {
    free(l);
    return NULL;
  }
  return l;
}

void offcpu_light_destroy(struct offcpu_light *l) {
  if (!l)
    return;
  if (l->direct)
    offcpu_dbpf__destroy(l->direct);
  else
    offcpu_lbpf__destroy(l->plain);
  free(l);
}

void *offcpu_light_rodata(struct offcpu_light *l, size_t *size) {
  void *p = NULL;
  SKEL_DO(l, (*size = sizeof(*sk->rodata), p = sk->rodata));
  return p;
}

void *offcpu_light_bss(struct offcpu_light *l, size_t *size) {
  void *p = NULL;
  SKEL_DO(l, (*size = sizeof(*sk->bss), p = sk->bss));
  return p;
}

void offcpu_light_set_sizes(struct offcpu_light *l,
                            const struct offcpu_map_sizes *sizes) {
  SKEL_DO(l, {
    sk->maps.filter_tgids.max_entries = sizes->filter_tgids;
    sk->maps.filter_tids.max_entries = sizes->filter_tids;
    sk->maps.filter_cgroups.max_entries = sizes->filter_cgroups;
    sk->maps.stacks.max_entries = sizes->stacks;
    sk->maps.counts.max_entries = sizes->counts;
    sk->maps.starts_hash.max_entries = sizes->starts_hash;
    sk->maps.wakers.max_entries = sizes->wakers;
    sk->maps.uw_files.max_entries = sizes->uw_files;
    sk->maps.uw_pages.max_entries = sizes->uw_pages;
    sk->maps.uw_rows.max_entries = sizes->uw_rows;
    sk->maps.uw_rules.max_entries = sizes->uw_rules;
  });
}

int offcpu_light_load(struct offcpu_light *l) {
  int err = 0;
  if (l->direct)
    err = offcpu_dbpf__load(l->direct);
  else
    err = offcpu_lbpf__load(l->plain);
  return err < 0 ? err : err ? -err : 0;
}

void offcpu_light_get_fds(struct offcpu_light *l,
                          struct offcpu_light_fds *fds) {
  SKEL_DO(l, {
    fds->switch_btf = sk->progs.offcpu_switch_btf.prog_fd;
    fds->waking_btf = sk->progs.offcpu_waking_btf.prog_fd;
    fds->fork_btf = sk->progs.offcpu_fork_btf.prog_fd;
    fds->seed_open = sk->progs.offcpu_seed_open.prog_fd;
    fds->seed_stacks = sk->progs.offcpu_seed_stacks.prog_fd;
    fds->flush = sk->progs.offcpu_flush.prog_fd;
    fds->stacks = sk->maps.stacks.map_fd;
    fds->counts = sk->maps.counts.map_fd;
    fds->counts_overflow = sk->maps.counts_overflow.map_fd;
    fds->waits_charged = sk->maps.waits_charged.map_fd;
    fds->new_processes = sk->maps.new_processes.map_fd;
    fds->filter_tgids = sk->maps.filter_tgids.map_fd;
    fds->filter_tids = sk->maps.filter_tids.map_fd;
    fds->wakers = sk->maps.wakers.map_fd;
    fds->filter_cgroups = sk->maps.filter_cgroups.map_fd;
    fds->uw_procs = sk->maps.uw_procs.map_fd;
    fds->uw_files = sk->maps.uw_files.map_fd;
    fds->uw_pages = sk->maps.uw_pages.map_fd;
    fds->uw_rows = sk->maps.uw_rows.map_fd;
    fds->uw_rules = sk->maps.uw_rules.map_fd;
    fds->uw_requests = sk->maps.uw_requests.map_fd;
    fds->uw_stats = sk->maps.uw_stat_map.map_fd;
    fds->uw_file_ids = sk->maps.uw_file_ids.map_fd;
  });
}
