// Separate debug files (found by build id or .gnu_debuglink) are named by
// the binary, which another user may control: what one may cost, shared
// by the unwinder (.debug_frame) and the symbolizer (.symtab), so both
// apply the same rule.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace offcpu {

// A debug file is larger than its stripped binary, but not without bound:
// at most this many times its size, never less than the floor, never more
// than the ceiling (a sparse 20 GB file named like a debug file would
// otherwise be read, or CRC'd, for a minute).
constexpr uint64_t kDebugFileRatio = 32;
constexpr uint64_t kDebugFileFloor = uint64_t{64} << 20;
constexpr uint64_t kDebugFileCeiling = uint64_t{4} << 30;
// CRC time (.gnu_debuglink): per debug file, and for every one of a run.
constexpr uint64_t kCrcNsPerFile = 1000000000;
constexpr uint64_t kCrcNsPerRun = 2000000000;

// The largest debug file accepted for a binary of `binary_size` bytes.
uint64_t max_debug_file_bytes(uint64_t binary_size);
// The rule, as loss messages state it: "over 32 times its binary's size
// and 64 MiB".
std::string debug_file_size_rule();

// CRC-32 of a whole file as .gnu_debuglink records it; nullopt if
// unreadable, longer than max_bytes, or `give_up` (asked every 4 MiB) says
// so.
std::optional<uint32_t> file_crc32(int fd, uint64_t max_bytes,
                                   const std::function<bool()> &give_up = {});

// Why a debug file's CRC was not had.
enum class CrcStop {
  None,
  Unreadable, // an I/O error, or longer than allowed
  FileTime,   // over kCrcNsPerFile
  RunTime,    // the run's kCrcNsPerRun spent (by other files)
  Deadline,   // the caller's deadline came (its file's, the run's end)
  Stopped,    // the caller's stop() said so
};

struct CrcOutcome {
  std::optional<uint32_t> crc;
  CrcStop stop = CrcStop::None; // why crc is empty
};

// The CRC time of a run's debug files: one per reader of them, each file
// held to its share and all of them to the run's.
class CrcBudget {
public:
  explicit CrcBudget(uint64_t per_file_ns = kCrcNsPerFile,
                     uint64_t per_run_ns = kCrcNsPerRun)
      : per_file_ns_(per_file_ns), left_ns_(per_run_ns) {}
  // The CRC of `fd` (at most `max_bytes` long), given up at its share of
  // time, at `deadline_ns` (CLOCK_MONOTONIC; 0: none) or when `stop` says.
  CrcOutcome crc(int fd, uint64_t max_bytes, uint64_t deadline_ns = 0,
                 const std::function<bool()> &stop = {});
  uint64_t left_ns() const { return left_ns_; }

private:
  uint64_t per_file_ns_;
  uint64_t left_ns_;
};

} // namespace offcpu
