// Validation of a loaded recipe: section schemas, plugin schemas, the model graph,
// rewrites and early shape checks. Every problem is collected, each at the place
// where the offending value was written. This file: the entry point, the order of
// the jobs (each in its own file, see validator.hpp), the generic table check and
// the plugin lookup.
#include "validator.hpp"
#include "vexp/dsl/table_check.hpp"

#include <algorithm>
#include <filesystem>
#include <system_error>

namespace vexp::dsl {

namespace detail {

namespace fs = std::filesystem;

std::string join(const std::vector<std::string>& items, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += sep;
    out += items[i];
  }
  return out;
}

std::string got(const Value& v) {
  if (v.is_table()) return "a table";
  if (v.is_array()) return "an array";
  return std::string(v.kind_name()) + " " + v.to_toml_inline();
}

std::string with_hint(std::string msg, const std::string& word, const std::vector<std::string>& candidates) {
  const std::string hint = did_you_mean(word, candidates);
  if (!hint.empty()) msg += " (did you mean '" + hint + "'?)";
  return msg;
}

std::string absolute_from(const Loc& loc, const std::string& fallback_file, const std::string& path) {
  fs::path p(path);
  if (p.is_relative()) {
    const bool from_file = loc.known() && loc.file.rfind("--set", 0) != 0;
    // Paths given with --set are relative to where the command runs.
    if (from_file) {
      p = fs::path(loc.file).parent_path() / p;
    } else if (!loc.known()) {
      p = fs::path(fallback_file).parent_path() / p;
    }
  }
  std::error_code ec;
  fs::path abs = fs::absolute(p, ec);
  if (ec) abs = p;
  return abs.lexically_normal().string();
}

std::optional<RecipePlan> Validator::run() {
  const Value& root = recipe_.root;
  if (!root.is_table()) {
    diags_.error(file_loc_, "a recipe must be a table of sections");
    return std::nullopt;
  }
  check_top_level(root);
  for (const auto& [name, schema] : builtin_sections()) check_section(root, name, schema);
  check_run_name();
  read_config();
  check_schedule_span();
  check_data();
  check_dist();
  check_plugins();
  check_parts(root);
  check_optim();
  check_nodes();
  check_edges();
  check_rewrites();
  check_shapes();
  build_resolved();
  if (diags_.has_errors()) return std::nullopt;
  return std::move(plan_);
}

Checked Validator::check_table(const Schema& schema, const Value* given, const Loc& owner, const std::string& where,
                               const std::set<std::string>& skip) {
  return dsl::check_table(schema, given, owner, where, skip, diags_);
}

// Finds `name` among plugins of `kinds`; reports an unknown one with the known names.
const PluginDecl* Validator::find_plugin(const std::vector<std::string>& kinds, const std::string& label,
                                         const std::string& name, const Loc& loc, std::string* kind_out) {
  for (const auto& kind : kinds) {
    if (const PluginDecl* d = catalog_.find(kind, name)) {
      if (kind_out) *kind_out = kind;
      return d;
    }
  }
  std::vector<std::string> known;
  for (const auto& kind : kinds) {
    for (auto& n : catalog_.names(kind)) known.push_back(std::move(n));
  }
  std::sort(known.begin(), known.end());
  known.erase(std::unique(known.begin(), known.end()), known.end());
  std::string msg = with_hint("unknown " + label + " '" + name + "'", name, known);
  msg += known.empty() ? "; none is loaded" : "; known: " + join(known, ", ");
  diags_.error(loc, msg);
  return nullptr;
}

}  // namespace detail

std::optional<RecipePlan> validate(const Recipe& recipe, const PluginCatalog& catalog, Diagnostics& diags,
                                   const ValidateOptions& options) {
  return detail::Validator(recipe, catalog, diags, options).run();
}

}  // namespace vexp::dsl
