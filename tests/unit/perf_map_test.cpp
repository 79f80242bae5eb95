#include <gtest/gtest.h>

#include "symbolize/perf_map.h"
#include "symbolize/xz.h"

namespace offcpu {
namespace {

TEST(PerfMap, ParsesAndFinds) {
  auto syms = parse_perf_map("7f0000001000 20 LazyCompile:*foo bar.js:10\n"
                             "7f0000000000 100 Interpreter\n"
                             "0x7f0000002000 0x10 stub\n"
                             "garbage\n"
                             "zz 10 bad_start\n"
                             "7f0000003000 0 zero_size\n");
  ASSERT_EQ(syms.size(), 3u);
  EXPECT_EQ(find_perf_symbol(syms, 0x7f0000001010)->name,
            "LazyCompile:*foo bar.js:10");
  EXPECT_EQ(find_perf_symbol(syms, 0x7f0000000080)->name, "Interpreter");
  EXPECT_EQ(find_perf_symbol(syms, 0x7f000000200f)->name, "stub");
  EXPECT_EQ(find_perf_symbol(syms, 0x7f0000002010), nullptr); // past the end
  EXPECT_EQ(find_perf_symbol(syms, 0x1000), nullptr);
}

TEST(PerfMap, HostileInput) {
  EXPECT_TRUE(parse_perf_map("").empty());
  EXPECT_TRUE(
      parse_perf_map("ffffffffffffffff ffffffffffffffff overflow\n").empty());
  EXPECT_TRUE(parse_perf_map(std::string(100000, ' ')).empty());
  auto long_name = parse_perf_map("1000 10 " + std::string(100000, 'x') + "\n");
  ASSERT_EQ(long_name.size(), 1u);
  EXPECT_LE(long_name[0].name.size(), 4096u);
}

TEST(Xz, RejectsGarbageAndOversizedOutput) {
  EXPECT_TRUE(xz_decompress("not xz at all", 1 << 20).empty());
  EXPECT_TRUE(xz_decompress("", 1 << 20).empty());
}

} // namespace
} // namespace offcpu
