#include "vexp/runtime/data_pipeline.hpp"

#include <stdexcept>
#include <utility>

#include "vexp/base/error.hpp"
#include "vexp/schema/schema.hpp"

namespace vexp {

namespace {

const char* kKind = "transform";

// The factory's own sentence: the host prefixes "transform 'x' (from lib.so): ".
std::string plugin_message(const std::string& what, const std::string& type) {
  const std::string prefix = std::string(kKind) + " '" + type + "' (from ";
  if (what.rfind(prefix, 0) == 0) {
    const size_t end = what.find("): ");
    if (end != std::string::npos) return what.substr(end + 3);
  }
  return what;
}

// Where a message about `use` belongs: at the parameter it starts with ("scale: ...")
// when the recipe gave that parameter, else at the use's table.
dsl::Loc where_of(const dsl::PluginUse& use, const std::string& message) {
  const size_t colon = message.find(": ");
  if (colon != std::string::npos && use.params.has(message.substr(0, colon))) {
    const dsl::Loc& l = use.params.get(message.substr(0, colon)).loc();
    if (l.known()) return l;
  }
  return use.loc;
}

std::string name_of(const std::string& where, size_t i, const dsl::PluginUse& use) {
  return where + "[" + std::to_string(i) + "] (" + use.type + ")";
}

std::string at(const dsl::Loc& loc) { return loc.known() ? loc.str() + ": " : std::string(); }

}  // namespace

ClipPipeline make_pipeline(const PluginHost& host, const std::vector<dsl::PluginUse>& uses, const std::string& where) {
  ClipPipeline out;
  for (size_t i = 0; i < uses.size(); ++i) {
    try {
      out.push_back(host.make<ClipTransform>(kKind, uses[i].type, uses[i].params));
    } catch (const std::exception& e) {
      const std::string m = plugin_message(e.what(), uses[i].type);
      throw base::invalid(at(where_of(uses[i], m)) + name_of(where, i, uses[i]) + ": " + m);
    }
  }
  return out;
}

void check_transform_lists(const PluginHost& host, const dsl::RecipePlan& plan, dsl::Diagnostics& diags) {
  const struct {
    const char* where;
    const std::vector<dsl::PluginUse>* uses;
    bool train;
  } lists[] = {{"data.train_transforms", &plan.train_transforms, true},
               {"data.test_transforms", &plan.test_transforms, false}};
  for (const auto& l : lists) {
    std::string first_pixels;  // the first pixel transform of the list, for the order message
    for (size_t i = 0; i < l.uses->size(); ++i) {
      const dsl::PluginUse& use = (*l.uses)[i];
      const std::string name = name_of(l.where, i, use);
      if (!host.find(kKind, use.type)) continue;  // the DSL said so
      std::shared_ptr<ClipTransform> t;
      try {
        t = host.make<ClipTransform>(kKind, use.type, use.params);
      } catch (const std::exception& e) {
        const std::string m = plugin_message(e.what(), use.type);
        diags.error(where_of(use, m), name + ": " + m);
        continue;
      }
      const unsigned stages = t->stages();
      if (stages == 0 || (stages & ~(ClipTransform::kGeometry | ClipTransform::kPixels)) != 0) {
        diags.error(use.loc, name + ": the plugin declares no valid stage (stages() = " + std::to_string(stages) +
                                 "; kGeometry, kPixels or both)");
        continue;
      }
      const int64_t views = t->views();
      if (views < 1) {
        diags.error(use.loc, name + ": the plugin makes " + std::to_string(views) + " views (at least 1)");
      } else if (l.train && views > 1) {
        diags.error(use.loc, name + ": makes " + std::to_string(views) +
                                 " test views of a clip; training takes one clip per sample (list it in "
                                 "data.test_transforms)");
      }
      if ((stages & ClipTransform::kGeometry) && !first_pixels.empty()) {
        diags.error(use.loc, name + " chooses the geometry, which is decided before decoding, but follows the pixel "
                                    "transform " + first_pixels + ": list the crops and flips first");
      }
      if ((stages & ClipTransform::kPixels) && first_pixels.empty()) first_pixels = name;
      if (plan.data_facts.clip.size() == 4) {
        try {
          t->check(plan.data_facts.clip);
        } catch (const std::exception& e) {
          diags.error(where_of(use, e.what()), name + ": " + e.what());
        }
      }
    }
  }
}

void attach_transforms(Dataset& data, const PluginHost& host, const dsl::RecipePlan& plan) {
  const struct {
    const char* where;
    const std::vector<dsl::PluginUse>* uses;
    Split split;
  } lists[] = {{"data.train_transforms", &plan.train_transforms, Split::Train},
               {"data.test_transforms", &plan.test_transforms, Split::Val}};
  for (const auto& l : lists) {
    if (l.uses->empty()) continue;
    const std::string at_list = at(l.uses->front().loc) + l.where;
    ClipPipeline pipeline = make_pipeline(host, *l.uses, l.where);
    bool taken = false;
    try {
      taken = data.set_transforms(l.split, std::move(pipeline));
    } catch (const std::exception& e) {
      throw base::invalid(at_list + ": dataset '" + plan.dataset + "': " + e.what());
    }
    if (!taken)
      throw base::invalid(at_list + ": dataset '" + plan.dataset +
                          "' takes no clip transforms (its pipeline is built in); remove the list, or use a dataset "
                          "that runs transform plugins (kinetics, synthetic_motion)");
  }
}

std::shared_ptr<Dataset> make_dataset(const PluginHost& host, const dsl::RecipePlan& plan) {
  return make_dataset(host, plan, plan.dataset_params);
}

std::shared_ptr<Dataset> make_dataset(const PluginHost& host, const dsl::RecipePlan& plan, const Params& params) {
  auto data = host.make<Dataset>("dataset", plan.dataset, params);
  attach_transforms(*data, host, plan);
  return data;
}

ClipPipeline make_default_pipeline(const PluginHost& host, const Dataset& data, Split split) {
  ClipPipeline out;
  for (const TransformSpec& spec : data.default_transforms(split)) {
    const PluginDecl* decl = host.find(kKind, spec.type);
    if (!decl)
      throw base::failure("the dataset's built-in pipeline uses the transform '" + spec.type +
                          "', which is not loaded (transforms.so is in vexp's plugin folder)");
    out.push_back(host.make<ClipTransform>(kKind, spec.type, schema::make_params(decl->schema, spec.params)));
  }
  return out;
}

}  // namespace vexp
