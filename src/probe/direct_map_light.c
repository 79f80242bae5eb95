#include "probe/direct_map_light.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <time.h>

#include "direct_map.lskel.h"

/* Two words the search must read back through the page tables: one on this
 * thread's stack, one on a page of its own; each holds a value no stale
 * memory would. */
struct check_words {
  volatile uint64_t *heap;
  volatile uint64_t stack;
};

static uint64_t unguessable(void) {
  uint64_t v = 0;
  if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != (ssize_t)sizeof(v)) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    v = ((uint64_t)ts.tv_sec * 1000000007ull) ^ (uint64_t)ts.tv_nsec;
  }
  return v | (1ull << 63); /* never 0 nor a small number */
}

static int search(struct direct_map_lbpf *skel, struct check_words *w,
                  int count_all) {
  int err = direct_map_lbpf__load(skel);
  if (err)
    return err < 0 ? err : -err;
  w->stack = unguessable();
  *w->heap = unguessable();
  skel->bss->check_addr[0] = (uint64_t)(uintptr_t)&w->stack;
  skel->bss->check_value[0] = w->stack;
  skel->bss->check_addr[1] = (uint64_t)(uintptr_t)w->heap;
  skel->bss->check_value[1] = *w->heap;
  skel->bss->count_all = count_all ? 1 : 0;
  LIBBPF_OPTS(bpf_test_run_opts, run);
  if (bpf_prog_test_run_opts(skel->progs.find_direct_map.prog_fd, &run))
    return errno ? -errno : -EINVAL;
  return skel->bss->found_base ? 0 : -ENOENT;
}

static int find(uint64_t *base, uint32_t *levels, int count_all,
                uint32_t *passed, uint32_t *table_only) {
  struct check_words w;
  void *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (page == MAP_FAILED)
    return errno ? -errno : -ENOMEM;
  w.heap = (volatile uint64_t *)page + 17; /* not the page's first word */
  struct direct_map_lbpf *skel = direct_map_lbpf__open();
  int err = skel ? search(skel, &w, count_all) : (errno ? -errno : -ENOMEM);
  if (!err) {
    *base = skel->bss->found_base;
    *levels = skel->bss->found_levels;
  }
  if (skel && passed)
    *passed = skel->bss->passed;
  if (skel && table_only)
    *table_only = skel->bss->table_only;
  if (skel)
    direct_map_lbpf__destroy(skel);
  munmap(page, 4096);
  return err;
}

int offcpu_find_direct_map(uint64_t *base, uint32_t *levels) {
  return find(base, levels, 0, NULL, NULL);
}

int offcpu_count_direct_map_candidates(uint64_t *base, uint32_t *levels,
                                       uint32_t *passed, uint32_t *table_only) {
  return find(base, levels, 1, passed, table_only);
}
