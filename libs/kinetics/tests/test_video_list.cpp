// TSM and mmaction2 video lists (video_list.hpp): the dataset plugin's lists and
// `vexp data extract-frames`'s, one reader.
#include <gtest/gtest.h>

#include "vexp/kinetics/error.hpp"
#include "vexp/kinetics/video_list.hpp"

namespace {

using namespace std::string_literals;  // "...\0..."s keeps the NUL and what follows

using namespace vexp::kinetics;

std::string error_of(const std::string& text, ListFormat f = ListFormat::Auto, bool optional = false) {
  try {
    parse_video_list(text, "list.txt", f, optional);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(KineticsVideoList, AutoTellsTsmFromMmactionByTheColumns) {
  const auto e = parse_video_list(
      "\xEF\xBB\xBF" "abseiling/a_000000_000010 250 0\r\n"
      "# a comment\n"
      "\n"
      "  air drumming/b.mp4 3  \n"
      "my videos/c d.mp4 12 7\n",
      "list.txt", ListFormat::Auto);
  ASSERT_EQ(e.size(), 3u);
  EXPECT_EQ(e[0].path, "abseiling/a_000000_000010");
  EXPECT_EQ(e[0].frames, 250);
  EXPECT_EQ(e[0].label, 0);
  EXPECT_EQ(e[0].line, 1);
  EXPECT_EQ(e[1].path, "air drumming/b.mp4");  // mmaction: one number; the path keeps its space
  EXPECT_EQ(e[1].frames, -1);
  EXPECT_EQ(e[1].label, 3);
  EXPECT_EQ(e[1].line, 4);
  EXPECT_EQ(e[2].path, "my videos/c d.mp4");
  EXPECT_EQ(e[2].frames, 12);
  EXPECT_EQ(e[2].label, 7);
}

TEST(KineticsVideoList, ExplicitFormats) {
  // mmaction: "12 7" is a path "x 12" and a label 7.
  EXPECT_EQ(parse_video_list("x 12 7\n", "list.txt", ListFormat::Mmaction).at(0).path, "x 12");
  EXPECT_EQ(error_of("x.mp4 7\n", ListFormat::Tsm), "list.txt:1: expected 'path num_frames label'");
  EXPECT_EQ(error_of("x.mp4\n", ListFormat::Mmaction), "list.txt:1: expected 'path label'");
  EXPECT_EQ(list_format("tsm"), ListFormat::Tsm);
  EXPECT_THROW(list_format("csv"), std::invalid_argument);
}

TEST(KineticsVideoList, NumbersAndPathsAreChecked) {
  EXPECT_EQ(error_of("a.mp4 -1\n"), "list.txt:1: expected a non-negative integer label, got '-1'");
  EXPECT_EQ(error_of("a.mp4 x\n"), "list.txt:1: expected a non-negative integer label, got 'x'");
  EXPECT_EQ(error_of("ok.mp4 8 0\nb.mp4 8 99999999999999999999\n"),
            "list.txt:2: expected a non-negative integer label, got '99999999999999999999'");
  EXPECT_EQ(error_of("ok.mp4 8 0\nabseiling/a\0b.mp4 8 0\n"s),
            "list.txt:2: the path 'abseiling/a\\x00b.mp4' holds a control character (TAB, NUL, ...)");
  EXPECT_EQ(error_of("a\tb.mp4 x 0\n"), "list.txt:1: the path 'a\\tb.mp4 x' holds a control character (TAB, NUL, ...)");
  EXPECT_TRUE(parse_video_list("# only a comment\n\n", "list.txt", ListFormat::Auto).empty());
}

TEST(KineticsVideoList, LabelsOptionalForExtractFrames) {
  const auto e = parse_video_list("a.mp4\nb.mp4 3\nc.mp4 16 2\n", "list.txt", ListFormat::Auto, true);
  ASSERT_EQ(e.size(), 3u);
  EXPECT_EQ(e[0].path, "a.mp4");
  EXPECT_EQ(e[0].label, -1);
  EXPECT_EQ(e[1].label, 3);
  EXPECT_EQ(e[2].frames, 16);
  EXPECT_EQ(error_of("a.mp4\n"), "list.txt:1: expected 'path label'");
}

TEST(KineticsVideoList, WrittenLinesReadBack) {
  EXPECT_EQ(tsm_line("a b/c", 16, 2), "a b/c 16 2\n");
  EXPECT_EQ(mmaction_line("a b/c.mp4", 2), "a b/c.mp4 2\n");
  const auto e = parse_video_list(tsm_line("a b/c", 16, 2) + mmaction_line("a b/c.mp4", 2), "list.txt", ListFormat::Auto);
  EXPECT_EQ(e.at(0).path, "a b/c");
  EXPECT_EQ(e.at(0).frames, 16);
  EXPECT_EQ(e.at(1).path, "a b/c.mp4");
  EXPECT_EQ(e.at(1).label, 2);
}

}  // namespace
