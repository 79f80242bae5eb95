#include "run/command.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <set>

#include "util/clock.h"
#include "util/error.h"
#include "util/fd.h"
#include "util/messages.h"
#include "util/privileges.h"

extern char **environ;

namespace offcpu {
namespace {

// Where the command is, or the status it gets when it is nowhere to run.
struct Found {
  std::string path;
  int status = 0; // kExitNotFound or kExitCannotRun when path is empty
  std::string why;
};

// As execvp searches, and as env reports: a name with a slash is a path;
// any other is looked up on PATH, where a file that is there but cannot be
// run is remembered (126) and the search goes on.
Found find_command(const std::string &name) {
  auto check = [](const std::string &path, Found &f) {
    struct stat st {};
    if (stat(path.c_str(), &st) != 0) {
      if (errno != ENOENT && errno != ENOTDIR && f.status != kExitCannotRun)
        f = {"", kExitCannotRun, path + ": " + errno_text(errno)};
      return false;
    }
    if (!S_ISREG(st.st_mode) || !(st.st_mode & 0111)) {
      if (f.status != kExitCannotRun)
        f = {"", kExitCannotRun, path + ": not an executable file"};
      return false;
    }
    f = {path, 0, ""};
    return true;
  };
  Found f{"", kExitNotFound, name + ": no such file"};
  if (name.empty())
    return {"", kExitNotFound, "'': an empty command name"};
  if (name.find('/') != std::string::npos) {
    check(name, f);
    return f;
  }
  f.why = name + ": command not found on PATH";
  const char *path = getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t at = 0;
  for (;;) {
    size_t colon = dirs.find(':', at);
    std::string dir = dirs.substr(at, colon - at);
    if (check((dir.empty() ? "." : dir) + "/" + name, f))
      return f;
    if (colon == std::string::npos)
      return f;
    at = colon + 1;
  }
}

int status_for(int err) {
  return err == ENOENT || err == ENOTDIR ? kExitNotFound : kExitCannotRun;
}

[[noreturn]] void fail(int error_fd) {
  int err = errno;
  ssize_t n = write(error_fd, &err, sizeof(err));
  (void)n;
  _exit(status_for(err));
}

// Reads the int the child sends: 0 once it is ready to exec, else the
// errno that stopped it. False on EOF (exec succeeded, or the child died)
// or after `timeout_ms` (-1: none).
bool read_child_word(int fd, int &word, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  int r;
  do
    r = poll(&p, 1, timeout_ms);
  while (r < 0 && errno == EINTR);
  return r > 0 && read(fd, &word, sizeof(word)) == sizeof(word);
}

// A process to end, held by a pidfd (5.3+) where the kernel gives one, so
// that a pid reused after it exits is never signalled.
struct Member {
  pid_t pid;
  UniqueFd pidfd;
  bool alive() const {
    if (!pidfd)
      return kill(pid, 0) == 0;
    pollfd p{pidfd.get(), POLLIN, 0};
    return poll(&p, 1, 0) == 0; // readable once it has exited
  }
  void signal(int sig) const {
#ifdef SYS_pidfd_send_signal
    if (pidfd) {
      syscall(SYS_pidfd_send_signal, pidfd.get(), sig, nullptr, 0);
      return;
    }
#endif
    kill(pid, sig);
  }
};

// At most this many processes started by the command are ended with it,
// found in at most this many lists of children: a fork storm or a process
// of many threads must not hold offcpu's end.
constexpr size_t kMaxDescendants = 4096;
constexpr size_t kMaxChildLists = 65536;

// The parent (tgid) of `pid` from /proc/PID/stat, -1 if it is gone.
pid_t parent_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  std::getline(in, stat);
  // "PID (comm) STATE PPID ...": comm may hold anything, ')' included.
  size_t close = stat.rfind(')');
  if (close == std::string::npos)
    return -1;
  char state = 0;
  long ppid = -1;
  if (sscanf(stat.c_str() + close + 1, " %c %ld", &state, &ppid) != 2)
    return -1;
  return static_cast<pid_t>(ppid);
}

// Held only while it is still `parent`'s child: a pid read from a list
// may be reused by the time it is opened, and someone else's process must
// never be signalled. While the pidfd says it is alive, its /proc entry is
// its own.
std::optional<Member> open_child(pid_t pid, pid_t parent) {
#ifdef SYS_pidfd_open
  UniqueFd fd(static_cast<int>(syscall(SYS_pidfd_open, pid, 0)));
#else
  UniqueFd fd;
#endif
  Member m{pid, std::move(fd)};
  if (parent_of(pid) != parent || !m.alive())
    return std::nullopt;
  return m;
}

// The processes below `root` (its children, theirs...) not yet in `tree`,
// added to it. Each thread has its own list of children in
// /proc/PID/task/TID/children.
void add_descendants(pid_t root, std::vector<Member> &tree) {
  std::set<pid_t> known;
  for (const Member &m : tree)
    known.insert(m.pid);
  std::vector<pid_t> queue{root};
  size_t lists = 0;
  for (size_t i = 0; i < queue.size() && tree.size() < kMaxDescendants; i++) {
    const std::string task_dir = "/proc/" + std::to_string(queue[i]) + "/task";
    std::unique_ptr<DIR, int (*)(DIR *)> dir(opendir(task_dir.c_str()),
                                             closedir);
    if (!dir)
      continue; // gone already
    std::vector<pid_t> children;
    while (const dirent *d = readdir(dir.get())) {
      if (d->d_name[0] == '.')
        continue;
      if (++lists > kMaxChildLists)
        return;
      std::ifstream in(task_dir + "/" + d->d_name + "/children");
      for (pid_t c; children.size() < kMaxDescendants && in >> c;)
        children.push_back(c);
    }
    for (pid_t c : children) {
      if (tree.size() >= kMaxDescendants || !known.insert(c).second)
        continue;
      if (auto m = open_child(c, queue[i])) {
        tree.push_back(std::move(*m));
        queue.push_back(c);
      }
    }
  }
}

} // namespace

TracedCommand::TracedCommand(const std::vector<std::string> &args,
                             const CommandSetup &setup)
    : name_(args.empty() ? "" : args[0]) {
  if (args.empty())
    throw usage_error("nothing to run after '--'");
  Found found = find_command(args[0]);
  if (found.path.empty())
    throw FatalError(found.status, "cannot run " + found.why);
  path_ = found.path;
  // Everything the child needs is prepared here: after fork it only makes
  // system calls (offcpu may have threads by then).
  std::vector<std::string> env = command_environment(setup.as, environ);
  std::vector<char *> envp;
  for (std::string &e : env)
    envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<char *> argv;
  for (const std::string &a : args)
    argv.push_back(const_cast<char *>(a.c_str()));
  argv.push_back(nullptr);
  // A script without #! is the shell's to run, as execvp runs it.
  std::vector<char *> sh_argv{const_cast<char *>("/bin/sh"), found.path.data()};
  sh_argv.insert(sh_argv.end(), argv.begin() + 1, argv.end());
  std::string base = args[0].substr(args[0].rfind('/') + 1);
  const bool change_user = getuid() == 0;
  int go[2], err[2];
  if (pipe2(go, O_CLOEXEC) || pipe2(err, O_CLOEXEC))
    throw runtime_error("pipe: " + errno_text(errno));
  pid_ = fork();
  if (pid_ < 0) {
    const int fork_errno = errno;
    for (int fd : {go[0], go[1], err[0], err[1]})
      close(fd);
    throw runtime_error("fork: " + errno_text(fork_errno));
  }
  if (pid_ == 0) {
    // What offcpu set for itself is not the command's.
    signal(SIGPIPE, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    close(go[1]);
    close(err[0]);
    // Named as the command already: what little it does before exec is
    // the command starting.
    prctl(PR_SET_NAME, base.c_str());
    if (!setup.keep_fds)
      close_fds_on_exec(STDERR_FILENO + 1);
    restore_fd_limit();
    if (change_user &&
        !drop_privileges(setup.as.uid, setup.as.gid, setup.as.groups.data(),
                         setup.as.groups.size()))
      fail(err[1]);
    // As its user now: may it run the file (a root-only directory on the
    // way, a file only root may execute)?
    if (access(found.path.c_str(), X_OK) != 0)
      fail(err[1]);
    int ready = 0;
    if (write(err[1], &ready, sizeof(ready)) != sizeof(ready))
      _exit(kExitCannotRun);
    char c;
    if (read(go[0], &c, 1) != 1)
      _exit(kExitNotFound); // offcpu gave up before tracing started
    execve(found.path.c_str(), argv.data(), envp.data());
    if (errno == ENOEXEC)
      execve(sh_argv[0], sh_argv.data(), envp.data());
    fail(err[1]);
  }
  close(go[0]);
  close(err[1]);
  go_fd_ = go[1];
  error_fd_ = err[0];
  // Refused before tracing starts, with the status a shell would give.
  int word = -1;
  if (!read_child_word(error_fd_, word, 30000) || word != 0) {
    const int status =
        word > 0 ? status_for(word) : static_cast<int>(kExitCannotRun);
    const std::string why = word > 0 ? errno_text(word) : "it did not start";
    // The destructor does not run for a constructor that throws.
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    close(go_fd_);
    close(error_fd_);
    throw FatalError(status, "cannot run " + args[0] + " as " + setup.as.name +
                                 ": " + why);
  }
}

TracedCommand::~TracedCommand() {
  if (go_fd_ >= 0) { // never released: it must not run untraced
    if (!reaped_)
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
  if (go_fd_ < 0 && read_child_word(error_fd_, err, 0) && err != 0)
    exec_error_ = "cannot run " + name_ + ": " + errno_text(err);
  return true;
}

CommandEnd TracedCommand::end(double grace_s) {
  CommandEnd e;
  if (exited())
    return e;
  // The command first, signalled by pid: it is our child, not yet reaped,
  // so its pid cannot be anyone else's.
  std::vector<Member> tree;
  tree.push_back({pid_, UniqueFd()});
  add_descendants(pid_, tree);
  auto others_alive = [&tree] {
    int n = 0;
    for (size_t i = 1; i < tree.size(); i++)
      n += tree[i].alive();
    return n;
  };
  e.signalled = true;
  for (const Member &m : tree)
    m.signal(SIGTERM);
  const uint64_t deadline =
      monotonic_ns() + static_cast<uint64_t>(grace_s * 1e9);
  while (!(exited() && others_alive() == 0) && monotonic_ns() < deadline)
    usleep(10000);
  if (exited() && others_alive() == 0)
    return e;
  // Outlived SIGTERM: what it started meanwhile goes too.
  if (!exited())
    add_descendants(pid_, tree);
  for (size_t i = 1; i < tree.size(); i++)
    if (tree[i].alive()) {
      add_descendants(tree[i].pid, tree);
      e.others_killed++;
    }
  e.killed = !exited();
  if (e.killed)
    tree[0].signal(SIGKILL);
  for (size_t i = 1; i < tree.size(); i++)
    if (tree[i].alive())
      tree[i].signal(SIGKILL);
  // SIGKILL ends all but a task stuck in the kernel (a dead NFS server).
  const uint64_t kill_deadline = monotonic_ns() + 1000000000ull;
  while (!exited() && monotonic_ns() < kill_deadline)
    usleep(10000);
  e.still_running = !exited();
  return e;
}

// The traced command's end. Once the output is written, a command still
// running (the window ended on its duration, a Ctrl-C or SIGTERM) is ended
// as timeout(1) ends it: SIGTERM, then SIGKILL after a grace period. Its
// status is offcpu's.
int finish_command(TracedCommand &cmd) {
  const CommandEnd end = cmd.end();
  const std::string who = "the command (PID " + std::to_string(cmd.pid()) + ")";
  const std::string others =
      std::to_string(end.others_killed) +
      (end.others_killed == 1 ? " process" : " processes") + " it started";
  const std::string grace =
      " still running " + std::to_string(static_cast<int>(kTermGraceSeconds)) +
      " s after SIGTERM: killed with SIGKILL";
  if (end.still_running) {
    warn(who + " did not end even after SIGKILL (stuck in the kernel?); "
               "offcpu exits without it");
    return kExitRuntime;
  }
  if (end.killed)
    warn(who + (end.others_killed ? " and " + others + " were" : " was") +
         grace + "; exit status " + std::to_string(cmd.status()));
  else if (end.others_killed)
    warn(others + (end.others_killed == 1 ? " was" : " were") + grace);
  else if (end.signalled)
    note(who + " was still running: ended with SIGTERM, exit status " +
         std::to_string(cmd.status()));
  if (!cmd.exec_error().empty())
    warn(cmd.exec_error());
  return cmd.status();
}

} // namespace offcpu
