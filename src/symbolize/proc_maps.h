// A process's executable mappings, from /proc/PID/maps.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace offcpu {

struct Mapping {
  uint64_t start = 0;
  uint64_t end = 0;
  uint64_t offset = 0; // file offset of `start`
  uint64_t inode = 0;
  uint32_t dev_major = 0;
  uint32_t dev_minor = 0;
  bool executable = false;
  std::string path; // may be "[vdso]", "" (anonymous), or "... (deleted)"

  bool is_file() const { return !path.empty() && path[0] == '/'; }
  bool deleted() const;
  std::string real_path() const;    // the path without " (deleted)"
  std::string display_name() const; // basename of real_path()
};

// Parses maps text; malformed lines are skipped. Sorted by start address.
std::vector<Mapping> parse_proc_maps(std::string_view text);

// The mapping holding addr, or null.
const Mapping *find_mapping(const std::vector<Mapping> &maps, uint64_t addr);

} // namespace offcpu
