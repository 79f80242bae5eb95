// Chunks: the drained counts, read across chunk boundaries and freed as
// they are consumed.
#include <gtest/gtest.h>

#include <array>
#include <vector>

#include "util/chunks.h"

namespace offcpu {
namespace {

// Big enough that a chunk holds only a few: the boundaries are crossed.
struct Big {
  std::array<char, (1u << 20) / 3> pad{};
  int n = 0;
};

TEST(Chunks, ReadsInOrderAcrossChunks) {
  static_assert(Chunks<Big>::kPerChunk > 1 && Chunks<Big>::kPerChunk < 7);
  Chunks<Big> c;
  EXPECT_TRUE(c.empty());
  EXPECT_TRUE(c.begin() == c.end());
  for (int i = 0; i < 14; i++) {
    Big b;
    b.n = i;
    c.push_back(b);
  }
  EXPECT_EQ(c.size(), 14u);
  std::vector<int> seen;
  for (const Big &b : c)
    seen.push_back(b.n);
  ASSERT_EQ(seen.size(), 14u);
  for (int i = 0; i < 14; i++)
    EXPECT_EQ(seen[i], i);
}

TEST(Chunks, ConsumeSeesEachOnceAndLeavesItEmpty) {
  Chunks<int> c;
  const size_t n = 2 * Chunks<int>::kPerChunk + 5;
  for (size_t i = 0; i < n; i++)
    c.push_back(static_cast<int>(i));
  size_t next = 0;
  c.consume([&](int &v) { EXPECT_EQ(v, static_cast<int>(next++)); });
  EXPECT_EQ(next, n);
  EXPECT_TRUE(c.empty());
  EXPECT_TRUE(c.begin() == c.end());
  c.push_back(7); // usable again
  EXPECT_EQ(*c.begin(), 7);
}

} // namespace
} // namespace offcpu
