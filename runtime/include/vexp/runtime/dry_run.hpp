// `vexp run RECIPE --dry-run`: the plan of a run without data or training.
#pragma once

#include <string>
#include <vector>

#include "vexp/runtime/dist_plan.hpp"
#include "vexp/runtime/grad_profile.hpp"
#include "vexp/runtime/session.hpp"

namespace vexp {

// Builds the model (to count gradients and lay out the reducer's buckets,
// buckets.hpp) and computes the plan. The training-set size is data.train_size
// when given (> 0), else the dataset's (which builds it). With `profile`, the same
// model's gradient profile (grad_profile.hpp: MACs per parameter) is filled too.
// With `size_note` (vexp run --dry-run), a declared data.train_size is checked
// against the dataset when it can be built: its real count wins, and the note
// says which count was used (empty when they agree).
// With `param_groups` (vexp run --dry-run), the optimizer's parameter groups of the
// same model as a table (optimizer.hpp: param_groups_table, the header first), the
// recipe's globs checked as vexp run checks them (base::invalid at the glob) and
// their warnings logged.
DistPlan plan_run(Session& s, int64_t ranks, GradientProfile* profile = nullptr, std::string* size_note = nullptr,
                  std::vector<std::string>* param_groups = nullptr);

// The training-set size plan_run plans with (the same rule, without building the
// model): data.train_size when given (> 0), else the dataset's; with `size_note`,
// a declared size is checked against the dataset when it can be built and its real
// count wins (what the trainer will count), the note saying so. Throws when the
// dataset must be built and cannot be.
int64_t planned_train_size(Session& s, std::string* size_note = nullptr);

// The number of ranks the launcher started (launcher.hpp: detect_launcher), or 1.
int64_t launched_ranks_from_env();

}  // namespace vexp
