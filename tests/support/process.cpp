#include "support/process.h"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <stdexcept>

namespace offcpu::test {

double now_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

void sleep_seconds(double s) {
  timespec ts{static_cast<time_t>(s),
              static_cast<long>(
                  (s - static_cast<double>(static_cast<time_t>(s))) * 1e9)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

Subprocess::Subprocess(const std::vector<std::string> &argv, Options opts) {
  int in[2], out[2], err[2];
  // stdin stays open (and silent) until the Subprocess is destroyed, so
  // fixtures that wait on it keep running.
  if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC))
    throw std::runtime_error("pipe failed");
  std::vector<char *> args;
  for (const auto &a : argv)
    args.push_back(const_cast<char *>(a.c_str()));
  args.push_back(nullptr);
  pid_ = fork();
  if (pid_ < 0)
    throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    setpgid(0, 0);
    dup2(in[0], STDIN_FILENO);
    dup2(out[1], STDOUT_FILENO);
    dup2(err[1], STDERR_FILENO);
    if (opts.stdout_to_closed_pipe) {
      int p[2];
      if (pipe(p) == 0) {
        close(p[0]); // nobody will ever read: writes get EPIPE
        dup2(p[1], STDOUT_FILENO);
      }
    }
    ::signal(SIGPIPE, SIG_DFL);
    ::signal(SIGINT, SIG_DFL);
    if (opts.run_as) {
      // Root's supplementary groups go too: the child is to have no
      // privilege left.
      gid_t gid = opts.run_as_group.value_or(*opts.run_as);
      if (setgroups(0, nullptr) != 0 || setresgid(gid, gid, gid) != 0 ||
          setresuid(*opts.run_as, *opts.run_as, *opts.run_as) != 0)
        _exit(126);
    }
    // A test killed by its timeout must not leave its workloads running
    // (set after any change of user, which clears it).
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    execv(args[0], args.data());
    _exit(127);
  }
  setpgid(pid_, pid_); // as the child does: no window before its own call
  close(in[0]);
  close(out[1]);
  close(err[1]);
  in_fd_ = in[1];
  out_fd_ = out[0];
  err_fd_ = err[0];
}

// The child leads a process group of its own: what it forked (a shell's
// sleep, a workload's child) goes with it. Only while it is not reaped,
// so its pid cannot have been reused.
void Subprocess::kill_group() {
  kill(-pid_, SIGKILL);
  kill(pid_, SIGKILL); // should setpgid have failed
}

Subprocess::~Subprocess() {
  if (!reaped_ && pid_ > 0) {
    kill_group();
    waitpid(pid_, nullptr, 0);
  }
  for (int fd : {in_fd_, out_fd_, err_fd_})
    if (fd >= 0)
      close(fd);
}

void Subprocess::pump(double timeout_s, bool until_line) {
  const double deadline = now_seconds() + timeout_s;
  while (out_fd_ >= 0 || err_fd_ >= 0) {
    if (until_line && out_.find('\n', consumed_) != std::string::npos)
      return;
    double left = deadline - now_seconds();
    if (left <= 0)
      return;
    pollfd fds[2];
    int n = 0;
    if (out_fd_ >= 0)
      fds[n++] = {out_fd_, POLLIN, 0};
    if (err_fd_ >= 0)
      fds[n++] = {err_fd_, POLLIN, 0};
    int r =
        poll(fds, static_cast<nfds_t>(n), static_cast<int>(left * 1000) + 1);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      return;
    for (int i = 0; i < n; i++) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR)))
        continue;
      char buf[65536];
      ssize_t got = read(fds[i].fd, buf, sizeof(buf));
      bool is_out = fds[i].fd == out_fd_;
      if (got <= 0) {
        close(fds[i].fd);
        (is_out ? out_fd_ : err_fd_) = -1;
      } else {
        (is_out ? out_ : err_).append(buf, static_cast<size_t>(got));
      }
    }
  }
}

std::optional<std::string> Subprocess::read_line(double timeout_s) {
  pump(timeout_s, true);
  size_t nl = out_.find('\n', consumed_);
  if (nl == std::string::npos)
    return std::nullopt;
  std::string line = out_.substr(consumed_, nl - consumed_);
  consumed_ = nl + 1;
  return line;
}

void Subprocess::signal(int sig) {
  if (!reaped_)
    kill(pid_, sig);
}

RunResult Subprocess::wait(double timeout_s) {
  RunResult r;
  const double deadline = now_seconds() + timeout_s;
  int status = 0;
  rusage usage{};
  for (;;) {
    pump(0.05, false);
    pid_t w = wait4(pid_, &status, WNOHANG, &usage);
    if (w == pid_)
      break;
    if (now_seconds() > deadline) {
      r.timed_out = true;
      kill_group();
      wait4(pid_, &status, 0, &usage);
      break;
    }
  }
  r.max_rss_kb = usage.ru_maxrss;
  reaped_ = true;
  pump(1.0, false); // drain what is left in the pipes
  if (WIFEXITED(status))
    r.exit_code = WEXITSTATUS(status);
  else if (WIFSIGNALED(status))
    r.term_signal = WTERMSIG(status);
  r.out = out_.substr(consumed_);
  r.err = err_;
  return r;
}

RunResult run(const std::vector<std::string> &argv, double timeout_s,
              Subprocess::Options opts) {
  Subprocess p(argv, opts);
  return p.wait(timeout_s);
}

int fds_linking_to(int pid, const std::string &target) {
  const std::string fds = "/proc/" + std::to_string(pid) + "/fd";
  int n = 0;
  if (DIR *d = opendir(fds.c_str())) {
    while (dirent *e = readdir(d)) {
      char link[64] = {};
      if (readlink((fds + "/" + e->d_name).c_str(), link, sizeof(link) - 1) >
              0 &&
          link == target)
        n++;
    }
    closedir(d);
  }
  return n;
}

size_t open_fds(int pid) {
  size_t n = 0;
  if (DIR *d = opendir(("/proc/" + std::to_string(pid) + "/fd").c_str())) {
    while (dirent *e = readdir(d))
      n += e->d_name[0] != '.';
    closedir(d);
  }
  return n;
}

} // namespace offcpu::test
