// Frames named where the easy path fails: binaries deleted after start,
// binaries seen only through another mount namespace, stripped binaries with
// separate debug information, JIT code with a perf map.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "support/folded_parse.h"
#include "support/process.h"
#include "support/root_fixture.h"

namespace offcpu {
namespace {

class Symbolize : public test::RootTest {
protected:
  // Starts argv (which prints "ready PID"), traces it for 2 s, returns the
  // folded lines.
  std::vector<test::FoldedLine> trace(std::vector<std::string> argv,
                                      std::vector<std::string> extra = {}) {
    test::Subprocess w(argv);
    auto line = w.read_line(20);
    EXPECT_TRUE(line && line->rfind("ready ", 0) == 0)
        << (line ? *line : "no line");
    if (!line || line->rfind("ready ", 0) != 0)
      return {};
    std::string pid = line->substr(6);
    last_pid_ = pid;
    after_start(pid);
    std::vector<std::string> args = {OFFCPU_BIN, "-p", pid, "-f"};
    args.insert(args.end(), extra.begin(), extra.end());
    args.push_back("2");
    auto r = test::run(args, 60);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return test::parse_folded(r.out);
  }
  virtual void after_start(const std::string &) {}
  std::string last_pid_; // the workload trace() ran last

  static bool named(const std::vector<test::FoldedLine> &lines,
                    const std::string &caller, const std::string &callee) {
    for (const auto &l : lines) {
      int a = test::frame_index(l, caller), b = test::frame_index(l, callee);
      if (a >= 0 && b == a + 1)
        return true;
    }
    return false;
  }

  std::string copy_blocker(const std::string &name) {
    std::string path = dir_ + "/" + name;
    EXPECT_EQ(test::run({"/bin/cp", WORKLOAD_BLOCKER, path}, 10).exit_code, 0);
    return path;
  }
};

class DeletedBinary : public Symbolize {
protected:
  void after_start(const std::string &) override { unlink(path_.c_str()); }

public:
  std::string path_;
};

TEST_F(DeletedBinary, FramesNamedAfterTheFileIsGone) {
  path_ = copy_blocker("deleted_blocker");
  auto lines = trace({path_});
  EXPECT_NE(access(path_.c_str(), F_OK), 0) << "the binary should be gone";
  EXPECT_TRUE(named(lines, "sleeper_main", "block_in_nanosleep"));
}

TEST_F(Symbolize, BinaryOnlyVisibleInAnotherMountNamespace) {
  // The workload runs from a tmpfs mounted in its own mount namespace: its
  // path does not exist for offcpu.
  std::string bin = copy_blocker("ns_blocker");
  std::string script = "mkdir -p /tmp/offcpu-private-mnt && "
                       "mount -t tmpfs none /tmp/offcpu-private-mnt && "
                       "cp " +
                       bin +
                       " /tmp/offcpu-private-mnt/blocker && "
                       "exec /tmp/offcpu-private-mnt/blocker --no-spinner";
  auto lines = trace({"/usr/bin/unshare", "-m", "--propagation", "private",
                      "/bin/sh", "-c", script});
  struct stat st {};
  EXPECT_NE(stat("/tmp/offcpu-private-mnt/blocker", &st), 0)
      << "visible outside the namespace";
  EXPECT_TRUE(named(lines, "sleeper_main", "block_in_nanosleep"));
  rmdir("/tmp/offcpu-private-mnt");
}

TEST_F(Symbolize, StrippedBinaryWithDebuglink) {
  std::string bin = copy_blocker("dl_blocker");
  std::string debug = dir_ + "/dl_blocker.debug";
  ASSERT_EQ(test::run({"/usr/bin/objcopy", "--only-keep-debug", bin, debug}, 30)
                .exit_code,
            0);
  ASSERT_EQ(test::run({"/usr/bin/strip", "--strip-all", bin}, 30).exit_code, 0);
  ASSERT_EQ(
      test::run({"/usr/bin/objcopy", "--add-gnu-debuglink=" + debug, bin}, 30)
          .exit_code,
      0);
  EXPECT_TRUE(named(trace({bin}), "sleeper_main", "block_in_nanosleep"));
}

TEST_F(Symbolize, StrippedBinaryWithDebugFileByBuildId) {
  std::string bin = copy_blocker("bid_blocker");
  auto id = test::run(
      {"/bin/sh", "-c", "readelf -n " + bin + " | sed -n 's/.*Build ID: //p'"},
      30);
  std::string build_id = id.out.substr(0, id.out.find('\n'));
  ASSERT_GT(build_id.size(), 2u) << id.out;
  std::string root = dir_ + "/debugroot";
  std::string sub = root + "/.build-id/" + build_id.substr(0, 2);
  ASSERT_EQ(test::run({"/bin/mkdir", "-p", sub}, 10).exit_code, 0);
  ASSERT_EQ(test::run({"/usr/bin/objcopy", "--only-keep-debug", bin,
                       sub + "/" + build_id.substr(2) + ".debug"},
                      30)
                .exit_code,
            0);
  ASSERT_EQ(test::run({"/usr/bin/strip", "--strip-all", bin}, 30).exit_code, 0);
  auto without = trace({bin});
  EXPECT_FALSE(named(without, "sleeper_main", "block_in_nanosleep"))
      << "stripped, no debug file: names should be missing";
  EXPECT_TRUE(named(trace({bin}, {"--debug-dir", root}), "sleeper_main",
                    "block_in_nanosleep"));
}

TEST_F(Symbolize, StrippedBinaryWithMiniDebugInfo) {
  // As Fedora ships binaries: function symbols in an xz-compressed ELF in
  // the .gnu_debugdata section.
  std::string bin = copy_blocker("mdi_blocker");
  std::string script =
      "set -e; cd " + dir_ +
      "; "
      "nm -D --format=posix --defined-only mdi_blocker | awk '{print $1}' | "
      "sort > dynsyms; "
      "nm --format=posix --defined-only mdi_blocker | awk '$2 ~ /[Tt]/ {print "
      "$1}' | sort > funcs; "
      "comm -13 dynsyms funcs > keep; "
      "objcopy --only-keep-debug mdi_blocker mini.debug; "
      "objcopy -S --remove-section .gdb_index --remove-section .comment "
      "--keep-symbols=keep mini.debug mini; "
      "xz -f mini; strip --strip-all mdi_blocker; "
      "objcopy --add-section .gnu_debugdata=mini.xz mdi_blocker";
  auto r = test::run({"/bin/sh", "-c", script}, 60);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(named(trace({bin}), "sleeper_main", "block_in_nanosleep"));
}

TEST_F(Symbolize, PerfMapNamesJitCode) {
  auto lines = trace({WORKLOAD_JIT});
  // Killed, the workload leaves its perf map behind, where a later process
  // given its pid finds it: HostileFiles' workload, which makes its map a
  // symlink or a FIFO there, then fails to start (17 maps were left in
  // /tmp on the development VM; one failed
  // HostileFiles.PerfMapFifoOrDeviceDoesNotHang).
  unlink(("/tmp/perf-" + last_pid_ + ".map").c_str());
  bool jit = false;
  for (const auto &l : lines)
    jit |= test::frame_index(l, "jit_compiled_sleep") >= 0;
  EXPECT_TRUE(jit) << "no frame named from /tmp/perf-PID.map";
}

// glibc's versioned functions read as people write them: no
// "@GLIBC_2.2.5" / "@@GLIBC_2.17" suffix (libc6-dbg's symbols have them).
TEST_F(Symbolize, GlibcFunctionsWithoutVersionSuffixes) {
  auto lines = trace({WORKLOAD_LIBC_WAITS});
  bool clock = false;
  for (const auto &l : lines) {
    for (const auto &f : l.frames)
      EXPECT_EQ(f.find("@GLIBC"), std::string::npos) << l.text;
    clock |= l.frames[0] == "clksleep" &&
             test::frame_index(l, "clock_nanosleep") >= 0;
  }
  EXPECT_TRUE(clock) << "no clock_nanosleep frame";
}

} // namespace
} // namespace offcpu
