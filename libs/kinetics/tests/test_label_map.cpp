// Label maps: the one reader of class-name files (label_map.hpp), used by the dataset
// plugin's label_map, `vexp data prepare --label-map` and `vexp predict --labels`,
// which had three parsers.
#include <gtest/gtest.h>

#include "vexp/kinetics/error.hpp"
#include "vexp/kinetics/label_map.hpp"

namespace {

using namespace vexp::kinetics;
using Names = std::vector<std::string>;

std::string error_of(const std::string& text) {
  try {
    parse_label_map(text, "map.txt");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(KineticsLabelMap, LinesTrimmedBlankLinesSkippedQuotesKept) {
  const LabelMap m = parse_label_map("\xEF\xBB\xBF" "a \"quoted\", name\r\n\n  second  \n\tthird\t\r\nfourth", "map.txt");
  EXPECT_EQ(m.names(), (Names{"a \"quoted\", name", "second", "third", "fourth"}));
  EXPECT_EQ(m.size(), 4);
  EXPECT_EQ(m.find("second"), 1);
  EXPECT_EQ(m.find("fourth"), 3);
  EXPECT_EQ(m.find("fifth"), -1);
}

TEST(KineticsLabelMap, FindsNamesWrittenAsTsmOrMmactionFolders) {
  const LabelMap m = parse_label_map("passing American football (in game)\nmassaging person's head\n", "map.txt");
  EXPECT_EQ(m.find("passing American football (in game)"), 0);
  EXPECT_EQ(m.find("passing_American_football_(in_game)"), 0);  // mmaction2's folder
  EXPECT_EQ(m.find("passing_American_football_in_game"), 0);     // TSM's folder
  EXPECT_EQ(m.find("massaging_persons_head"), 1);
  // ... and the other way round: a map of folder names finds the CSV's names.
  const LabelMap f = parse_label_map("passing_American_football_in_game\n", "map.txt");
  EXPECT_EQ(f.find("passing American football (in game)"), 0);
}

TEST(KineticsLabelMap, RefusedWithTheirLine) {
  EXPECT_EQ(error_of("a\n\nb\na \n"), "map.txt:4: 'a' is listed twice (first at line 1)");
  EXPECT_EQ(error_of("a\nb\x1b[2Jc\n"), "map.txt:2: the name 'b\\e[2Jc' holds a control character");
  EXPECT_EQ(error_of(std::string("a\0b\n", 4)), "map.txt:1: the name 'a\\x00b' holds a control character");
  EXPECT_EQ(error_of(""), "the label map 'map.txt' has no names");
  EXPECT_EQ(error_of("\xEF\xBB\xBF\n \n\r\n"), "the label map 'map.txt' has no names");
}

TEST(KineticsLabelMap, WrittenMapsReadBack) {
  const Names names{"abseiling", "air drumming", "massaging person's head"};
  EXPECT_EQ(label_map_text(names), "abseiling\nair drumming\nmassaging person's head\n");
  EXPECT_EQ(parse_label_map(label_map_text(names), "map.txt").names(), names);
  EXPECT_THROW(LabelMap(Names{"a", "b", "a"}, "the names"), Error);
}

}  // namespace
