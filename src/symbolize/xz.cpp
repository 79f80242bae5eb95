#include "symbolize/xz.h"

#include <lzma.h>

namespace offcpu {

std::string xz_decompress(const std::string &in, size_t max_out) {
  lzma_stream strm = LZMA_STREAM_INIT;
  // The memory limit bounds what a hostile file can make us allocate.
  if (lzma_stream_decoder(&strm, 256u << 20, 0) != LZMA_OK)
    return {};
  std::string out;
  char buf[65536];
  strm.next_in = reinterpret_cast<const uint8_t *>(in.data());
  strm.avail_in = in.size();
  lzma_ret ret = LZMA_OK;
  while (ret == LZMA_OK) {
    strm.next_out = reinterpret_cast<uint8_t *>(buf);
    strm.avail_out = sizeof(buf);
    ret = lzma_code(&strm, LZMA_FINISH);
    out.append(buf, sizeof(buf) - strm.avail_out);
    if (out.size() > max_out) {
      ret = LZMA_MEMLIMIT_ERROR;
      break;
    }
  }
  lzma_end(&strm);
  return ret == LZMA_STREAM_END ? out : std::string();
}

} // namespace offcpu
