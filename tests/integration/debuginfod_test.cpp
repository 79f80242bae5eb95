// Issue #31: debug files from a real debuginfod server (Debian's package),
// started by the test on 127.0.0.1 and serving a directory with the debug
// file of a stripped copy of the inlined workload. With DEBUGINFOD_URLS
// the stripped binary's frames are named, inlined calls included, and the
// file lands in the cache; without, they stay [module]. A server that never
// answers costs the run its --debuginfod-time, no more, and is reported.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "support/process.h"
#include "symbolize/elf_file.h"

namespace offcpu {
namespace {

class Debuginfod : public ::testing::Test {
protected:
  void SetUp() override {
    if (geteuid() != 0)
      GTEST_SKIP() << "integration tests load BPF programs: run as root";
    for (const char *tool : {"/usr/bin/debuginfod", "/usr/bin/curl"})
      if (access(tool, X_OK) != 0)
        GTEST_SKIP() << tool << " is needed: apt-get install debuginfod curl";
    char tmpl[] = "/tmp/offcpu-debuginfod-XXXXXX";
    dir_ = mkdtemp(tmpl);
    mkdir((dir_ + "/serve").c_str(), 0755);
    mkdir((dir_ + "/cache").c_str(), 0700);
    stripped_ = dir_ + "/inlined_stripped";
    ASSERT_EQ(test::run({"/usr/bin/objcopy", "--only-keep-debug",
                         WORKLOAD_INLINED, dir_ + "/serve/inlined.debug"},
                        30)
                  .exit_code,
              0);
    ASSERT_EQ(
        test::run({"/usr/bin/strip", "-o", stripped_, WORKLOAD_INLINED}, 30)
            .exit_code,
        0);
    chmod(stripped_.c_str(), 0755);
    auto elf = ElfFile::open(stripped_);
    ASSERT_TRUE(elf && !elf->build_id().empty());
    build_id_ = elf->build_id();
  }
  void TearDown() override {
    server_.reset();
    if (!dir_.empty())
      test::run({"/bin/rm", "-rf", dir_}, 10);
  }

  // debuginfod on 127.0.0.1:`port` over serve/, once it serves the file.
  void start_server(int port) {
    server_ = std::make_unique<test::Subprocess>(std::vector<std::string>{
        "/usr/bin/debuginfod", "-F", dir_ + "/serve", "-p",
        std::to_string(port), "-d", dir_ + "/db.sqlite"});
    url_ = "http://127.0.0.1:" + std::to_string(port);
    for (int i = 0; i < 60; i++) {
      auto r = test::run({"/usr/bin/curl", "-s", "-o", "/dev/null", "-w",
                          "%{http_code}",
                          url_ + "/buildid/" + build_id_ + "/debuginfo"},
                         10);
      if (r.out == "200")
        return;
      test::sleep_seconds(0.5);
    }
    FAIL() << "debuginfod did not serve the debug file in 30 s";
  }

  test::RunResult trace(int pid, const std::vector<std::string> &env,
                        const std::vector<std::string> &extra = {}) {
    std::vector<std::string> argv{"/usr/bin/env"};
    argv.insert(argv.end(), env.begin(), env.end());
    for (const std::string &a :
         {std::string(OFFCPU_BIN), std::string("-p"), std::to_string(pid),
          std::string("-U"), std::string("-f")})
      argv.push_back(a);
    argv.insert(argv.end(), extra.begin(), extra.end());
    argv.push_back("1");
    return test::run(argv, 60);
  }

  int start_workload(std::unique_ptr<test::Subprocess> &w) {
    w = std::make_unique<test::Subprocess>(std::vector<std::string>{stripped_});
    auto line = w->read_line(20);
    if (!line || line->rfind("ready ", 0) != 0)
      return -1;
    return std::stoi(line->substr(6));
  }

  std::string dir_, stripped_, build_id_, url_;
  std::unique_ptr<test::Subprocess> server_;
};

TEST_F(Debuginfod, StrippedBinaryNamedFromTheServer) {
  start_server(18900 + getpid() % 90);
  std::unique_ptr<test::Subprocess> w;
  int pid = start_workload(w);
  ASSERT_GT(pid, 0);
  auto plain = trace(pid, {"DEBUGINFOD_URLS="});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(plain.out.find("poll_loop"), std::string::npos)
      << "named without the server: the test proves nothing\n"
      << plain.out;
  auto r = trace(pid, {"DEBUGINFOD_URLS=" + url_,
                       "DEBUGINFOD_CACHE_PATH=" + dir_ + "/cache"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(";poll_loop;poll_outer;poll_middle;poll_forever;"),
            std::string::npos)
      << r.out << r.err;
  struct stat st {};
  EXPECT_EQ(stat((dir_ + "/cache/" + build_id_ + "/debuginfo").c_str(), &st), 0)
      << "not in the cache";
}

// A server that accepts and never answers: the run spends its
// --debuginfod-time on it, says so, and names the rest.
TEST_F(Debuginfod, SilentServerCostsOnlyTheBudget) {
  const int port = 18990 + getpid() % 9;
  server_ = std::make_unique<test::Subprocess>(std::vector<std::string>{
      "/usr/bin/python3", "-c",
      "import socket, time\n"
      "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, "
      "socket.SO_REUSEADDR, 1)\n"
      "s.bind(('127.0.0.1', " +
          std::to_string(port) +
          ")); s.listen(16)\n"
          "print('ready', flush=True)\n"
          "conns = []\n"
          "while True: conns.append(s.accept())\n"});
  ASSERT_TRUE(server_->read_line(20));
  std::unique_ptr<test::Subprocess> w;
  int pid = start_workload(w);
  ASSERT_GT(pid, 0);
  const double t0 = test::now_seconds();
  auto r = trace(pid,
                 {"DEBUGINFOD_URLS=http://127.0.0.1:" + std::to_string(port),
                  "DEBUGINFOD_CACHE_PATH=" + dir_ + "/cache"},
                 {"--debuginfod-time", "1"});
  const double took = test::now_seconds() - t0;
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_LT(took, 1 + 1 + 2.5) << r.err; // window, budget, start and end
  EXPECT_NE(r.err.find("not fetched from debuginfod"), std::string::npos)
      << r.err;
  EXPECT_NE(r.out.find("start_thread"), std::string::npos) << r.out;
}

} // namespace
} // namespace offcpu
