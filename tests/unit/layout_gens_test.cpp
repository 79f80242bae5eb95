#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "unwind/layout_gens.h"

namespace offcpu {
namespace {

std::vector<uw_mapping> layout(uint64_t start, uint32_t file) {
  std::vector<uw_mapping> m(3);
  for (size_t i = 0; i < m.size(); i++) {
    m[i].start = start + i * 0x10000;
    m[i].end = m[i].start + 0x8000;
    m[i].base = m[i].start - 0x1000;
    m[i].file = file + static_cast<uint32_t>(i);
  }
  return m;
}

// Processes installed alike (a server and the workers it forked) share a
// gen; any difference (an address, a file, a deferred file built since, a
// mapping more) is another content and another gen.
TEST(LayoutGens, OneGenPerContent) {
  LayoutGens gens;
  auto server = layout(0x400000, 1);
  auto g = gens.gen_for(server.data(), server.size());
  ASSERT_TRUE(g);
  EXPECT_NE(*g, 0u);
  auto worker = server;
  EXPECT_EQ(gens.gen_for(worker.data(), worker.size()), g);
  auto moved = layout(0x500000, 1); // the same files elsewhere (ASLR)
  auto built = server;
  built[2].file = UW_FILE_DEFERRED; // one file's table not built yet
  std::vector<uint32_t> seen{*g};
  for (const auto *other : {&moved, &built}) {
    auto o = gens.gen_for(other->data(), other->size());
    ASSERT_TRUE(o);
    EXPECT_EQ(std::count(seen.begin(), seen.end(), *o), 0) << *o;
    seen.push_back(*o);
  }
  auto fewer = gens.gen_for(server.data(), 2);
  ASSERT_TRUE(fewer);
  EXPECT_EQ(std::count(seen.begin(), seen.end(), *fewer), 0);
  EXPECT_EQ(gens.contents(), 4u);
}

// Past its budget it forgets the contents it knew: the same content then
// gets a new gen (less sharing), never one given to another content.
TEST(LayoutGens, ForgettingNeverGivesAGenTwice) {
  LayoutGens gens(1024);
  std::vector<uint32_t> given;
  for (int round = 0; round < 3; round++)
    for (uint64_t i = 0; i < 16; i++) {
      auto l = layout(0x400000 + i * 0x100000, 1);
      auto g = gens.gen_for(l.data(), l.size());
      ASSERT_TRUE(g);
      given.push_back(*g);
    }
  EXPECT_LE(gens.bytes(), 1024u);
  std::vector<uint32_t> sorted = given;
  std::sort(sorted.begin(), sorted.end());
  // Every gen handed out names one content: a repeat of a gen is the same
  // content asked again before it was forgotten.
  for (size_t i = 0; i < given.size(); i++)
    for (size_t j = i + 1; j < given.size(); j++)
      if (given[i] == given[j]) {
        EXPECT_EQ(i % 16, j % 16) << "gen " << given[i];
      }
  EXPECT_GT(sorted.back(), 16u) << "some content was forgotten";
}

} // namespace
} // namespace offcpu
