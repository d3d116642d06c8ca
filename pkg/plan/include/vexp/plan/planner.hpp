// `vexp plan`: a recipe planned at each GPU count through the dry-run planner
// (the recipe opened for planning with dist.world_size overridden like --set, then
// plan_run / make_dist_plan of the runtime), its model's gradient profile and the
// reducer's bucket layout fed to the performance model (model.hpp), plus the advice.
// No CLI in here: the caller opens the recipe (RecipeOpener), problems are PlanError.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "vexp/dsl/recipe.hpp"
#include "vexp/dsl/validate.hpp"
#include "vexp/plan/goodput.hpp"
#include "vexp/plan/model.hpp"

namespace vexp {
struct Session;  // vexp/runtime/session.hpp
}

namespace vexp::plan {

struct PlanOptions {
  std::vector<int64_t> gpus;          // empty: the recipe's dist.world_size
  DataOptions data;
  double bucket_mb = 0;               // > 0: --bucket-mb (dist.bucket_mb overridden)
  bool fixed_batch = false;           // keep dist.world_size; emulate it on G GPUs
  std::vector<dsl::Override> overrides;       // --set
  // > 0: the gradient noise scale (clips) that weighs each row by its statistical
  // efficiency (goodput.hpp); noise_from says where it was read.
  double noise_scale = 0;
  std::string noise_from;
};

// Opens `recipe` with `overrides` into the fresh session `s`, validated for
// planning as `vexp run --dry-run` does (a missing dataset plugin stood in for),
// or throws. `quiet`: a re-plan at another GPU count, whose warnings were already
// shown with the first opening. What it throws leaves plan_recipe unchanged, so
// the caller decides how an invalid recipe is reported (the CLI: its
// diagnostics, then exit 2).
using RecipeOpener = std::function<void(Session& s, const std::string& recipe,
                                        const std::vector<dsl::Override>& overrides, bool quiet)>;

struct Advice {
  double knee_efficiency = 0.8;       // the rule: the largest G with efficiency >= this
  int64_t knee_gpus = 0;              // 0: no G reaches it
  int64_t at_gpus = 0;                // the largest G (where the rest is evaluated)
  double bucket_mb = 0;               // the bucket size with the least exposed comm at at_gpus
  double bucket_exposed_ms = 0;
  double current_bucket_exposed_ms = 0;
  std::vector<std::pair<double, double>> bucket_scan;  // (bucket_mb, exposed comm ms) at at_gpus
  // Decode threads per GPU that keep the GPUs fed at at_gpus (per layout with a
  // rate); 0 when storage, not decoding, is the limit.
  struct Layout {
    std::string layout;
    double threads_needed = 0;
    bool storage_bound = false;
    double exposed_data_ms = 0;       // with the planned threads per GPU
    bool fed = false;                 // exposed_data_ms == 0
  };
  std::vector<Layout> layouts;
  int64_t workers = 0;                // suggested data.workers (threads needed on the planned layout, >= 1)
};

struct RecipeResult {
  std::string recipe;
  std::string model;                  // model key
  Compute compute;                    // per micro-step at batch_per_gpu, on 1 GPU (each row: its own profile)
  int64_t compute_threads = 0;        // compute threads per rank (run.threads; 0 there: the node's cores)
  int64_t grad_bytes = 0, grad_params = 0;
  int64_t buckets = 0;
  double bucket_mb = 0;
  std::string compression;
  bool attributed = true;             // MACs tied to parameters (else spread by size)
  int64_t world = 0, per_gpu = 0, accum = 0;
  int64_t workers = 0;                // the recipe's data.workers
  std::string layout;
  double threads_per_gpu = 0;
  bool fixed_batch = false;
  std::vector<Row> rows;
  Advice advice;
  // With PlanOptions::noise_scale: time to the recipe's progress at each row, the
  // reference being the recipe's global batch (as written) and its run.epochs.
  std::optional<TargetPlan> target;
};

// Plans `recipe` on `cluster`, each opening through `open`. Throws PlanError
// ("RECIPE: ...", "RECIPE at G GPU(s): ...") when the geometry is impossible or
// the cluster has no profile for the model; what `open` throws passes through.
RecipeResult plan_recipe(const std::string& recipe, const Cluster& cluster, const PlanOptions& options,
                         const RecipeOpener& open);

// The model key of a recipe (what [[gpu.profile]] model matches): the backbone
// node's op and depth ("resnet50", "resnet3d50"), with its inflate_style when it
// has one ("resnet3d50_3x3x3"), prefixed by "tsm_" when temporal_shift is
// inserted (other inserted ops: their op name).
std::string model_key(const dsl::RecipePlan& plan);

}  // namespace vexp::plan
