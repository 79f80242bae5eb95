// The walker's rule cache key for each installed process (uw_proc.gen):
// one gen per distinct installed content (the mappings, their files and
// bases), shared by every process installed alike. The walker caches each
// address's rule by (gen, address), per CPU; keyed by process, the
// backends of a pre-fork server (postgres under pgbench: a dozen processes
// of one image) each filled the cache with their own copy of the same
// rules, and missed it as often.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "offcpu/unwind.h"

namespace offcpu {

class LayoutGens {
public:
  // Contents are remembered up to `max_bytes`; past it those known so far
  // are forgotten (their processes keep their gens; the same content
  // installed again gets a new one: less sharing, never a wrong rule).
  explicit LayoutGens(size_t max_bytes = kDefaultMaxBytes)
      : max_bytes_(max_bytes) {}

  // The gen of the content of maps[0, n): the one given to the same
  // content before, else a new one. A gen never names two contents. Empty
  // once the gens below UW_GEN_LIMIT are spent (2^31 new contents).
  std::optional<uint32_t> gen_for(const uw_mapping *maps, size_t n);

  size_t bytes() const { return bytes_; }
  size_t contents() const { return by_hash_.size(); }

  static constexpr size_t kDefaultMaxBytes = 4u << 20;

private:
  struct Layout {
    uint32_t gen;
    std::vector<uw_mapping> maps;
  };
  size_t max_bytes_;
  size_t bytes_ = 0;
  uint32_t last_ = 0;
  std::unordered_multimap<uint64_t, Layout> by_hash_;
};

} // namespace offcpu
