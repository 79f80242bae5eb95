// Where results go: stdout, or a file that appears only when complete.
#pragma once

#include <optional>
#include <string>

#include "util/fd.h"
#include "util/output.h"

namespace offcpu {

class OutputFile {
public:
  // nullopt: stdout. A path: written to a temporary name in the same
  // directory and renamed over `path` by commit(); until then an interrupted
  // run leaves nothing that looks finished. An existing pipe or device is
  // written in place. Throws FatalError if the path is a directory or
  // cannot be written: before tracing starts, not after.
  explicit OutputFile(const std::optional<std::string> &path);
  ~OutputFile(); // removes the temporary file unless committed
  OutputFile(const OutputFile &) = delete;
  OutputFile &operator=(const OutputFile &) = delete;

  // Ok, ClosedPipe (stdout reader gone) or throws FatalError naming the cause.
  WriteResult write(const std::string &data);
  void commit();

private:
  UniqueFd file_; // owned when writing a file; stdout is not ours
  int fd_ = 1;
  std::string path_, temp_;
  bool committed_ = false;
  bool in_place_ = false; // a pipe or device: no temporary, no rename
  int cleanup_ = -1;      // see add_cleanup_path
};

} // namespace offcpu
