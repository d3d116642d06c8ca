// The critical batch size from steps to a target (McCandlish, Kaplan, Amodei et al.,
// "An Empirical Model of Large-Batch Training", 2018): the steps S and the clips
// E = B S that a batch of B clips needs to reach a fixed target follow
//
//     (S / S_min - 1) (E / E_min - 1) = 1,  that is  S = S_min + E_min / B  and  E = E_min + S_min B,
//
// S_min the fewest steps (an unbounded batch), E_min the fewest clips (a batch of one),
// and B_crit = E_min / S_min the batch where both cost twice their minimum.
// A pure, torch-free function: docs/sweeps.md, "The fit".
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace vexp::report {

// One batch size and the steps it took to the target.
struct BatchPoint {
  double batch = 0;  // clips per optimizer step (the global batch)
  double steps = 0;  // optimizer steps to the target
};

struct CriticalBatchFit {
  double s_min = 0, e_min = 0;
  // E_min / S_min; +infinity when S_min is 0 (steps fell as 1/B over every batch
  // measured: all of them are below the critical batch), 0 when E_min is 0 (steps
  // did not fall with the batch: all of them are past it).
  double b_crit = 0;
  // The constraint S_min >= 0 (or E_min >= 0) held the value at 0: the unconstrained
  // least squares wanted it negative.
  bool s_min_at_zero = false, e_min_at_zero = false;
  // sqrt(mean over the points of ((S - fitted S) / S)^2): the relative misfit, which is
  // also that of the clips (E / fitted E = S / fitted S).
  double rel_rms = 0;
  size_t points = 0, batches = 0;  // points fitted, distinct batches among them
  double steps_at(double b) const { return s_min + e_min / b; }
  double clips_at(double b) const { return e_min + s_min * b; }
};

// The fit, or why there is none.
struct FitOutcome {
  std::optional<CriticalBatchFit> fit;
  std::string why_not;  // "" when fitted
};

// S_min and E_min >= 0 minimising sum_i ((S_i - S_min - E_min / B_i) / S_i)^2:
// least squares of S against 1/B (linear in S_min and E_min) with relative weights
// 1 / S_i^2, so that a large batch's few steps count as much as a small batch's many
// (each point's relative error; to first order the fit in log space). Since
// E_i / (E_min + S_min B_i) = S_i / (S_min + E_min / B_i), it is at once the same fit
// of the clips E = E_min + S_min B. With a negative unconstrained S_min or E_min the
// better of the two one-parameter fits on the boundary (S_min = 0 or E_min = 0) is
// the constrained minimum. Needs at least 2 distinct batches, every batch and step
// count positive and finite; otherwise `why_not` says what is missing.
FitOutcome fit_critical_batch(const std::vector<BatchPoint>& points);

}  // namespace vexp::report
