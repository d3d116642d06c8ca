// Learning-rate schedule per optimizer step, counted in clips: the rate at step s
// is a function of the epochs' worth of clips the steps before it took,
// x = s*G/N (sample_stream.hpp). Linear warmup (Goyal et al.) over x <
// warmup_epochs, then constant, step decay (x gamma from the first step whose
// clips start at or after milestone m: s*G >= m*N, the first step of epoch m) or
// cosine from x = warmup_epochs to x = epochs, down to min_lr.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "vexp/runtime/sample_stream.hpp"

namespace vexp {

struct LrSchedule {
  std::string type = "cosine";  // constant | step | cosine
  double base_lr = 0.01;
  double min_lr = 0;
  double warmup_start = 0;      // fraction of base_lr at step 0
  double warmup_epochs = 0;     // in epochs of clips
  int64_t epochs = 1;           // the cosine reaches min_lr after this many epochs of clips
  std::vector<int64_t> milestones;  // epochs
  double gamma = 0.1;
  SampleStream stream;          // N and G

  double at(int64_t step) const;
  // The steps of the warmup (below base_lr): those with s*G < warmup_epochs*N.
  int64_t warmup_steps() const;
};

}  // namespace vexp
