// RFC 4180 records: the one CSV reader of the Kinetics files (libs/kinetics/csv.hpp).
#include <gtest/gtest.h>

#include "vexp/kinetics/csv.hpp"
#include "vexp/kinetics/error.hpp"

namespace {

using vexp::kinetics::csv_field;
using vexp::kinetics::CsvRecord;
using vexp::kinetics::parse_csv;
using Fields = std::vector<std::string>;

std::string error_of(const std::string& text) {
  try {
    parse_csv(text, "f.csv");
  } catch (const vexp::kinetics::Error& e) {
    return e.what();
  }
  return "";
}

TEST(KineticsCsv, DoubledQuotesAreOneQuote) {
  // One of #26's disagreements: the dataset plugin dropped the quotes of
  // "massaging person""s head" while `vexp data` kept one.
  const auto r = parse_csv("\"say \"\"hi\"\"\",x\n", "f.csv");
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].fields, (Fields{"say \"hi\"", "x"}));
  EXPECT_EQ(parse_csv("\"\"\"\"\n", "f.csv")[0].fields, (Fields{"\""}));
  EXPECT_EQ(parse_csv("\"\",a\n", "f.csv")[0].fields, (Fields{"", "a"}));
}

TEST(KineticsCsv, QuotedCommasAndLineBreaksAreData) {
  const auto r = parse_csv("a,b\n\"juggling, balls\",\"two\nlines\",c\nd,e\n", "f.csv");
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[1].fields, (Fields{"juggling, balls", "two\nlines", "c"}));
  EXPECT_EQ(r[1].line, 2);
  EXPECT_EQ(r[2].line, 4);  // the record after a quoted line break keeps the file's line numbers
}

TEST(KineticsCsv, ByteOrderMarkAndCrlf) {
  const auto r = parse_csv("\xEF\xBB\xBFlabel,id\r\n\"a\",b\r\nc,\"d\"\r\n", "f.csv");
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].fields, (Fields{"label", "id"}));
  EXPECT_EQ(r[1].fields, (Fields{"a", "b"}));
  EXPECT_EQ(r[2].fields, (Fields{"c", "d"}));
  // A CR that ends no line is data (the name rules refuse it as a control character).
  EXPECT_EQ(parse_csv("a\rb\n", "f.csv")[0].fields, (Fields{"a\rb"}));
  // The last record needs no line break.
  EXPECT_EQ(parse_csv("a,b", "f.csv")[0].fields, (Fields{"a", "b"}));
  EXPECT_EQ(parse_csv("a,\"b\"\r", "f.csv")[0].fields, (Fields{"a", "b"}));
}

TEST(KineticsCsv, SpacesAreDataAndBlankLinesAreSkipped) {
  const auto r = parse_csv("a , b\n\n  \t\n\"\"\nc\n", "f.csv");
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].fields, (Fields{"a ", " b"}));
  EXPECT_EQ(r[1].fields, (Fields{""}));  // a quoted empty field is a record
  EXPECT_EQ(r[2].line, 5);
  EXPECT_TRUE(parse_csv("", "f.csv").empty());
  EXPECT_TRUE(parse_csv("\xEF\xBB\xBF\n\n", "f.csv").empty());
}

TEST(KineticsCsv, MalformedQuotesAreRefusedAtTheirLine) {
  EXPECT_EQ(error_of("a\n\"air drumming,x,1\n"), "f.csv:2: a quoted field is not closed");
  EXPECT_EQ(error_of("a\n\"a\"b,c\n"), "f.csv:2: text after the closing quote of field 1");
  EXPECT_EQ(error_of("a\nx,a\"b\n"),
            "f.csv:2: a quote inside the unquoted field 2 (quote the whole field and double the quote)");
  EXPECT_EQ(error_of("\"two\nlines\" x\n"), "f.csv:2: text after the closing quote of field 1");
}

TEST(KineticsCsv, WrittenFieldsReadBack) {
  EXPECT_EQ(csv_field("abseiling"), "abseiling");
  EXPECT_EQ(csv_field("massaging person's head", true), "\"massaging person's head\"");
  EXPECT_EQ(csv_field("massaging person's head"), "massaging person's head");
  for (const std::string s : {"a,b", "say \"hi\"", "two\nlines", "cr\r", "", "\"", "plain words"}) {
    const auto r = parse_csv(csv_field(s, true) + ",end\n", "f.csv");
    ASSERT_EQ(r.size(), 1u) << s;
    EXPECT_EQ(r[0].fields, (Fields{s, "end"})) << s;
  }
}

}  // namespace
