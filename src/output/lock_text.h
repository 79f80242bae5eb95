// Reports of rwsem waits: per stack the frames (leaf first, as in the
// off-CPU report), the thread, which lock and side, and the number, total,
// maximum and average of the waits. Largest total last.
#pragma once

#include <string>
#include <vector>

#include "collect/lock_sample.h"

namespace offcpu {

std::string format_lock_text(const std::vector<LockSample> &samples,
                             bool delimited);

// Folded lines (comm;user;kernel wait_us) through the common folded writer.
std::string format_lock_folded(const std::vector<LockSample> &samples,
                               bool delimited);

} // namespace offcpu
