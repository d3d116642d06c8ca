#include "vexp/runtime/dry_run.hpp"

#include "vexp/runtime/launcher.hpp"

#include <cstdlib>
#include <memory>
#include <stdexcept>

#include <ATen/ATen.h>

#include "vexp/runtime/buckets.hpp"
#include "vexp/runtime/graph.hpp"
#include "vexp/dataset.hpp"
#include "vexp/registrar.hpp"

namespace vexp {

namespace {

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

}  // namespace

bool open_recipe_for_planning(Session& s, const std::string& path, const std::vector<dsl::Override>& overrides,
                              std::string& note) {
  if (!load_recipe_and_plugins(s, path, overrides)) return false;
  const dsl::Value* data = s.recipe->root.is_table() ? s.recipe->root.find("data") : nullptr;
  const dsl::Value* dataset = data && data->is_table() ? data->find("dataset") : nullptr;
  if (dataset && dataset->is_string() && !s.host.find("dataset", dataset->as_string())) {
    const std::string name = dataset->as_string();
    PluginDecl d;
    d.name = name;
    d.doc = "planning stand-in for the dataset plugin '" + name + "', which is not installed";
    const dsl::Value* params = data->find("params");
    if (params && params->is_table()) {
      for (const auto& [key, v] : params->as_table()) {
        dsl::ParamSpec spec;
        spec.name = key;
        spec.type = type_of(v);
        spec.default_value = v;
        spec.doc = "as written in the recipe";
        d.schema.add(std::move(spec));
      }
    }
    d.dataset_facts = [](const dsl::Params& p) {
      dsl::DatasetFacts f;
      const int64_t size = first_int(p, {"size", "crop_size", "crop"}, 224);
      f.clip = {first_int(p, {"frames", "num_segments", "segments"}, 8), 3, size, size};
      f.classes = first_int(p, {"classes", "num_classes"}, 400);
      return f;
    };
    s.host.builtin_registrar("<planning stand-in>")
        .add_dataset(std::move(d), [name](const Params&) -> std::shared_ptr<Dataset> {
          throw std::runtime_error("dataset plugin '" + name + "' is not installed (only planned with --dry-run)");
        });
    note = "dataset plugin '" + name +
           "' is not installed: planning from the recipe's declared numbers (data.train_size, data.params frames/size)";
  }
  dsl::ValidateOptions vo;
  vo.require_data = false;  // planning needs the numbers, not the files
  s.plan = dsl::validate(*s.recipe, s.host, s.diags, vo);
  return s.plan.has_value() && !s.diags.has_errors();
}

int64_t planned_train_size(Session& s, std::string* size_note) {
  const dsl::RecipePlan& plan = *s.plan;
  int64_t train_size = plan.data.train_size;
  if (train_size <= 0) {
    auto data = s.host.make<Dataset>("dataset", plan.dataset, plan.dataset_params);
    train_size = data->size(Split::Train);
  } else if (size_note) {
    // The run counts the clips its list holds, not the declared number: a dry
    // run that can read the list plans what the run will do.
    const std::string declared = "data.train_size = " + std::to_string(train_size);
    try {
      auto data = s.host.make<Dataset>("dataset", plan.dataset, plan.dataset_params);
      const int64_t real = data->size(Split::Train);
      if (real > 0 && real != train_size) {
        *size_note = "planning with the " + std::to_string(real) + " training clips the data holds, not the declared " +
                     declared;
        train_size = real;
      }
    } catch (const std::exception& e) {
      std::string why = e.what();
      *size_note = "planning with the declared " + declared + " (the data cannot be read: " +
                   why.substr(0, why.find('\n')) + ")";
    }
  }
  return train_size;
}

DistPlan plan_run(Session& s, int64_t ranks, GradientProfile* profile, std::string* size_note) {
  const dsl::RecipePlan& plan = *s.plan;
  const int64_t train_size = planned_train_size(s, size_note);
  std::vector<int64_t> numels;
  {
    ModelGraph model(plan, s.host);
    for (const auto& p : model.named_parameters(true))
      if (p.value().requires_grad()) numels.push_back(p.value().numel());
    if (profile) {
      if (plan.data_facts.clip.size() != 4)
        throw std::runtime_error("the dataset gives no clip shape [T, C, H, W] to count the model's MACs with");
      *profile = gradient_profile(model, plan.data_facts.clip);
    }
  }
  int64_t params = 0;
  for (int64_t n : numels) params += n;
  DistPlan p = make_dist_plan(plan, ranks, train_size, params);
  // The reducer's own layout (make_dist_plan only knows the total).
  p.buckets = static_cast<int64_t>(
      bucket_layout(numels, wire_bytes_per_element(p.compression), plan.dist.bucket_mb).size());
  return p;
}

int64_t launched_ranks_from_env() {
  const Launcher l = detect_launcher();
  return l.tasks > 0 ? l.tasks : 1;
}

}  // namespace vexp
