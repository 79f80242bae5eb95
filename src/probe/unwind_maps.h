// The walker's unwind-table maps as both sides of the loaded object see
// them: the sessions (collect/) size them and hand out their descriptors,
// the Unwinder (unwind/) fills them. Plain structs, kept below both so
// neither folder includes the other's headers for them.
#pragma once

#include <cstdint>

#include "offcpu/unwind.h"

namespace offcpu {

// Descriptors of the walker's maps, from the loaded object.
struct UnwindMapFds {
  int procs = -1, files = -1, pages = -1, rows = -1, rules = -1;
  // The walker's uw_epoch in its mapped .bss (null: none), bumped after
  // every install so its stack memos know the tables changed.
  uint32_t *epoch = nullptr;
  // Files with tables by identity, for walks of processes not installed
  // yet (-1: none).
  int file_ids = -1;
  // What each process was asked about and the walks made since without
  // its tables (struct uw_demand), for the order of the queue (-1: none).
  int asked = -1;
};

// Sizes of the walker's arrays (entries), fixed when the object is loaded.
struct UnwindSizes {
  uint32_t files = 1, pages = 1, row_chunks = 1, rules = 1;
  // Kernel memory the arrays take.
  uint64_t bytes() const {
    return uint64_t{files} * sizeof(uw_file) + uint64_t{pages} * 8 +
           uint64_t{row_chunks} * sizeof(uw_chunk) +
           uint64_t{rules} * sizeof(uw_rule);
  }
};

} // namespace offcpu
