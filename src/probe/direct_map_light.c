#include "probe/direct_map_light.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>

#include "direct_map.lskel.h"

int offcpu_find_direct_map(uint64_t *base, uint32_t *levels) {
  struct direct_map_lbpf *skel = direct_map_lbpf__open();
  if (!skel)
    return errno ? -errno : -ENOMEM;
  int err = direct_map_lbpf__load(skel);
  if (err) {
    direct_map_lbpf__destroy(skel);
    return err < 0 ? err : -err;
  }
  LIBBPF_OPTS(bpf_test_run_opts, run);
  err = bpf_prog_test_run_opts(skel->progs.find_direct_map.prog_fd, &run);
  if (err)
    err = errno ? -errno : -EINVAL;
  else if (!skel->bss->found_base)
    err = -ENOENT;
  else {
    *base = skel->bss->found_base;
    *levels = skel->bss->found_levels;
  }
  direct_map_lbpf__destroy(skel);
  return err;
}
