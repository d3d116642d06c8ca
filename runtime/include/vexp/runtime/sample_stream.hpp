// The training stream of a run. Every epoch is a shuffle of all N training
// clips and the shuffles follow one another: global step s takes the G clips
// (the global batch) at stream positions [s*G, (s+1)*G). Nothing is dropped: a
// step that passes an epoch's end takes the next epoch's first shuffled clips,
// so every clip is seen once per epoch. Step s belongs to the epoch of its first
// clip, floor(s*G/N): epoch e owns steps [ceil(e*N/G), ceil((e+1)*N/G)) (the
// floor or the ceiling of N/G of them) and its last step completes it. A run of
// E epochs has ceil(E*N/G) steps; the last fills up with the first clips of
// epoch E's shuffle (the only repeats). Torch-free.
#pragma once

#include <cstdint>

namespace vexp {

struct SampleStream {
  int64_t clips = 1;         // N: training clips, one epoch
  int64_t global_batch = 1;  // G: clips per optimizer step

  // The first step of epoch `epoch` (from 0): ceil(epoch*N/G). Epoch e owns
  // steps [first_step(e), first_step(e+1)); first_step(E) steps make E epochs.
  int64_t first_step(int64_t epoch) const { return (epoch * clips + global_batch - 1) / global_batch; }
  int64_t steps_in(int64_t epoch) const { return first_step(epoch + 1) - first_step(epoch); }
  // The epoch of step `step`: that of its first clip, floor(step*G/N).
  int64_t epoch_of(int64_t step) const { return step * global_batch / clips; }
  // Epochs' worth of clips taken by the steps before `step`: step*G/N.
  double epochs_before(int64_t step) const {
    return static_cast<double>(step * global_batch) / static_cast<double>(clips);
  }
};

}  // namespace vexp
