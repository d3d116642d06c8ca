// `vexp bench train`: the throughput of the recipe's training step, split into
// data, forward, backward, optimizer and communication time. Built from the
// trainer's pieces (ModelGraph, Sgd, Loader, Reducer) without its bookkeeping
// (no run directory, checkpoints, evaluation or schedule: the lr is optim.lr).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "vexp/runtime/session.hpp"

namespace vexp {

struct BenchTrainOptions {
  int64_t steps = 10;      // timed steps (the median is reported)
  int64_t warmup = 2;      // untimed steps first
  bool synthetic = false;  // random clips of the recipe's shape instead of the dataset
  std::string memory_format;   // auto | channels_last | contiguous; empty: the recipe's run.memory_format
  std::string device;          // cpu | cuda | auto; empty: the recipe's run.device
  std::string precision;       // fp32 | bf16 | fp16; empty: the recipe's run.precision
};

// One phase's times over the timed steps (seconds).
struct PhaseTimes {
  std::vector<double> samples;
  double median() const;
};

struct BenchTrainResult {
  int64_t threads = 0, ranks = 1, clips_per_step = 0, frames_per_clip = 0;
  std::vector<int64_t> clip;  // [T, C, H, W]
  int64_t params = 0;
  PhaseTimes step, data, forward, backward, optimizer, comm;
  double clips_per_s = 0, frames_per_s = 0;  // from the median step
  int64_t peak_rss_kb = 0;                    // of this process, after the steps
  double final_loss = 0;
  std::string device, precision, memory_format;  // what ran
  double loss_scale = 0;                      // fp16: the scale after the steps
  int64_t skipped_steps = 0;                  // fp16: steps skipped on inf / NaN gradients
};

// `s` is an opened recipe (plugins loaded, plan valid). Without `synthetic` the
// recipe's dataset is read through the loader (data.workers / data.prefetch).
BenchTrainResult bench_train(Session& s, const BenchTrainOptions& options);

}  // namespace vexp
