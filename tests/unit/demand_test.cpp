// The tables' queue reads each queued process's walks without tables from
// a real uw_asked map (an LRU hash, as the walker's): the right counts, in
// a number of system calls that does not grow with the queue.
#include <bpf/bpf.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include "offcpu/unwind.h"
#include "unwind/demand.h"

namespace offcpu {
namespace {

class Demand : public ::testing::Test {
protected:
  void SetUp() override {
    if (geteuid() != 0)
      GTEST_SKIP() << "creating a BPF map needs root";
    fd_ = bpf_map_create(BPF_MAP_TYPE_LRU_HASH, "uw_asked_test",
                         sizeof(uint32_t), sizeof(uw_demand), 8192, nullptr);
    ASSERT_GE(fd_, 0) << "bpf_map_create: " << errno;
  }
  void TearDown() override {
    if (fd_ >= 0)
      close(fd_);
  }
  // Processes 1..n asked, process t with 3t walks.
  void fill(uint32_t n) {
    for (uint32_t t = 1; t <= n; t++) {
      uw_demand d{t, 3ull * t};
      ASSERT_EQ(bpf_map_update_elem(fd_, &t, &d, BPF_ANY), 0) << t;
    }
  }
  int fd_ = -1;
};

TEST_F(Demand, AShortQueueIsReadOneLookupEach) {
  fill(100);
  std::deque<uint32_t> queue{7, 50, 99, 4000}; // 4000 never asked
  DemandReading r = read_demand(fd_, queue);
  EXPECT_EQ(r.syscalls, queue.size());
  ASSERT_EQ(r.walks.size(), 3u);
  EXPECT_EQ(r.walks.at(7), 21u);
  EXPECT_EQ(r.walks.at(50), 150u);
  EXPECT_EQ(r.walks.at(99), 297u);
}

// 1,000 queued among 3,000 asked: every queued one read, in batches.
TEST_F(Demand, ALongQueueIsReadInAFewBatches) {
  fill(3000);
  std::deque<uint32_t> queue;
  for (uint32_t t = 2; t <= 2000; t += 2)
    queue.push_back(t);
  queue.push_back(7000); // never asked
  DemandReading r = read_demand(fd_, queue);
  EXPECT_LE(r.syscalls, 8192 / kDemandBatch) << "bounded by the map's size";
  EXPECT_LT(r.syscalls, queue.size() / 10);
  ASSERT_EQ(r.walks.size(), 1000u);
  for (uint32_t t = 2; t <= 2000; t += 2)
    EXPECT_EQ(r.walks.at(t), 3ull * t) << t;
  EXPECT_EQ(r.walks.count(7000), 0u);
  EXPECT_EQ(r.walks.count(3), 0u) << "not queued";
}

} // namespace
} // namespace offcpu
