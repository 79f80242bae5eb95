#include "util/output_file.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "util/error.h"
#include "util/signals.h"

namespace offcpu {

OutputFile::OutputFile(const std::optional<std::string> &path) {
  if (!path)
    return;
  path_ = *path;
  struct stat st {};
  if (stat(path_.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    if (S_ISDIR(st.st_mode))
      throw runtime_error("cannot write " + path_ + ": it is a directory");
    // A pipe, terminal or device (/dev/stdout, a shell's >(...)): written
    // in place. Renaming a file over it would replace the node itself.
    file_.reset(::open(path_.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY));
    if (!file_)
      throw runtime_error("cannot write " + path_ + ": " +
                          std::strerror(errno));
    fd_ = file_.get();
    in_place_ = true;
    return;
  }
  temp_ = path_ + ".offcpu-XXXXXX";
  file_.reset(mkostemp(temp_.data(), O_CLOEXEC));
  if (!file_)
    throw runtime_error("cannot write " + path_ + ": " + std::strerror(errno));
  fd_ = file_.get();
  fchmod(fd_, 0644);
  cleanup_ = add_cleanup_path(temp_.c_str());
}

OutputFile::~OutputFile() {
  if (path_.empty())
    return;
  file_.reset();
  forget_cleanup_path(cleanup_);
  if (!committed_ && !in_place_)
    unlink(temp_.c_str());
}

WriteResult OutputFile::write(const std::string &data) {
  WriteResult r = write_all(fd_, data);
  if (r == WriteResult::Failed)
    throw runtime_error("cannot write " +
                        (path_.empty() ? std::string("the results") : path_) +
                        ": " + std::strerror(errno));
  return r;
}

void OutputFile::commit() {
  if (path_.empty() || committed_ || in_place_)
    return;
  // close() reports what delayed writes failed: checked, not left to RAII.
  bool ok = fsync(fd_) == 0;
  ok = close(file_.release()) == 0 && ok;
  fd_ = -1;
  if (!ok)
    throw runtime_error("cannot write " + path_ + ": " + std::strerror(errno));
  if (rename(temp_.c_str(), path_.c_str()) != 0)
    throw runtime_error("cannot write " + path_ + ": " + std::strerror(errno));
  committed_ = true;
  forget_cleanup_path(cleanup_);
  cleanup_ = -1;
}

} // namespace offcpu
