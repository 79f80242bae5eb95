#include "probe/ksyms_light.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ksyms.lskel.h"

/* "name+0x0/0x30": the function's end from its start and size; 0 if the
 * text is not that. */
static __u64 end_of(__u64 start, const char *printed) {
  const char *size = strrchr(printed, '/');
  if (!start || !size)
    return 0;
  char *rest = NULL;
  unsigned long long n = strtoull(size + 1, &rest, 16);
  return rest != size + 1 && n > 0 && n < (1u << 20) ? start + n : 0;
}

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
  for (int i = 0; !err && i < OFFCPU_TIMER_FNS; i++) {
    char printed[OFFCPU_NAME_LEN];
    memcpy(printed, skel->bss->timer_fn_text[i], sizeof(printed));
    printed[sizeof(printed) - 1] = 0;
    text->timer_fn_end[i] = end_of(text->timer_fn_start[i], printed);
    if (!text->timer_fn_end[i])
      text->timer_fn_start[i] = 0;
  }
  ksyms_lbpf__destroy(skel);
  return err;
}
