// Validation of a loaded recipe against built-in section schemas and plugin
// schemas. Runs before anything heavy is built and collects every problem.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "vexp/schema/catalog.hpp"
#include "vexp/dsl/config.hpp"
#include "vexp/dsl/diagnostics.hpp"
#include "vexp/dsl/recipe.hpp"

namespace vexp::dsl {

struct NodeSpec {
  std::string id;
  std::string op;
  std::string kind;                 // kind of the plugin that provides `op`
  std::vector<std::string> inputs;
  Params params;                    // defaults filled
  Loc loc;                          // where the node table was written
  Shape output_shape;               // from shape inference (may be empty)
  std::string pretrained;           // `pretrained = "x.pth"`: absolute path, "" when not given
  std::string pretrained_inflate = "mean";  // `pretrained_inflate`: mean or center
  // Where the recipe wrote `pretrained = ""` (typically an unset `${VAR:-}`): the node
  // has a weights slot left empty, so it trains from scratch; unknown otherwise.
  Loc pretrained_empty;
};

struct InsertSpec {
  std::string node;                 // node id of the backbone
  std::string point;                // "layer1/block0/residual_in"
  std::string op;
  std::string kind;
  Params params;
  Loc loc;                          // where the rewrite rule was written
  Shape point_shape;                // shape at the insertion point (may be empty)
};

struct RewriteSpec {
  std::string pattern;              // "features/layer*/block*/residual_in"
  std::string op;
  Params params;
  Loc loc;
};

// One use of a training-part plugin (kinds optimizer, loss, transform,
// batch_transform, hook): a table `{ type = "NAME", <the plugin's parameters> }`.
struct PluginUse {
  std::string type;  // the plugin's name
  Params params;     // its parameters, defaults filled
  Loc loc;           // the table (errors about this use point here)
};

struct RecipePlan {
  // Built-in sections, typed, defaults filled (config.hpp).
  RunConfig run;
  DataConfig data;
  DistConfig dist;
  OptimConfig optim;
  ScheduleConfig schedule;
  std::string dataset;              // data.dataset
  Params dataset_params;            // data.params
  std::string comm;                 // dist.backend
  Params comm_params;               // dist.params
  // The training parts (plugin ABI 5). An empty type / list: vexp's default (the
  // cross-entropy loss; the dataset's own pipelines; no batch transform, no hook).
  PluginUse loss;                           // [loss]
  std::vector<PluginUse> train_transforms;  // [[data.train_transforms]], in order
  std::vector<PluginUse> test_transforms;   // [[data.test_transforms]], in order
  std::vector<PluginUse> batch_transforms;  // [[data.batch_transforms]], in order
  std::vector<PluginUse> hooks;             // [[hooks]], in order
  std::vector<std::string> plugin_paths;  // [plugins] paths, absolute
  std::string model_input, model_output;
  std::vector<NodeSpec> nodes;      // topological order
  std::vector<RewriteSpec> rewrites;
  std::vector<InsertSpec> inserts;  // rewrites expanded, in rule order
  DatasetFacts data_facts;
  // What the plugins' shape hooks and builds are told: dist.batch_per_gpu, the
  // clip's frames and the dataset's classes (-1 where unknown).
  GraphContext context;
  // The model input [dist.batch_per_gpu, T, C, H, W]; empty when the dataset
  // gives no clip shape.
  Shape input_shape;
  Value resolved;                   // full tree with defaults filled and overrides applied
};

// The built-in sections and their schemas: run, data, dist, optim, schedule,
// plugins, model (node/rewrite tables are checked separately).
const std::vector<std::pair<std::string, Schema>>& builtin_sections();

// Reads `[plugins] paths` (resolved relative to the file that wrote them) before
// validation, so the host can load those plugins first.
std::vector<std::string> plugin_paths(const Recipe& recipe);

// Why `name` cannot be the name of one folder (a run name, a sweep name): "" when
// it can, else the reason ("contains '/'", ...). "" (empty) is fine: the default.
std::string folder_name_problem(const std::string& name);

// Glob with '*', '?' and [abc] / [a-z] classes; '*' does not cross '/'.
bool glob_match(const std::string& pattern, const std::string& text);

struct ValidateOptions {
  // Missing data (a dataset's check_data hook) is an error when true (vexp run),
  // a warning when false (vexp check, graph, info, --dry-run: planning on a laptop).
  bool require_data = true;
};

std::optional<RecipePlan> validate(const Recipe& recipe, const PluginCatalog& catalog,
                                   Diagnostics& diags, const ValidateOptions& options = {});

}  // namespace vexp::dsl
