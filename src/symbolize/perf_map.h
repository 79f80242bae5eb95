// perf map files (/tmp/perf-PID.map), written by JIT runtimes (the JVM with
// perf-map-agent, V8, .NET, LuaJIT...) to name code they generate:
// one "START SIZE name" line per function, hexadecimal addresses.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace offcpu {

struct PerfMapSymbol {
  uint64_t start = 0;
  uint64_t size = 0;
  std::string name;
};

// Parses a perf map; malformed lines are skipped. Sorted by start.
std::vector<PerfMapSymbol> parse_perf_map(std::string_view text);

// The symbol whose [start, start + size) holds addr, or null.
const PerfMapSymbol *find_perf_symbol(const std::vector<PerfMapSymbol> &syms,
                                      uint64_t addr);

} // namespace offcpu
