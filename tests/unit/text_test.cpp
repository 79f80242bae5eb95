#include <gtest/gtest.h>

#include <regex>
#include <sstream>

#include "offcpu/shared.h"
#include "output/folded.h"
#include "output/lock_table.h"
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

// Two raw stacks that symbolize alike (two call sites in one function, a
// waker's two stacks) print as one entry with both totals; other threads
// and other wakers stay apart.
TEST(Text, EntriesThatPrintAlikeAreOne) {
  Sample a =
      test::sample("redis", {"main", "aeMain"}, {"schedule"}, 33000, 5, 33);
  a.user.mut(1).address = 0x1000;
  Sample b = a;
  b.user.mut(1).address = 0x1040;
  b.total_ns = 2488000;
  b.count = 2488;
  Sample other_thread = a;
  other_thread.tid = 6;
  std::string out =
      render_text(test::profile({a, b, other_thread}), LayoutOptions{});
  EXPECT_EQ(out, "    schedule\n"
                 "    aeMain\n"
                 "    main\n"
                 "    -                redis (6)\n"
                 "        33 us in 33 waits\n"
                 "\n"
                 "    schedule\n"
                 "    aeMain\n"
                 "    main\n"
                 "    -                redis (5)\n"
                 "        2521 us in 2521 waits\n"
                 "\n");

  Sample w1 = a, w2 = a;
  w1.waker = Waker{Waker::Kind::Task, 5, 8, "io", {}, {}};
  w2.waker = Waker{Waker::Kind::Task, 5, 9, "io", {}, {}};
  Sample w3 = w2;
  w3.total_ns = 1000;
  w3.count = 1;
  out = render_text(test::profile({w1, w2, w3}), LayoutOptions{});
  EXPECT_NE(out.find("-                io (8)\n        33 us in 33 waits"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("-                io (9)\n        34 us in 34 waits"),
            std::string::npos)
      << out;
}

// Lock waits merged: counts and totals add up, the max is the largest.
TEST(Text, MergedLockWaitsKeepTheirMax) {
  Sample s = test::sample("db", {"flush"}, {"down_write"}, 3000000, 9, 2);
  s.lock = LockWait{2000000, true, "mmap_lock"};
  Sample t = s;
  t.user.mut(0).address = 0x10;
  t.total_ns = 1000000;
  t.count = 1;
  t.lock->max_ns = 1000000;
  std::string out = render_text(test::profile({s, t}, ProfileKind::LockWaits),
                                LayoutOptions{});
  EXPECT_NE(out.find("3 waits, total 4000 us, max 2000 us, avg 1333 us"),
            std::string::npos)
      << out;
}

// --show-state: the state under the thread (the README's order) in every
// format that lays out frames.
TEST(Text, StateSitsUnderTheThread) {
  Sample s = test::sample("db", {"main", "poll"}, {"schedule"}, 5000, 9);
  s.state = 'D';
  std::string text = render_text(test::profile({s}), LayoutOptions{});
  EXPECT_EQ(text, "    schedule\n"
                  "    poll\n"
                  "    main\n"
                  "    [D]\n"
                  "    -                db (9)\n"
                  "        5 us in 1 wait\n"
                  "\n");
  EXPECT_EQ(render_folded(test::profile({s}), LayoutOptions{}),
            "db;[D];main;poll;schedule 5\n");
  s.cgroup = "app.service";
  EXPECT_EQ(render_folded(test::profile({s}), LayoutOptions{}),
            "app.service;db;[D];main;poll;schedule 5\n");
}

} // namespace
} // namespace offcpu

namespace offcpu {
namespace {

Sample lock_sample(const std::string &comm, uint32_t tid,
                   const std::vector<std::string> &kernel, uint64_t total_us,
                   uint64_t count, const std::string &kind,
                   const std::string &lock) {
  Sample s = test::sample(comm, {"main"}, kernel, total_us * 1000, tid, count);
  s.lock = LockWait{total_us * 1000 / count, true, lock, kind};
  return s;
}

// offcpu lock's table: a row per lock, the largest total first, its waits
// summed over threads, the caller above the locking code.
TEST(LockTable, RowsPerLockSortedByTotal) {
  Profile p = test::profile(
      {lock_sample("db", 1,
                   {"do_mkdirat", "filename_create", "down_write",
                    "rwsem_down_write_slowpath"},
                   300, 3, "rwsem:write", "[lock 0xffff1]"),
       lock_sample("db", 2,
                   {"do_rmdir", "down_write", "rwsem_down_write_slowpath"}, 500,
                   5, "rwsem:write", "[lock 0xffff1]"),
       lock_sample("db", 1,
                   {"ksys_read", "fdget_pos", "mutex_lock",
                    "__mutex_lock_slowpath", "schedule"},
                   100, 1, "mutex", "[lock 0xffff2]")},
      ProfileKind::LockWaits);
  std::string out =
      render_lock_table(p, LockGrouping::Lock, false, LayoutOptions{});
  std::istringstream in(out);
  std::string head, first, second, extra;
  std::getline(in, head);
  std::getline(in, first);
  std::getline(in, second);
  EXPECT_FALSE(std::getline(in, extra)) << out;
  EXPECT_NE(head.find("contended"), std::string::npos) << out;
  EXPECT_TRUE(std::regex_search(
      first, std::regex("^ +8 +800 us +\\d+ us +100 us  rwsem:write +"
                        "\\[lock 0xffff1\\] +do_rmdir$")))
      << out;
  EXPECT_TRUE(std::regex_search(
      second, std::regex("^ +1 +100 us .* mutex +\\[lock 0xffff2\\] +"
                         "fdget_pos$")))
      << out;
  // By caller: the two rwsem callers apart; by thread: tid 1's two kinds
  // together.
  EXPECT_NE(render_lock_table(p, LockGrouping::Caller, false, {})
                .find("filename_create"),
            std::string::npos);
  std::string threads = render_lock_table(p, LockGrouping::Thread, false, {});
  EXPECT_NE(threads.find("db (1)"), std::string::npos) << threads;
  // -v: the stacks under their row.
  EXPECT_NE(render_lock_table(p, LockGrouping::Lock, true, {})
                .find("    __mutex_lock_slowpath"),
            std::string::npos);
}

// Each row is followed by its distribution: 3 waits of 1-2 ms and 1 of
// 8-16 ms as two bars, the larger bucket the full width.
TEST(LockTable, RowHasItsLatencyHistogram) {
  Sample s = lock_sample("db", 1, {"do_rmdir", "down_write"}, 13000, 4,
                         "rwsem:write", "[ext4_inode_cache]");
  uint32_t hist[OFFCPU_HIST_BUCKETS] = {};
  hist[offcpu_hist_bucket(1500000)] = 3;
  hist[offcpu_hist_bucket(9000000)] = 1;
  s.latency = Latency::from_buckets(hist, 4, 9000000);
  Profile p = test::profile({s}, ProfileKind::LockWaits);
  std::string out = render_lock_table(p, LockGrouping::Lock, false, {});
  EXPECT_TRUE(std::regex_search(
      out, std::regex("\n +1024 -> 2047 +: 3 +\\|\\*{30}\\|\n")))
      << out;
  EXPECT_TRUE(std::regex_search(
      out, std::regex("\n +8192 -> 16383 +: 1 +\\|\\*{10} *\\|\n")))
      << out;
}

// --holders: the owner the lock recorded is a frame of its own after the
// holder's comm only where it is not the task that woke the waiter.
TEST(LockTable, OwnerShownWhereItIsNotTheWaker) {
  Sample s =
      lock_sample("db", 1, {"down_write"}, 100, 1, "rwsem:write", "[lock 0x1]");
  Waker w;
  w.kind = Waker::Kind::Task;
  w.tid = 7;
  w.comm = "holder";
  s.waker = w;
  s.lock->owner_tid = 7;
  s.lock->owner_comm = "holder";
  std::string same = render_folded(test::profile({s}, ProfileKind::LockWaits),
                                   LayoutOptions{});
  EXPECT_NE(same.find(";--;holder 100"), std::string::npos) << same;
  s.lock->owner_tid = 8;
  s.lock->owner_comm = "other";
  std::string other = render_folded(test::profile({s}, ProfileKind::LockWaits),
                                    LayoutOptions{});
  EXPECT_NE(other.find(";--;holder;[owner other] 100"), std::string::npos)
      << other;
}

} // namespace
} // namespace offcpu
