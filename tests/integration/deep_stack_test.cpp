// Stacks deeper than the depth limit (--perf-max-stack-depth): the real
// offcpu traces a thread blocked at the bottom of a recursion thousands of
// frames deep (tests/workloads/deep.c). A cut stack keeps exactly the
// limit's frames from the leaf, ends in a [truncated] frame at its root in
// every output, and is counted on stderr; a stack that fits is whole.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

#include "support/folded_parse.h"
#include "support/hostile_fixture.h"
#include "support/process.h"

namespace offcpu {
namespace {

using test::FoldedLine;

// As an unprivileged user the test creates (a process of someone else's is
// what a deep stack would be in practice): the deep workload, copied where
// that user can run it.
class DeepStack : public test::HostileFiles {
protected:
  static std::string deep() { return bin_dir_ + "/deep"; }

  void SetUp() override {
    HostileFiles::SetUp();
    if (IsSkipped())
      return;
    if (access(deep().c_str(), X_OK) != 0) {
      ASSERT_TRUE(test::ok(test::run({"/bin/cp", WORKLOAD_DEEP, deep()}, 30)) &&
                  chmod(deep().c_str(), 0755) == 0);
    }
  }

  // Blocked at the bottom of `depth` levels of recursion.
  test::Workload deep_workload(int depth) {
    return start({deep(), std::to_string(depth)});
  }

  // offcpu -U -f on the workload for 1 s, plus `extra`.
  test::RunResult trace(const test::Workload &w,
                        std::vector<std::string> extra = {}) {
    // --no-inline: one frame per level of recursion, counted exactly.
    std::vector<std::string> args = {OFFCPU_BIN, "-p", w.pid(),
                                     "-U",       "-f", "--no-inline"};
    args.insert(args.end(), extra.begin(), extra.end());
    args.push_back("1");
    auto r = test::run(args, 60);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_FALSE(r.timed_out);
    return r;
  }
};

// The heaviest folded line that blocks in deep_block; fails if none.
FoldedLine blocked_line(const std::string &folded) {
  FoldedLine best;
  for (const FoldedLine &l : test::parse_folded(folded))
    if (!l.frames.empty() && l.frames.back() == "deep_block" &&
        l.value > best.value)
      best = l;
  EXPECT_FALSE(best.frames.empty()) << "no stack ends in deep_block:\n"
                                    << folded.substr(0, 2000);
  return best;
}

// comm;[truncated];descend x (limit-1);deep_block: the limit's frames from
// the leaf, and the mark where the rest is missing.
void expect_cut_at(const FoldedLine &l, size_t limit) {
  ASSERT_GE(l.frames.size(), 2u);
  EXPECT_EQ(l.frames[1], "[truncated]") << l.text.substr(0, 300);
  EXPECT_EQ(l.frames.size(), 2 + limit) << l.text.substr(0, 300);
  for (size_t i = 2; i + 1 < l.frames.size(); i++)
    ASSERT_EQ(l.frames[i], "descend") << "frame " << i;
  EXPECT_EQ(std::count(l.frames.begin(), l.frames.end(), "[truncated]"), 1);
}

void expect_counted(const std::string &err, size_t limit) {
  EXPECT_NE(
      err.find("deeper than " + std::to_string(limit) + " frames were cut"),
      std::string::npos)
      << err;
  EXPECT_NE(err.find("--perf-max-stack-depth"), std::string::npos) << err;
}

TEST_F(DeepStack, TenThousandDeepIsCutAtTheDefaultLimitAndMarked) {
  test::Workload w = deep_workload(10000);
  ASSERT_TRUE(w.ready()) << w.error();
  // Through the unwind tables (auto) and by frame pointers alone.
  for (const char *unwind : {"auto", "fp"}) {
    SCOPED_TRACE(unwind);
    auto r = trace(w, {"--user-unwind", unwind});
    expect_cut_at(blocked_line(r.out), 127);
    expect_counted(r.err, 127);
    EXPECT_NE(r.err.find("the most offcpu keeps"), std::string::npos) << r.err;
  }
}

TEST_F(DeepStack, LowerLimitCutsThereAndNamesTheOption) {
  test::Workload w = deep_workload(10000);
  ASSERT_TRUE(w.ready()) << w.error();
  auto r = trace(w, {"--perf-max-stack-depth", "40"});
  expect_cut_at(blocked_line(r.out), 40);
  expect_counted(r.err, 40);
  EXPECT_NE(r.err.find("raise --perf-max-stack-depth (now 40"),
            std::string::npos)
      << r.err;
}

TEST_F(DeepStack, StackThatFitsIsWhole) {
  test::Workload w =
      deep_workload(60); // deep_block, 60 x descend, main, libc's start: < 127
  for (const char *depth : {"127", "100"}) {
    SCOPED_TRACE(depth);
    auto r = trace(w, {"--perf-max-stack-depth", depth});
    FoldedLine l = blocked_line(r.out);
    EXPECT_EQ(std::find(l.frames.begin(), l.frames.end(), "[truncated]"),
              l.frames.end())
        << l.text.substr(0, 300);
    EXPECT_EQ(std::count(l.frames.begin(), l.frames.end(), "descend"), 60);
    EXPECT_NE(std::find(l.frames.begin(), l.frames.end(), "main"),
              l.frames.end())
        << l.text.substr(0, 300);
    EXPECT_EQ(r.err.find("were cut"), std::string::npos) << r.err;
  }
  // Cut one frame short of its depth: the limit is exact.
  auto r = trace(w, {"--perf-max-stack-depth", "30"});
  expect_cut_at(blocked_line(r.out), 30);
}

// Stacks of up to OFFCPU_SHORT_STACK_DEPTH frames are stored in one map,
// deeper ones in another (bpf/stack_store.bpf.h): either side of the
// boundary keeps exactly its frames.
TEST_F(DeepStack, CutsEitherSideOfTheShortStacksMapAreExact) {
  test::Workload w = deep_workload(10000);
  ASSERT_TRUE(w.ready()) << w.error();
  for (size_t limit : {31, 32, 33, 34}) {
    SCOPED_TRACE(limit);
    auto r = trace(w, {"--perf-max-stack-depth", std::to_string(limit)});
    expect_cut_at(blocked_line(r.out), limit);
  }
}

// Kernel stacks too: the nanosleep path is 7 frames deep, so a limit of 4
// cuts it, in the ORC walker (auto) as in the kernel's own walk at
// switch-out (whose count includes the tracer's frames, left out after).
TEST_F(DeepStack, KernelStackCutAtTheLimitIsMarked) {
  test::Workload w = deep_workload(10);
  ASSERT_TRUE(w.ready()) << w.error();
  for (const char *unwind : {"auto", "switch-out"}) {
    SCOPED_TRACE(unwind);
    auto r =
        test::run({OFFCPU_BIN, "-p", w.pid(), "-K", "-f", "--kernel-unwind",
                   unwind, "--perf-max-stack-depth", "4", "1"},
                  60);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    FoldedLine best;
    for (const FoldedLine &l : test::parse_folded(r.out))
      if (l.frames.size() > 1 && l.frames[0] == "deep" && l.value > best.value)
        best = l;
    ASSERT_GE(best.frames.size(), 3u) << r.out;
    EXPECT_EQ(best.frames[1], "[truncated]") << best.text;
    EXPECT_EQ(best.frames.back(), "__schedule") << best.text;
    if (std::string(unwind) == "auto") {
      EXPECT_EQ(best.frames.size(), 2u + 4) << best.text;
    }
    expect_counted(r.err, 4);
  }
}

TEST_F(DeepStack, MarkIsInEveryFormat) {
  test::Workload w = deep_workload(10000);
  ASSERT_TRUE(w.ready()) << w.error();
  const std::string &d = dir_; // the fixture's, removed after the test
  auto r = test::run({OFFCPU_BIN, "-p", w.pid(), "-o", d + "/out.svg", "-o",
                      d + "/out.txt", "-o", d + "/out.pb.gz", "1"},
                     60);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(test::slurp(d + "/out.svg").find("[truncated]"), std::string::npos);
  const std::string text = test::slurp(d + "/out.txt");
  EXPECT_NE(text.find("[truncated]"), std::string::npos);
  // The text report lists frames leaf first: the mark right after the
  // deepest descend kept.
  EXPECT_NE(text.find("descend\n    [truncated]\n"), std::string::npos) << text;
  // pprof: the mark is a function name in the (gzipped) string table.
  test::run(
      {"/bin/sh", "-c", "gzip -dc " + d + "/out.pb.gz > " + d + "/out.pb"}, 30);
  EXPECT_NE(test::slurp(d + "/out.pb").find("[truncated]"), std::string::npos);
  expect_counted(r.err, 127);
}

} // namespace
} // namespace offcpu
