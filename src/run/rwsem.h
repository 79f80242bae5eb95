// `offcpu rwsem`: rw-semaphore waits of the threads of a process, chosen by
// name or PID, reported every interval.
#pragma once

#include "cli/options.h"

namespace offcpu {

int run_rwsem(const RwsemOptions &opts);

// Whether a process (or, with threads, a thread) of this name runs now.
bool process_name_exists(const std::string &name, bool threads);

} // namespace offcpu
