#include "commands/common.hpp"

#include "vexp/base/attempt.hpp"
#include "vexp/base/process.hpp"
#include "vexp/base/text.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>

#include "vexp/base/files.hpp"
#include "vexp/rundir/files.hpp"
#include "vexp/runtime/plugin_trust.hpp"

namespace vexp::cli {

int exit_code(const base::Error& e) {
  switch (e.kind()) {
    case base::ErrorKind::failure: return kExitFailure;
    case base::ErrorKind::invalid:
    case base::ErrorKind::refused: return kExitInvalid;
    case base::ErrorKind::diverged: return kExitDiverged;
    case base::ErrorKind::interrupted: return kExitInterrupted;
    case base::ErrorKind::child: return e.child_code() > 0 && e.child_code() < 256 ? e.child_code() : kExitFailure;
  }
  return kExitFailure;
}


std::string shipped_recipe(const std::string& rel) {
  namespace fs = std::filesystem;
  const std::string exe = base::exe_path();
  if (exe.empty()) throw base::failure("cannot find the vexp executable (/proc/self/exe) to find its recipes");
  const fs::path path = (fs::path(exe).parent_path() / VEXP_DATA_FROM_BIN / "recipes" / rel).lexically_normal();
  std::error_code ec;
  if (!fs::is_regular_file(path, ec))
    throw base::failure("the recipe vexp ships, '" + path.string() + "', is not there (an incomplete install?); "
                             "give the recipe's path");
  return path.string();
}

void add_plugin_path_option(CLI::App* app, std::vector<std::string>& dirs) {
  app->add_option("--plugin-path", dirs,
                  "Load the plugins in DIR; recipes may then name it in [plugins] paths (repeatable)")
      ->type_name("DIR")
      // One folder per occurrence: a vector option would otherwise also take the
      // recipe that follows (`check --plugin-path DIR RECIPE`), then say "recipe is required".
      ->allow_extra_args(false)
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->check(CLI::ExistingPath);
}

void RecipeArgs::add_to(CLI::App* app) {
  app->add_option("recipe", path, "Recipe file (.toml)")->required();
  app->add_option("--set", sets, "Override a recipe value: --set optim.lr=0.05 (repeatable)");
  add_plugin_path_option(app, plugin_paths);
}

std::vector<std::string> canonical_plugin_paths(const std::vector<std::string>& dirs) {
  std::vector<std::string> out;
  for (const auto& d : dirs) {
    std::string why;
    std::string c = canonical_path(d, &why);
    if (c.empty()) throw base::invalid("--plugin-path '" + d + "': " + why);
    out.push_back(c);
  }
  return out;
}

std::vector<std::string> RecipeArgs::plugin_path_argv() const {
  std::vector<std::string> argv;
  for (const auto& d : canonical_plugin_paths(plugin_paths)) argv.insert(argv.end(), {"--plugin-path", d});
  return argv;
}

void load_session_plugins(Session& s, const std::vector<std::string>& dirs) {
  s.plugin_dirs = canonical_plugin_paths(dirs);
  load_plugins(s);
  report_plugin_problems(s);
}

void report_plugin_problems(const Session& s) {
  for (const auto& p : s.plugin_problems) std::cerr << "vexp: warning: " << p << "\n";
}

std::vector<dsl::Override> parse_sets(const std::vector<std::string>& sets) {
  std::vector<dsl::Override> overrides;
  for (const auto& text : sets) {
    auto o = dsl::parse_override(text);
    if (!o) throw base::invalid("--set '" + text + "': expected KEY=VALUE, for example --set optim.lr=0.05");
    overrides.push_back(*o);
  }
  return overrides;
}

bool open_session(Session& s, const RecipeArgs& args) {
  OpenOptions o;
  o.require_data = args.require_data;
  return open_session(s, args, std::move(o));
}

bool open_session(Session& s, const RecipeArgs& args, OpenOptions o) {
  for (auto& ov : parse_sets(args.sets)) o.overrides.push_back(std::move(ov));
  o.plugin_dirs = canonical_plugin_paths(args.plugin_paths);
  const bool loaded_before = s.plugins_loaded;
  auto opened = base::attempt<dsl::RecipeError>([&] { return open_recipe(s, args.path, o); });
  if (!loaded_before) report_plugin_problems(s);  // before a recipe error too
  const bool ok = std::move(opened).value();
  const bool valid = print_recipe_diagnostics(s, args.path, ok);
  if (valid && !s.stand_in_note.empty()) std::cerr << "vexp: note: " << s.stand_in_note << "\n";
  return valid;
}

bool open_session_for_planning(Session& s, const RecipeArgs& args) { return open_session(s, args, planning_options()); }

bool print_recipe_diagnostics(const Session& s, const std::string& path, bool valid) {
  for (const auto& d : s.diags.sorted()) std::cerr << d.str() << "\n";
  if (!valid) {
    size_t n = s.diags.error_count();
    std::cerr << path << ": " << n << (n == 1 ? " error" : " errors") << "\n";
  }
  return valid;
}

std::vector<int64_t> parse_four_sizes(const std::string& text, const std::string& option, const std::string& layout,
                                      const std::string& example) {
  const std::string where = option + " '" + text + "': ";
  std::vector<int64_t> s;
  for (const std::string& part : base::split(text, 'x')) {
    if (part.empty() || part.find_first_not_of("0123456789") != std::string::npos || part.size() > 9)
      throw base::invalid(where + "expected " + layout + ", for example " + example);
    s.push_back(std::stoll(part));
  }
  if (s.size() != 4) throw base::invalid(where + "expected four sizes " + layout);
  for (int64_t v : s)
    if (v < 1) throw base::invalid(where + "sizes must be >= 1");
  return s;
}

}  // namespace vexp::cli
