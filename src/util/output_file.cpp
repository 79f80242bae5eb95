#include "util/output_file.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <ctime>

#include "util/error.h"
#include "util/output_path.h"
#include "util/signals.h"

namespace offcpu {
namespace {

// The directory may be writable by other users: a name they cannot guess,
// created only if it does not exist and never through a link.
UniqueFd create_temp(int dir, const std::string &name, std::string *temp) {
  for (int attempt = 0; attempt < 100; attempt++) {
    uint64_t r = 0;
    if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != sizeof(r)) {
      timespec ts{};
      clock_gettime(CLOCK_MONOTONIC, &ts);
      r = static_cast<uint64_t>(ts.tv_nsec) ^
          (static_cast<uint64_t>(getpid()) << 32) ^
          static_cast<uint64_t>(attempt);
    }
    char suffix[32];
    snprintf(suffix, sizeof(suffix), ".offcpu-%012llx",
             static_cast<unsigned long long>(r & 0xffffffffffffULL));
    *temp = name + suffix;
    UniqueFd fd(openat(dir, temp->c_str(),
                       O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                       0600));
    if (fd || errno != EEXIST)
      return fd;
  }
  return UniqueFd();
}

std::string join(const std::string &dir, const std::string &name) {
  if (dir == ".")
    return name;
  return dir == "/" ? "/" + name : dir + "/" + name;
}

// Holds SIGINT and SIGTERM back while a temporary file exists but is not
// yet registered for removal: a second Ctrl-C landing in between would
// otherwise leave it behind. Pending signals arrive when it ends.
class StopSignalsHeld {
public:
  StopSignalsHeld() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, &old_);
  }
  ~StopSignalsHeld() { pthread_sigmask(SIG_SETMASK, &old_, nullptr); }
  StopSignalsHeld(const StopSignalsHeld &) = delete;
  StopSignalsHeld &operator=(const StopSignalsHeld &) = delete;

private:
  sigset_t old_;
};

const char *kind_of(mode_t mode) {
  return S_ISLNK(mode)    ? "a symlink"
         : S_ISDIR(mode)  ? "a directory"
         : S_ISBLK(mode)  ? "a block device"
         : S_ISCHR(mode)  ? "a character device"
         : S_ISFIFO(mode) ? "a FIFO"
                          : "a socket";
}

} // namespace

OutputFile::OutputFile(const std::optional<std::string> &path) {
  if (!path)
    return;
  path_ = *path;
  ResolvedOutput target = resolve_output_path(path_);
  if (target.in_place) {
    file_ = std::move(target.in_place);
    fd_ = file_.get();
    in_place_ = true;
    return;
  }
  dir_ = std::move(target.dir);
  name_ = target.name;
  StopSignalsHeld held;
  file_ = create_temp(dir_.get(), name_, &temp_);
  if (!file_)
    throw runtime_error("cannot write " + path_ + ": " + errno_text(errno));
  fd_ = file_.get();
  shown_ = join(target.dir_path, temp_);
  fchmod(fd_, 0644);
  // Through the directory we hold, so that a second Ctrl-C removes this
  // file even if someone renamed a directory on the way meanwhile.
  cleanup_path_ = "/proc/self/fd/" + std::to_string(dir_.get()) + "/" + temp_;
  cleanup_ = add_cleanup_path(cleanup_path_.c_str());
}

OutputFile::~OutputFile() {
  if (path_.empty())
    return;
  file_.reset();
  forget_cleanup_path(cleanup_);
  if (!committed_ && !in_place_ && !kept_ && dir_)
    unlinkat(dir_.get(), temp_.c_str(), 0);
}

WriteResult OutputFile::write(const std::string &data) {
  WriteResult r = write_all(fd_, data);
  if (r == WriteResult::Failed)
    throw runtime_error("cannot write " +
                        (path_.empty() ? std::string("the results") : path_) +
                        ": " + errno_text(errno));
  return r;
}

void OutputFile::commit() {
  if (path_.empty() || committed_ || in_place_ || kept_)
    return;
  // close() reports what delayed writes failed: checked, not left to RAII.
  bool ok = fsync(fd_) == 0;
  ok = close(file_.release()) == 0 && ok;
  fd_ = -1;
  if (!ok)
    throw runtime_error("cannot write " + path_ + ": " + errno_text(errno));
  // Renamed over a regular file only. A rename never writes into what it
  // replaces, but a name that became something else while we traced is
  // not ours to replace.
  struct stat st {};
  if (fstatat(dir_.get(), name_.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
      !S_ISREG(st.st_mode)) {
    kept_ = true;
    forget_cleanup_path(cleanup_);
    cleanup_ = -1;
    throw runtime_error("cannot write " + path_ + ": it became " +
                        kind_of(st.st_mode) +
                        " while offcpu ran; the results are in " + shown_);
  }
  if (renameat(dir_.get(), temp_.c_str(), dir_.get(), name_.c_str()) != 0)
    throw runtime_error("cannot write " + path_ + ": " + errno_text(errno));
  committed_ = true;
  forget_cleanup_path(cleanup_);
  cleanup_ = -1;
}

} // namespace offcpu
