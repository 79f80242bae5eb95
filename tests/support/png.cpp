#include "support/png.h"

#include <zlib.h>

#include <cstdlib>
#include <fstream>
#include <iterator>

namespace offcpu::test {
namespace {

uint32_t be32(const uint8_t *p) {
  return static_cast<uint32_t>(p[0]) << 24 | static_cast<uint32_t>(p[1]) << 16 |
         static_cast<uint32_t>(p[2]) << 8 | p[3];
}

uint8_t paeth(int a, int b, int c) {
  int p = a + b - c, pa = std::abs(p - a), pb = std::abs(p - b),
      pc = std::abs(p - c);
  return static_cast<uint8_t>(pa <= pb && pa <= pc ? a : pb <= pc ? b : c);
}

} // namespace

std::optional<Image> read_png(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<uint8_t> f((std::istreambuf_iterator<char>(in)),
                         std::istreambuf_iterator<char>());
  if (f.size() < 8 || f[1] != 'P' || f[2] != 'N' || f[3] != 'G')
    return std::nullopt;
  Image img;
  int channels = 0;
  std::vector<uint8_t> idat;
  for (size_t p = 8; p + 12 <= f.size();) {
    uint32_t len = be32(&f[p]);
    std::string type(f.begin() + static_cast<long>(p) + 4,
                     f.begin() + static_cast<long>(p) + 8);
    if (p + 12 + len > f.size())
      return std::nullopt;
    const uint8_t *data = &f[p + 8];
    if (type == "IHDR") {
      img.width = be32(data);
      img.height = be32(data + 4);
      if (data[8] != 8 || data[12] != 0)
        return std::nullopt; // 8-bit, not interlaced only
      channels = data[9] == 6 ? 4 : data[9] == 2 ? 3 : 0;
      if (!channels)
        return std::nullopt;
    } else if (type == "IDAT") {
      idat.insert(idat.end(), data, data + len);
    }
    p += 12 + len;
  }
  size_t stride = static_cast<size_t>(img.width) * channels;
  std::vector<uint8_t> raw((stride + 1) * img.height);
  uLongf raw_len = raw.size();
  if (!channels ||
      uncompress(raw.data(), &raw_len, idat.data(), idat.size()) != Z_OK ||
      raw_len != raw.size())
    return std::nullopt;
  std::vector<uint8_t> prev(stride, 0), cur(stride);
  img.rgb.reserve(static_cast<size_t>(img.width) * img.height * 3);
  for (uint32_t y = 0; y < img.height; y++) {
    const uint8_t *row = &raw[y * (stride + 1)];
    uint8_t filter = row[0];
    for (size_t x = 0; x < stride; x++) {
      int a = x >= static_cast<size_t>(channels) ? cur[x - channels] : 0;
      int b = prev[x];
      int c = x >= static_cast<size_t>(channels) ? prev[x - channels] : 0;
      int v = row[1 + x];
      switch (filter) {
      case 1:
        v += a;
        break;
      case 2:
        v += b;
        break;
      case 3:
        v += (a + b) / 2;
        break;
      case 4:
        v += paeth(a, b, c);
        break;
      default:
        break;
      }
      cur[x] = static_cast<uint8_t>(v);
    }
    for (uint32_t x = 0; x < img.width; x++)
      for (int ch = 0; ch < 3; ch++)
        img.rgb.push_back(cur[x * channels + ch]);
    prev.swap(cur);
  }
  return img;
}

} // namespace offcpu::test
