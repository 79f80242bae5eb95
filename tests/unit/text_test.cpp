#include <gtest/gtest.h>

#include "output/text.h"
#include "support/model_builder.h"

namespace offcpu {
namespace {

TEST(Text, BccLayoutLeafFirstLargestLast) {
  Sample big = test::sample("worker", {"main", "wait_loop"},
                            {"do_syscall_64", "schedule"}, 2500000, 42, 3);
  Sample small = big;
  small.comm = "other";
  small.tid = 7;
  small.total_ns = 1000;
  small.count = 1;
  std::string out =
      render_text(test::profile({big, small}), LayoutOptions{true});
  EXPECT_EQ(out, "    schedule\n"
                 "    do_syscall_64\n"
                 "    --\n"
                 "    wait_loop\n"
                 "    main\n"
                 "    -                other (7)\n"
                 "        1 us in 1 wait\n"
                 "\n"
                 "    schedule\n"
                 "    do_syscall_64\n"
                 "    --\n"
                 "    wait_loop\n"
                 "    main\n"
                 "    -                worker (42)\n"
                 "        2500 us in 3 waits\n"
                 "\n");
}

TEST(Text, MissedMarkers) {
  Sample s = test::sample("t", {}, {}, 1000, 1);
  s.user_missed = true;
  s.kernel_missed = true;
  std::string out = render_text(test::profile({s}), LayoutOptions{});
  EXPECT_NE(out.find("[Missed Kernel Stack]"), std::string::npos);
  EXPECT_NE(out.find("[Missed User Stack]"), std::string::npos);
}

TEST(Text, LockWaitsNameTheLockAndTheirStatistics) {
  Sample s = test::sample("db", {"flush"}, {"down_write"}, 3000000, 9, 2);
  s.lock = LockWait{2000000, true, "mmap_lock"};
  std::string out =
      render_text(test::profile({s}, ProfileKind::LockWaits), LayoutOptions{});
  EXPECT_EQ(out, "    down_write\n"
                 "    flush\n"
                 "    -                db (9) write wait on mmap_lock\n"
                 "        2 waits, total 3000 us, max 2000 us, avg 1500 us\n"
                 "\n");
}

} // namespace
} // namespace offcpu
