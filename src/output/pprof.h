// pprof's profile.proto, gzip-compressed, written by a small encoder of our
// own: enough for `go tool pprof`, Pyroscope and Parca to read an off-CPU
// (or lock-wait) profile and to name it again from the files: locations at
// their real addresses (a caller at its call, the return address - 1),
// mappings with the process's ranges, file offsets, file names and build
// ids ([kernel.kallsyms] around the kernel addresses seen), functions with
// their file, pid/tid/comm labels (and lock/side for lock waits).
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
