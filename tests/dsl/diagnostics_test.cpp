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

}  // namespace
}  // namespace vexp::dsl
