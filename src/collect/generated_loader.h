// Loads a libbpf object's programs through a loader program libbpf writes
// at run time (its gen_loader, what a light skeleton is built from), against
// maps that already exist. The kernel then relocates CO-RE accesses against
// its own BTF and finds the tp_btf targets itself; a plain libbpf load
// parses the kernel's BTF in user space (~8 ms) and searches it for each
// relocation's candidates (~12 ms) first, in every object (issue 27: the
// split load's two objects at start-up).
#pragma once

#include <bpf/libbpf.h>

#include <vector>

#include "util/fd.h"

namespace offcpu {

// What the loader gets besides the object.
struct GeneratedLoad {
  // A descriptor for every map of the object, in its order; the read-only
  // data maps' (.rodata*) are not used: each load creates its own, with
  // this object's contents, frozen as libbpf would.
  std::vector<int> map_fds;
  // A map the loader creates itself at UINT32_MAX entries, so that the
  // load fails as a real one would (--fail-load); nullptr: none.
  const bpf_map *fail_map = nullptr;
};

// Loads the autoloaded programs of `obj` (opened, with its data written,
// not loaded) into `progs`, one per autoloaded program in the object's
// order: 0; -ENOTSUP when this libbpf's generated loader does not have the
// shape this code rewrites (nothing was loaded: load with libbpf instead);
// or the load's negative errno.
int load_generated(bpf_object *obj, const GeneratedLoad &in,
                   std::vector<UniqueFd> *progs);

} // namespace offcpu
