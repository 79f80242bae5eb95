// The one-shot BPF syscall programs of bpf/ksyms.bpf.c (kernel addresses
// and names through the kernel itself), owned RAII.
#pragma once

#include <memory>

#include "ksyms.skel.h"

namespace offcpu {

struct KsymsDeleter {
  void operator()(ksyms_bpf *s) const { ksyms_bpf__destroy(s); }
};
using KsymsProgram = std::unique_ptr<ksyms_bpf, KsymsDeleter>;

} // namespace offcpu
