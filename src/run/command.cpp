#include "run/command.h"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "util/error.h"

namespace offcpu {
namespace {

bool executable_file(const std::string &path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
         access(path.c_str(), X_OK) == 0;
}

// What execvp would run, or "" when nothing on PATH is.
std::string find_command(const std::string &name) {
  if (name.find('/') != std::string::npos)
    return executable_file(name) ? name : "";
  const char *path = getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t at = 0;
  for (;;) {
    size_t colon = dirs.find(':', at);
    std::string dir = dirs.substr(at, colon - at);
    std::string full = (dir.empty() ? "." : dir) + "/" + name;
    if (executable_file(full))
      return full;
    if (colon == std::string::npos)
      return "";
    at = colon + 1;
  }
}

bool parse_id(const char *s, unsigned long &out) {
  if (!s || !*s)
    return false;
  char *end = nullptr;
  errno = 0;
  out = std::strtoul(s, &end, 10);
  return errno == 0 && *end == '\0';
}

// In the child: the user's groups, group and user, in that order (after
// setuid nothing else may be changed). Done before the wait for release,
// so that once released the child only execs.
bool become(const RunAs &as) {
  if (getuid() != 0 || as.uid == 0)
    return true;
  return (as.name.empty() ? setgroups(0, nullptr)
                          : initgroups(as.name.c_str(), as.gid)) == 0 &&
         setresgid(as.gid, as.gid, as.gid) == 0 &&
         setresuid(as.uid, as.uid, as.uid) == 0;
}

[[noreturn]] void fail(int error_fd) {
  int err = errno;
  ssize_t n = write(error_fd, &err, sizeof(err));
  (void)n;
  _exit(127);
}

} // namespace

RunAs command_user(const std::string &user_option) {
  RunAs as;
  as.uid = getuid();
  as.gid = getgid();
  if (!user_option.empty()) {
    unsigned long id = 0;
    const passwd *pw = parse_id(user_option.c_str(), id)
                           ? getpwuid(static_cast<uid_t>(id))
                           : getpwnam(user_option.c_str());
    if (!pw && parse_id(user_option.c_str(), id)) {
      as.uid = as.gid = static_cast<uid_t>(id); // a uid without a name
      return as;
    }
    if (!pw)
      throw usage_error("--user: no such user '" + user_option + "'");
    as.uid = pw->pw_uid;
    as.gid = pw->pw_gid;
    as.name = pw->pw_name;
    return as;
  }
  unsigned long uid = 0, gid = 0;
  if (parse_id(getenv("SUDO_UID"), uid) && parse_id(getenv("SUDO_GID"), gid)) {
    as.uid = static_cast<uid_t>(uid);
    as.gid = static_cast<gid_t>(gid);
    if (const passwd *pw = getpwuid(as.uid))
      as.name = pw->pw_name;
  }
  return as;
}

TracedCommand::TracedCommand(const std::vector<std::string> &args,
                             const RunAs &as)
    : name_(args.empty() ? "" : args[0]) {
  if (args.empty())
    throw usage_error("nothing to run after '--'");
  if (find_command(args[0]).empty())
    throw usage_error("command not found or not executable: " + args[0]);
  int go[2], err[2];
  if (pipe2(go, O_CLOEXEC) || pipe2(err, O_CLOEXEC))
    throw runtime_error("pipe: " + errno_text(errno));
  std::vector<char *> argv;
  for (const std::string &a : args)
    argv.push_back(const_cast<char *>(a.c_str()));
  argv.push_back(nullptr);
  pid_ = fork();
  if (pid_ < 0)
    throw runtime_error("fork: " + errno_text(errno));
  if (pid_ == 0) {
    // What offcpu set for itself is not the command's.
    signal(SIGPIPE, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    close(go[1]);
    close(err[0]);
    // Named as the command already: what little it does before exec is
    // the command starting.
    std::string base = args[0].substr(args[0].rfind('/') + 1);
    prctl(PR_SET_NAME, base.c_str());
    if (!become(as))
      fail(err[1]);
    char c;
    if (read(go[0], &c, 1) != 1)
      _exit(127); // offcpu gave up before tracing started
    execvp(argv[0], argv.data());
    fail(err[1]);
  }
  close(go[0]);
  close(err[1]);
  go_fd_ = go[1];
  error_fd_ = err[0];
}

TracedCommand::~TracedCommand() {
  if (go_fd_ >= 0) { // never released: it must not run untraced
    kill(pid_, SIGKILL);
    close(go_fd_);
  }
  if (!reaped_ && pid_ > 0 && go_fd_ >= 0)
    waitpid(pid_, nullptr, 0);
  if (error_fd_ >= 0)
    close(error_fd_);
}

void TracedCommand::release() {
  if (go_fd_ < 0)
    return;
  ssize_t n = write(go_fd_, "g", 1);
  (void)n;
  close(go_fd_);
  go_fd_ = -1;
}

bool TracedCommand::exited() {
  if (reaped_)
    return true;
  int st = 0;
  if (waitpid(pid_, &st, WNOHANG) != pid_)
    return false;
  reaped_ = true;
  status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  int err = 0;
  if (read(error_fd_, &err, sizeof(err)) == sizeof(err))
    exec_error_ = "cannot run " + name_ + ": " + errno_text(err);
  return true;
}

void TracedCommand::terminate() {
  if (!reaped_)
    kill(pid_, SIGTERM);
}

} // namespace offcpu
