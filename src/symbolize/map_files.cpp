#include "symbolize/map_files.h"

#include <cinttypes>
#include <cstdio>

namespace offcpu {

CheckedFile open_map_file(const std::string &pid_dir, const Mapping &m) {
  char range[64];
  snprintf(range, sizeof(range), "/%" PRIx64 "-%" PRIx64, m.start, m.end);
  FilePolicy mapped;
  mapped.follow_last_symlink = true;
  mapped.max_size = UINT64_MAX;
  return open_checked(pid_dir + "/map_files" + range, mapped);
}

} // namespace offcpu
