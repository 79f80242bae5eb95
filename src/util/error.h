// Errors that end the program, and the exit codes they map to.
#pragma once

#include <cstring>
#include <stdexcept>
#include <string>

namespace offcpu {

// Exit codes, documented in the README.
enum ExitCode : int {
  kExitOk = 0,
  kExitRuntime = 1,       // the kernel, a file or the system failed us
  kExitUsage = 2,         // bad command line or input
  kExitInterrupted = 130, // a second Ctrl-C: stopped without output
};

// A failure the user must act on. main() prints what() on one line and
// exits with exit_code(). Recoverable problems are return values instead.
class FatalError : public std::runtime_error {
public:
  FatalError(int exit_code, const std::string &message)
      : std::runtime_error(message), exit_code_(exit_code) {}
  int exit_code() const { return exit_code_; }

private:
  int exit_code_;
};

inline FatalError usage_error(const std::string &message) {
  return FatalError(kExitUsage, message);
}
inline FatalError runtime_error(const std::string &message) {
  return FatalError(kExitRuntime, message);
}

// strerror of an errno, positive or negative (libbpf returns -errno).
inline std::string errno_text(int err) {
  return std::strerror(err < 0 ? -err : err);
}

} // namespace offcpu
