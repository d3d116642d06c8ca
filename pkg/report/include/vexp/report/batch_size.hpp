// The batch-size study of a sweep with a target ([sweep] target): each trial's steps,
// clips and time to the target against its global batch, the best trial of each batch
// (the fewest steps: over an lr axis, the tuned lr), the fit of S_min and E_min
// through them (critical_batch.hpp) and the gradient noise scale B_noise the trials
// measured (run.noise_scale_every). Shared by the HTML report and the gnuplot PNGs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "vexp/report/critical_batch.hpp"
#include "vexp/report/sweep_results.hpp"

namespace vexp::report {

struct TargetTrial {
  const sweep::Row* row = nullptr;
  // The trial's B_noise: its last smoothed value at or before the step that reached
  // the target (metrics.jsonl's noise records), and at the end of its run
  // (rundir::last_noise_scale: summary.json's, else the last record's); empty when it
  // measured none.
  std::optional<double> noise_at_target, noise_end;
};

struct BatchSizeStudy {
  sweep::Target target;
  std::vector<TargetTrial> trials;             // every trial, in the store's order
  std::vector<int64_t> batches;                // the distinct global batches, ascending
  // Per batch: the index (into `trials`) of the trial with the fewest steps to the
  // target (ties: the fewer clips, then the lower id); empty when none reached it.
  std::vector<std::optional<size_t>> best;
  FitOutcome fit;                              // through the best trial of each batch
  // The trials' B_noise beside the fit: the median (and range) over the trials that
  // reached the target of their value there, or when none measured one there, over
  // every trial of its value at the end.
  std::optional<double> noise;
  double noise_lo = 0, noise_hi = 0;
  size_t noise_trials = 0;
  std::string noise_where;                     // "at the target" or "at the end of the runs"
  // Sentences for the page and the plots: the fit ("S_min = ..., E_min = ..., B_crit
  // = ...") or why there is none; B_noise and B_crit / B_noise.
  std::string fit_text, noise_text;
};

// The study of an opened sweep; nullopt when it has no target or fewer than 2
// distinct global batches (nothing to plot against the batch).
std::optional<BatchSizeStudy> batch_size_study(const Opened& o);

}  // namespace vexp::report
