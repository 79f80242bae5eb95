#include <gtest/gtest.h>

#include "output/folded.h"
#include "support/model_builder.h"

namespace offcpu {
namespace {

Sample make(std::string comm, std::vector<std::string> user,
            std::vector<std::string> kernel, uint64_t ns) {
  return test::sample(std::move(comm), user, kernel, ns);
}

std::string format_folded(const std::vector<Sample> &samples,
                          bool delimited = false) {
  return render_folded(test::profile(samples), LayoutOptions{delimited});
}

TEST(Folded, CommThenUserRootFirstThenKernel) {
  std::vector<Sample> samples = {make("app", {"main", "work", "read"},
                                      {"ksys_read", "pipe_read", "schedule"},
                                      1500000)};
  EXPECT_EQ(format_folded(samples),
            "app;main;work;read;ksys_read;pipe_read;schedule 1500\n");
}

TEST(Folded, DelimiterOnlyBetweenBothParts) {
  std::vector<Sample> samples = {make("a", {"u"}, {"k"}, 2000),
                                 make("b", {}, {"k"}, 1000),
                                 make("c", {"u"}, {}, 3000)};
  EXPECT_EQ(format_folded(samples, true), "c;u 3\na;u;-;k 2\nb;k 1\n");
}

TEST(Folded, MissedStacksAreMarked) {
  Sample s = make("t", {}, {}, 5000);
  s.user_missed = true;
  s.kernel_missed = true;
  EXPECT_EQ(format_folded({s}),
            "t;[Missed User Stack];[Missed Kernel Stack] 5\n");
}

TEST(Folded, IdenticalLinesMergeAcrossThreads) {
  std::vector<Sample> samples = {make("w", {"f"}, {"k"}, 1400),
                                 make("w", {"f"}, {"k"}, 1400)};
  samples[1].tid = 2;
  EXPECT_EQ(format_folded(samples), "w;f;k 3\n");
}

TEST(Folded, SeparatorsInNamesAreNeutralised) {
  std::vector<Sample> samples = {
      make("my;comm", {"operator<<(a;b)", "x\ny"}, {}, 1000)};
  EXPECT_EQ(format_folded(samples), "my:comm;operator<<(a:b);x y 1\n");
}

// The fast scan for separators stops at a NUL: what follows it is still
// looked at. Tabs and carriage returns become spaces too.
TEST(Folded, SeparatorsPastANulAreNeutralised) {
  std::vector<Sample> samples = {
      make("t", {std::string("a\0b;c", 5), "d\te\rf"}, {}, 1000)};
  EXPECT_EQ(format_folded(samples), std::string("t;a\0b:c;d e f 1\n", 16));
}

TEST(Folded, LargestFirstAndSubMicrosecondDropped) {
  std::vector<Sample> samples = {make("a", {}, {"k"}, 1000),
                                 make("b", {}, {"k"}, 9000),
                                 make("c", {}, {"k"}, 400)};
  EXPECT_EQ(format_folded(samples), "b;k 9\na;k 1\n");
}

} // namespace
} // namespace offcpu
