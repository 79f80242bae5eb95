// Issue #27, bug 4: the walker holds UW_MAX_MAPPINGS (256) executable
// mappings per process. A process with more (hundreds of plugins, JIT
// regions) had tables for the first 256 by address only: libc, mapped above
// them, had none, and 96% of its waits were [Missed User Stack] with
// nothing on stderr. Now the mappings are fitted (unwinder.cpp,
// fit_mappings): the program and the largest code keep their tables, and
// stderr says what was left to frame pointers and what that cost. Also
// from bug 4: a large library mapped after start by a -- COMMAND (nothing
// of it mapped when the tables were sized) gets its tables. Each process
// here is the test user's, built without frame pointers as Debian's libc
// is: a whole stack means the tables were used.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <sstream>

#include "support/hostile_fixture.h"

namespace offcpu::test {
namespace {

// The frames the workload's stack must hold, root first.
const std::vector<std::string> kChain{"main", "mm_sleep_outer",
                                      "mm_sleep_middle", "mm_sleep_inner"};

// Off-CPU time of the comm's stacks, and of those that hold kChain in
// order with a libc sleep below it.
struct Whole {
  uint64_t total = 0, whole = 0;
};

Whole whole_stacks(const std::string &folded, const std::string &comm) {
  Whole w;
  for (const FoldedLine &l : parse_folded(folded)) {
    if (l.frames.empty() || l.frames[0] != comm)
      continue;
    w.total += l.value;
    int at = 0;
    bool in_order = true;
    for (const std::string &f : kChain) {
      int i = frame_index(l, f);
      in_order = in_order && i > at;
      at = i;
    }
    if (in_order && (frame_index(l, "clock_nanosleep") > at ||
                     frame_index(l, "__clock_nanosleep") > at ||
                     frame_index(l, "nanosleep") > at ||
                     frame_index(l, "__nanosleep") > at))
      w.whole += l.value;
  }
  return w;
}

// The folded lines, without what the traced command printed.
std::string folded_only(const std::string &out) {
  std::istringstream in(out);
  std::string kept;
  for (std::string line; std::getline(in, line);)
    if (line.rfind("ready ", 0) != 0)
      kept += line + "\n";
  return kept;
}

class ManyMappings : public HostileFiles {
protected:
  static void SetUpTestSuite() {
    HostileFiles::SetUpTestSuite();
    if (skip_.empty() &&
        (!ok(run({"/bin/cp", WORKLOAD_MANY_MAPS, many_maps()}, 30)) ||
         chmod(many_maps().c_str(), 0755) != 0))
      skip_ = "could not copy the workload to " + bin_dir_;
  }
  static std::string many_maps() { return bin_dir_ + "/many_maps"; }

  // Maps its own binary `count` times, then sleeps through libc; its
  // stacks, traced for 2 s, must be whole.
  void expect_whole_with(int count) {
    const std::string what = std::to_string(count) + " mappings";
    Workload w = start({many_maps(), std::to_string(count), many_maps(), "0"});
    ASSERT_TRUE(w.ready()) << w.error();
    Timed t = run_offcpu({"-f", "-p", w.pid(), "2"}, 2);
    expect_clean_run(t, 2, what);
    Whole s = whole_stacks(t.r.out, "many_maps");
    ASSERT_GT(s.total, 0u) << what << ": the workload was not seen\n"
                           << t.r.out << t.r.err;
    EXPECT_GE(s.whole * 10, s.total * 9) << what << ": " << s.whole << " of "
                                         << s.total << " us in whole stacks\n"
                                         << t.r.out << t.r.err;
    EXPECT_NE(t.r.err.find("more executable mappings than the unwinder holds"),
              std::string::npos)
        << what << ": stderr does not say mappings were left to frame "
        << "pointers:\n"
        << t.r.err;
  }
};

TEST_F(ManyMappings, ThreeHundredMappingsKeepTheProgramAndLibcTables) {
  expect_whole_with(300);
}

// Nothing of a -- COMMAND is mapped when the tables' arrays are sized: a
// library of 50 MiB of code it loads later must still find room (a guard:
// a -- COMMAND's arrays are already sized to the cap, 55 MiB of rows).
TEST_F(ManyMappings, LargeLibraryLoadedByACommandGetsItsTables) {
  std::string lib;
  for (const char *p : {"/usr/lib/x86_64-linux-gnu/libLLVM-15.so.1",
                        "/usr/lib/x86_64-linux-gnu/libLLVM-14.so.1",
                        "/usr/lib/x86_64-linux-gnu/libLLVM-16.so.1"})
    if (access(p, R_OK) == 0) {
      lib = p;
      break;
    }
  if (lib.empty())
    GTEST_SKIP() << "no libLLVM installed (apt-get install libllvm15)";
  Timed t = run_offcpu({"-v", "-f", "--user", kUser, "--", many_maps(), "0",
                        many_maps(), "3", lib},
                       20);
  expect_clean_run(t, 20, "-- COMMAND loading " + lib);
  EXPECT_EQ(t.r.err.find("no room for their unwind tables"), std::string::npos)
      << t.r.err;
  // -v: "user unwind tables: N files (...), R rows, ...": the library's
  // are in (it has ~2M; the program and libc a few thousand).
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      t.r.err, m, std::regex("user unwind tables: .*?([0-9]+) rows")))
      << t.r.err;
  EXPECT_GT(std::stoull(m[1].str()), 1000000u) << t.r.err;
  // Its 3 s sleep, whole (the waits of the dlopen before it are others').
  Whole s = whole_stacks(folded_only(t.r.out), "many_maps");
  EXPECT_GE(s.whole, 2900000u)
      << s.whole << " of " << s.total << " us in whole stacks\n"
      << t.r.out << t.r.err;
}

// One user's process maps 1,200 distinct files with DWARF, and no stack of
// it reaches them. offcpu opens each file it maps while the process lives
// (it may exit before its frames are named), and held every one to the end
// of the run: 1,567 descriptors for 1,500 such files, past the 1,024 a
// process gets by default, so that every other process's files went
// unread ("not read (... unreadable)"). Now at most 256 wait unparsed, 256
// wait to be parsed and 128 keep their DWARF's descriptor; one let go is
// opened again when a stack reaches it, its process being alive then.
TEST_F(ManyMappings, ThousandsOfFilesWithDwarfHoldFewDescriptors) {
  constexpr int kFiles = 1200;
  const std::string libs = dir_ + "/libs";
  ASSERT_EQ(mkdir(libs.c_str(), 0755), 0) << strerror(errno);
  for (int i = 0; i < kFiles; i++)
    std::filesystem::copy_file(many_maps(),
                               libs + "/lib" + std::to_string(i) + ".so");
  Workload w = start({many_maps(), std::to_string(kFiles), libs, "0"});
  ASSERT_TRUE(w.ready()) << w.error();
  const double window = 3;
  test::Subprocess offcpu({OFFCPU_BIN, "-f", "-p", w.pid(), "3"});
  size_t most = 0;
  const double end = test::now_seconds() + window + kKillAfter;
  while (test::now_seconds() < end) {
    const size_t n = test::open_fds(offcpu.pid());
    most = std::max(most, n);
    if (n == 0)
      break;
    usleep(20000);
  }
  test::RunResult r = offcpu.wait(kKillAfter);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // 640 for the files and about 60 for the maps, programs and the rest.
  EXPECT_LT(most, 800u) << "offcpu held " << most << " descriptors at once";
  EXPECT_EQ(r.err.find("unreadable"), std::string::npos) << r.err;
  // Its program and libc, mapped before and after the 1,200 files, named
  // all the same.
  Whole s = whole_stacks(r.out, "many_maps");
  ASSERT_GT(s.total, 0u) << r.out << r.err;
  EXPECT_GE(s.whole * 10, s.total * 9)
      << s.whole << " of " << s.total << " us in whole stacks\n"
      << r.out << r.err;
}

// 300 threads of a user's process block each in its own copy of a library
// with DWARF: the run reads the DWARF of 256 files at most (each holds a
// descriptor to the end), and says how many it left; their frames keep
// their symbols' names.
TEST_F(ManyMappings, DwarfFilesPastTheRunsShareAreCountedAndNamedBySymbols) {
  constexpr int kLibs = 300;
  const std::string libs = dir_ + "/libs";
  const std::string program = bin_dir_ + "/many_libs";
  ASSERT_EQ(mkdir(libs.c_str(), 0755), 0) << strerror(errno);
  std::filesystem::copy_file(WORKLOAD_MANY_LIBS, program);
  ASSERT_EQ(chmod(program.c_str(), 0755), 0);
  for (int i = 0; i < kLibs; i++)
    std::filesystem::copy_file(WORKLOAD_BLOCK_LIB,
                               libs + "/lib" + std::to_string(i) + ".so");
  Workload w = start({program, libs, std::to_string(kLibs)});
  ASSERT_TRUE(w.ready()) << w.error();
  Timed t = run_offcpu({"-f", "-p", w.pid(), "2"}, 2);
  expect_clean_run(t, 2, std::to_string(kLibs) + " libraries with DWARF");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      t.r.err, m,
      std::regex("([0-9]+) more files with DWARF than offcpu keeps open")))
      << t.r.err;
  // The 300 copies, the program and libc's debug file, past 256.
  EXPECT_GE(std::stoul(m[1].str()), 40u) << t.r.err;
  EXPECT_LE(std::stoul(m[1].str()), 50u) << t.r.err;
  uint64_t total = 0, named = 0;
  for (const FoldedLine &l : parse_folded(t.r.out)) {
    if (l.frames.empty() || l.frames[0] != "many_libs")
      continue;
    total += l.value;
    if (frame_index(l, "bl_block") > 0)
      named += l.value;
  }
  ASSERT_GT(total, 0u) << t.r.out << t.r.err;
  EXPECT_GE(named * 10, total * 9)
      << named << " of " << total << " us under bl_block\n"
      << t.r.out << t.r.err;
}

} // namespace
} // namespace offcpu::test
