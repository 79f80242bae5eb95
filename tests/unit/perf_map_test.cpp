#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

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

// The streaming scan reads in 64 KiB chunks: lines cut by a chunk's end,
// later lines winning, and only the wanted names kept.
TEST(PerfMap, ScanAcrossChunksKeepsOnlyWantedNames) {
  std::string text;
  for (int i = 0; i < 5000; i++) {
    char line[96];
    snprintf(line, sizeof(line), "%x 10 jit_function_number_%d\n",
             0x100000 + i * 0x10, i);
    text += line;
  }
  text += "100020 10 replaced_later\n"; // same range as function 2
  text += "200000 10 " + std::string(100000, 'y') + "\n";
  text += "300000 10 last_line_without_newline";
  int fd = memfd_create("perfmap", MFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, text.data(), text.size()),
            static_cast<ssize_t>(text.size()));
  std::vector<uint64_t> wanted = {0x100005, 0x100025, 0x100000 + 4999 * 0x10,
                                  0x200001, 0x300002, 0x900000};
  std::sort(wanted.begin(), wanted.end());
  PerfMapScan scan = scan_perf_map(fd, wanted, text.size());
  EXPECT_EQ(scan.names.size(), 5u); // 0x900000 is in no entry
  EXPECT_EQ(scan.names[0x100005], "jit_function_number_0");
  EXPECT_EQ(scan.names[0x100025], "replaced_later");
  EXPECT_EQ(scan.names[0x100000 + 4999 * 0x10], "jit_function_number_4999");
  EXPECT_EQ(scan.names[0x200001], std::string(4096, 'y'));
  EXPECT_EQ(scan.names[0x300002], "last_line_without_newline");
  EXPECT_FALSE(scan.truncated);
  PerfMapScan part = scan_perf_map(fd, wanted, 1000);
  EXPECT_TRUE(part.truncated);
  EXPECT_EQ(part.names.size(),
            2u); // functions 0 and 2, in the first 1000 bytes
  close(fd);
}

TEST(Xz, RejectsGarbageAndOversizedOutput) {
  EXPECT_TRUE(xz_decompress("not xz at all", 1 << 20).empty());
  EXPECT_TRUE(xz_decompress("", 1 << 20).empty());
}

} // namespace
} // namespace offcpu
