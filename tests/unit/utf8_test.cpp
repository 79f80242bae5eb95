#include <gtest/gtest.h>

#include "util/utf8.h"

namespace offcpu {
namespace {

TEST(Utf8, ValidTextIsKept) {
  EXPECT_EQ(valid_utf8("start_thread"), "start_thread");
  EXPECT_EQ(valid_utf8("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x94\xa5"),
            "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x94\xa5");
  EXPECT_EQ(valid_utf8("a\tb"), "a\\x09b"); // no control characters
}

TEST(Utf8, InvalidBytesAndControlsAreEscapedVisibly) {
  EXPECT_EQ(valid_utf8("bad\xff\xfe<&>"), "bad\\xff\\xfe<&>");
  EXPECT_EQ(valid_utf8("line\nbreak"), "line\\x0abreak");
  EXPECT_EQ(valid_utf8("\xc0\xaf"), "\\xc0\\xaf");          // overlong '/'
  EXPECT_EQ(valid_utf8("\xed\xa0\x80"), "\\xed\\xa0\\x80"); // surrogate
  EXPECT_EQ(valid_utf8("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");
  EXPECT_EQ(valid_utf8("cut\xe2\x82"), "cut\\xe2\\x82"); // truncated char
  EXPECT_TRUE(is_clean_utf8(valid_utf8("\x80\x81\xc3")));
}

TEST(Utf8, PrefixNeverSplitsACharacter) {
  std::string s = "\xc3\xa9\xc3\xa9\xc3\xa9"; // three two-byte characters
  EXPECT_EQ(utf8_length(s), 3u);
  EXPECT_EQ(utf8_prefix(s, 2), "\xc3\xa9\xc3\xa9");
  EXPECT_EQ(utf8_prefix(s, 10), s);
  EXPECT_EQ(utf8_prefix("abc", 0), "");
}

} // namespace
} // namespace offcpu
