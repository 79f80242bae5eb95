// Where results go: stdout, or a file that appears only when complete.
#pragma once

#include <optional>
#include <string>

#include "util/fd.h"
#include "util/output.h"

namespace offcpu {

class OutputFile {
public:
  // nullopt: stdout. A path is resolved without following links another
  // user could change (util/output_path.h); a regular file, or none yet, is
  // written to a temporary name in its directory and renamed over the name
  // by commit(): until then an interrupted run leaves nothing that looks
  // finished. A pipe, terminal, /dev/null or /dev/stdout is written in
  // place. Throws FatalError for a refused or unwritable path: before
  // tracing starts, not after.
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
  std::string path_;
  UniqueFd dir_;             // the directory the file is renamed in
  std::string name_;         // its name there
  std::string temp_;         // the temporary's name there
  std::string shown_;        // the temporary as a path, for messages
  std::string cleanup_path_; // the temporary through dir_, see add_cleanup_path
  bool committed_ = false;
  bool kept_ = false;     // left for the user: the name was taken meanwhile
  bool in_place_ = false; // a pipe or device: no temporary, no rename
  int cleanup_ = -1;
};

} // namespace offcpu
