// The plan of a (possibly distributed, possibly emulated) training run: batch
// geometry, learning rate after large-batch scaling, schedule in steps and the
// gradient traffic. Computed from the recipe alone, so `vexp run --dry-run` can
// print it without data, model weights or a launcher. Torch-free.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "vexp/runtime/schedule.hpp"
#include "vexp/dsl/validate.hpp"

namespace vexp {

struct DistPlan {
  int64_t world = 1;          // dist.world_size: GPUs the recipe was designed for
  int64_t ranks = 1;          // processes actually launched
  int64_t per_gpu = 1;        // dist.batch_per_gpu
  int64_t accum = 1;          // dist.accum_steps
  int64_t micro = 1;          // micro-batches per rank per optimizer step
  int64_t global_batch = 1;   // clips per optimizer step
  int64_t frames = 0;         // frames per clip (0: unknown)
  int64_t train_size = 0;     // training clips
  int64_t steps_per_epoch = 0;
  int64_t epochs = 1;
  int64_t total_steps = 0;
  // Learning rate.
  bool scaled = false;        // optim.base_lr > 0
  double base_lr = 0;
  int64_t base_batch = 0;
  std::string lr_scaling;     // linear | sqrt | none
  double lr = 0;              // peak lr after scaling
  LrSchedule schedule;
  std::vector<int64_t> milestone_steps;
  // Gradients.
  int64_t grad_params = 0;    // trainable parameters (0: unknown)
  int64_t grad_bytes = 0;     // bytes each rank allreduces per optimizer step (wire format)
  int64_t buckets = 0;
  std::string compression;    // none | fp16 | bf16
};

// Throws std::runtime_error with a sentence when the geometry is impossible
// (world_size not a multiple of ranks, fewer clips than one global batch).
// The global batch, dist.world_size x batch_per_gpu x accum_steps (clips per
// optimizer step); std::nullopt when the product does not fit in 64 bits.
std::optional<int64_t> global_batch_of(const dsl::DistConfig& dist);

DistPlan make_dist_plan(const dsl::RecipePlan& plan, int64_t ranks, int64_t train_size, int64_t grad_params);

// The learning rate after scaling: base_lr x (global/base_batch) or its square
// root when optim.base_lr > 0, else optim.lr as written.
double scaled_lr(const dsl::OptimConfig& optim, int64_t global_batch);

// Multi-line human-readable plan (what --dry-run prints).
std::string describe(const DistPlan& p);

}  // namespace vexp
