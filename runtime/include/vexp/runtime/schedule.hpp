// Learning-rate schedule per optimizer step: linear warmup (Goyal et al.), then
// constant, step decay at epoch milestones, or cosine to min_lr.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace vexp {

struct LrSchedule {
  std::string type = "cosine";  // constant | step | cosine
  double base_lr = 0.01;
  double min_lr = 0;
  double warmup_start = 0;      // fraction of base_lr at step 0
  int64_t warmup_steps = 0;
  int64_t total_steps = 1;
  int64_t steps_per_epoch = 1;
  std::vector<int64_t> milestones;  // epochs
  double gamma = 0.1;

  double at(int64_t step) const;
};

}  // namespace vexp
