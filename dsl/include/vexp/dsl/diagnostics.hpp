// Collected recipe problems, each with the place it was written.
#pragma once

#include "vexp/base/error.hpp"
#include <string>
#include <vector>

#include "vexp/schema/value.hpp"

namespace vexp::dsl {

enum class Severity { Error, Warning, Note };

struct Diagnostic {
  Severity severity = Severity::Error;
  Loc loc;
  std::string message;
  // "recipe.toml:12:7: error: message" (or "error: message" when loc is unknown): one
  // line for a terminal, control characters (from file names and quoted values) escaped
  // as vexp::base::printable shows them.
  std::string str() const;
};

class Diagnostics {
 public:
  void error(const Loc& loc, std::string message);
  void warning(const Loc& loc, std::string message);
  void note(const Loc& loc, std::string message);
  bool has_errors() const;
  size_t error_count() const;
  const std::vector<Diagnostic>& items() const { return items_; }
  // Sorted by file, line, column (stable for equal positions); duplicates removed.
  // At most `max_shown` of them: when there are more, the first `max_shown` are
  // followed by one note "... and N more errors" (without a location) that
  // counts the rest, so that a recipe with 200,000 mistakes prints a screenful.
  std::vector<Diagnostic> sorted(size_t max_shown = kMaxShown) const;
  // The same, one per line.
  std::string str(size_t max_shown = kMaxShown) const;

  static constexpr size_t kMaxShown = 100;
  static constexpr size_t kAll = static_cast<size_t>(-1);

 private:
  std::vector<Diagnostic> items_;
};

// Thrown where collecting is impossible (e.g. the root file does not exist).
struct RecipeError : base::Error {
  explicit RecipeError(const std::string& what) : base::Error(what, base::ErrorKind::invalid) {}
};

}  // namespace vexp::dsl
