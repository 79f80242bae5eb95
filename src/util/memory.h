// How the C library's allocator holds memory for offcpu (issue #27).
#pragma once

namespace offcpu {

// Large blocks (unwind rows, DWARF sections, the profile's arrays) are
// given back to the kernel when freed, and every thread allocates from one
// heap, so that a block freed by one is reused by another. Call once,
// before any thread starts.
void limit_heap_growth();

} // namespace offcpu
