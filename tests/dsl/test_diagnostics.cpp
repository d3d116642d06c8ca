// Compiler-style rendering and ordering of diagnostics.
#include <gtest/gtest.h>

#include "vexp/dsl/diagnostics.hpp"

namespace vexp::dsl {
namespace {

TEST(Diagnostics, RendersLikeACompiler) {
  Diagnostic d{Severity::Error, {"path/to/recipe.toml", 12, 7}, "lr must be > 0"};
  EXPECT_EQ(d.str(), "path/to/recipe.toml:12:7: error: lr must be > 0");
  Diagnostic w{Severity::Warning, {"r.toml", 3, 1}, "unused"};
  EXPECT_EQ(w.str(), "r.toml:3:1: warning: unused");
  Diagnostic n{Severity::Note, {}, "see above"};
  EXPECT_EQ(n.str(), "note: see above");
  Diagnostic s{Severity::Error, {"--set a.b=1", 0, 0}, "bad"};
  EXPECT_EQ(s.str(), "--set a.b=1: error: bad");
}

TEST(Diagnostics, CountsErrorsOnly) {
  Diagnostics d;
  EXPECT_FALSE(d.has_errors());
  d.warning({"a.toml", 1, 1}, "w");
  d.note({"a.toml", 1, 1}, "n");
  EXPECT_FALSE(d.has_errors());
  d.error({"a.toml", 1, 1}, "e");
  EXPECT_TRUE(d.has_errors());
  EXPECT_EQ(d.error_count(), 1u);
  EXPECT_EQ(d.items().size(), 3u);
}

TEST(Diagnostics, SortedByPositionStableAndWithoutDuplicates) {
  Diagnostics d;
  d.error({"b.toml", 1, 1}, "b1");
  d.error({"a.toml", 10, 2}, "a10");
  d.error({"a.toml", 2, 5}, "first at 2:5");
  d.warning({"a.toml", 2, 5}, "second at 2:5");
  d.error({"a.toml", 10, 2}, "a10");  // exact duplicate
  d.error({"a.toml", 2, 1}, "a2");
  const auto sorted = d.sorted();
  std::vector<std::string> messages;
  for (const auto& x : sorted) messages.push_back(x.message);
  EXPECT_EQ(messages, (std::vector<std::string>{"a2", "first at 2:5", "second at 2:5", "a10", "b1"}));
  EXPECT_EQ(d.str(),
            "a.toml:2:1: error: a2\n"
            "a.toml:2:5: error: first at 2:5\n"
            "a.toml:2:5: warning: second at 2:5\n"
            "a.toml:10:2: error: a10\n"
            "b.toml:1:1: error: b1\n");
}


TEST(Diagnostics, ShowsTheFirstHundredAndCountsTheRest) {
  Diagnostics d;
  for (int i = 1; i <= 250; ++i) d.error({"a.toml", i, 1}, "e" + std::to_string(i));
  d.warning({"a.toml", 300, 1}, "w");
  const auto shown = d.sorted();
  ASSERT_EQ(shown.size(), Diagnostics::kMaxShown + 1);
  EXPECT_EQ(shown[0].message, "e1");
  EXPECT_EQ(shown[99].message, "e100");
  EXPECT_EQ(shown.back().str(), "note: ... and 150 more errors, 1 more warning (not shown)");
  EXPECT_EQ(d.error_count(), 250u);  // the summary line still counts every error
  EXPECT_EQ(d.sorted(Diagnostics::kAll).size(), 251u);
  EXPECT_EQ(d.sorted(3).back().str(), "note: ... and 247 more errors, 1 more warning (not shown)");
  // Exactly the cap: nothing hidden, no note.
  Diagnostics exact;
  for (int i = 1; i <= 100; ++i) exact.error({"a.toml", i, 1}, "e");
  EXPECT_EQ(exact.sorted().size(), 100u);
  EXPECT_EQ(exact.sorted().back().severity, Severity::Error);
}

}  // namespace
}  // namespace vexp::dsl
