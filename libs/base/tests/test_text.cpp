#include <gtest/gtest.h>

#include <cmath>

#include "vexp/base/text.hpp"

using vexp::base::has_control;
using vexp::base::printable;
using vexp::base::strip_utf8_bom;

TEST(Text, EscapesTerminalControls) {
  EXPECT_EQ(printable("run\x1b]0;pwned\x07\x1b[2J"), "run\\e]0;pwned\\x07\\e[2J");
  EXPECT_EQ(printable("a\nb\tc\rd"), "a\\nb\\tc\\rd");
  EXPECT_EQ(printable("\xc2\x9b" "2J"), "\\xc2\\x9b2J");  // C1 CSI
  EXPECT_EQ(printable("caf\xc3\xa9 \xe2\x9c\x93"), "caf\xc3\xa9 \xe2\x9c\x93");  // UTF-8 stays
  EXPECT_EQ(printable("bad \xff byte"), "bad \\xff byte");
  EXPECT_TRUE(has_control("x\x1b"));
  EXPECT_TRUE(has_control("\xc2\x85"));
  EXPECT_FALSE(has_control("plain caf\xc3\xa9"));
}

TEST(Text, CutsLongValues) {
  const std::string s(100000, 'n');
  const std::string p = printable(s, 10);
  EXPECT_EQ(p, "nnnnnnnnnn... (100000 bytes)");
  // A multi-byte character is not split at the cut.
  EXPECT_EQ(printable("ab\xc3\xa9", 3), "ab\\xc3... (4 bytes)");
}

TEST(Text, StripsOneUtf8Bom) {
  std::string s = "\xEF\xBB\xBFlabel,youtube_id";
  EXPECT_TRUE(strip_utf8_bom(s));
  EXPECT_EQ(s, "label,youtube_id");
  EXPECT_FALSE(strip_utf8_bom(s));
  std::string short_one = "\xEF\xBB";
  EXPECT_FALSE(strip_utf8_bom(short_one));
  EXPECT_EQ(short_one, "\xEF\xBB");
  std::string empty;
  EXPECT_FALSE(strip_utf8_bom(empty));
}

// Counts for people: MACs and parameters in every report and table (issue #36).
TEST(Text, CountsReadAsCounts) {
  using vexp::base::count_text;
  EXPECT_EQ(count_text(71594234), "71.59 M");  // the quickstart's MACs per clip, never 7.1594e+07
  EXPECT_EQ(count_text(4.134e9), "4.134 G");
  EXPECT_EQ(count_text(176128), "176.1 k");
  EXPECT_EQ(count_text(33.0e12), "33 T");
  EXPECT_EQ(count_text(9999), "9999");
  EXPECT_EQ(count_text(0), "0");
  EXPECT_EQ(count_text(-2.5e6), "-2.5 M");
  EXPECT_EQ(count_text(999960), "1 M");  // not "1000 k"
  EXPECT_EQ(count_text(std::nan("")), "nan");
  for (double v : {1e4, 123456789.0, 7.1594e7, 1e11, 5e14}) {
    const std::string t = count_text(v);
    EXPECT_EQ(t.find('e'), std::string::npos) << t;
  }
}

TEST(Text, SplitKeepsEveryPiece) {
  using vexp::base::split;
  using V = std::vector<std::string>;
  EXPECT_EQ(split("8,64,512", ','), (V{"8", "64", "512"}));
  EXPECT_EQ(split("8,,64,", ','), (V{"8", "", "64", ""}));  // empty pieces are the caller's to refuse
  EXPECT_EQ(split("", ','), (V{""}));
  EXPECT_EQ(split("1x3x224x224", 'x'), (V{"1", "3", "224", "224"}));
}
