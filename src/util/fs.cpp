#include "util/fs.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "util/fd.h"

namespace offcpu {

bool SystemFileReader::read_chunks(
    const std::string &path, std::size_t max_bytes,
    const std::function<void(std::string_view)> &sink) const {
  UniqueFd fd(
      ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  struct stat st {};
  // Regular files only (/proc files are): never a FIFO or a device.
  if (!fd || fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode))
    return false;
  char buf[65536];
  std::size_t total = 0;
  // /proc files report size 0, so read until EOF instead of trusting stat.
  while (total < max_bytes) {
    ssize_t n = ::read(fd.get(), buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return false;
    }
    if (n == 0)
      break;
    std::size_t take = std::min(static_cast<std::size_t>(n), max_bytes - total);
    sink(std::string_view(buf, take));
    total += take;
  }
  return true;
}

std::optional<std::string> SystemFileReader::read(const std::string &path,
                                                  std::size_t max_bytes) const {
  std::string out;
  if (!read_chunks(path, max_bytes, [&](std::string_view c) { out.append(c); }))
    return std::nullopt;
  return out;
}

std::optional<std::string> SystemFileReader::read_at(const std::string &path,
                                                     uint64_t offset,
                                                     std::size_t size) const {
  UniqueFd fd(
      ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (!fd)
    return std::nullopt;
  std::string out(size, '\0');
  std::size_t done = 0;
  while (done < size) {
    ssize_t n = ::pread(fd.get(), out.data() + done, size - done,
                        static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    done += static_cast<std::size_t>(n);
  }
  if (done != size)
    return std::nullopt;
  return out;
}

const FileReader &system_files() {
  static const SystemFileReader reader;
  return reader;
}

} // namespace offcpu
