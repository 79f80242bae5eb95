// xz decompression (liblzma), for MiniDebugInfo sections.
#pragma once

#include <cstddef>
#include <string>

namespace offcpu {

// The decompressed bytes, or empty on any error or past max_out bytes.
std::string xz_decompress(const std::string &in, size_t max_out);

} // namespace offcpu
