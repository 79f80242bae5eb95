#include "collect/light_loader.h"

#include <errno.h>
#include <linux/types.h>
#include <stdlib.h>

#include "offcpu/shared.h"

#include "offcpu.dlskel.h"
#include "offcpu.lskel.h"
#include "offcpu.mlskel.h"

/* Three light objects of one source: offcpu_lbpf (probe reads),
 * offcpu_dbpf (plain loads of kernel memory, 6.8+) and offcpu_mbpf (the
 * latter with programs that return at once: the split load's maps). They
 * differ in code only, so one set of accessors serves all: SKEL_DO runs
 * `op` on whichever this loader holds. */
struct offcpu_light {
  struct offcpu_lbpf *plain;
  struct offcpu_dbpf *direct;
  struct offcpu_mbpf *maps;
};

#define SKEL_DO(l, op)                                                         \
  do {                                                                         \
    if ((l)->maps) {                                                           \
      struct offcpu_mbpf *sk = (l)->maps;                                      \
      op;                                                                      \
    } else if ((l)->direct) {                                                  \
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

struct offcpu_light *offcpu_light_open_maps(void) {
  struct offcpu_light *l = calloc(1, sizeof(*l));
  if (!l)
    return NULL;
  l->maps = offcpu_mbpf__open();
  if (!l->maps) {
    free(l);
    return NULL;
  }
  return l;
}

void offcpu_light_destroy(struct offcpu_light *l) {
  if (!l)
    return;
  if (l->maps)
    offcpu_mbpf__destroy(l->maps);
  else if (l->direct)
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
#define SET_SIZE(name) sk->maps.name.max_entries = sizes->name;
  SKEL_DO(l, {OFFCPU_SIZED_MAPS(SET_SIZE)});
#undef SET_SIZE
}

int offcpu_light_load(struct offcpu_light *l, char *log, size_t log_size) {
  int err = 0;
  if (log && log_size) {
    log[0] = 0;
    /* Level 1: the path that failed, not every state verified. */
    SKEL_DO(l, (sk->ctx.log_level = 1, sk->ctx.log_size = (__u32)log_size,
                sk->ctx.log_buf = (__u64)(unsigned long)log));
  }
  if (l->maps)
    err = offcpu_mbpf__load(l->maps);
  else if (l->direct)
    err = offcpu_dbpf__load(l->direct);
  else
    err = offcpu_lbpf__load(l->plain);
  return err < 0 ? err : err ? -err : 0;
}

size_t offcpu_light_map_fds(struct offcpu_light *l, int *fds, size_t max) {
  size_t n = 0;
  /* The skeleton's maps are one bpf_map_desc each, in the object's order. */
  SKEL_DO(l, {
    const struct bpf_map_desc *m = (const struct bpf_map_desc *)&sk->maps;
    n = sizeof(sk->maps) / sizeof(*m);
    for (size_t i = 0; i < n && i < max; i++)
      fds[i] = m[i].map_fd;
  });
  return n;
}

void offcpu_light_get_fds(struct offcpu_light *l, struct offcpu_fds *fds) {
#define MAP_FD(name) fds->name = sk->maps.name.map_fd;
#define PROG_FD(name) fds->name = sk->progs.name.prog_fd;
#define NO_FD(name) fds->name = -1;
  SKEL_DO(l, {OFFCPU_MAPS(MAP_FD) OFFCPU_PROGS(PROG_FD)});
  OFFCPU_RAW_PROGS(NO_FD)
#undef MAP_FD
#undef PROG_FD
#undef NO_FD
}
