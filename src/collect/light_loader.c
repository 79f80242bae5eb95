#include "collect/light_loader.h"

#include <errno.h>
#include <linux/types.h>
#include <stdlib.h>
#include <string.h>

#include "offcpu/shared.h"

#include "offcpu.lskel.h"

struct offcpu_light {
  struct offcpu_lbpf *skel;
};

/* Maps and programs by name. */
// clang-format off
#define MAPS(X)                                                                \
  X(stacks) X(stack_scratch) X(orc_cache) X(kernel_walk_scratch)               \
  X(waits_charged) X(filter_tgids) X(filter_tids) X(starts_task)               \
  X(starts_hash) X(counts) X(new_processes) X(seen_stacks)
#define PROGS(X)                                                               \
  X(offcpu_switch_btf) X(offcpu_switch_raw) X(offcpu_seed_open)                \
  X(offcpu_seed_stacks) X(offcpu_flush)
// clang-format on

static struct bpf_map_desc *map_desc(struct offcpu_light *l, const char *n) {
#define MATCH(m)                                                               \
  if (strcmp(n, #m) == 0)                                                      \
    return &l->skel->maps.m;
  MAPS(MATCH)
#undef MATCH
  return NULL;
}

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

int offcpu_light_set_max_entries(struct offcpu_light *l, const char *map,
                                 unsigned int n) {
  struct bpf_map_desc *d = map_desc(l, map);
  if (!d)
    return -1;
  d->max_entries = n;
  return 0;
}

int offcpu_light_load(struct offcpu_light *l) {
  int err = offcpu_lbpf__load(l->skel);
  return err < 0 ? err : err ? -err : 0;
}

int offcpu_light_map_fd(struct offcpu_light *l, const char *map) {
  struct bpf_map_desc *d = map_desc(l, map);
  return d ? d->map_fd : -1;
}

int offcpu_light_prog_fd(struct offcpu_light *l, const char *prog) {
#define MATCH(p)                                                               \
  if (strcmp(prog, #p) == 0)                                                   \
    return l->skel->progs.p.prog_fd;
  PROGS(MATCH)
#undef MATCH
  return -1;
}
