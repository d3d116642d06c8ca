// The official annotation CSVs and the names derived from them (annotations.hpp, names.hpp).
#include <gtest/gtest.h>

#include "vexp/kinetics/annotations.hpp"
#include "vexp/kinetics/error.hpp"
#include "vexp/kinetics/names.hpp"

namespace {

using namespace vexp::kinetics;
const std::string kHead = "label,youtube_id,time_start,time_end,split\n";

std::string error_of(const std::string& text) {
  try {
    parse_annotations(text, "a.csv");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(KineticsAnnotations, ReadsTheOfficialShape) {
  const auto c = parse_annotations(
      "label,youtube_id,time_start,time_end,split,is_cc\n"
      "abseiling,--07WQ2iBlw,1,11,train,0\n"
      "\"massaging person's head\",-_a1b2c3d4e,000059,69,train,1\n",
      "a.csv");
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].label, "abseiling");
  EXPECT_EQ(c[0].youtube_id, "--07WQ2iBlw");
  EXPECT_EQ(c[0].start, 1);
  EXPECT_EQ(c[0].end, 11);
  EXPECT_EQ(c[0].split, "train");
  EXPECT_EQ(c[0].line, 2);
  EXPECT_EQ(c[1].label, "massaging person's head");
  EXPECT_EQ(c[1].start, 59);
  EXPECT_EQ(clip_name(c[1]), "-_a1b2c3d4e_000059_000069");
  EXPECT_EQ(sorted_class_names(c), (std::vector<std::string>{"abseiling", "massaging person's head"}));
  EXPECT_TRUE(parse_annotations(kHead, "a.csv").empty());  // a header alone: no clips
}

TEST(KineticsAnnotations, IntegralDecimalTimesAreTheSameWholeSeconds) {
  // One of #26's disagreements: `vexp data` read 59.0 (and 59.5, as 59) while the
  // dataset plugin refused 59.0. One rule now: whole seconds, written as integers
  // (the official CSVs) or with a fractional part of zeros; anything else is refused.
  int64_t s = -1;
  for (const char* t : {"59", "59.0", "59.000", "0059"}) {
    ASSERT_TRUE(parse_seconds(t, &s)) << t;
    EXPECT_EQ(s, 59) << t;
  }
  for (const char* t : {"59.5", "59.01", "59.", ".0", "-1", "+1", "1e3", " 59", "59 ", "", "soon", "0x10",
                        "12345678901", "nan"})
    EXPECT_FALSE(parse_seconds(t, &s)) << t;
  ASSERT_TRUE(parse_seconds("9999999999", &s));
  EXPECT_EQ(s, 9999999999);
  const auto c = parse_annotations(kHead + "abseiling,abc,59.0,69.00,train\n", "a.csv");
  EXPECT_EQ(clip_name(c.at(0)), "abc_000059_000069");
  EXPECT_EQ(error_of(kHead + "abseiling,abc,59.5,69,train\n"),
            "a.csv:2: time_start '59.5' is not a number of seconds (whole seconds: the official CSVs write 59; "
            "59.0 is read as 59)");
  EXPECT_EQ(error_of(kHead + "abseiling,abc,1,soon,train\n").rfind("a.csv:2: time_end 'soon' is not a number of seconds", 0), 0u);
  EXPECT_EQ(error_of(kHead + "abseiling,abc,20,10,train\n"), "a.csv:2: time_end 10 is before time_start 20");
}

TEST(KineticsAnnotations, DoubledQuotesInALabelAreOneQuote) {
  const auto c = parse_annotations(kHead + "\"say \"\"hi\"\"\",abc,0,10,train\n", "a.csv");
  EXPECT_EQ(c.at(0).label, "say \"hi\"");
  EXPECT_EQ(mmaction_name(c.at(0).label), "say_hi");
}

TEST(KineticsAnnotations, HeaderAndFieldCounts) {
  EXPECT_EQ(error_of(""), "a.csv: the file is empty");
  EXPECT_EQ(error_of("youtube_id,time_start,time_end,split\nabc,1,11,test\n"),
            "a.csv:1: expected the header 'label,youtube_id,time_start,time_end,split[,is_cc]' of the official "
            "Kinetics train/val CSVs, got 'youtube_id,time_start,time_end,split'");
  // No header: the first row is not taken for one.
  EXPECT_EQ(error_of("abseiling,abc,0,10,train\n").rfind("a.csv:1: expected the header", 0), 0u);
  EXPECT_EQ(error_of("label,youtube_id,time_start,time_end,split,extra\n").rfind("a.csv:1: expected the header", 0), 0u);
  EXPECT_EQ(error_of(kHead + "abseiling,abc,0,10\n"), "a.csv:2: expected 5 fields, got 4");
  EXPECT_EQ(error_of("label,youtube_id,time_start,time_end,split,is_cc\nabseiling,abc,0,10,train\n"),
            "a.csv:2: expected 6 fields, got 5");
  EXPECT_EQ(error_of(kHead + "\"juggling, balls\",abc,0,10,train,x\n"), "a.csv:2: expected 5 fields, got 6");
  // The BOM and CRLF of a spreadsheet's export.
  EXPECT_EQ(parse_annotations("\xEF\xBB\xBF" "label,youtube_id,time_start,time_end,split\r\na,b,0,1,val\r\n", "a.csv")
                .at(0).split, "val");
}

TEST(KineticsAnnotations, NamesThatCannotBePartOfAPathAreRefused) {
  auto row = [](const std::string& fields) { return error_of(kHead + "abseiling,ok,0,10,train\n" + fields + "\n"); };
  EXPECT_EQ(row("\"../../outside\",abc,0,10,train"), "a.csv:3: label '../../outside' cannot be a folder name: it holds a '/'");
  EXPECT_EQ(row("..,abc,0,10,train"), "a.csv:3: label '..' cannot be a folder name: '..' names the parent folder");
  EXPECT_EQ(row("\".\"\"\",abc,0,10,train"), "a.csv:3: label '.\"' cannot be a folder name: '.' names the folder itself");
  EXPECT_EQ(row("\"a\tb\",abc,0,10,train"), "a.csv:3: label 'a\\tb' cannot be a folder name: it holds a control character");
  EXPECT_EQ(row(std::string("ab\0cd", 5) + ",abc,0,10,train"),
            "a.csv:3: label 'ab\\x00cd' cannot be a folder name: it holds a NUL byte");
  EXPECT_EQ(row("a\\b,abc,0,10,train"), "a.csv:3: label 'a\\b' cannot be a folder name: it holds a '\\'");
  EXPECT_EQ(row(",abc,0,10,train"), "a.csv:3: label '' cannot be a folder name: it is empty");
  EXPECT_EQ(row("abseiling,\"aa\tbb\",0,10,train"),
            "a.csv:3: youtube_id 'aa\\tbb' cannot be part of a path: it holds a control character");
  EXPECT_EQ(row("abseiling,a b,0,10,train"), "a.csv:3: youtube_id 'a b' cannot be part of a path: it holds a space");
  EXPECT_EQ(row("abseiling,../x,0,10,train"), "a.csv:3: youtube_id '../x' cannot be part of a path: it holds a '/'");
  EXPECT_EQ(row("abseiling," + std::string(201, 'x') + ",0,10,train").find("it is 201 bytes long (200 at most)") !=
                std::string::npos, true);
  EXPECT_EQ(row("abseiling,abc,0,10,.."), "a.csv:3: split '..' cannot be part of a path: '..' names the parent folder");
  EXPECT_EQ(row("abseiling,abc,0,10,"), "");  // an empty split is allowed (csv_path's {split} is then empty)
}

TEST(KineticsAnnotations, WrittenCsvsReadBack) {
  EXPECT_EQ(annotation_header(true), "label,youtube_id,time_start,time_end,split,is_cc\n");
  EXPECT_EQ(annotation_header(false), "label,youtube_id,time_start,time_end,split\n");
  Clip a;
  a.label = "massaging person's head";
  a.youtube_id = "-_a1b2c3d4e";
  a.start = 59;
  a.end = 69;
  a.split = "val";
  Clip b = a;
  b.label = "say \"hi\", twice";
  EXPECT_EQ(annotation_row(a, true), "\"massaging person's head\",-_a1b2c3d4e,59,69,val,0\n");
  for (bool is_cc : {false, true}) {
    const auto c = parse_annotations(annotation_header(is_cc) + annotation_row(a, is_cc) + annotation_row(b, is_cc), "a.csv");
    ASSERT_EQ(c.size(), 2u);
    EXPECT_EQ(c[0].label, a.label);
    EXPECT_EQ(c[1].label, b.label);
    EXPECT_EQ(clip_name(c[1]), "-_a1b2c3d4e_000059_000069");
    EXPECT_EQ(c[1].split, "val");
  }
}

TEST(KineticsNames, ClipAndFolderNames) {
  EXPECT_EQ(clip_name("abc", 0, 10), "abc_000000_000010");
  EXPECT_EQ(clip_name("abc", 1234567, 1234577), "abc_1234567_1234577");
  EXPECT_EQ(clip_time(59), "000059");
  EXPECT_EQ(mmaction_name("passing American football (in game)"), "passing_American_football_(in_game)");
  EXPECT_EQ(tsm_name("passing American football (in game)"), "passing_American_football_in_game");
  EXPECT_EQ(tsm_name("massaging person's head"), "massaging_persons_head");
  EXPECT_EQ(label_problem("massaging person's head"), "");
  EXPECT_EQ(label_problem("\"\""), "it is empty");  // as mmaction2 writes it
  EXPECT_EQ(youtube_id_problem("--07WQ2iBlw"), "");
  EXPECT_EQ(split_problem(""), "");
  EXPECT_EQ(split_problem("a/b"), "it holds a '/'");
}

TEST(KineticsNames, ClipPathsAreExpandedOnce) {
  Clip c;
  c.label = "{id}";  // a value that looks like a key stays as it is
  c.youtube_id = "abc";
  c.split = "val";
  c.start = 5;
  c.end = 15;
  EXPECT_EQ(expand_clip_path("{label}/{id}_{start}_{end}.mp4", c), "{id}/abc_000005_000015.mp4");
  EXPECT_EQ(expand_clip_path("{split}/{id}.mp4", c), "val/abc.mp4");
  EXPECT_EQ(expand_clip_path("{id}{id}{nokey}", c), "abcabc{nokey}");
}

}  // namespace
