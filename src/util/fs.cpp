#include "util/fs.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "util/fd.h"

namespace offcpu {

std::optional<std::string> SystemFileReader::read(const std::string &path,
                                                  std::size_t max_bytes) const {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY));
  if (!fd)
    return std::nullopt;
  std::string out;
  char buf[65536];
  // /proc files report size 0, so read until EOF instead of trusting stat.
  while (out.size() < max_bytes) {
    ssize_t n = ::read(fd.get(), buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return std::nullopt;
    }
    if (n == 0)
      break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  if (out.size() > max_bytes)
    out.resize(max_bytes);
  return out;
}

const FileReader &system_files() {
  static const SystemFileReader reader;
  return reader;
}

} // namespace offcpu
