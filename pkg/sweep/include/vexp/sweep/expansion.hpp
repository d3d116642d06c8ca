// A sweep's trials: the grid and list axes multiplied out, the random axes drawn,
// the derived values computed, and every trial's recipe validated.
#pragma once

#include <optional>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "vexp/sweep/definition.hpp"
#include "vexp/dsl/validate.hpp"
#include "vexp/runtime/session.hpp"

namespace vexp::sweep {

// What a trial trains, as `vexp run` plans it: the figures of runtime's
// make_dist_plan (dist_plan.hpp) for the trial's validated recipe, so the store,
// `vexp results`, the report and the best recipe carry the values that train
// (optim.base_lr scaled to the global batch, not the value written).
struct TrainedFigures {
  int64_t world_size = 1;      // dist.world_size
  std::string backend;         // dist.backend, as validated ("local", "mpi", "nccl", ...)
  int64_t ranks = 1;           // processes each trial is launched with
  int64_t batch_per_gpu = 1, accum_steps = 1;
  int64_t micro_batches = 1;   // per rank per optimizer step (world/ranks x accum: emulation)
  int64_t global_batch = 1;    // clips per optimizer step
  double lr = 0;               // the peak lr the optimizer uses (after optim.base_lr scaling)
  std::optional<int64_t> train_size, epochs, total_steps, warmup_steps;  // unknown without the training-set size
  nlohmann::json to_json() const;
};

struct Trial {
  int64_t id = 0;                        // 1-based
  nlohmann::json params = nlohmann::json::object();   // axis and derived values by key
  std::vector<dsl::Override> overrides;  // everything passed to `vexp run --set`
  TrainedFigures figures;
  std::string recipe_hash;
};

// Opens the sweep's base recipe with a trial's overrides as `vexp run` would, on a
// session whose plugins are loaded (its diagnostics start empty): runtime's one
// open_recipe, missing data an error only with `require_data`. True when it validates.
bool open_trial_recipe(Session& s, const std::string& base, const std::vector<dsl::Override>& overrides,
                       bool require_data);

// A trial's name and folder under DIR/trials: its id as three digits ("007").
std::string trial_name(int64_t id);

// The figures `vexp run` would train `plan` with on `ranks` processes and
// `train_size` clips (nothing: unknown; the steps are then unknown too).
// Throws std::runtime_error with make_dist_plan's sentence when the geometry is
// impossible (world_size not a multiple of ranks, fewer clips than one global batch,
// a global batch past 64 bits).
TrainedFigures trained_figures(const dsl::RecipePlan& plan, int64_t ranks, std::optional<int64_t> train_size);

// The most trials one sweep may have (docs/sweeps.md). Every trial is a training
// run, and all of them are expanded and validated in memory before the first starts.
constexpr int64_t kMaxTrials = 100000;

// How many trials `def` expands to (grid and list sizes times the random draws),
// counted without expanding; nothing when the product does not fit in 64 bits.
std::optional<int64_t> trial_count(const Definition& def);

// The problem with `vexp sweep --set` keys against the sweep file: a key an axis,
// a derived value or [sweep.set] also sets would be silently overridden in every
// trial. "" when there is none.
std::string cli_set_conflict(const Definition& def);

// Expands the axes into trials, validates every trial's recipe (plugins must be
// loaded into `session`) and plans it for `ranks` processes per trial with the
// runtime's planner (dry_run.hpp planned_train_size, dist_plan.hpp make_dist_plan).
// Problems go to `diags`, located in the sweep file where the offending value was
// written. A training split smaller than one global batch leaves the trial's steps
// unknown (it fails when run, as its `vexp run` would).
std::vector<Trial> expand(const Definition& def, Session& session, int64_t ranks, dsl::Diagnostics& diags);

// A stable hash of the definition and of every trial's recipe.
std::string sweep_hash(const Definition& def, const std::vector<Trial>& trials);

}  // namespace vexp::sweep
