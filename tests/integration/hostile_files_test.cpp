// Issue #10: offcpu runs as root and reads files that the users it traces
// control (perf maps, binaries, debug files, process names). Each attack
// here runs as an unprivileged user the suite creates. Whatever the files
// hold, an offcpu run must end on time, exit 0 with its usual output, leak
// nothing the user could not read, and never crash.
#include <fcntl.h>
#include <glob.h>
#include <gtest/gtest.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <regex>
#include <sstream>

#include "support/chromium.h"
#include "support/folded_parse.h"
#include "support/hostile_fixture.h"
#include "support/png.h"
#include "support/process.h"

namespace offcpu {
namespace {

using test::expect_clean_run;
using test::has_comm;
using test::HostileFiles;
using test::kKillAfter;
using test::lines_with;
using test::ok;
using test::run_offcpu;
using test::slurp;
using test::Timed;
using test::utf8_problem;
using test::Workload;

// 1. Perf maps: /tmp/perf-PID.map belongs to the traced user, who can make
// it anything.

TEST_F(HostileFiles, PerfMapSymlinkToRootOnlyFileLeaksNothing) {
  if (slurp("/proc/sys/fs/protected_symlinks") != "0\n")
    std::cerr << "[ info ] fs.protected_symlinks is on: the kernel itself "
                 "stops root following the user's symlink in /tmp\n";
  std::string marker = write_secret();
  Workload w = start({hostile(), "jit", "symlink", secret_});
  ASSERT_TRUE(w.ready()) << w.error();
  Timed t = run_offcpu({"-p", w.pid(), "-f", "2"}, 2);
  expect_clean_run(t, 2, "perf map symlinked to a root-only file");
  expect_no_leak(t, marker);
  EXPECT_TRUE(has_comm(t.r.out, "hostile")) << t.r.out;
}

TEST_F(HostileFiles, PerfMapSymlinkInPrivateMountNamespaceLeaksNothing) {
  if (!ok(run_as_user({"/usr/bin/unshare", "-Urm", "/bin/true"})))
    GTEST_SKIP() << "unprivileged user namespaces are not available";
  std::string marker = write_secret();
  // Its own tmpfs on /tmp, and there an absolute symlink to the host path:
  // read through /proc/PID/root, it resolves in offcpu's root.
  Workload w = start(
      {"/usr/bin/unshare", "-Urm", hostile(), "jit", "ns-symlink", secret_});
  ASSERT_TRUE(w.ready()) << w.error();
  Timed t = run_offcpu({"-p", w.pid(), "-f", "2"}, 2);
  expect_clean_run(t, 2,
                   "perf map symlinked to a root-only file from a private "
                   "/tmp");
  expect_no_leak(t, marker);
  EXPECT_TRUE(has_comm(t.r.out, "hostile")) << t.r.out;
}

TEST_F(HostileFiles, PerfMapFifoOrDeviceDoesNotHang) {
  // Reading the map happens when the first stack comes in, whatever the
  // window: 1 s windows keep this short.
  {
    Workload w = start({hostile(), "jit", "fifo"});
    ASSERT_TRUE(w.ready()) << w.error();
    // -v: the second is counted from the window's end (expect_clean_run).
    Timed t = run_offcpu({"-v", "-p", w.pid(), "-f", "1"}, 1);
    expect_clean_run(t, 1, "perf map a FIFO held open by its writer");
    EXPECT_TRUE(has_comm(t.r.out, "hostile")) << t.r.out;
  }
  {
    Workload w = start({hostile(), "jit", "symlink", "/dev/zero"});
    ASSERT_TRUE(w.ready()) << w.error();
    Timed t = run_offcpu({"-v", "-p", w.pid(), "-f", "1"}, 1);
    expect_clean_run(t, 1, "perf map a symlink to /dev/zero");
    EXPECT_TRUE(has_comm(t.r.out, "hostile")) << t.r.out;
    std::cerr << "[ info ] /dev/zero as perf map: " << t.seconds << " s, peak "
              << t.r.max_rss_kb / 1024 << " MB\n";
  }
}

TEST_F(HostileFiles, LegitimatePerfMapStillNamesJitCode) {
  Workload w = start({hostile(), "jit", "legit"});
  ASSERT_TRUE(w.ready()) << w.error();
  Timed t = run_offcpu({"-p", w.pid(), "-f", "2"}, 2);
  expect_clean_run(t, 2, "a user's own regular perf map");
  EXPECT_NE(t.r.out.find(";jit_compiled_sleep;"), std::string::npos)
      << "the JIT frame is not named from the user's own perf map:\n"
      << t.r.out;
}

// 2. A mapped file truncated under offcpu's feet: a reader that maps it
// gets SIGBUS.

TEST_F(HostileFiles, BinaryTruncatedWhileReadDoesNotKillOffcpu) {
  // A large symbol table: reading it takes offcpu long enough for a
  // truncation to land meanwhile.
  std::string fat = dir_ + "/fat.bin", rsp = dir_ + "/symbols.rsp";
  {
    std::ofstream out(rsp);
    for (int i = 0; i < 200000; i++)
      out << "--add-symbol=hostile_fake_" << i << "=.text:0x" << std::hex
          << (i % 256) * 16 << std::dec << ",function,global\n";
  }
  auto made = test::run({"/usr/bin/objcopy", "@" + rsp, hostile(), fat}, 60);
  ASSERT_EQ(made.exit_code, 0) << made.err;
  chmod(fat.c_str(), 0644);
  std::string scratch = user_scratch_dir();
  ASSERT_FALSE(scratch.empty());
  Workload w = start({hostile(), "sigbus", fat, scratch + "/victim"});
  ASSERT_TRUE(w.ready()) << w.error();

  // 1 s windows: the file is read when the process is first seen, so a
  // longer window adds time, not chances.
  int runs = 0, killed = 0;
  double slowest = 0;
  std::string failures;
  for (int i = 0; i < 12; i++) {
    bool whole_system = i >= 10;
    std::vector<std::string> args = {"-f", "1"};
    if (!whole_system)
      args = {"-p", w.pid(), "-f", "1"};
    Timed t = run_offcpu(args, 1);
    runs++;
    std::string what = std::string(whole_system ? "whole system" : "-p PID") +
                       " run " + std::to_string(i + 1);
    if (t.r.term_signal != 0 && !t.r.timed_out)
      killed++;
    slowest = std::max(slowest, t.seconds);
    // A hang is killed (timed_out); how long a run takes short of that
    // depends on how busy the machine is, and is recorded only.
    if (t.r.timed_out || t.r.term_signal != 0 || t.r.exit_code != 0)
      failures +=
          what + ": " +
          (t.r.timed_out     ? std::string("hung")
           : t.r.term_signal ? strsignal(t.r.term_signal)
                             : "exit " + std::to_string(t.r.exit_code)) +
          "\n";
    else if (!whole_system && !has_comm(t.r.out, "hostile"))
      failures += what + ": the workload is missing from the output\n";
  }
  RecordProperty("slowest_run_s", std::to_string(slowest));
  EXPECT_EQ(killed, 0) << "offcpu killed by a signal in " << killed << " of "
                       << runs << " runs";
  EXPECT_TRUE(failures.empty()) << failures;
}

// 3. Reads without a bound.

TEST_F(HostileFiles, HugeSparseDebuglinkTargetIsNotReadWhole) {
  std::string bin = dir_ + "/dl_hostile", debug = dir_ + "/dl_hostile.debug";
  ASSERT_TRUE(ok(test::run({"/bin/cp", hostile(), bin}, 30)));
  ASSERT_TRUE(
      ok(test::run({"/usr/bin/objcopy", "--only-keep-debug", bin, debug}, 30)));
  ASSERT_TRUE(ok(test::run({"/usr/bin/strip", "--strip-all", bin}, 30)));
  ASSERT_TRUE(ok(test::run(
      {"/usr/bin/objcopy", "--add-gnu-debuglink=" + debug, bin}, 30)));
  // The name the link asks for, now 20 GB of holes.
  ASSERT_EQ(unlink(debug.c_str()), 0);
  int fd = open(debug.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, off_t{20} << 30), 0) << strerror(errno);
  close(fd);
  ASSERT_EQ(chown(debug.c_str(), uid_, gid_), 0);
  ASSERT_EQ(chown(bin.c_str(), uid_, gid_), 0);

  Workload w = start({bin, "sleep"});
  ASSERT_TRUE(w.ready()) << w.error();
  Timed t = run_offcpu({"-p", w.pid(), "-f", "2"}, 2);
  expect_clean_run(t, 2, "debuglink to a 20 GB sparse file");
  EXPECT_TRUE(has_comm(t.r.out, "dl_hostile")) << t.r.out;
}

TEST_F(HostileFiles, PerfMapFromUrandomWithManyStacksEndsOnTime) {
  // A new JIT page every 8 ms, each a new stack outside the maps read so
  // far, and a perf map with no end.
  Workload w = start({hostile(), "jit-many", "/dev/urandom"});
  ASSERT_TRUE(w.ready()) << w.error();
  const double t0 = test::now_seconds();
  test::Subprocess p({OFFCPU_BIN, "-p", w.pid(), "-f", "3"});
  test::sleep_seconds(3.3); // the window, and the ~50 ms it takes to start
  p.signal(SIGINT);
  const double sent = test::now_seconds();
  test::RunResult r = p.wait(kKillAfter);
  const double after = test::now_seconds() - sent;
  if (r.timed_out) {
    ADD_FAILURE() << "offcpu still running " << after
                  << " s after its 3 s window and a SIGINT; killed\n"
                  << r.err;
    return;
  }
  EXPECT_LE(after, 1.0) << "offcpu ended " << after
                        << " s after its window and a SIGINT ("
                        << test::now_seconds() - t0 << " s in all)";
  EXPECT_EQ(r.term_signal, 0) << strsignal(r.term_signal);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(has_comm(r.out, "hostile")) << r.out;
  std::cerr << "[ info ] " << test::parse_folded(r.out).size()
            << " folded lines from the many-stacks workload\n";
}

TEST_F(HostileFiles, LargePerfMapPeakMemory) {
  Workload w = start({hostile(), "jit", "big", "85"});
  ASSERT_TRUE(w.ready()) << w.error();
  struct stat st {};
  ASSERT_EQ(lstat(("/tmp/perf-" + w.pid() + ".map").c_str(), &st), 0);
  EXPECT_GE(st.st_size, 85'000'000);
  Timed t = run_offcpu({"-p", w.pid(), "-f", "2"}, 2);
  expect_clean_run(t, 2, "an 85 MB perf map");
  std::cerr << "[ info ] offcpu peak RSS with an 85 MB perf map: "
            << t.r.max_rss_kb / 1024 << " MB\n";
  EXPECT_LT(t.r.max_rss_kb, 150 * 1024)
      << "offcpu peaked at " << t.r.max_rss_kb / 1024
      << " MB reading an 85 MB perf map";
  EXPECT_NE(t.r.out.find(";jit_compiled_sleep;"), std::string::npos)
      << "the JIT frame (last line of the map) is not named";
}

// 4. Process names are bytes, not text.

TEST_F(HostileFiles, InvalidUtf8ProcessNameIsEscapedEverywhere) {
  const std::string name = "bad\xff\xfe<&>";
  Workload w = start({hostile(), "comm", name});
  ASSERT_TRUE(w.ready()) << w.error();
  std::string svg = dir_ + "/x.svg", pb = dir_ + "/x.pb.gz",
              folded = dir_ + "/x.folded", text = dir_ + "/x.txt";
  Timed t = run_offcpu(
      {"-p", w.pid(), "-o", svg, "-o", pb, "-o", folded, "-o", text, "2"}, 2);
  expect_clean_run(t, 2, "a process named bad\\xff\\xfe<&>");
  for (const auto &f : {svg, folded, text}) {
    std::string content = slurp(f);
    EXPECT_NE(content.find("bad"), std::string::npos)
        << f << ": the process is missing";
    EXPECT_EQ(utf8_problem(content), "") << f;
  }
  std::string svg_text = slurp(svg);
  EXPECT_TRUE(
      std::regex_search(svg_text, std::regex(R"(bad\\x[fF][fF]\\x[fF][eE])")))
      << "the name is not shown with its invalid bytes escaped (\\xff):\n"
      << lines_with(svg_text, "bad");

  std::vector<std::string> missing;
  if (access("/usr/bin/xmllint", X_OK) == 0) {
    auto lint = test::run({"/usr/bin/xmllint", "--noout", svg}, 60);
    EXPECT_EQ(lint.exit_code, 0) << "the SVG is not well-formed XML:\n"
                                 << lint.err.substr(0, 2000);
  } else {
    missing.push_back("xmllint (libxml2-utils)");
  }
  if (access("/usr/bin/go", X_OK) == 0) {
    auto raw = test::run({"/usr/bin/go", "tool", "pprof", "-raw", pb}, 120);
    EXPECT_EQ(raw.exit_code, 0) << raw.err;
    EXPECT_NE(raw.out.find("bad"), std::string::npos) << raw.out;
    EXPECT_EQ(utf8_problem(raw.out), "") << "pprof strings";
  } else {
    missing.push_back("go (golang-go)");
  }
  if (test::chromium_installed()) {
    // Chromium shows an error page, not the graph, for malformed XML.
    std::string png = dir_ + "/x.png";
    auto shot =
        test::chromium_screenshot("file://" + svg, png, dir_ + "/chrome");
    const auto &img = shot.image;
    ASSERT_TRUE(img) << "no screenshot: " << shot.log;
    size_t blue = test::user_frame_pixels(*img), pixels = img->rgb.size() / 3;
    EXPECT_GT(blue, pixels / 20)
        << "Chromium shows no flame graph (" << 100 * blue / pixels
        << "% frame pixels): " << png;
  } else {
    missing.push_back("chromium");
  }
  if (!missing.empty())
    GTEST_SKIP() << "not installed, so not checked: "
                 << ::testing::PrintToString(missing);
}

// 5. Limits and output targets, refused before tracing starts.

TEST_F(HostileFiles, HugeMapSizesAreRefusedUpFront) {
  for (const char *opt : {"--stack-storage-size", "--max-entries"}) {
    Timed t = run_offcpu({opt, "16777216", "1"}, 1);
    std::string what = std::string(opt) + " 16777216";
    if (t.r.timed_out) {
      ADD_FAILURE() << what << ": still running after " << t.seconds
                    << " s, killed";
      continue;
    }
    EXPECT_LT(t.seconds, 2.0) << what << ": took " << t.seconds << " s";
    EXPECT_TRUE(t.r.exit_code == 1 || t.r.exit_code == 2)
        << what << ": exit " << t.r.exit_code << "\n"
        << t.r.err;
    EXPECT_EQ(t.r.err.find("Tracing"), std::string::npos)
        << what << ": accepted, tracing started:\n"
        << t.r.err;
    EXPECT_EQ(std::count(t.r.err.begin(), t.r.err.end(), '\n'), 1)
        << what << ": not one line:\n"
        << t.r.err;
    // The message names the option and its cap (a number below the ask).
    bool cap = false;
    std::regex number("[0-9]+");
    for (auto it = std::sregex_iterator(t.r.err.begin(), t.r.err.end(), number);
         it != std::sregex_iterator(); ++it) {
      const std::string n = it->str();
      cap |= n.size() < 9 && std::stoul(n) > 0 && std::stoul(n) < 16777216;
    }
    EXPECT_TRUE(t.r.err.find(opt) != std::string::npos && cap)
        << what << ": the error does not state the cap: " << t.r.err;
  }
}

TEST_F(HostileFiles, UnusableOutputTargetsAreRefusedBeforeTracing) {
  for (const char *target : {"/tmp", "/nonexistent-dir/x.svg"}) {
    Timed t = run_offcpu({"-o", target, "1"}, 1);
    std::string what = std::string("-o ") + target;
    EXPECT_FALSE(t.r.timed_out) << what << ": hung";
    EXPECT_LT(t.seconds, 2.0) << what << ": took " << t.seconds << " s";
    EXPECT_NE(t.r.exit_code, 0) << what << ": accepted";
    EXPECT_EQ(t.r.err.find("Tracing"), std::string::npos)
        << what << ": refused only after tracing:\n"
        << t.r.err;
  }
  glob_t g{};
  EXPECT_NE(glob("/tmp.offcpu-*", 0, nullptr, &g), 0)
      << "a temporary file was left beside /tmp: " << g.gl_pathv[0];
  globfree(&g);
}

TEST_F(HostileFiles, SecondCtrlCLeavesNoTemporaryFiles) {
  // Whole system: the work after the first Ctrl-C takes long enough for
  // the second to land in it.
  int interrupted = 0;
  for (double gap : {0.002, 0.02, 0.05}) {
    std::string out =
        dir_ + "/gap" + std::to_string(static_cast<int>(gap * 1000));
    ASSERT_EQ(mkdir(out.c_str(), 0755), 0);
    test::Subprocess p({OFFCPU_BIN, "-o", out + "/a.svg", "-o",
                        out + "/b.pb.gz", "-o", out + "/c.folded"});
    test::sleep_seconds(1.0);
    p.signal(SIGINT);
    test::sleep_seconds(gap);
    p.signal(SIGINT);
    auto r = p.wait(30);
    ASSERT_FALSE(r.timed_out) << "hung after two SIGINTs";
    interrupted += r.exit_code == 130;
    glob_t g{};
    std::string left;
    if (glob((out + "/*.offcpu-*").c_str(), 0, nullptr, &g) == 0)
      for (size_t i = 0; i < g.gl_pathc; i++)
        left += std::string(g.gl_pathv[i]) + "\n";
    globfree(&g);
    EXPECT_EQ(left, "") << "second SIGINT " << gap * 1000
                        << " ms after the first (exit " << r.exit_code
                        << ") left temporary files:\n"
                        << left;
  }
  if (interrupted == 0)
    GTEST_SKIP() << "every run finished between the two signals";
}

} // namespace
} // namespace offcpu
