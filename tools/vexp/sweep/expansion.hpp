// A sweep's trials: the grid and list axes multiplied out, the random axes drawn,
// the derived values computed, and every trial's recipe validated.
#pragma once

#include <optional>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sweep/definition.hpp"
#include "vexp/dsl/validate.hpp"
#include "vexp/runtime/session.hpp"

namespace vexp::sweep {

struct Trial {
  int64_t id = 0;                        // 1-based
  nlohmann::json params = nlohmann::json::object();   // axis and derived values by key
  std::vector<dsl::Override> overrides;  // everything passed to `vexp run --set`
  int64_t global_batch = 0;
  int64_t world_size = 1;                // dist.world_size of the trial's recipe
  double lr = 0;
  std::string recipe_hash;
};

// A trial's name and folder under DIR/trials: its id as three digits ("007").
std::string trial_name(int64_t id);

// What a trial's validated recipe says about its batch and learning rate: the
// variables derived expressions may use, and what the store records.
struct RecipeFigures {
  int64_t world_size = 1, batch_per_gpu = 1, accum_steps = 1, global_batch = 1;
  double lr = 0;
};
// Nothing when the global batch does not fit in 64 bits (dist_plan's global_batch_of).
std::optional<RecipeFigures> recipe_figures(const dsl::RecipePlan& plan);

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

// Expands the axes into trials and validates every trial's recipe (plugins must be
// loaded into `session`). Problems go to `diags`, located in the sweep file where
// the offending value was written.
std::vector<Trial> expand(const Definition& def, Session& session, dsl::Diagnostics& diags);

// A stable hash of the definition and of every trial's recipe.
std::string sweep_hash(const Definition& def, const std::vector<Trial>& trials);

}  // namespace vexp::sweep
