// FlatMemo: the memo of named frames; found again across growth, by full
// key (keys that hash alike are told apart), with references that last.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "util/flat_memo.h"

namespace offcpu {
namespace {

struct Key {
  uint32_t a = 0;
  uint64_t b = 0;
  bool operator==(const Key &o) const { return a == o.a && b == o.b; }
};
struct GoodHash {
  size_t operator()(const Key &k) const { return k.b * 31 + k.a; }
};
// Every key in one home slot: only the full comparison tells them apart.
struct SameHash {
  size_t operator()(const Key &) const { return 7; }
};

TEST(FlatMemo, FindsWhatWasAddedAcrossGrowth) {
  FlatMemo<Key, std::string, GoodHash> m;
  EXPECT_EQ(m.find({1, 2}), nullptr);
  std::vector<const std::string *> refs;
  for (uint32_t i = 0; i < 5000; i++)
    refs.push_back(&m.add({i % 7, i}, std::to_string(i)));
  EXPECT_EQ(m.size(), 5000u);
  for (uint32_t i = 0; i < 5000; i++) {
    const std::string *v = m.find({i % 7, i});
    ASSERT_NE(v, nullptr) << i;
    EXPECT_EQ(*v, std::to_string(i));
    EXPECT_EQ(v, refs[i]) << "a reference moved as the memo grew";
  }
  EXPECT_EQ(m.find({1, 5000}), nullptr);
  EXPECT_EQ(m.find({0, 1}), nullptr); // b known, a not
}

TEST(FlatMemo, TellsApartKeysThatHashAlike) {
  FlatMemo<Key, int, SameHash> m;
  for (uint32_t i = 0; i < 3000; i++)
    m.add({i, ~uint64_t{i}}, static_cast<int>(i));
  for (uint32_t i = 0; i < 3000; i++) {
    const int *v = m.find({i, ~uint64_t{i}});
    ASSERT_NE(v, nullptr) << i;
    EXPECT_EQ(*v, static_cast<int>(i));
  }
  EXPECT_EQ(m.find({3000, ~uint64_t{3000}}), nullptr);
  EXPECT_EQ(m.find({1, 1}), nullptr);
}

} // namespace
} // namespace offcpu
