// A recipe opened for use: plugins loaded (default folders, VEXP_PLUGIN_PATH,
// --plugin-path and the recipe's [plugins] paths when they are trusted, see
// plugin_trust.hpp), the recipe loaded and validated. open_recipe(s, path, options)
// is the one way every command opens a recipe: with or without its data, with or
// without a stand-in for a dataset plugin that is not installed.
#pragma once

#include <cstdint>
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
  bool plugins_loaded = false;  // load_plugins ran (open_recipe loads them the first time)
  // Set by open_recipe when a stand-in replaced a dataset plugin that is not
  // installed ("" otherwise): one sentence for the user.
  std::string stand_in_note;
};

// How a recipe is opened.
struct OpenOptions {
  std::vector<dsl::Override> overrides;  // --set KEY=VALUE, in order
  // With `load_plugins`, when the session has not loaded its plugins yet
  // (s.plugins_loaded), the default folders and these --plugin-path folders
  // (canonical; they become s.plugin_dirs) are loaded first. Without it the caller
  // has loaded what the session needs (a sweep's trials, tests).
  bool load_plugins = true;
  std::vector<std::string> plugin_dirs;
  // Missing data files are an error (vexp run, check, data check, bench data) or a
  // warning (planning, model-only commands).
  bool require_data = true;
  // A dataset plugin the recipe names that is not installed (the Kinetics plugin on
  // a laptop) is replaced by a stand-in that accepts the recipe's [data.params] as
  // written (not checked), so the rest of the recipe is still fully validated. Its
  // clip shape comes from the parameters `frames` (or `num_segments`, `segments`)
  // and `size` (or `crop_size`, `crop`) (channels: `channels`, else 3), its classes from `classes`
  // (or `num_classes`), unless given below. s.stand_in_note then says so. Building
  // the stand-in's dataset fails (unknown dataset plugin): it is for planning only.
  bool stand_in = false;
  // Dataset facts given by the user (vexp info / predict / export --input, --classes):
  // they replace the dataset's (the real plugin's or the stand-in's), and a real
  // plugin that cannot give its facts (no data here) is then not asked.
  std::optional<dsl::Shape> clip;  // [T, C, H, W]
  int64_t classes = -1;            // > 0: given
};

// Loads the default plugin folders and s.plugin_dirs into `s.host` (problems collected).
void load_plugins(Session& s);

// Loads the plugins (options.load_plugins, the first time), then `path` (overrides applied) and the plugin
// folders its [plugins] paths name, and validates it. Returns true when the recipe
// is valid; diagnostics are in s.diags either way. Throws dsl::RecipeError when the
// file cannot be read.
bool open_recipe(Session& s, const std::string& path, const OpenOptions& options);

// The options of planning (vexp run --dry-run, submit, plan, bench --synthetic):
// no data needed, a stand-in for a dataset plugin that is not installed.
OpenOptions planning_options(std::vector<dsl::Override> overrides = {}, std::vector<std::string> plugin_dirs = {});

// Loads `path` (overrides applied) into s.recipe and the plugin folders its
// [plugins] paths name into s.host. A folder that is not trusted (see
// plugin_trust.hpp) is an error at the array element that names it and nothing
// is loaded from it. False when no recipe could be loaded or a folder was refused.
bool load_recipe_and_plugins(Session& s, const std::string& path, const std::vector<dsl::Override>& overrides);

}  // namespace vexp
