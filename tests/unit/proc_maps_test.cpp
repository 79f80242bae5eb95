#include <gtest/gtest.h>

#include "symbolize/proc_maps.h"

namespace offcpu {
namespace {

const char kMaps[] = "55d0c4a00000-55d0c4a01000 r--p 00000000 fe:01 1234       "
                     "                /usr/bin/app\n"
                     "55d0c4a01000-55d0c4a05000 r-xp 00001000 fe:01 1234       "
                     "                /usr/bin/app\n"
                     "7f1a2b000000-7f1a2b028000 r--p 00000000 fe:01 99         "
                     "                /usr/lib/x86_64-linux-gnu/libc.so.6\n"
                     "7f1a2b028000-7f1a2b1bd000 r-xp 00028000 fe:01 99         "
                     "                /usr/lib/x86_64-linux-gnu/libc.so.6\n"
                     "7f1a2c000000-7f1a2c001000 r-xp 00000000 00:01 77         "
                     "                /tmp/old binary (deleted)\n"
                     "7ffd1e5f0000-7ffd1e5f2000 r-xp 00000000 00:00 0          "
                     "                [vdso]\n"
                     "7f00aa000000-7f00aa100000 rwxp 00000000 00:00 0 \n"
                     "this is not a maps line\n"
                     "7f00bb000000-7f00ba000000 r-xp 00000000 00:00 0          "
                     "                [reversed]\n"
                     "ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0  "
                     "                [vsyscall]\n";

TEST(ProcMaps, ParsesAndSorts) {
  auto maps = parse_proc_maps(kMaps);
  ASSERT_EQ(maps.size(), 8u); // junk and the reversed range dropped
  for (size_t i = 1; i < maps.size(); i++)
    EXPECT_LT(maps[i - 1].start, maps[i].start);
}

TEST(ProcMaps, FindsMappingAndFields) {
  auto maps = parse_proc_maps(kMaps);
  const Mapping *m = find_mapping(maps, 0x7f1a2b030000);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->path, "/usr/lib/x86_64-linux-gnu/libc.so.6");
  EXPECT_EQ(m->offset, 0x28000u);
  EXPECT_EQ(m->inode, 99u);
  EXPECT_EQ(m->dev_major, 0xfeu);
  EXPECT_EQ(m->dev_minor, 1u);
  EXPECT_TRUE(m->executable);
  EXPECT_TRUE(m->is_file());
  EXPECT_EQ(m->display_name(), "libc.so.6");
  EXPECT_EQ(find_mapping(maps, 0x1000), nullptr);
  EXPECT_EQ(find_mapping(maps, 0x55d0c4a05000), nullptr); // end is exclusive
}

TEST(ProcMaps, DeletedAndSpecialMappings) {
  auto maps = parse_proc_maps(kMaps);
  const Mapping *del = find_mapping(maps, 0x7f1a2c000010);
  ASSERT_NE(del, nullptr);
  EXPECT_TRUE(del->deleted());
  EXPECT_EQ(del->display_name(), "old binary");
  const Mapping *vdso = find_mapping(maps, 0x7ffd1e5f0100);
  ASSERT_NE(vdso, nullptr);
  EXPECT_EQ(vdso->path, "[vdso]");
  EXPECT_FALSE(vdso->is_file());
  const Mapping *anon = find_mapping(maps, 0x7f00aa000100);
  ASSERT_NE(anon, nullptr);
  EXPECT_TRUE(anon->path.empty());
}

TEST(ProcMaps, HostileInputDoesNotCrash) {
  EXPECT_TRUE(parse_proc_maps("").empty());
  EXPECT_TRUE(parse_proc_maps("-\n--\n1-\n-1 r-xp\n").empty());
  EXPECT_TRUE(parse_proc_maps("fffffffffffffffff-1 r-xp 0 0:0 0 x\n").empty());
  std::string huge(100000, 'f');
  EXPECT_TRUE(parse_proc_maps(huge).empty());
}

} // namespace
} // namespace offcpu
