// Opening the file a process maps through /proc/PID/map_files.
#pragma once

#include <string>

#include "symbolize/proc_maps.h"
#include "util/safe_file.h"

namespace offcpu {

// The file mapped at `m` by the process whose /proc directory is `pid_dir`,
// through its map_files link: it reaches the very file that is mapped, even
// when it was deleted or lives in another mount namespace (the kernel
// resolves that link, not a path the user chose). Any size: the readers
// read only the sections they use.
CheckedFile open_map_file(const std::string &pid_dir, const Mapping &m);

} // namespace offcpu
