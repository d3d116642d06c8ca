// The gradient noise scale a run measured (run.noise_scale_every; docs/batch-size.md):
// the noise_* keys of metrics.jsonl's step records, typed. `vexp report` charts them;
// planners read the last smoothed B_noise (summary.json's noise_scale, or the last
// record's for an unfinished run). Torch-free.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <vector>

namespace vexp::rundir {

// One measured step's record.
struct NoiseRecord {
  int64_t global_step = 0;
  double epochs_trained = -1;        // epochs' worth of clips after the step
  int64_t small_batch = 0;           // noise_small_batch: clips per GPU per step (accumulation included)
  int64_t big_batch = 0;             // noise_big_batch: the global batch
  std::optional<double> small_sq;    // noise_small_sq: mean over the GPUs of |their gradient|^2
  std::optional<double> big_sq;      // noise_big_sq: |global gradient|^2
  std::optional<double> g2_step;     // noise_g2_step: this step's unbiased |G|^2
  std::optional<double> trace_step;  // noise_trace_step: this step's unbiased tr(Sigma)
  std::optional<double> g2;          // noise_g2: the moving average of |G|^2
  std::optional<double> trace;       // noise_trace: the moving average of tr(Sigma)
  std::optional<double> scale;       // noise_scale: B_noise = noise_trace / noise_g2 (null: |G|^2 <= 0)
  bool skipped = false;              // noise_skipped: fp16 overflow, nothing measured
};

// The step records of DIR/metrics.jsonl that carry noise keys, in order (lines that
// are not JSON objects, or whose noise keys are not numbers, are passed over).
std::vector<NoiseRecord> read_noise(const std::filesystem::path& dir);

// The run's last smoothed B_noise: summary.json's noise_scale, else the last record's
// that has one; nullopt when the run measured none.
std::optional<double> last_noise_scale(const std::filesystem::path& dir);
// The same with the run's records already read (read_noise): metrics.jsonl is not
// read again.
std::optional<double> last_noise_scale(const std::filesystem::path& dir, const std::vector<NoiseRecord>& records);

}  // namespace vexp::rundir
