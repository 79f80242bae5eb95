// Writing results to stdout in one piece.
#pragma once

#include <string>

namespace offcpu {

enum class WriteResult { Ok, ClosedPipe, Failed };

// Writes all of `data` to fd, retrying short writes and EINTR.
WriteResult write_all(int fd, const std::string &data);

} // namespace offcpu
