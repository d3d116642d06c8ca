// Loading a recipe: TOML parse, `extends` chains, `unset`, `--set` overrides and
// ${VAR} interpolation. Produces a value tree in which every value knows the
// file:line:col where it was written.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "vexp/dsl/diagnostics.hpp"
#include "vexp/schema/value.hpp"

namespace vexp::dsl {

// A recipe file (the root, every `extends` base, a sweep file) must be a regular
// file of at most this many bytes; devices, FIFOs and directories are refused.
constexpr uint64_t kMaxRecipeBytes = 16ull * 1024 * 1024;

struct Override {
  std::string path;   // "optim.lr", "model.node.features.depth", "model.node.1.depth"
  std::string text;   // raw value text as typed after '='
};
// Parses "a.b.c=value"; returns nullopt when there is no '=' or the path is empty.
std::optional<Override> parse_override(const std::string& arg);

struct LoadOptions {
  std::vector<Override> overrides;
  // Environment lookup for ${VAR}; defaults to getenv.
  std::function<std::optional<std::string>(const std::string&)> env;
};

// A ${VAR} the recipe interpolated (recorded once per name, in the order first met).
struct Interpolation {
  std::string name;
  std::optional<std::string> environment;  // its value in the environment; nullopt: not set
  std::string value;                       // what the recipe received (the default when unset or empty)
  Loc loc;                                 // where it was first used
};

struct Recipe {
  std::string path;                 // the root file as given
  std::vector<std::string> files;   // root first, then bases in `extends` order
  Value root;                       // merged tree (a Table), overrides applied
  std::vector<Interpolation> variables;  // the ${VAR}s interpolated into `root`
};

// Loads and merges. Problems go into `diags` (all of them, not just the first);
// returns nullopt only when no tree could be built at all.
std::optional<Recipe> load_recipe(const std::string& path, const LoadOptions& opts,
                                  Diagnostics& diags);
// Same from text (tests, fuzzing); `extends` resolves relative to `virtual_path`.
std::optional<Recipe> load_recipe_text(const std::string& text, const std::string& virtual_path,
                                       const LoadOptions& opts, Diagnostics& diags);

// Renders a value tree as TOML (tables as [sections], arrays of tables as [[...]]).
std::string to_toml(const Value& root);
// A stable hex hash of the rendered TOML (the recipe hash).
std::string recipe_hash(const Value& root);

}  // namespace vexp::dsl
