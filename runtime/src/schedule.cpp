#include "vexp/runtime/schedule.hpp"

#include <algorithm>
#include <cmath>

namespace vexp {

double LrSchedule::at(int64_t step) const {
  // Clips taken before this step, and the warmup's clips (as warmup_steps() counts).
  const double seen = static_cast<double>(step * stream.global_batch);
  const double warmup_clips = warmup_epochs * static_cast<double>(stream.clips);
  if (warmup_epochs > 0 && seen < warmup_clips) return base_lr * (warmup_start + (1.0 - warmup_start) * seen / warmup_clips);
  if (type == "step") {
    double lr = base_lr;
    for (int64_t m : milestones)
      if (stream.epoch_of(step) >= m) lr *= gamma;  // step*G >= m*N
    return lr;
  }
  if (type == "cosine") {
    const double span = static_cast<double>(epochs) - warmup_epochs;
    const double progress = span > 0 ? std::clamp((stream.epochs_before(step) - warmup_epochs) / span, 0.0, 1.0) : 1.0;
    return min_lr + 0.5 * (base_lr - min_lr) * (1.0 + std::cos(M_PI * progress));
  }
  return base_lr;
}

int64_t LrSchedule::warmup_steps() const {
  if (warmup_epochs <= 0) return 0;
  const double target = warmup_epochs * static_cast<double>(stream.clips);
  auto before = [&](int64_t s) { return static_cast<double>(s * stream.global_batch) < target; };
  // ceil(target / G), corrected for rounding: the first step not before the target.
  int64_t s = static_cast<int64_t>(std::ceil(target / static_cast<double>(stream.global_batch)));
  while (s > 0 && !before(s - 1)) --s;
  while (before(s)) ++s;
  return s;
}

}  // namespace vexp
