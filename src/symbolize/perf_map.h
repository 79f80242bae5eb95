// perf map files (/tmp/perf-PID.map), written by JIT runtimes (the JVM with
// perf-map-agent, V8, .NET, LuaJIT...) to name code they generate:
// one "START SIZE name" line per function, hexadecimal addresses.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace offcpu {

struct PerfMapSymbol {
  uint64_t start = 0;
  uint64_t size = 0;
  std::string name;
};

// One line; false if malformed. `name` points into `line`.
struct PerfMapLine {
  uint64_t start = 0;
  uint64_t size = 0;
  std::string_view name;
};
bool parse_perf_map_line(std::string_view line, PerfMapLine &out);

// Parses a whole perf map; malformed lines are skipped. Sorted by start.
std::vector<PerfMapSymbol> parse_perf_map(std::string_view text);

// The symbol whose [start, start + size) holds addr, or null.
const PerfMapSymbol *find_perf_symbol(const std::vector<PerfMapSymbol> &syms,
                                      uint64_t addr);

// Names `wanted` addresses (sorted, unique) from the perf map open at `fd`,
// read in chunks up to max_bytes: one pass, memory for the wanted names
// only, however large the file. Later lines win (JITs reuse memory).
struct PerfMapScan {
  std::unordered_map<uint64_t, std::string> names;
  bool truncated = false; // the file was longer than max_bytes
  bool failed = false;    // a read error
};
PerfMapScan scan_perf_map(int fd, const std::vector<uint64_t> &wanted,
                          uint64_t max_bytes);

} // namespace offcpu
