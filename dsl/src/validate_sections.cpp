// The built-in sections ([run], [data], ...) against their schemas, run.name,
// the plugin sections ([data] dataset + params, [dist] backend + params) and
// [plugins] paths.
#include "validator.hpp"

#include <algorithm>
#include <sstream>

#include "vexp/base/text.hpp"

namespace vexp::dsl {

namespace detail {

void Validator::check_top_level(const Value& root) {
  std::vector<std::string> names;
  for (const auto& s : builtin_sections()) names.push_back(s.first);
  names.push_back("hooks");  // [[hooks]]: a list, checked by check_parts
  for (const auto& [key, value] : root.as_table()) {
    if (std::find(names.begin(), names.end(), key) != names.end()) continue;
    diags_.error(value.loc(), with_hint("unknown section '" + key + "'", key, names));
  }
}

void Validator::check_section(const Value& root, const std::string& name, const Schema& schema) {
  const Value* sec = root.find(name);
  Loc owner = sec && sec->loc().known() ? sec->loc() : file_loc_;
  if (sec && !sec->is_table()) {
    diags_.error(sec->loc(), "[" + name + "] must be a table, got " + got(*sec));
    sec = nullptr;
  }
  std::set<std::string> skip;
  if (name == "model") skip = {"node", "rewrite"};
  if (name == "data") skip = {"train_transforms", "test_transforms", "batch_transforms"};
  if (name == "loss" && sec && sec->is_table()) {  // the loss plugin's own keys: check_parts
    for (const auto& kv : sec->as_table())
      if (kv.first != "type") skip.insert(kv.first);
  }
  if (name == "optim" && sec && sec->is_table()) {  // the optimizer's own keys and groups: check_optim
    const std::vector<std::string> host = schema.names();
    for (const auto& kv : sec->as_table())
      if (std::find(host.begin(), host.end(), kv.first) == host.end()) skip.insert(kv.first);
  }
  Checked c = check_table(schema, sec, owner, "[" + name + "]", skip);
  section_given_[name] = sec;
  section_loc_[name] = owner;
  sections_[name] = std::move(c);
}

// run.name names the folder runs/<name>: one path component, so that no name
// can place a run outside runs/ (--out or run.out choose another folder).
void Validator::check_run_name() {
  const Value* v = given("run", "name");
  if (!v || !v->is_string()) return;  // absent, or the type is already reported
  const std::string problem = folder_name_problem(v->as_string());
  if (!problem.empty()) {
    // A long value is quoted once, cut: a --set location already shows it.
    const bool shown_by_loc = v->loc().file.rfind("--set ", 0) == 0 && v->as_string().size() > 64;
    const std::string value = shown_by_loc ? std::string() : base::printable(v->to_toml_inline(), 64) + " ";
    diags_.error(v->loc(), "run.name " + value + problem +
                               "; a run name is one folder name under runs/ (use --out or run.out to choose another "
                               "folder)");
    sections_["run"].ok = false;
  }
}

// Warmup and step milestones are counted in epochs from the run's start: after
// run.epochs is shortened (often with --set) they may fall at or past the last
// step, where they change nothing, silently.
void Validator::check_schedule_span() {
  if (!sections_["run"].ok || !sections_["schedule"].ok) return;
  const int64_t epochs = plan_.run.epochs;
  const ScheduleConfig& s = plan_.schedule;
  const std::string run_end = "the run's end (run.epochs = " + std::to_string(epochs) + ")";
  if (s.warmup_epochs > 0 && s.warmup_epochs >= static_cast<double>(epochs)) {
    std::ostringstream w;
    w << s.warmup_epochs;
    diags_.warning(loc_or_section("schedule", "warmup_epochs"),
                   "schedule.warmup_epochs = " + w.str() + " reaches " + run_end +
                       ": the whole run warms up and the learning rate never reaches optim.lr");
  }
  if (s.type != "step") return;
  const Value* written = given("schedule", "milestones");
  for (size_t i = 0; i < s.milestones.size(); ++i) {
    if (s.milestones[i] < epochs) continue;
    const Loc at = written && written->is_array() && i < written->as_array().size() &&
                           written->as_array()[i].loc().known()
                       ? written->as_array()[i].loc()
                       : loc_or_section("schedule", "milestones");
    diags_.warning(at, "schedule.milestones: epoch " + std::to_string(s.milestones[i]) + " is at or after " + run_end +
                           ": the learning rate is never lowered there");
  }
}

const Value* Validator::given(const std::string& section, const std::string& key) const {
  const Value* sec = section_given_.at(section);
  return sec ? sec->find(key) : nullptr;
}

Loc Validator::loc_or_section(const std::string& section, const std::string& key) const {
  const Value* v = given(section, key);
  return v && v->loc().known() ? v->loc() : section_loc_.at(section);
}

// The plugin named by `section.key` and its `section.params`.
void Validator::check_plugin_section(const std::string& section, const std::string& key, const std::string& kind,
                                     std::string& name_out, Params& params_out, const PluginDecl*& decl_out,
                                     bool& params_ok) {
  const Params& p = sections_[section].params;
  params_ok = false;
  if (!p.has(key) || !p.get(key).is_string()) return;
  name_out = p.str(key);
  const Value* params = given(section, "params");
  decl_out = find_plugin({kind}, kind + " plugin", name_out, loc_or_section(section, key), nullptr);
  if (!decl_out) return;
  if (params && !params->is_table()) return;  // reported by the section schema
  const Loc owner = params && params->loc().known() ? params->loc() : section_loc_.at(section);
  Checked c = check_table(decl_out->schema, params, owner,
                          "[" + section + ".params] of " + kind + " '" + name_out + "'", {});
  params_out = c.params;
  params_ok = c.ok;
  plugin_params_resolved_[section] = std::move(c.resolved);
}

void Validator::check_data() {
  check_plugin_section("data", "dataset", "dataset", plan_.dataset, plan_.dataset_params, dataset_decl_,
                       dataset_params_ok_);
}

void Validator::check_dist() {
  const PluginDecl* decl = nullptr;
  bool ok = false;
  check_plugin_section("dist", "backend", "comm", plan_.comm, plan_.comm_params, decl, ok);
  // The exact reduction sums the gradients as 64-bit integers: nothing to compress.
  const Value* comp = given("dist", "compression");
  const Value* red = given("dist", "reduction");
  const bool exact = red && red->is_string() && red->as_string() == "exact";
  if (exact && comp && comp->is_string() && comp->as_string() != "none")
    diags_.error(comp->loc(), "dist.compression = \"" + comp->as_string() +
                                  "\" compresses what the fast reduction sends, and dist.reduction is \"exact\"" +
                                  ", which sums the gradients exactly as 64-bit integers: set dist.reduction = "
                                  "\"fast\" to compress them, or drop dist.compression");
  // The gradient noise scale compares each GPU's gradient (a small batch) with their
  // mean (the global batch): one GPU has nothing to compare (docs/batch-size.md).
  if (sections_["run"].ok && sections_["dist"].ok && plan_.run.noise_scale_every > 0 && plan_.dist.world_size < 2)
    diags_.error(loc_or_section("run", "noise_scale_every"),
                 "run.noise_scale_every = " + std::to_string(plan_.run.noise_scale_every) +
                     " measures the gradient noise scale from the GPUs' gradients against their mean, and "
                     "dist.world_size is 1: it needs at least two GPUs or emulated GPUs per step (dist.world_size "
                     ">= 2; a rank emulates the GPUs beyond its own), or set run.noise_scale_every = 0");
}

void Validator::check_plugins() {
  const Value* paths = given("plugins", "paths");
  if (!paths || !paths->is_array()) return;
  for (const auto& p : paths->as_array()) {
    if (!p.is_string()) continue;
    plan_.plugin_paths.push_back(absolute_from(p.loc(), recipe_.path, p.as_string()));
  }
}

}  // namespace detail

std::vector<std::string> plugin_paths(const Recipe& recipe) {
  std::vector<std::string> out;
  const Value* plugins = recipe.root.find("plugins");
  const Value* paths = plugins ? plugins->find("paths") : nullptr;
  if (!paths || !paths->is_array()) return out;
  for (const auto& p : paths->as_array()) {
    if (p.is_string()) out.push_back(detail::absolute_from(p.loc(), recipe.path, p.as_string()));
  }
  return out;
}

// Why `name` cannot be a run name ("" when it can). Empty means "the recipe
// file's stem" (the default, which a resolved recipe writes out as "").
std::string folder_name_problem(const std::string& name) {
  if (name.empty()) return "";
  if (name == "." || name == "..") return "is not a folder name";
  if (name.find('/') != std::string::npos) return "contains '/'";
  if (name.size() > 255) return "is longer than 255 bytes";
  for (unsigned char c : name) {
    if (c < 0x20 || c == 0x7f) return "contains a control character";
  }
  return "";
}

}  // namespace vexp::dsl
