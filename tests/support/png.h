// Just enough PNG decoding (8-bit RGB/RGBA, not interlaced) to look at a
// browser's screenshot in a test.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace offcpu::test {

struct Image {
  uint32_t width = 0, height = 0;
  std::vector<uint8_t> rgb; // width * height * 3
};

std::optional<Image> read_png(const std::string &path);

} // namespace offcpu::test
