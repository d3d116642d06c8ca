// A recipe opened for use: plugins loaded (default folders, VEXP_PLUGIN_PATH,
// --plugin-path and the recipe's [plugins] paths when they are trusted, see
// plugin_trust.hpp), the recipe loaded and validated.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "vexp/dsl/validate.hpp"
#include "vexp/runtime/plugin_host.hpp"

namespace vexp {

struct Session {
  PluginHost host;
  std::vector<std::string> plugin_problems;  // libraries that failed to load
  // --plugin-path folders (canonical): loaded by load_plugins, and folders a
  // recipe may name in [plugins] paths.
  std::vector<std::string> plugin_dirs;
  dsl::Diagnostics diags;
  std::optional<dsl::Recipe> recipe;
  std::optional<dsl::RecipePlan> plan;
  // Whether missing data is an error (see open_recipe); sweeps set it per use.
  bool require_data = true;
};

// Loads the default plugin folders and s.plugin_dirs into `s.host` (problems collected).
void load_plugins(Session& s);

// Loads `path` (overrides applied) into s.recipe and the plugin folders its
// [plugins] paths name into s.host. A folder that is not trusted (see
// plugin_trust.hpp) is an error at the array element that names it and nothing
// is loaded from it. False when no recipe could be loaded or a folder was refused.
bool load_recipe_and_plugins(Session& s, const std::string& path, const std::vector<dsl::Override>& overrides);

// Loads and validates `path` (plugins must be loaded already). Returns true when
// the recipe is valid; diagnostics are in s.diags either way.
// `require_data`: missing data is an error (vexp run) rather than a warning.
bool open_recipe(Session& s, const std::string& path, const std::vector<dsl::Override>& overrides,
                 bool require_data = true);

}  // namespace vexp
