#include "util/output_path.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <deque>
#include <string>

#include "util/error.h"
#include "util/utf8.h"

namespace offcpu {
namespace {

// As the kernel's own limit (MAXSYMLINKS): a loop ends with ELOOP.
constexpr int kMaxLinks = 40;

[[noreturn]] void refuse(const std::string &path, const std::string &why) {
  throw runtime_error("cannot write " + path + ": " + why);
}

std::string owner_text(uid_t uid) {
  std::string id = "uid " + std::to_string(uid);
  passwd pw{}, *found = nullptr;
  char buf[1024];
  if (getpwuid_r(uid, &pw, buf, sizeof(buf), &found) == 0 && found)
    return std::string(found->pw_name) + " (" + id + ")";
  return id;
}

std::string mode_text(mode_t mode) {
  char buf[8];
  snprintf(buf, sizeof(buf), "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

std::string device_text(dev_t rdev) {
  return std::to_string(major(rdev)) + ":" + std::to_string(minor(rdev));
}

// Only root can add, remove or rename entries in it. Group-writable counts
// as others', whatever the group: with a POSIX ACL the group bits are the
// mask, so a user granted write by the ACL shows there too.
bool only_root_writes(const struct stat &st) {
  return st.st_uid == 0 && (st.st_mode & (S_IWGRP | S_IWOTH)) == 0;
}

// The character devices a report may go into: /dev/null, /dev/tty,
// /dev/console, virtual consoles and serial lines (major 4), pseudo
// terminals (136-143). Not /dev/ptmx (opening it makes a terminal), not
// memory, kmsg or any other driver that acts on what it is sent.
bool report_device(dev_t rdev) {
  unsigned ma = major(rdev), mi = minor(rdev);
  if (ma == 1)
    return mi == 3;
  if (ma == 5)
    return mi == 0 || mi == 1;
  return ma == 4 || (ma >= 136 && ma <= 143);
}

bool same_inode(const struct stat &a, const struct stat &b) {
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

std::deque<std::string> split(const std::string &path) {
  std::deque<std::string> parts;
  size_t i = 0;
  while (i < path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string::npos)
      j = path.size();
    std::string c = path.substr(i, j - i);
    if (!c.empty() && c != ".")
      parts.push_back(c);
    i = j + 1;
  }
  return parts;
}

std::string join(const std::string &dir, const std::string &name) {
  if (dir == ".")
    return name;
  return dir == "/" ? "/" + name : dir + "/" + name;
}

// Why a file of this type is not written, or "" when it may be.
std::string refused_kind(const struct stat &st) {
  if (S_ISDIR(st.st_mode))
    return "it is a directory";
  if (S_ISBLK(st.st_mode))
    return "it is a block device (" + device_text(st.st_rdev) +
           "): results go only to files, pipes, terminals and /dev/null";
  if (S_ISCHR(st.st_mode) && !report_device(st.st_rdev))
    return "it is a character device (" + device_text(st.st_rdev) +
           ") other than a terminal or /dev/null";
  if (S_ISSOCK(st.st_mode))
    return "it is a socket";
  return "";
}

class Walk {
public:
  explicit Walk(const std::string &path) : path_(path) {
    // /proc itself: its links (self, thread-self) are plain text.
    have_proc_ = stat("/proc", &proc_) == 0;
  }

  ResolvedOutput run() {
    if (path_.empty())
      refuse("''", "no file name");
    if (path_.back() == '/')
      refuse(path_, "a file name cannot end in '/'");
    start_at(path_[0] == '/' ? "/" : ".");
    std::deque<std::string> parts = split(path_);
    if (parts.empty())
      refuse(path_, "it is a directory");
    int links = 0;
    while (!parts.empty()) {
      std::string c = parts.front();
      parts.pop_front();
      const bool last = parts.empty();
      const std::string here = join(dir_path_, c);
      if (c == "..") {
        if (last)
          refuse(path_, here + " is a directory");
        enter(openat(dir_.get(), "..", O_PATH | O_DIRECTORY | O_CLOEXEC), here);
        continue;
      }
      UniqueFd fd(
          openat(dir_.get(), c.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC));
      if (!fd) {
        if (errno == ENOENT && last)
          return create(c);
        refuse(path_, here + ": " + errno_text(errno));
      }
      struct stat st {};
      if (fstat(fd.get(), &st) != 0)
        refuse(path_, here + ": " + errno_text(errno));
      if (S_ISLNK(st.st_mode)) {
        if (own_fd_dir())
          return own_fd(c, here, last);
        std::string target = read_link(fd.get(), here);
        check_link(st, here, target);
        if (++links > kMaxLinks)
          refuse(path_, here + ": " + errno_text(ELOOP));
        std::deque<std::string> more = split(target);
        parts.insert(parts.begin(), more.begin(), more.end());
        if (target[0] == '/')
          start_at("/");
        if (parts.empty()) // a link to "/"
          refuse(path_, here + " leads to a directory");
        continue;
      }
      if (S_ISDIR(st.st_mode) && !last) {
        dir_ = std::move(fd);
        dir_st_ = st;
        dir_path_ = here;
        continue;
      }
      if (!last)
        refuse(path_, here + ": " + errno_text(ENOTDIR));
      return existing(std::move(fd), st, c, here);
    }
    refuse(path_, "it is a directory"); // not reached: the last part returns
  }

private:
  void start_at(const char *where) {
    enter(open(where, O_PATH | O_DIRECTORY | O_CLOEXEC), where);
  }

  void enter(int fd, const std::string &where) {
    UniqueFd d(fd);
    struct stat st {};
    if (!d || fstat(d.get(), &st) != 0)
      refuse(path_, where + ": " + errno_text(errno));
    dir_ = std::move(d);
    dir_st_ = st;
    dir_path_ = where;
  }

  bool on_proc() const {
    struct statfs fs {};
    return fstatfs(dir_.get(), &fs) == 0 && fs.f_type == PROC_SUPER_MAGIC;
  }

  // Our own /proc/PID/fd or /proc/PID/task/TID/fd, by the path the kernel
  // gives for the directory we hold (inode numbers in /proc are not stable).
  bool own_fd_dir() const {
    if (!on_proc())
      return false;
    char buf[256];
    std::string self = "/proc/self/fd/" + std::to_string(dir_.get());
    ssize_t n = readlink(self.c_str(), buf, sizeof(buf));
    if (n <= 0 || static_cast<size_t>(n) >= sizeof(buf))
      return false;
    std::string at(buf, static_cast<size_t>(n));
    std::string pid = std::to_string(getpid());
    return at == "/proc/" + pid + "/fd" ||
           at == "/proc/" + pid + "/task/" + std::to_string(gettid()) + "/fd";
  }

  // protected_symlinks' rule, applied in every directory and stricter:
  // only root's links, only where no one else could replace them.
  void check_link(const struct stat &link, const std::string &here,
                  const std::string &target) const {
    // The target as the user wrote it, made printable: root sees where the
    // report would have gone.
    const std::string to =
        " to " + std::string(utf8_prefix(valid_utf8(target), 200));
    if (link.st_uid != 0)
      refuse(path_, here + " is a symlink" + to + " owned by " +
                        owner_text(link.st_uid) +
                        ", who could point it anywhere: offcpu follows only "
                        "root's links in directories only root can write; "
                        "name the real file");
    if (!only_root_writes(dir_st_))
      refuse(path_,
             here + " is a symlink" + to + " in " +
                 (dir_path_ == "." ? "the current directory" : dir_path_) +
                 ", which other users can write (owned by " +
                 owner_text(dir_st_.st_uid) + ", mode " +
                 mode_text(dir_st_.st_mode) +
                 "): they could replace it; name the real file");
    // Other links in /proc are magic (cwd, root, another process's fds):
    // their text is not where they lead.
    if (on_proc() && !(have_proc_ && same_inode(dir_st_, proc_)))
      refuse(path_, here + " is a link in /proc that offcpu does not follow: "
                           "name the real file");
  }

  std::string read_link(int fd, const std::string &here) const {
    char buf[4096];
    // The link itself, through the descriptor we checked: not a name that
    // could be replaced since.
    ssize_t n = readlinkat(fd, "", buf, sizeof(buf));
    if (n < 0)
      refuse(path_, here + ": " + errno_text(errno));
    if (n == 0)
      refuse(path_, here + ": " + errno_text(ENOENT));
    if (static_cast<size_t>(n) >= sizeof(buf))
      refuse(path_, here + ": " + errno_text(ENAMETOOLONG));
    return std::string(buf, static_cast<size_t>(n));
  }

  // /dev/stdout and friends: the descriptor root's shell gave us.
  ResolvedOutput own_fd(const std::string &c, const std::string &here,
                        bool last) const {
    if (!last || c.find_first_not_of("0123456789") != std::string::npos ||
        c.size() > 9)
      refuse(path_, here + ": " + errno_text(ENOTDIR));
    int n = std::stoi(c);
    int flags = fcntl(n, F_GETFL);
    if (flags < 0)
      refuse(path_, "descriptor " + c + " is not open");
    if ((flags & O_ACCMODE) == O_RDONLY)
      refuse(path_, "descriptor " + c + " is open for reading only");
    struct stat st {};
    if (fstat(n, &st) != 0)
      refuse(path_, "descriptor " + c + ": " + errno_text(errno));
    std::string why = refused_kind(st);
    if (!why.empty())
      refuse(path_, "descriptor " + c + ": " + why);
    ResolvedOutput r;
    r.in_place.reset(fcntl(n, F_DUPFD_CLOEXEC, 3));
    if (!r.in_place)
      refuse(path_, errno_text(errno));
    return r;
  }

  ResolvedOutput create(const std::string &name) {
    ResolvedOutput r;
    r.dir = std::move(dir_);
    r.name = name;
    r.dir_path = dir_path_;
    return r;
  }

  ResolvedOutput existing(UniqueFd fd, const struct stat &st,
                          const std::string &name, const std::string &here) {
    if (S_ISREG(st.st_mode))
      return create(name); // replaced by rename: never written into
    std::string why = refused_kind(st);
    if (why.empty() && S_ISFIFO(st.st_mode) && st.st_uid != 0)
      why = "it is a FIFO owned by " + owner_text(st.st_uid) +
            ": offcpu writes only into FIFOs root made";
    if (!why.empty())
      refuse(path_, here == path_ ? why : here + ": " + why);
    // Reopened through our own descriptor: the inode just checked, not
    // whatever the name leads to now. A FIFO waits here for its reader.
    std::string self = "/proc/self/fd/" + std::to_string(fd.get());
    ResolvedOutput r;
    r.in_place.reset(open(self.c_str(), O_WRONLY | O_NOCTTY | O_CLOEXEC));
    if (!r.in_place)
      refuse(path_, errno_text(errno));
    return r;
  }

  const std::string path_;
  UniqueFd dir_;
  struct stat dir_st_ {};
  std::string dir_path_;
  struct stat proc_ {};
  bool have_proc_ = false;
};

} // namespace

ResolvedOutput resolve_output_path(const std::string &path) {
  return Walk(path).run();
}

} // namespace offcpu
