#include "util/privileges.h"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>

#if __has_include(<linux/close_range.h>)
#include <linux/close_range.h> // CLOSE_RANGE_CLOEXEC
#endif

#include "util/error.h"

namespace offcpu {
namespace {

#ifndef CAP_PERFMON
#define CAP_PERFMON 38
#endif
#ifndef CAP_BPF
#define CAP_BPF 39
#endif

bool has_cap(const __user_cap_data_struct (&data)[2], int cap) {
  return data[cap / 32].effective & (1u << (cap % 32));
}

constexpr rlim_t kFdLimit = 65536;
// The limit before raise_fd_limit, for a child to get back (read after
// fork, so a plain global).
rlimit g_fd_limit_before{};
bool g_fd_limit_raised = false;

} // namespace

void raise_fd_limit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0)
    return;
  const rlim_t want = std::min(limit.rlim_max, kFdLimit);
  if (limit.rlim_cur >= want)
    return;
  rlimit raised = limit;
  raised.rlim_cur = want;
  if (setrlimit(RLIMIT_NOFILE, &raised) == 0) {
    g_fd_limit_before = limit;
    g_fd_limit_raised = true;
  }
}

void restore_fd_limit() {
  if (g_fd_limit_raised)
    setrlimit(RLIMIT_NOFILE, &g_fd_limit_before);
}

void require_bpf_privileges() {
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  if (syscall(SYS_capget, &hdr, data) != 0)
    return; // cannot tell: let the kernel decide at load time
  if (has_cap(data, CAP_SYS_ADMIN))
    return;
  if (has_cap(data, CAP_BPF) && has_cap(data, CAP_PERFMON))
    return;
  throw runtime_error(
      "permission denied: offcpu needs root, or CAP_BPF and CAP_PERFMON "
      "(try: sudo offcpu ...)");
}

bool drop_privileges(uid_t uid, gid_t gid, const gid_t *groups,
                     size_t group_count) {
  return setgroups(group_count, groups) == 0 && setresgid(gid, gid, gid) == 0 &&
         setresuid(uid, uid, uid) == 0;
}

bool close_listed_fds_on_exec(int from) {
  int dir = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0)
    return false;
  // getdents64 rather than opendir: no allocation after fork.
  alignas(8) char buf[4096];
  for (;;) {
    long n = syscall(SYS_getdents64, dir, buf, sizeof(buf));
    if (n <= 0)
      break;
    for (long at = 0; at < n;) {
      const auto *d = reinterpret_cast<const dirent64 *>(buf + at);
      at += d->d_reclen;
      int fd = 0;
      const char *c = d->d_name;
      for (; *c >= '0' && *c <= '9' && fd < (1 << 30); c++)
        fd = fd * 10 + (*c - '0');
      if (*c == '\0' && c != d->d_name && fd >= from && fd != dir)
        fcntl(fd, F_SETFD, FD_CLOEXEC);
    }
  }
  close(dir);
  return true;
}

void close_fds_on_exec(int from) {
#if defined(SYS_close_range) && defined(CLOSE_RANGE_CLOEXEC)
  if (syscall(SYS_close_range, static_cast<unsigned>(from), ~0u,
              CLOSE_RANGE_CLOEXEC) == 0)
    return;
#endif
  if (close_listed_fds_on_exec(from))
    return;
  rlimit limit{};
  rlim_t last = getrlimit(RLIMIT_NOFILE, &limit) == 0 ? limit.rlim_cur : 1024;
  last = std::min<rlim_t>(last, 1 << 20);
  for (rlim_t fd = static_cast<rlim_t>(from); fd < last; fd++)
    fcntl(static_cast<int>(fd), F_SETFD, FD_CLOEXEC);
}

} // namespace offcpu
