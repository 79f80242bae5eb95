// The DWARF loader's thread (issue #31): a file handed to it is read while
// the caller goes on, then taken and looked up as one read directly; a
// deadline already past neither begins a file nor waits for one.
#include <gtest/gtest.h>

#include <fcntl.h>

#include <sstream>

#include "support/process.h"
#include "symbolize/dwarf_loader.h"
#include "util/clock.h"

namespace offcpu {
namespace {

UniqueFd open_fixture() {
  return UniqueFd(open(FIXTURE_PIE, O_RDONLY));
}

// fixture_alpha's address in the fixture, from nm.
uint64_t alpha_address() {
  // Defined symbols only: an undefined one has no address column.
  auto r = test::run({"/usr/bin/nm", "--defined-only", FIXTURE_PIE}, 30);
  std::istringstream in(r.out);
  for (std::string addr, type, name; in >> addr >> type >> name;)
    if (name == "fixture_alpha")
      return std::stoull(addr, nullptr, 16);
  return 0;
}

TEST(DwarfLoader, ReadsOnItsThreadThenLooksUp) {
  const uint64_t alpha = alpha_address();
  ASSERT_NE(alpha, 0u);
  DwarfLoader loader;
  DwarfLoader::Ticket t = loader.submit(open_fixture());
  // Read by the thread before it is asked for.
  for (int i = 0; i < 2000 && loader.pending() > 0; i++)
    usleep(10000);
  ASSERT_EQ(loader.pending(), 0u);
  DwarfLoss why = DwarfLoss::Count;
  auto file = loader.take(t, 0, &why);
  ASSERT_TRUE(file) << static_cast<int>(why);
  EXPECT_EQ(why, DwarfLoss::None);
  EXPECT_EQ(loader.read_ahead(), 1u);
  const auto &chain = file->frames_at(alpha);
  ASSERT_FALSE(chain.empty());
  ASSERT_TRUE(chain.back().function);
  EXPECT_EQ(*chain.back().function, "fixture_alpha");
  ASSERT_TRUE(chain.back().file);
  EXPECT_NE(chain.back().file->find("symbols_main.c"), std::string::npos);
}

TEST(DwarfLoader, WarmedAddressesAreAnsweredPastTheDeadline) {
  const uint64_t alpha = alpha_address();
  ASSERT_NE(alpha, 0u);
  DwarfLoader loader;
  DwarfLoader::Ticket t = loader.submit(open_fixture());
  loader.warm(t, alpha);
  for (int i = 0; i < 2000 && loader.pending() > 0; i++)
    usleep(10000);
  ASSERT_EQ(loader.pending(), 0u);
  DwarfLoss why = DwarfLoss::Count;
  auto file = loader.take(t, 0, &why);
  ASSERT_TRUE(file);
  // A deadline already past: only what the thread looked up is answered.
  const uint64_t past = monotonic_ns() - 1;
  ASSERT_FALSE(file->frames_at(alpha, past).empty());
  EXPECT_EQ(*file->frames_at(alpha, past).back().function, "fixture_alpha");
  EXPECT_TRUE(file->frames_at(alpha + 1, past).empty());
}

TEST(DwarfLoader, TakeWithoutWaitingReadsInTurn) {
  DwarfLoader loader;
  std::vector<DwarfLoader::Ticket> tickets;
  for (int i = 0; i < 4; i++)
    tickets.push_back(loader.submit(open_fixture()));
  // Asked for the last first: it goes before the others not begun.
  for (auto it = tickets.rbegin(); it != tickets.rend(); ++it) {
    DwarfLoss why = DwarfLoss::Count;
    EXPECT_TRUE(loader.take(*it, monotonic_ns() + 20000000000ull, &why));
    EXPECT_EQ(why, DwarfLoss::None);
  }
}

TEST(DwarfLoader, NothingBegunOrAwaitedPastTheDeadline) {
  DwarfLoader loader;
  loader.set_deadline(monotonic_ns() - 1);
  DwarfLoader::Ticket t = loader.submit(open_fixture());
  DwarfLoss why = DwarfLoss::None;
  const uint64_t start = monotonic_ns();
  EXPECT_FALSE(loader.take(t, monotonic_ns() - 1, &why));
  EXPECT_EQ(why, DwarfLoss::Time);
  EXPECT_LT(monotonic_ns() - start, 100000000u); // not waited for
}

TEST(DwarfLoader, FileWithoutDwarfIsNoLoss) {
  DwarfLoader loader;
  DwarfLoader::Ticket t = loader.submit(UniqueFd(open("/bin/true", O_RDONLY)));
  DwarfLoss why = DwarfLoss::Count;
  EXPECT_FALSE(loader.take(t, 0, &why));
  EXPECT_EQ(why, DwarfLoss::None);
}

} // namespace
} // namespace offcpu
