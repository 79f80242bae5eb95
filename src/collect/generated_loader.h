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
  // A descriptor for every map of the object, in its order, each of the
  // object's map's shape; the read-only data maps' (.rodata*) are not used:
  // each load creates its own, with this object's contents, frozen.
  std::vector<int> map_fds;
  // A map the loader creates itself at UINT32_MAX entries, so that the
  // load fails as a real one would (--fail-load); nullptr: none.
  const bpf_map *fail_map = nullptr;
  // The CPU the loader runs on (-1: wherever the thread is). The kernel
  // runs it with migration disabled, verifier and all: two loaders at once
  // must start on two CPUs.
  int cpu = -1;
};

// Loads the autoloaded programs of `obj` (opened, with its data written,
// not loaded) into `progs`, one per autoloaded program in the object's
// order: 0, or a negative errno. *unknown_shape: this libbpf's generated
// loader is not the shape this code rewrites, and nothing was loaded (load
// with libbpf instead).
int load_generated(bpf_object *obj, const GeneratedLoad &in,
                   std::vector<UniqueFd> *progs, bool *unknown_shape);

} // namespace offcpu
