#include "vexp/runtime/session.hpp"

#include "vexp/runtime/data_pipeline.hpp"

#include <initializer_list>
#include <stdexcept>

#include "vexp/hook.hpp"
#include "vexp/optimizer.hpp"
#include "vexp/transform.hpp"
#include "vexp/runtime/objective.hpp"
#include "vexp/runtime/plugin_trust.hpp"

namespace vexp {

namespace {

// The optimizer, batch transforms and hooks made once from the recipe's parameters,
// as vexp run makes them: what a factory refuses beyond its schema (adamw's betas of
// one number, a hook's combination of keys) is a recipe error at its table's line in
// vexp check, --dry-run and vexp run, before a run folder exists. (The loss and the
// clip transforms: check_objective and check_transform_lists.)
// Makes the use's object once; what its factory throws is an error at the use.
template <class Interface>
void check_made(const PluginHost& host, const char* kind, const dsl::PluginUse& u, const std::string& label,
                dsl::Diagnostics& diags) {
  if (!host.find(kind, u.type)) return;  // validation reported it
  try {
    (void)host.make<Interface>(kind, u.type, u.params);
  } catch (const std::exception& e) {
    diags.error(u.loc, label + ": " + e.what());
  }
}

void check_factories(const dsl::RecipePlan& plan, const PluginHost& host, dsl::Diagnostics& diags) {
  if (!plan.optim.type.empty() && host.find("optimizer", plan.optim.type)) {
    try {
      (void)host.make<Optimizer>("optimizer", plan.optim.type, plan.optim.params);
    } catch (const std::exception& e) {
      diags.error(plan.optim.section, e.what());
    }
  }
  for (size_t i = 0; i < plan.batch_transforms.size(); ++i)
    check_made<BatchTransform>(host, "batch_transform", plan.batch_transforms[i],
                               "data.batch_transforms[" + std::to_string(i) + "]", diags);
  for (size_t i = 0; i < plan.hooks.size(); ++i)
    check_made<Hook>(host, "hook", plan.hooks[i], "hooks[" + std::to_string(i) + "]", diags);
}

dsl::ParamType type_of(const dsl::Value& v) {
  using K = dsl::Value::Kind;
  switch (v.kind()) {
    case K::Bool: return dsl::ParamType::Bool;
    case K::Int: return dsl::ParamType::Int;
    case K::Float: return dsl::ParamType::Float;
    case K::Table: return dsl::ParamType::Table;
    case K::Array: {
      const auto& a = v.as_array();
      if (!a.empty() && a[0].is_int()) return dsl::ParamType::IntList;
      if (!a.empty() && a[0].is_float()) return dsl::ParamType::FloatList;
      return dsl::ParamType::StringList;
    }
    default: return dsl::ParamType::String;
  }
}

int64_t first_int(const dsl::Params& p, std::initializer_list<const char*> names, int64_t fallback) {
  for (const char* n : names)
    if (p.has(n) && p.get(n).is_int()) return p.i64(n);
  return fallback;
}

// The one stand-in mechanism: the host's catalog, with the recipe's dataset
// replaced when it is not installed (OpenOptions::stand_in) and its facts replaced
// by the given ones (OpenOptions::clip / classes).
class StandInCatalog : public dsl::PluginCatalog {
 public:
  StandInCatalog(const dsl::PluginCatalog& base, const dsl::Value* data, const OpenOptions& o) : base_(base) {
    const dsl::Value* dataset = data && data->is_table() ? data->find("dataset") : nullptr;
    if (!dataset || !dataset->is_string()) return;
    name_ = dataset->as_string();
    const dsl::PluginDecl* real = base.find("dataset", name_);
    if (real) {
      decl_ = *real;
    } else if (o.stand_in) {
      stand_in_ = true;
      decl_.kind = "dataset";
      decl_.name = name_;
      decl_.doc = "stand-in for the dataset plugin '" + name_ + "', which is not installed";
      const dsl::Value* params = data->find("params");
      if (params && params->is_table()) {
        for (const auto& [key, v] : params->as_table()) {
          dsl::ParamSpec spec;
          spec.name = key;
          spec.type = type_of(v);
          spec.default_value = v;
          spec.doc = "as written in the recipe";
          decl_.schema.add(std::move(spec));
        }
      }
      decl_.dataset_facts = [](const dsl::Params& p) {
        dsl::DatasetFacts f;
        const int64_t size = first_int(p, {"size", "crop_size", "crop"}, 224);
        f.clip = {first_int(p, {"frames", "num_segments", "segments"}, 8), first_int(p, {"channels"}, 3), size, size};
        f.classes = first_int(p, {"classes", "num_classes"}, 400);
        return f;
      };
    } else {
      return;  // an unknown dataset: the validator's to report
    }
    const bool given = o.clip || o.classes > 0;
    given_ = given;
    if (given) {
      auto inner = decl_.dataset_facts;
      const std::optional<dsl::Shape> clip = o.clip;
      const int64_t classes = o.classes;
      decl_.dataset_facts = [inner, clip, classes](const dsl::Params& p) {
        dsl::DatasetFacts f;
        if (inner) {
          try {
            f = inner(p);
          } catch (const std::exception&) {
            if (!clip || classes <= 0) throw;  // what was not given is still the plugin's to say
          }
        }
        if (clip) f.clip = *clip;
        if (classes > 0) f.classes = classes;
        return f;
      };
    }
    replaced_ = stand_in_ || given;
  }
  bool stand_in() const { return stand_in_; }
  bool facts_given() const { return given_; }
  const std::string& dataset() const { return name_; }
  const dsl::PluginDecl* find(const std::string& kind, const std::string& name) const override {
    if (replaced_ && kind == "dataset" && name == name_) return &decl_;
    return base_.find(kind, name);
  }
  std::vector<std::string> names(const std::string& kind) const override {
    std::vector<std::string> n = base_.names(kind);
    if (stand_in_ && kind == "dataset") n.push_back(name_);
    return n;
  }

 private:
  const dsl::PluginCatalog& base_;
  std::string name_;
  dsl::PluginDecl decl_;
  bool stand_in_ = false, replaced_ = false, given_ = false;
};

}  // namespace

void load_plugins(Session& s) {
  s.host.load_default_paths(s.plugin_problems);
  for (const auto& dir : s.plugin_dirs) s.host.load_directory(dir, s.plugin_problems);
  s.plugins_loaded = true;
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

bool open_recipe(Session& s, const std::string& path, const OpenOptions& o) {
  if (o.load_plugins && !s.plugins_loaded) {
    if (!o.plugin_dirs.empty()) s.plugin_dirs = o.plugin_dirs;
    load_plugins(s);
  }
  s.plan.reset();
  s.stand_in_note.clear();
  if (!load_recipe_and_plugins(s, path, o.overrides)) return false;
  const dsl::Value* data = s.recipe->root.is_table() ? s.recipe->root.find("data") : nullptr;
  const StandInCatalog catalog(s.host, data, o);
  if (catalog.stand_in())
    s.stand_in_note = "dataset plugin '" + catalog.dataset() + "' is not installed: " +
                      (catalog.facts_given()
                           ? std::string("using the given input shape and classes; its parameters are not checked")
                           : std::string("planning from the recipe's declared numbers (data.train_size, data.params "
                                         "frames/size)"));
  dsl::ValidateOptions vo;
  vo.require_data = o.require_data;
  s.plan = dsl::validate(*s.recipe, catalog, s.diags, vo);
  // What only the plugins' objects know: a loss that cannot take the soft targets
  // of the recipe's batch transforms (objective.hpp).
  if (s.plan && !s.diags.has_errors()) check_objective(*s.plan, s.host, s.diags);
  if (s.plan && !s.diags.has_errors()) check_factories(*s.plan, s.host, s.diags);
  // The transform lists' checks that need the plugins' objects (data_pipeline.hpp).
  if (s.plan && !s.diags.has_errors()) check_transform_lists(s.host, *s.plan, s.diags);
  return s.plan.has_value() && !s.diags.has_errors();
}

OpenOptions planning_options(std::vector<dsl::Override> overrides, std::vector<std::string> plugin_dirs) {
  OpenOptions o;
  o.overrides = std::move(overrides);
  o.plugin_dirs = std::move(plugin_dirs);
  o.require_data = false;  // planning needs the numbers, not the files
  o.stand_in = true;
  return o;
}

}  // namespace vexp
