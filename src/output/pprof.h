// pprof's profile.proto, gzip-compressed, written by a small encoder of our
// own: enough for `go tool pprof`, Pyroscope and Parca to read an off-CPU
// (or lock-wait) profile with functions, mappings with build ids, and
// pid/tid/comm labels.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "collect/sample.h"

namespace offcpu {

struct PprofOptions {
  // Two values per sample: how many waits, and how long they took.
  std::string count_type = "events";
  std::string time_type = "off_cpu"; // "delay" for lock waits
  int64_t time_nanos = 0;            // when tracing started (wall clock)
  int64_t duration_nanos = 0;
  std::string comment;
};

// The uncompressed protobuf message.
std::string encode_pprof(const std::vector<Sample> &samples,
                         const PprofOptions &opts);

// gzip (RFC 1952) of data, as pprof files are stored.
std::string gzip_compress(const std::string &data);

} // namespace offcpu
