// Running programs from tests: capture stdout/stderr, signal, time out.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace offcpu::test {

struct RunResult {
  int exit_code = -1; // -1 when killed by a signal
  int term_signal = 0;
  bool timed_out = false;
  long max_rss_kb = 0; // the child's peak resident set (ru_maxrss)
  std::string out;
  std::string err;
};

class Subprocess {
public:
  struct Options {
    std::optional<uid_t> run_as;       // drop root for this child
    std::optional<gid_t> run_as_group; // its group; default: run_as's number
    bool stdout_to_closed_pipe = false;
  };
  Subprocess(const std::vector<std::string> &argv, Options opts);
  explicit Subprocess(const std::vector<std::string> &argv)
      : Subprocess(argv, Options{}) {}
  ~Subprocess(); // kills and reaps a child still running
  Subprocess(const Subprocess &) = delete;
  Subprocess &operator=(const Subprocess &) = delete;

  pid_t pid() const { return pid_; }
  // Reads stdout up to the next newline; nullopt on EOF or timeout.
  std::optional<std::string> read_line(double timeout_s);
  void signal(int sig);
  // Waits for exit, collecting all output; kills it after timeout_s.
  RunResult wait(double timeout_s);

private:
  void kill_group();
  void pump(double timeout_s, bool until_line);
  pid_t pid_ = -1;
  int in_fd_ = -1;
  int out_fd_ = -1;
  int err_fd_ = -1;
  std::string out_, err_;
  size_t consumed_ = 0;
  bool reaped_ = false;
};

// Runs to completion.
RunResult run(const std::vector<std::string> &argv, double timeout_s,
              Subprocess::Options opts = {});

double now_seconds();
void sleep_seconds(double s);

// How many of `pid`'s open fds link to `target` (e.g.
// "anon_inode:bpf_link", "anon_inode:[perf_event]"): a tracer's attachments.
int fds_linking_to(int pid, const std::string &target);
// How many descriptors `pid` holds now (0 once it is gone).
size_t open_fds(int pid);

} // namespace offcpu::test
