#include "collect/light_loader.h"

#include <errno.h>
#include <linux/types.h>
#include <stdlib.h>

#include "offcpu/shared.h"

#include "offcpu.lskel.h"

struct offcpu_light {
  struct offcpu_lbpf *skel;
};

struct offcpu_light *offcpu_light_open(void) {
  struct offcpu_light *l = calloc(1, sizeof(*l));
  if (!l)
    return NULL;
  l->skel = offcpu_lbpf__open();
  if (!l->skel) {
    free(l);
    return NULL;
  }
  return l;
}

void offcpu_light_destroy(struct offcpu_light *l) {
  if (!l)
    return;
  offcpu_lbpf__destroy(l->skel);
  free(l);
}

void *offcpu_light_rodata(struct offcpu_light *l, size_t *size) {
  *size = sizeof(*l->skel->rodata);
  return l->skel->rodata;
}

void *offcpu_light_bss(struct offcpu_light *l, size_t *size) {
  *size = sizeof(*l->skel->bss);
  return l->skel->bss;
}

void offcpu_light_set_sizes(struct offcpu_light *l,
                            const struct offcpu_map_sizes *sizes) {
  l->skel->maps.filter_tgids.max_entries = sizes->filter_tgids;
  l->skel->maps.filter_tids.max_entries = sizes->filter_tids;
  l->skel->maps.filter_cgroups.max_entries = sizes->filter_cgroups;
  l->skel->maps.stacks.max_entries = sizes->stacks;
  l->skel->maps.counts.max_entries = sizes->counts;
  l->skel->maps.starts_hash.max_entries = sizes->starts_hash;
  l->skel->maps.wakers.max_entries = sizes->wakers;
  l->skel->maps.uw_files.max_entries = sizes->uw_files;
  l->skel->maps.uw_pages.max_entries = sizes->uw_pages;
  l->skel->maps.uw_rows.max_entries = sizes->uw_rows;
  l->skel->maps.uw_rules.max_entries = sizes->uw_rules;
}

int offcpu_light_load(struct offcpu_light *l) {
  int err = offcpu_lbpf__load(l->skel);
  return err < 0 ? err : err ? -err : 0;
}

void offcpu_light_get_fds(struct offcpu_light *l,
                          struct offcpu_light_fds *fds) {
  fds->switch_btf = l->skel->progs.offcpu_switch_btf.prog_fd;
  fds->waking_btf = l->skel->progs.offcpu_waking_btf.prog_fd;
  fds->fork_btf = l->skel->progs.offcpu_fork_btf.prog_fd;
  fds->seed_open = l->skel->progs.offcpu_seed_open.prog_fd;
  fds->seed_stacks = l->skel->progs.offcpu_seed_stacks.prog_fd;
  fds->flush = l->skel->progs.offcpu_flush.prog_fd;
  fds->stacks = l->skel->maps.stacks.map_fd;
  fds->counts = l->skel->maps.counts.map_fd;
  fds->waits_charged = l->skel->maps.waits_charged.map_fd;
  fds->new_processes = l->skel->maps.new_processes.map_fd;
  fds->filter_tgids = l->skel->maps.filter_tgids.map_fd;
  fds->filter_tids = l->skel->maps.filter_tids.map_fd;
  fds->wakers = l->skel->maps.wakers.map_fd;
  fds->filter_cgroups = l->skel->maps.filter_cgroups.map_fd;
  fds->uw_procs = l->skel->maps.uw_procs.map_fd;
  fds->uw_files = l->skel->maps.uw_files.map_fd;
  fds->uw_pages = l->skel->maps.uw_pages.map_fd;
  fds->uw_rows = l->skel->maps.uw_rows.map_fd;
  fds->uw_rules = l->skel->maps.uw_rules.map_fd;
  fds->uw_requests = l->skel->maps.uw_requests.map_fd;
  fds->uw_stats = l->skel->maps.uw_stat_map.map_fd;
  fds->uw_file_ids = l->skel->maps.uw_file_ids.map_fd;
}
