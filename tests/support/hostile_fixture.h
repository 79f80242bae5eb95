// The base of every test that attacks offcpu as an unprivileged user
// (issues #10 and #26): the test user, a copy of the hostile workload it can
// run, scratch directories it owns, and the checks every such run must pass
// (ends on time, exit 0, nothing leaked). Used by the integration tests only
// (OFFCPU_BIN and WORKLOAD_HOSTILE come from tests/CMakeLists.txt).
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "support/folded_parse.h"
#include "support/process.h"
#include "support/root_fixture.h"

namespace offcpu::test {

inline constexpr const char *kUser = "offcpu-hostile";
// A hung offcpu is killed this long after its window should have ended:
// enough to tell late from hung, short enough to keep the suite fast.
inline constexpr double kKillAfter = 4.0;

inline std::string slurp(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline bool ok(const test::RunResult &r) {
  return r.exit_code == 0;
}

// Offset of the first byte that breaks UTF-8 (RFC 3629: no overlong forms,
// no surrogates, nothing above U+10FFFF), or npos.
inline size_t invalid_utf8_at(std::string_view s) {
  static const uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  size_t i = 0;
  while (i < s.size()) {
    auto c = static_cast<unsigned char>(s[i]);
    size_t len = c < 0x80             ? 1
                 : (c & 0xe0) == 0xc0 ? 2
                 : (c & 0xf0) == 0xe0 ? 3
                 : (c & 0xf8) == 0xf0 ? 4
                                      : 0;
    if (len == 0 || i + len > s.size())
      return i;
    uint32_t cp = len == 1 ? c : c & (0x7f >> len);
    for (size_t k = 1; k < len; k++) {
      auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xc0) != 0x80)
        return i;
      cp = cp << 6 | (cc & 0x3f);
    }
    if (len > 1 &&
        (cp < kMin[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)))
      return i;
    i += len;
  }
  return std::string_view::npos;
}

// "" if valid, else where it breaks, with the bytes around it.
inline std::string utf8_problem(const std::string &s) {
  size_t at = invalid_utf8_at(s);
  if (at == std::string_view::npos)
    return "";
  size_t from = at < 40 ? 0 : at - 40;
  std::string shown;
  for (char c : s.substr(from, 80)) {
    auto u = static_cast<unsigned char>(c);
    char hex[8];
    snprintf(hex, sizeof(hex), "\\x%02x", u);
    shown += u >= 0x20 && u < 0x7f ? std::string(1, c) : std::string(hex);
  }
  return "invalid UTF-8 at byte " + std::to_string(at) + ": ..." + shown +
         "...";
}

// The lines of `text` that contain `needle`.
inline std::string lines_with(const std::string &text,
                              const std::string &needle) {
  std::istringstream in(text);
  std::string out;
  for (std::string line; std::getline(in, line);)
    if (line.find(needle) != std::string::npos)
      out += line + "\n";
  return out;
}

inline bool has_comm(const std::string &folded, const std::string &comm) {
  for (const auto &l : test::parse_folded(folded))
    if (!l.frames.empty() && l.frames[0] == comm)
      return true;
  return false;
}

struct Timed {
  test::RunResult r;
  double seconds = 0;
  double ended = 0; // when it exited, CLOCK_MONOTONIC seconds
};

// Runs offcpu as root; one that hangs is killed kKillAfter after its
// window and reported, not waited out.
inline Timed run_offcpu(const std::vector<std::string> &args, double window) {
  std::vector<std::string> argv{OFFCPU_BIN};
  argv.insert(argv.end(), args.begin(), args.end());
  const double t0 = test::now_seconds();
  test::Subprocess p(argv);
  Timed t;
  t.r = p.wait(window + kKillAfter);
  t.ended = test::now_seconds();
  t.seconds = t.ended - t0;
  return t;
}

// Ended within 1 s of its window, by itself, with exit code 0. With -v,
// offcpu says when its window closed, and the second is counted from
// there: what follows the window (naming, the outputs) is what the budget
// is for. Without it, from the start, which adds offcpu's start-up (0.2 s
// idle, more on a loaded host: 0.7 s of the second went there and to
// naming 24 costly files on a quiet 2-CPU VM).
inline void expect_clean_run(const Timed &t, double window,
                             const std::string &what) {
  if (t.r.timed_out) {
    ADD_FAILURE() << what << ": offcpu hung, killed after " << t.seconds
                  << " s (window " << window << " s)\n"
                  << t.r.err;
    return;
  }
  EXPECT_EQ(t.r.term_signal, 0)
      << what << ": offcpu killed by " << strsignal(t.r.term_signal);
  EXPECT_EQ(t.r.exit_code, 0) << what << ": " << t.r.err;
  std::smatch closed;
  if (std::regex_search(t.r.err, closed,
                        std::regex("window: [0-9]+ to ([0-9]+) ns"))) {
    const double after = t.ended - std::stod(closed[1]) / 1e9;
    EXPECT_LE(after, 1.0) << what << ": ended " << after
                          << " s after its window\n"
                          << t.r.err;
    return;
  }
  EXPECT_LE(t.seconds, window + 1.0)
      << what << ": ran " << t.seconds << " s for a " << window << " s window";
}

// A hostile process, run as the test user; "ready PID" on stdout once set.
// Its perf map in /tmp, if any, goes with it.
class Workload {
public:
  Workload(const std::vector<std::string> &argv, uid_t uid, gid_t gid) {
    test::Subprocess::Options o;
    o.run_as = uid;
    o.run_as_group = gid;
    proc_ = std::make_unique<test::Subprocess>(argv, o);
    auto line = proc_->read_line(60);
    if (line && line->rfind("ready ", 0) == 0) {
      pid_ = line->substr(6);
    } else {
      auto r = proc_->wait(5);
      error_ = "workload did not start (exit " + std::to_string(r.exit_code) +
               "): " + r.err;
    }
  }
  ~Workload() {
    // Its pid even when it never got ready: a map may be half written.
    std::string map = "/tmp/perf-" + std::to_string(proc_->pid()) + ".map";
    proc_.reset(); // kills it
    unlink(map.c_str());
  }
  bool ready() const { return !pid_.empty(); }
  const std::string &pid() const { return pid_; }
  const std::string &error() const { return error_; }

private:
  std::unique_ptr<test::Subprocess> proc_;
  std::string pid_, error_;
};

class HostileFiles : public RootTest {
protected:
  static void SetUpTestSuite() {
    skip_.clear();
    if (geteuid() != 0) {
      skip_ = "integration tests load BPF programs: run as root";
      return;
    }
    passwd *pw = getpwnam(kUser);
    if (!pw) {
      test::run({"/usr/sbin/useradd", "--system", "--no-create-home", "--shell",
                 "/usr/sbin/nologin", kUser},
                30);
      pw = getpwnam(kUser);
    }
    if (!pw) {
      skip_ = std::string("could not create the user ") + kUser;
      return;
    }
    uid_ = pw->pw_uid;
    gid_ = pw->pw_gid;
    // The build tree may be closed to other users: run a copy.
    char tmpl[] = "/tmp/offcpu-hostile-bin-XXXXXX";
    bin_dir_ = mkdtemp(tmpl);
    chmod(bin_dir_.c_str(), 0755);
    if (!ok(test::run({"/bin/cp", WORKLOAD_HOSTILE, hostile()}, 30)) ||
        chmod(hostile().c_str(), 0755) != 0)
      skip_ = "could not copy the workload to " + bin_dir_;
  }
  static void TearDownTestSuite() {
    if (!bin_dir_.empty())
      test::run({"/bin/rm", "-rf", bin_dir_}, 30);
    bin_dir_.clear();
  }

  void SetUp() override {
    if (!skip_.empty())
      GTEST_SKIP() << skip_;
    RootTest::SetUp();
    if (!dir_.empty())
      chmod(dir_.c_str(), 0755); // the user reaches what we put here
  }
  void TearDown() override {
    if (!shm_dir_.empty())
      test::run({"/bin/rm", "-rf", shm_dir_}, 30);
    RootTest::TearDown();
  }

  static std::string hostile() { return bin_dir_ + "/hostile"; }

  Workload start(const std::vector<std::string> &argv) const {
    return Workload(argv, uid_, gid_);
  }

  test::RunResult run_as_user(const std::vector<std::string> &argv) const {
    test::Subprocess::Options o;
    o.run_as = uid_;
    o.run_as_group = gid_;
    return test::run(argv, 30, o);
  }

  // A root-only file whose content, read as a perf map, names every user
  // address with a marker; returns the marker.
  std::string write_secret() {
    std::random_device rd;
    char id[32];
    snprintf(id, sizeof(id), "%08x%08x", rd(), rd());
    std::string marker = std::string("SECRET_MARKER_") + id;
    std::string priv = dir_ + "/private";
    mkdir(priv.c_str(), 0700);
    secret_ = priv + "/secret";
    int fd = open(secret_.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
    std::string text = "0 ffffffffffff " + marker + "\n";
    EXPECT_TRUE(fd >= 0 && write(fd, text.data(), text.size()) ==
                               static_cast<ssize_t>(text.size()));
    close(fd);
    EXPECT_FALSE(ok(run_as_user({"/bin/cat", secret_})))
        << "the test user can read the secret itself: the test proves nothing";
    return marker;
  }

  void expect_no_leak(const Timed &t, const std::string &marker) {
    EXPECT_EQ(t.r.out.find(marker), std::string::npos)
        << "the root-only file was read as the perf map: its content is "
           "printed as a frame name:\n"
        << lines_with(t.r.out, marker);
    EXPECT_EQ(t.r.err.find(marker), std::string::npos)
        << "the root-only file's content is on stderr:\n"
        << lines_with(t.r.err, marker);
  }

  // A directory the test user owns, on tmpfs when there is one: files
  // rewritten without pause there never reach a disk.
  std::string user_scratch_dir() {
    struct stat st {};
    std::string base =
        stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) ? "/dev/shm" : dir_;
    std::string tmpl = base + "/offcpu-hostile-XXXXXX";
    if (!mkdtemp(tmpl.data()))
      return "";
    if (base != dir_)
      shm_dir_ = tmpl;
    if (chown(tmpl.c_str(), uid_, gid_) != 0)
      return "";
    return tmpl;
  }

  static inline std::string skip_, bin_dir_;
  static inline uid_t uid_ = 0;
  static inline gid_t gid_ = 0;
  std::string shm_dir_, secret_;
};

} // namespace offcpu::test
