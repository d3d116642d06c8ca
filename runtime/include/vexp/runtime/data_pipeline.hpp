// The recipe's clip transform pipelines ([[data.train_transforms]],
// [[data.test_transforms]]; plugin kind "transform", vexp/transform.hpp): made from
// the loaded plugins, checked when a recipe is opened, handed to the dataset. Every
// place that makes the recipe's dataset for clips (the trainer, vexp bench, predict,
// eval) makes it through make_dataset, so the pipelines are the same everywhere.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "vexp/dataset.hpp"
#include "vexp/dsl/validate.hpp"
#include "vexp/runtime/plugin_host.hpp"
#include "vexp/transform.hpp"

namespace vexp {

// The transforms of one list, in order. `where` names the list in messages
// ("data.train_transforms"). Throws base::invalid "FILE:LINE:COL: where[i] (type): why"
// for a transform that cannot be made.
ClipPipeline make_pipeline(const PluginHost& host, const std::vector<dsl::PluginUse>& uses, const std::string& where);

// What open_recipe checks of a valid plan's lists, with the plugins at hand (the DSL
// checked each use's parameters against its schema already): each transform made
// (its own checks of its parameters), its stages, that no geometric transform
// follows a pixel transform, that a training list makes one view, and each
// transform's check() of the dataset's clip shape. Errors at the use's table (or at
// the parameter the message starts with).
void check_transform_lists(const PluginHost& host, const dsl::RecipePlan& plan, dsl::Diagnostics& diags);

// Hands the plan's lists (those given) to `data`; throws base::invalid at the list when
// the dataset takes no transforms or its parameters contradict a list.
void attach_transforms(Dataset& data, const PluginHost& host, const dsl::RecipePlan& plan);

// The recipe's dataset with its pipelines: data.dataset made with `params` (the
// plan's data.params unless given), then attach_transforms.
std::shared_ptr<Dataset> make_dataset(const PluginHost& host, const dsl::RecipePlan& plan);
std::shared_ptr<Dataset> make_dataset(const PluginHost& host, const dsl::RecipePlan& plan, const Params& params);

// The dataset's own pipeline of `split` made from transform plugins
// (Dataset::default_transforms): empty when the dataset describes none. Throws
// base::failure when a transform it names is not loaded.
ClipPipeline make_default_pipeline(const PluginHost& host, const Dataset& data, Split split);

}  // namespace vexp
