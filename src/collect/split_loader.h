// The split load (issue 27, start-up): the light object creates every map
// with each program cut to a return (the maps_only setting), then libbpf
// verifies the real programs in two objects at once, one per thread, against
// those maps (bpf_map__reuse_fd). The verifier is most of a start, and the
// light loader verifies its programs one after the other in one system
// call; its generated loader cannot take maps it did not create, and libbpf
// alone would parse the kernel's BTF once more to create them. Each libbpf
// object parses that BTF (~7 ms, ~11 MB while it loads), the two at once.
#pragma once

#include <cstdint>
#include <string>

#include "collect/offcpu_objects.h"
#include "offcpu/settings.h"
#include "util/fd.h"

struct offcpu_light;

namespace offcpu {

// The hooks not every run attaches.
struct SplitWant {
  bool waking = false;
  bool fork = false;
  // --fail-load split: the counts map created by libbpf, too large for the
  // kernel (E2BIG), so the split load fails where a real one would.
  bool fail = false;
  // The window edges' iterators too; else they load after the attach
  // (load_edge_programs).
  bool edges = true;
};

// The largest preallocated maps, created by a thread of their own while
// the light object creates the others (these at one entry each): the
// kernel allocates and zeroes them whole at creation, about 20 ms of a
// quiet start (stacks 64 MiB ~10, the unwind rows ~5) that was in series
// before any program was verified.
#define OFFCPU_SPLIT_BIG_MAPS(X)                                               \
  X(stacks)                                                                    \
  X(wakers)                                                                    \
  X(uw_rows)                                                                   \
  X(uw_pages)

// The programs' descriptors (-1: not loaded) and the big maps'; the libbpf
// objects are let go once loaded.
struct SplitPrograms {
#define OFFCPU_SPLIT_FD(name) UniqueFd name;
  OFFCPU_PROGS(OFFCPU_SPLIT_FD)
  struct {
    OFFCPU_SPLIT_BIG_MAPS(OFFCPU_SPLIT_FD)
  } maps;
#undef OFFCPU_SPLIT_FD
};

// Creates the big maps at `sizes` into out->maps, each as the BPF object
// defines it: 0, or a negative errno.
int create_split_maps(const offcpu_map_sizes &sizes, SplitPrograms *out);

// How long each thread's object took to load, in ns (for -v).
struct SplitTimes {
  uint64_t first_ns = 0, second_ns = 0;
};

// Loads the programs with `settings` against the maps of `light` (loaded
// with maps_only set), the big ones out->maps': 0, or a negative errno.
int load_split_programs(offcpu_light *light, const offcpu_settings &settings,
                        const SplitWant &want, SplitPrograms *out,
                        SplitTimes *times);

// Loads the window edges' iterators (offcpu_seed_stacks, offcpu_flush) with
// `settings` (edges_later cleared here) against the split load's maps:
// `light`'s, the big ones `big`'s. `fail`: as SplitWant's. 0, or a
// negative errno.
int load_edge_programs(offcpu_light *light, const SplitPrograms &big,
                       const offcpu_settings &settings, bool fail,
                       SplitPrograms *out);

} // namespace offcpu
