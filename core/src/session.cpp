#include "session.hpp"

namespace vexp {

void load_plugins(Session& s) { s.host.load_default_paths(s.plugin_problems); }

bool load_recipe_and_plugins(Session& s, const std::string& path, const std::vector<dsl::Override>& overrides) {
  dsl::LoadOptions opts;
  opts.overrides = overrides;
  s.recipe = dsl::load_recipe(path, opts, s.diags);
  if (!s.recipe) return false;
  for (const auto& dir : dsl::plugin_paths(*s.recipe)) {
    std::vector<std::string> problems;
    s.host.load_directory(dir, problems);
    for (auto& p : problems) s.diags.error(dsl::Loc{path, 0, 0}, p);
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
