// pprof's profile.proto, gzip-compressed, written by a small encoder of our
// own: enough for `go tool pprof`, Pyroscope and Parca to read an off-CPU
// (or lock-wait) profile with functions, mappings with build ids, and
// pid/tid/comm labels.
#pragma once

#include <string>

#include "model/layout.h"
#include "model/profile.h"

namespace offcpu {

// The uncompressed protobuf message. Sample types: events/count and
// off_cpu/nanoseconds, or contentions/count and delay/nanoseconds for lock
// waits.
std::string encode_pprof(const Profile &profile,
                         const LayoutOptions &layout = {});

// gzip (RFC 1952) of data, as pprof files are stored.
std::string gzip_compress(const std::string &data);

} // namespace offcpu
