#include "vexp/plan/goodput.hpp"

#include <cmath>
#include <limits>

#include "vexp/plan/error.hpp"
#include "vexp/plan/model.hpp"

namespace vexp::plan {

TargetPlan plan_to_target(const std::vector<Row>& rows, double b_noise, int64_t ref_batch, double ref_clips,
                          int64_t train_size) {
  if (!(b_noise > 0) || !std::isfinite(b_noise)) throw PlanError("the noise scale must be a positive number of clips");
  if (ref_batch < 1 || !(ref_clips > 0) || train_size < 1)
    throw PlanError("time to accuracy needs the recipe's global batch, clips and training-set size");
  TargetPlan t;
  t.b_noise = b_noise;
  t.ref_batch = ref_batch;
  t.ref_clips = ref_clips;
  t.train_size = train_size;
  t.budget_epochs = ref_clips / static_cast<double>(train_size);
  const double b0 = static_cast<double>(ref_batch);
  t.budget_max_batch = (1 + t.budget_tolerance) * (b_noise + b0) - b_noise;
  double nearest = std::numeric_limits<double>::infinity();
  double fastest = nearest, best = -1;
  for (const Row& r : rows) {
    TargetRow x;
    x.gpus = r.gpus;
    x.global_batch = r.global_batch;
    const double b = static_cast<double>(r.global_batch);
    x.efficiency = (b_noise + b0) / (b_noise + b);
    x.clips = ref_clips / x.efficiency;
    x.steps = x.clips / b;
    x.epochs = x.clips / static_cast<double>(train_size);
    x.time_s = x.steps * r.step_ms / 1e3;
    x.gpu_hours = static_cast<double>(r.gpus) * x.time_s / 3600;
    x.goodput = r.clips_per_s * x.efficiency;
    x.within_budget = x.epochs <= t.budget_epochs * (1 + t.budget_tolerance) * (1 + 1e-12);
    const double distance = std::fabs(std::log(b / b_noise));
    if (distance < nearest) nearest = distance, t.critical_gpus = x.gpus;
    if (x.time_s < fastest) fastest = x.time_s, t.fastest_gpus = x.gpus;
    if (x.goodput > best) best = x.goodput, t.best_goodput_gpus = x.gpus;
    t.rows.push_back(x);
  }
  return t;
}

}  // namespace vexp::plan
