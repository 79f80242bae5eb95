#include "util/safe_file.h"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <deque>
#include <vector>

namespace offcpu {
namespace {

constexpr int kMaxSymlinks = 40; // the kernel's own limit (MAXSYMLINKS)

bool readable_by(const struct stat &st, const Credentials &c) {
  if (c.uid == 0)
    return true;
  if (st.st_uid == c.uid)
    return st.st_mode & S_IRUSR;
  if (st.st_gid == c.gid)
    return st.st_mode & S_IRGRP;
  return st.st_mode & S_IROTH;
}

OpenFailure errno_failure(int err) {
  switch (err) {
  case ENOENT:
  case ENOTDIR:
  case EXDEV:
  case ESRCH:
    return OpenFailure::Missing;
  case ELOOP:
    return OpenFailure::Symlink;
  case EACCES:
  case EPERM:
    return OpenFailure::Permission;
  default:
    return OpenFailure::Error;
  }
}

CheckedFile failed(OpenFailure why) {
  CheckedFile f;
  f.failure = why;
  return f;
}

// The checks, on an O_PATH descriptor; then the file is opened for reading
// through the descriptor itself, so it is the very inode that was checked.
CheckedFile check_and_reopen(UniqueFd path_fd, const FilePolicy &policy) {
  struct stat st {};
  if (fstat(path_fd.get(), &st) != 0)
    return failed(OpenFailure::Error);
  if (S_ISLNK(st.st_mode))
    return failed(OpenFailure::Symlink);
  if (!S_ISREG(st.st_mode))
    return failed(OpenFailure::NotRegular);
  if (policy.owner && st.st_uid != *policy.owner && st.st_uid != 0)
    return failed(OpenFailure::Owner);
  if (policy.reader && !readable_by(st, *policy.reader))
    return failed(OpenFailure::Permission);
  if (static_cast<uint64_t>(st.st_size) > policy.max_size)
    return failed(OpenFailure::TooLarge);
  std::string self = "/proc/self/fd/" + std::to_string(path_fd.get());
  CheckedFile f;
  f.fd.reset(
      ::open(self.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (!f.fd)
    return failed(errno_failure(errno));
  if (fstat(f.fd.get(), &f.st) != 0 || f.st.st_ino != st.st_ino ||
      f.st.st_dev != st.st_dev)
    return failed(OpenFailure::Error);
  return f;
}

std::deque<std::string> split_path(const std::string &path) {
  std::deque<std::string> parts;
  size_t at = 0;
  while (at <= path.size()) {
    size_t slash = path.find('/', at);
    if (slash == std::string::npos)
      slash = path.size();
    if (slash > at)
      parts.emplace_back(path.substr(at, slash - at));
    at = slash + 1;
  }
  return parts;
}

// Resolves `path` under `root_fd` one component at a time: O_PATH|O_NOFOLLOW
// at each step, symlinks expanded by hand (absolute ones restart at the
// root), ".." never above the root. Returns an O_PATH descriptor, or -errno.
int walk_in_root(int root_fd, const std::string &path, bool follow_last) {
  std::vector<UniqueFd> dirs; // dirs[0] is the root; back() is where we are
  dirs.emplace_back(fcntl(root_fd, F_DUPFD_CLOEXEC, 0));
  if (!dirs.back())
    return -errno;
  std::deque<std::string> parts = split_path(path);
  int links = 0;
  while (!parts.empty()) {
    std::string part = std::move(parts.front());
    parts.pop_front();
    if (part == ".")
      continue;
    if (part == "..") {
      if (dirs.size() > 1)
        dirs.pop_back();
      continue;
    }
    UniqueFd next(openat(dirs.back().get(), part.c_str(),
                         O_PATH | O_NOFOLLOW | O_CLOEXEC));
    if (!next)
      return -errno;
    struct stat st {};
    if (fstat(next.get(), &st) != 0)
      return -errno;
    if (S_ISLNK(st.st_mode) && (follow_last || !parts.empty())) {
      if (++links > kMaxSymlinks)
        return -ELOOP;
      char target[PATH_MAX];
      ssize_t n = readlinkat(next.get(), "", target, sizeof(target) - 1);
      if (n <= 0)
        return n < 0 ? -errno : -ENOENT;
      target[n] = '\0';
      if (target[0] == '/')
        dirs.resize(1);
      std::deque<std::string> more = split_path(target);
      parts.insert(parts.begin(), more.begin(), more.end());
      continue;
    }
    if (!parts.empty() && !S_ISDIR(st.st_mode))
      return -ENOTDIR;
    dirs.push_back(std::move(next));
  }
  if (dirs.size() == 1) // the path named the root itself
    return -EISDIR;
  return dirs.back().release();
}

} // namespace

const char *open_failure_name(OpenFailure f) {
  switch (f) {
  case OpenFailure::None:
    return "opened";
  case OpenFailure::Missing:
    return "missing";
  case OpenFailure::Symlink:
    return "a symlink";
  case OpenFailure::NotRegular:
    return "not a regular file";
  case OpenFailure::Owner:
    return "owned by another user";
  case OpenFailure::Permission:
    return "not readable by the process's user";
  case OpenFailure::TooLarge:
    return "too large";
  case OpenFailure::Error:
    break;
  }
  return "unreadable";
}

UniqueFd open_root_dir(const std::string &dir) {
  return UniqueFd(::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
}

CheckedFile open_in_root_by_walk(int root_fd, const std::string &path,
                                 const FilePolicy &policy) {
  int fd = walk_in_root(root_fd, path, policy.follow_last_symlink);
  if (fd < 0)
    return failed(errno_failure(-fd));
  return check_and_reopen(UniqueFd(fd), policy);
}

CheckedFile open_in_root(int root_fd, const std::string &path,
                         const FilePolicy &policy) {
  open_how how{};
  how.flags =
      O_PATH | O_CLOEXEC | (policy.follow_last_symlink ? 0 : O_NOFOLLOW);
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  // openat2 answers EAGAIN when a rename races with an in-root lookup.
  for (int attempt = 0; attempt < 3; attempt++) {
    long fd = syscall(SYS_openat2, root_fd, path.c_str(), &how, sizeof(how));
    if (fd >= 0)
      return check_and_reopen(UniqueFd(static_cast<int>(fd)), policy);
    if (errno == EAGAIN)
      continue;
    // Kernels before 5.6 (or a seccomp filter) lack openat2: walk instead.
    if (errno == ENOSYS || errno == EPERM)
      break;
    return failed(errno_failure(errno));
  }
  return open_in_root_by_walk(root_fd, path, policy);
}

CheckedFile open_checked(const std::string &path, const FilePolicy &policy) {
  UniqueFd fd(
      ::open(path.c_str(), O_PATH | O_CLOEXEC |
                               (policy.follow_last_symlink ? 0 : O_NOFOLLOW)));
  if (!fd)
    return failed(errno_failure(errno));
  return check_and_reopen(std::move(fd), policy);
}

std::optional<std::string> read_fd(int fd, std::size_t max_bytes) {
  std::string out;
  char buf[65536];
  off_t at = 0;
  while (out.size() < max_bytes) {
    size_t want = std::min(sizeof(buf), max_bytes - out.size());
    ssize_t n = ::pread(fd, buf, want, at);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return std::nullopt;
    }
    if (n == 0)
      break;
    out.append(buf, static_cast<size_t>(n));
    at += n;
  }
  return out;
}

} // namespace offcpu
