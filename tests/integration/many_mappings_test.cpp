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

} // namespace
} // namespace offcpu::test
