#include "vexp/runtime/session.hpp"

#include "vexp/runtime/plugin_trust.hpp"

namespace vexp {

void load_plugins(Session& s) {
  s.host.load_default_paths(s.plugin_problems);
  for (const auto& dir : s.plugin_dirs) s.host.load_directory(dir, s.plugin_problems);
}

bool load_recipe_and_plugins(Session& s, const std::string& path, const std::vector<dsl::Override>& overrides) {
  dsl::LoadOptions opts;
  opts.overrides = overrides;
  s.recipe = dsl::load_recipe(path, opts, s.diags);
  if (!s.recipe) return false;
  const dsl::Value* plugins = s.recipe->root.is_table() ? s.recipe->root.find("plugins") : nullptr;
  const dsl::Value* paths = plugins && plugins->is_table() ? plugins->find("paths") : nullptr;
  if (!paths || !paths->is_array()) return true;  // a wrong type is the validator's to report
  // Every folder is checked before anything is loaded from any of them: a
  // library's constructors run inside dlopen, before vexp sees its entry point.
  const std::vector<std::string> dirs = dsl::plugin_paths(*s.recipe);  // the string elements, in order
  const PluginTrust trust = PluginTrust::current(s.plugin_dirs);
  std::vector<std::pair<std::string, dsl::Loc>> load;
  bool refused = false;
  size_t k = 0;
  for (const auto& element : paths->as_array()) {
    if (!element.is_string() || k >= dirs.size()) continue;
    const std::string& dir = dirs[k++];
    const dsl::Loc loc = element.loc().known() ? element.loc() : dsl::Loc{path, 0, 0};
    std::string why;
    const std::string canonical = canonical_path(dir, &why);
    if (canonical.empty()) {
      s.diags.error(loc, "plugin folder '" + dir + "' does not exist");
      refused = true;
    } else if (!trust.allows(canonical)) {
      s.diags.error(loc, untrusted_plugin_folder_message(dir, canonical));
      refused = true;
    } else if (!trust.preloaded(canonical)) {  // loaded by load_plugins already (problems were warnings)
      load.emplace_back(canonical, loc);
    }
  }
  if (refused) return false;
  for (const auto& [dir, loc] : load) {
    std::vector<std::string> problems;
    s.host.load_directory(dir, problems);
    for (auto& p : problems) s.diags.error(loc, p);
  }
  return true;
}

bool open_recipe(Session& s, const std::string& path, const std::vector<dsl::Override>& overrides,
                 bool require_data) {
  if (!load_recipe_and_plugins(s, path, overrides)) return false;
  dsl::ValidateOptions vo;
  vo.require_data = require_data;
  s.plan = dsl::validate(*s.recipe, s.host, s.diags, vo);
  return s.plan.has_value() && !s.diags.has_errors();
}

}  // namespace vexp
