// What every session does to a BPF object before load, one copy for all
// (offcpu, rwsem, ...): the settings (include/offcpu/settings.h, one list),
// filled as a plain struct and written into a skeleton's .rodata, and the
// sizes of the maps every program built from bpf/'s shared modules has
// (collect/offcpu_objects.h).
#pragma once

#include <bpf/libbpf.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>

#include "collect/map_budget.h"
#include "collect/offcpu_objects.h"
#include "offcpu/settings.h"
#include "probe/unwind_maps.h"

namespace offcpu {

// Every setting at the default the programs are built with.
inline offcpu_settings default_settings() {
  offcpu_settings s{};
#define OFFCPU_DEFAULT_SETTING(type, name, init) s.name = init;
  OFFCPU_SETTINGS(OFFCPU_DEFAULT_SETTING)
#undef OFFCPU_DEFAULT_SETTING
  return s;
}

// -n NAME: filter by name, cut to what a comm holds (with its NUL).
inline void set_target_name(offcpu_settings &s, const std::string &name) {
  s.filter_name = !name.empty();
  std::memset(s.target_name, 0, sizeof(s.target_name));
  std::memcpy(s.target_name, name.data(),
              std::min(name.size(), sizeof(s.target_name) - 1));
}

// Writes every setting into a skeleton's .rodata: any object built with
// bpf/settings.bpf.h has each of them, under the same name.
template <typename Rodata>
void write_settings(Rodata *ro, const offcpu_settings &s) {
#define OFFCPU_WRITE_SETTING(type, name, init) ro->name = s.name;
  OFFCPU_SETTINGS(OFFCPU_WRITE_SETTING)
#undef OFFCPU_WRITE_SETTING
  static_assert(sizeof(ro->target_name) == sizeof(s.target_name));
  std::memcpy(const_cast<char *>(ro->target_name), s.target_name,
              sizeof(s.target_name));
}

// What sizes the shared maps.
struct SharedMapNeeds {
  size_t pids = 0, tids = 0, cgroups = 0; // the filters' ids
  bool follow_children = false;           // processes join while tracing
  uint32_t stack_storage = 1;             // --stack-storage-size
  bool wakers = false;                    // --wakers
  std::optional<UnwindSizes> unwind;      // the user unwind tables, if used
};

struct SharedMapSizes {
#define OFFCPU_SIZE_FIELD(name) uint32_t name = 1;
  OFFCPU_SHARED_SIZED_MAPS(OFFCPU_SIZE_FIELD)
#undef OFFCPU_SIZE_FIELD
};

inline SharedMapSizes shared_map_sizes(const SharedMapNeeds &n) {
  auto at_least_1 = [](size_t v) {
    return static_cast<uint32_t>(std::max<size_t>(1, v));
  };
  SharedMapSizes s;
  // Children join the process filter as they are forked: room for many.
  s.filter_tgids = n.follow_children ? 65536u : at_least_1(n.pids);
  s.filter_tids = at_least_1(n.tids);
  s.filter_cgroups = at_least_1(n.cgroups);
  s.stacks = n.stack_storage;
  s.deep_stacks = deep_stack_storage(n.stack_storage);
  // Distinct wakers (thread, stacks): as many as stacks, at most.
  s.wakers = n.wakers ? n.stack_storage : 1u;
  // Arrays of size 1 where the tables are not used.
  const UnwindSizes u = n.unwind.value_or(UnwindSizes{});
  s.uw_files = u.files;
  s.uw_pages = u.pages;
  s.uw_rows = u.row_chunks;
  s.uw_rules = u.rules;
  return s;
}

// Copies the shared sizes into a struct with a field for each (struct
// offcpu_map_sizes, for either of offcpu's skeletons).
template <typename Sizes>
void set_shared_sizes(Sizes *dst, const SharedMapSizes &s) {
#define OFFCPU_COPY_SIZE(name) dst->name = s.name;
  OFFCPU_SHARED_SIZED_MAPS(OFFCPU_COPY_SIZE)
#undef OFFCPU_COPY_SIZE
}

// Sizes the shared maps of a libbpf skeleton (any program's), before load.
template <typename Skel>
void size_shared_maps(Skel *skel, const SharedMapSizes &s) {
#define OFFCPU_SET_SIZE(name) bpf_map__set_max_entries(skel->maps.name, s.name);
  OFFCPU_SHARED_SIZED_MAPS(OFFCPU_SET_SIZE)
#undef OFFCPU_SET_SIZE
}

} // namespace offcpu
