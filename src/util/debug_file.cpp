#include "util/debug_file.h"

#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>

#include "util/clock.h"

namespace offcpu {

uint64_t max_debug_file_bytes(uint64_t binary_size) {
  const uint64_t scaled = binary_size > kDebugFileCeiling / kDebugFileRatio
                              ? kDebugFileCeiling
                              : binary_size * kDebugFileRatio;
  return std::min(kDebugFileCeiling, std::max(kDebugFileFloor, scaled));
}

std::string debug_file_size_rule() {
  return "over " + std::to_string(kDebugFileRatio) +
         " times its binary's size and " +
         std::to_string(kDebugFileFloor >> 20) + " MiB";
}

std::optional<uint32_t> file_crc32(int fd, uint64_t max_bytes,
                                   const std::function<bool()> &give_up) {
  uLong crc = crc32(0L, Z_NULL, 0);
  unsigned char buf[65536];
  uint64_t done = 0;
  for (unsigned chunk = 0;; chunk++) {
    if (chunk % 64 == 63 && give_up && give_up())
      return std::nullopt;
    ssize_t n = ::pread(fd, buf, sizeof(buf), static_cast<off_t>(done));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return std::nullopt;
    if (n == 0)
      break;
    done += static_cast<uint64_t>(n);
    if (done > max_bytes)
      return std::nullopt;
    crc = crc32(crc, buf, static_cast<uInt>(n));
  }
  return static_cast<uint32_t>(crc);
}

CrcOutcome CrcBudget::crc(int fd, uint64_t max_bytes, uint64_t deadline_ns,
                          const std::function<bool()> &stop) {
  CrcOutcome out;
  if (left_ns_ == 0) {
    out.stop = CrcStop::RunTime;
    return out;
  }
  const uint64_t start = monotonic_ns();
  // Whichever share is smaller ends this file's CRC, and names the cause.
  const bool run_limits = left_ns_ < per_file_ns_;
  const uint64_t end = start + std::min(per_file_ns_, left_ns_);
  CrcStop why = CrcStop::None;
  out.crc = file_crc32(fd, max_bytes, [&] {
    const uint64_t now = monotonic_ns();
    if (stop && stop())
      why = CrcStop::Stopped;
    else if (deadline_ns && now >= deadline_ns)
      why = CrcStop::Deadline;
    else if (now >= end)
      why = run_limits ? CrcStop::RunTime : CrcStop::FileTime;
    return why != CrcStop::None;
  });
  left_ns_ -= std::min(left_ns_, monotonic_ns() - start);
  if (!out.crc)
    out.stop = why == CrcStop::None ? CrcStop::Unreadable : why;
  return out;
}

} // namespace offcpu
