// The recipe tree's editing and writing, shared by recipe.cpp (parsing with toml++,
// `extends`, loading), recipe_edit.cpp (key paths, `unset`, merging, `--set`
// overrides, ${VAR} interpolation) and recipe_write.cpp (the TOML writer, the hash).
// Internal to the dsl library.
#pragma once

#include <algorithm>
#include <cctype>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "vexp/dsl/recipe.hpp"

namespace vexp::dsl::detail {

inline bool is_identifier_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

inline std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

// One TOML value written as text ("18", "[1, 2]", "\"x\""), at `loc`; nullopt when the
// text is not a single TOML value (recipe.cpp: toml++ stays there).
std::optional<Value> parse_value_text(const std::string& text, const Loc& loc);

// recipe_edit.cpp
// Removes the value at a dotted path (`unset`; array entries by index or id); false when absent.
bool erase_path(Value& root, const std::string& path);
// Tables merge key by key; everything else (arrays of tables included) replaces.
void merge_into(Value& base, Value child);
// One `--set PATH=TEXT`, its problems reported at "--set PATH=TEXT".
void apply_override(Value& root, const Override& o, Diagnostics& diags);
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;
// ${VAR}, ${VAR:-default} and $$ in every string of `v`; the variables used go to `used`.
void interpolate(Value& v, const EnvLookup& env, Diagnostics& diags, std::vector<Interpolation>& used);
std::optional<std::string> getenv_lookup(const std::string& name);

}  // namespace vexp::dsl::detail
