// Time to accuracy (docs/planning.md "Time to accuracy"): the plan's rows weighed by
// the statistics of large-batch training. McCandlish, Kaplan, Amodei et al., "An
// Empirical Model of Large-Batch Training" (2018): to reach a given training progress,
// a global batch B needs E = E_min (1 + B / B_noise) clips in S = S_min (1 + B_noise / B)
// steps, B_noise the gradient noise scale (about the critical batch E_min / S_min).
// Relative to a reference batch B0 that reaches the progress in E0 clips, B needs E0 (B_noise + B) / (B_noise + B0): its statistical efficiency is
// (B_noise + B0) / (B_noise + B) (Pollux, Qiao et al. OSDI 2021), and goodput =
// throughput x statistical efficiency. Torch-free, no I/O.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace vexp::plan {

struct Row;  // model.hpp

struct TargetRow {
  int64_t gpus = 0, global_batch = 0;
  double efficiency = 0;  // statistical: (B_noise + B0) / (B_noise + B); 1 at B0, above 1 below it
  double clips = 0;       // clips to the reference progress: reference clips / efficiency
  double steps = 0;       // clips / global batch
  double epochs = 0;      // clips / training clips
  double time_s = 0;      // steps x the row's step time
  double gpu_hours = 0;   // gpus x time_s / 3600: what the time to the progress costs
  double goodput = 0;     // clips/s x efficiency: the reference batch's clips' worth of progress per second
  bool within_budget = true;  // epochs <= the budget's epochs x (1 + budget_tolerance)
};

struct TargetPlan {
  double b_noise = 0;        // clips
  std::string noise_from;    // where it was read ("RUN_DIR (step 120)", "--noise-from 41")
  int64_t ref_batch = 0;     // B0: the recipe's global batch as written
  double ref_clips = 0;      // E0: the clips the recipe trains (its epoch budget), at B0
  int64_t train_size = 0;    // training clips per epoch
  double budget_epochs = 0;  // ref_clips / train_size
  double budget_tolerance = 0.10;
  // The largest global batch whose epochs to the reference progress stay within the
  // budget (+ tolerance): (1 + tol) (B_noise + B0) - B_noise.
  double budget_max_batch = 0;
  int64_t critical_gpus = 0;  // the row whose global batch is nearest B_noise (log scale)
  int64_t fastest_gpus = 0;   // the row with the least time to the reference progress
  int64_t best_goodput_gpus = 0;
  std::vector<TargetRow> rows;
};

// The rows of a plan (model.hpp) weighed with noise scale `b_noise` (> 0, finite),
// the reference batch `ref_batch` training `ref_clips` clips of `train_size` per epoch.
TargetPlan plan_to_target(const std::vector<Row>& rows, double b_noise, int64_t ref_batch, double ref_clips,
                          int64_t train_size);

}  // namespace vexp::plan
