// Issue #27, where offcpu's time went on a server load: a thread's last
// user stack was walked again whenever rbp changed, at the system call or
// saved in a frame, though the walk never used it (code built without
// frame pointers keeps any value there). The workload blocks at one place
// with a new rbp each time; its stack is to be reused, and be the stack a
// fresh walk gives.
#include <gtest/gtest.h>
#include <unistd.h>

#include <regex>

#include "support/folded_parse.h"
#include "support/process.h"

namespace offcpu {
namespace {

TEST(MemoRbp, StackReusedWhateverRbpHoldsAndAgreesWithAFreshWalk) {
  if (geteuid() != 0)
    GTEST_SKIP() << "integration tests load BPF programs: run as root";
  test::Subprocess workload({WORKLOAD_RBP_CHURN});
  auto line = workload.read_line(20);
  ASSERT_TRUE(line && line->rfind("ready ", 0) == 0);
  const std::string pid = line->substr(6);
  auto r = test::run({OFFCPU_BIN, "-p", pid, "-v", "-f", "--per-thread",
                      "--verify-stack-reuse", "3"},
                     60);
  ASSERT_EQ(r.exit_code, 0) << r.err;

  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      r.err, m,
      std::regex("stack reuse: user ([0-9]+) reused, ([0-9]+) walked again "
                 ".*, ([0-9]+) disagreed; kernel")))
      << r.err;
  const uint64_t reused = std::stoull(m[1]), changed = std::stoull(m[2]),
                 disagreed = std::stoull(m[3]);
  uint64_t waits = 0, whole = 0, total = 0;
  for (const auto &l : test::parse_folded(r.out)) {
    if (l.frames.empty() || l.frames[0].rfind("churn-", 0) != 0)
      continue;
    total += l.value;
    int step = test::frame_index(l, "churn_step");
    int block = test::frame_index(l, "churn_block");
    if (test::frame_index(l, "churn") >= 0 && step >= 0 && block == step + 1)
      whole += l.value;
  }
  // A wait of 1 ms at a time, 3 s: about 2,500 (fewer on a loaded host).
  waits = reused + changed;
  EXPECT_GT(reused, 500u) << r.err;
  EXPECT_LE(changed, waits / 20) << r.err;
  EXPECT_EQ(disagreed, 0u) << r.err;
  // The stacks are whole (the first waits, before the process's tables,
  // may be walked with frame pointers only).
  ASSERT_GT(total, 0u) << r.out;
  EXPECT_GE(static_cast<double>(whole), 0.9 * static_cast<double>(total))
      << r.out;
}

} // namespace
} // namespace offcpu
