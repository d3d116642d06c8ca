// `vexp bench train`: the throughput of the recipe's training step, split into
// data, forward, backward, optimizer and communication time. The step is the
// runtime's TrainStep (train_step.hpp), the one `vexp run` takes: the recipe's
// micro-batches (accum_steps, emulated GPUs), clip_grad_norm, the scheduled lr after
// scaling, on the batches `vexp run` draws (its sample stream and augmentation
// seeds); the model, its rig (rig.hpp: optimizer, scaler, reducer and step, as the
// trainer's) and the data are built in the trainer's order from the same seed.
// Without the trainer's bookkeeping: no run directory, checkpoints or evaluation.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "vexp/runtime/dist_plan.hpp"
#include "vexp/runtime/session.hpp"

namespace vexp {

class Dataset;

struct BenchTrainOptions {
  int64_t steps = 10;      // timed steps (the median is reported)
  int64_t warmup = 2;      // untimed steps first
  bool synthetic = false;  // random clips of the recipe's shape instead of the dataset
  std::string memory_format;   // auto | channels_last | contiguous; empty: the recipe's run.memory_format
  std::string device;          // cpu | cuda | auto; empty: the recipe's run.device
  std::string precision;       // fp32 | bf16 | fp16; empty: the recipe's run.precision
  std::string save_weights;    // non-empty: rank 0 writes the weights after every step here (a vexp checkpoint)
  // N > 0: time `steps` blocks of N steps whose last step measures the gradient noise
  // scale (run.noise_scale_every = N) against `steps` blocks of N plain steps,
  // alternating, and report the ratio of their times.
  int64_t noise_every = 0;
};

// One phase's times over the timed steps (seconds).
struct PhaseTimes {
  std::vector<double> samples;
  double median() const;
};

struct BenchTrainResult {
  int64_t threads = 0, ranks = 1, frames_per_clip = 0;
  int64_t clips_per_step = 0;  // clips one rank computes per step: batch_per_gpu x micro-batches
  int64_t micro = 1;           // micro-batches per rank per step (accum_steps x the GPUs a rank emulates)
  int64_t global_batch = 0;    // clips per optimizer step over every rank
  int64_t buckets = 0;         // the reducer's gradient buckets (dist.bucket_mb), used with more than one rank
  int64_t loader_ahead_steps = 0;  // steps the loader's stream runs past the last one, never taken (not --synthetic)
  int64_t data_workers = 0;        // the loader's decode threads (data.workers; 0: none, or --synthetic)
  double bucket_mb = 0;
  double lr_first = 0, lr_last = 0;  // the scheduled lr of the first and the last step
  std::vector<int64_t> clip;  // [T, C, H, W]
  int64_t params = 0;
  PhaseTimes step, data, forward, backward, optimizer, comm;
  double clips_per_s = 0, frames_per_s = 0;  // from the median step
  int64_t peak_rss_kb = 0;                    // of this process, after the steps
  double final_loss = 0;                      // the last step's mean loss
  std::string device, precision, memory_format;  // what ran
  double loss_scale = 0;                      // fp16: the scale after the steps
  int64_t skipped_steps = 0;                  // fp16: steps skipped on inf / NaN gradients
  // With noise_every: the measured steps' times (`step` and the phases hold the plain
  // blocks' steps), the blocks' total times, and their ratio: the step time measuring
  // every noise_every steps over the step time without.
  PhaseTimes noise_step;
  PhaseTimes noise_work;  // of each measured step, the measurement itself (StepTimes::noise)
  double noise_work_fraction = 0;  // median noise_work / median plain step / noise_every
  int64_t noise_every = 0;
  double noise_block_s = 0, plain_block_s = 0;
  double noise_block_cpu_s = 0, plain_block_cpu_s = 0;  // the same in CPU time of the process
  double noise_cpu_ratio = 0;                           // noise_block_cpu_s / plain_block_cpu_s
  double noise_step_ratio = 0;      // median measured step / median plain step
  double noise_interval_ratio = 0;  // noise_block_s / plain_block_s
};

// The plan of a benchmark's `steps` steps on `ranks` ranks (make_dist_plan): the
// training-set size, which sets the schedule's length, is `data`'s as in `vexp run`;
// without data, data.train_size when declared, else a set of exactly those steps.
// `grad_numels`: each trainable parameter's elements (its buckets: the reducer's layout).
DistPlan bench_dist_plan(const dsl::RecipePlan& plan, int64_t ranks, const Dataset* data, int64_t steps,
                         const std::vector<int64_t>& grad_numels);

// `s` is an opened recipe (plugins loaded, plan valid). Without `synthetic` the
// recipe's dataset is read through the loader (data.workers / data.prefetch).
BenchTrainResult bench_train(Session& s, const BenchTrainOptions& options);

}  // namespace vexp
