// The split load (issue 27, start-up): the light object creates every map
// with each program cut to a return (the maps_only setting), then the real
// programs are verified in two objects at once, one per thread, against
// those maps. The verifier is most of a start, and the light loader
// verifies its programs one after the other in one system call. Each
// object loads through a loader libbpf generates at run time, rewritten to
// take the light object's maps (generated_loader.h); where that loader is
// not the shape expected, by libbpf (bpf_map__reuse_fd), which parses the
// kernel's BTF in each object first (~20 ms of CPU, ~11 MB, each).
#pragma once

#include <cstdint>
#include <string>

#include "collect/offcpu_objects.h"
#include "offcpu/settings.h"
#include "util/fd.h"

struct offcpu_light;

namespace offcpu {

// How a share's programs load: through a loader libbpf generates for it
// (generated_loader.h; the kernel relocates CO-RE itself), or by libbpf,
// which parses the kernel's BTF first (where the generated loader is not
// the shape expected, or --fail-load generated).
enum class ShareLoader { Generated, Libbpf };

// The hooks not every run attaches.
struct SplitWant {
  bool waking = false;
  bool fork = false;
  // --fail-load split: the counts map created by the loader, too large for
  // the kernel (E2BIG), so the split load fails where a real one would.
  bool fail = false;
  // The window edges' iterators too; else they load after the attach
  // (load_edge_programs).
  bool edges = true;
  ShareLoader loader = ShareLoader::Generated;
};

// The largest preallocated maps, created by a thread of their own while
// the light object creates the others (these at one entry each): the
// kernel allocates and zeroes them whole at creation, about 20 ms of a
// quiet start (when the stacks were one 64 MiB map ~10, the unwind rows
// ~5) that was in series before any program was verified.
#define OFFCPU_SPLIT_BIG_MAPS(X)                                               \
  X(stacks)                                                                    \
  X(deep_stacks)                                                               \
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
  // How each loaded.
  ShareLoader first = ShareLoader::Generated, second = ShareLoader::Generated;
};

// Loads the programs with `settings` against the maps of `light` (loaded
// with maps_only set), the big ones out->maps': 0, or a negative errno.
int load_split_programs(offcpu_light *light, const offcpu_settings &settings,
                        const SplitWant &want, SplitPrograms *out,
                        SplitTimes *times);

// Loads the window edges' iterators (offcpu_seed_stacks, offcpu_flush) with
// `settings` (edges_later cleared here) against the split load's maps:
// `light`'s, the big ones `big`'s. `fail`, `loader`: as SplitWant's (on
// return, *loader: how they loaded). 0, or a negative errno.
int load_edge_programs(offcpu_light *light, const SplitPrograms &big,
                       const offcpu_settings &settings, bool fail,
                       ShareLoader *loader, SplitPrograms *out);

} // namespace offcpu
