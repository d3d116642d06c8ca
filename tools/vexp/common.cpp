#include "common.hpp"

#include <iostream>

namespace vexp::cli {

void RecipeArgs::add_to(CLI::App* app) {
  app->add_option("recipe", path, "Recipe file (.toml)")->required();
  app->add_option("--set", sets, "Override a recipe value: --set optim.lr=0.05 (repeatable)");
}

void report_plugin_problems(const Session& s) {
  for (const auto& p : s.plugin_problems) std::cerr << "vexp: warning: " << p << "\n";
}

std::vector<dsl::Override> parse_sets(const std::vector<std::string>& sets) {
  std::vector<dsl::Override> overrides;
  for (const auto& text : sets) {
    auto o = dsl::parse_override(text);
    if (!o) throw Exit{kExitInvalid, "--set '" + text + "': expected KEY=VALUE, for example --set optim.lr=0.05"};
    overrides.push_back(*o);
  }
  return overrides;
}

bool open_session(Session& s, const RecipeArgs& args) {
  const std::vector<dsl::Override> overrides = parse_sets(args.sets);
  load_plugins(s);
  report_plugin_problems(s);
  bool ok = false;
  try {
    ok = open_recipe(s, args.path, overrides, args.require_data);
  } catch (const dsl::RecipeError& e) {
    throw Exit{kExitInvalid, e.what()};
  }
  for (const auto& d : s.diags.sorted()) std::cerr << d.str() << "\n";
  if (!ok) {
    size_t n = s.diags.error_count();
    std::cerr << args.path << ": " << n << (n == 1 ? " error" : " errors") << "\n";
  }
  return ok;
}

}  // namespace vexp::cli
