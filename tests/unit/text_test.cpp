#include <gtest/gtest.h>

#include "output/text.h"

namespace offcpu {
namespace {

TEST(Text, BccLayoutLeafFirstLargestLast) {
  Sample big;
  big.comm = "worker";
  big.pid = 42;
  big.user = {"main", "wait_loop"};
  big.kernel = {"do_syscall_64", "schedule"};
  big.total_ns = 2500000;
  big.count = 3;
  Sample small = big;
  small.comm = "other";
  small.pid = 7;
  small.total_ns = 1000;
  small.count = 1;
  std::string out = format_text({big, small}, TextOptions{true});
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
  Sample s;
  s.comm = "t";
  s.pid = 1;
  s.user_missed = true;
  s.kernel_missed = true;
  s.total_ns = 1000;
  s.count = 1;
  std::string out = format_text({s}, {});
  EXPECT_NE(out.find("[Missed Kernel Stack]"), std::string::npos);
  EXPECT_NE(out.find("[Missed User Stack]"), std::string::npos);
}

} // namespace
} // namespace offcpu
