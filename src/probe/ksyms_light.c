#include "probe/ksyms_light.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>

#include "ksyms.lskel.h"

int offcpu_resolve_kernel_text(struct offcpu_kernel_text *text) {
  struct ksyms_lbpf *skel = ksyms_lbpf__open();
  if (!skel)
    return errno ? -errno : -ENOMEM;
  int err = ksyms_lbpf__load(skel);
  if (err) {
    ksyms_lbpf__destroy(skel);
    return err < 0 ? err : -err;
  }
  /* The program writes the addresses over the layout given here. */
  skel->bss->found = *text;
  LIBBPF_OPTS(bpf_test_run_opts, run);
  err = bpf_prog_test_run_opts(skel->progs.resolve_kernel_text.prog_fd, &run);
  if (err)
    err = errno ? -errno : -EINVAL;
  else
    *text = skel->bss->found;
  ksyms_lbpf__destroy(skel);
  return err;
}
