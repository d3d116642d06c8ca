#include "vexp/runtime/schedule.hpp"

#include <algorithm>
#include <cmath>

namespace vexp {

double LrSchedule::at(int64_t step) const {
  if (warmup_steps > 0 && step < warmup_steps) {
    double f = static_cast<double>(step) / static_cast<double>(warmup_steps);
    return base_lr * (warmup_start + (1.0 - warmup_start) * f);
  }
  if (type == "step") {
    double lr = base_lr;
    int64_t epoch = step / std::max<int64_t>(1, steps_per_epoch);
    for (int64_t m : milestones)
      if (epoch >= m) lr *= gamma;
    return lr;
  }
  if (type == "cosine") {
    int64_t span = std::max<int64_t>(1, total_steps - warmup_steps);
    double progress = std::min(1.0, static_cast<double>(step - warmup_steps) / static_cast<double>(span));
    return min_lr + 0.5 * (base_lr - min_lr) * (1.0 + std::cos(M_PI * progress));
  }
  return base_lr;
}

}  // namespace vexp
