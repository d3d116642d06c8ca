#include "vexp/report/critical_batch.hpp"

#include <cmath>
#include <cstdio>
#include <limits>
#include <set>

namespace vexp::report {

namespace {

// The relative weighted sum of squares of (s_min, e_min) over the points.
double misfit(const std::vector<BatchPoint>& p, double s_min, double e_min) {
  double sum = 0;
  for (const auto& q : p) {
    const double r = (q.steps - s_min - e_min / q.batch) / q.steps;
    sum += r * r;
  }
  return sum;
}

}  // namespace

FitOutcome fit_critical_batch(const std::vector<BatchPoint>& points) {
  FitOutcome out;
  std::set<double> batches;
  for (const auto& q : points) {
    if (!(q.batch > 0) || !std::isfinite(q.batch) || !(q.steps > 0) || !std::isfinite(q.steps)) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "a point of batch %g and %g steps: batches and steps must be positive and finite",
                    q.batch, q.steps);
      out.why_not = buf;
      return out;
    }
    batches.insert(q.batch);
  }
  if (batches.size() < 2) {
    out.why_not = batches.empty() ? "no batch reached the target"
                                  : "one batch size reached the target; the fit needs at least 2";
    return out;
  }
  // Weighted least squares of y = S on x = 1/B, weights w = 1/S^2, centred on the
  // weighted means (better conditioned than the normal equations as they stand).
  double sw = 0, sx = 0, sy = 0;
  for (const auto& q : points) {
    const double w = 1 / (q.steps * q.steps), x = 1 / q.batch;
    sw += w, sx += w * x, sy += w * q.steps;
  }
  const double xm = sx / sw, ym = sy / sw;
  double sxx = 0, sxy = 0;
  for (const auto& q : points) {
    const double w = 1 / (q.steps * q.steps), dx = 1 / q.batch - xm;
    sxx += w * dx * dx, sxy += w * dx * (q.steps - ym);
  }
  CriticalBatchFit f;
  f.points = points.size();
  f.batches = batches.size();
  f.e_min = sxy / sxx;
  f.s_min = ym - f.e_min * xm;
  if (f.s_min < 0 || f.e_min < 0) {
    // The constrained minimum lies on the boundary: S_min = 0 (E_min alone) or
    // E_min = 0 (S_min alone), whichever fits better. Both are feasible: every S and
    // 1/B is positive.
    double wxy = 0, wxx = 0;
    for (const auto& q : points) {
      const double w = 1 / (q.steps * q.steps), x = 1 / q.batch;
      wxy += w * x * q.steps, wxx += w * x * x;
    }
    const double e_only = wxy / wxx, s_only = ym;
    if (misfit(points, 0, e_only) <= misfit(points, s_only, 0)) {
      f.s_min = 0, f.e_min = e_only, f.s_min_at_zero = true;
    } else {
      f.s_min = s_only, f.e_min = 0, f.e_min_at_zero = true;
    }
  }
  f.b_crit = f.s_min > 0 ? f.e_min / f.s_min : std::numeric_limits<double>::infinity();
  f.rel_rms = std::sqrt(misfit(points, f.s_min, f.e_min) / static_cast<double>(points.size()));
  out.fit = f;
  return out;
}

}  // namespace vexp::report
