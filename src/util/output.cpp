#include "util/output.h"

#include <unistd.h>

#include <cerrno>

namespace offcpu {

WriteResult write_all(int fd, const std::string &data) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return errno == EPIPE ? WriteResult::ClosedPipe : WriteResult::Failed;
    }
    done += static_cast<size_t>(n);
  }
  return WriteResult::Ok;
}

} // namespace offcpu
