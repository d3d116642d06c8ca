// The plan of a (possibly distributed, possibly emulated) training run: batch
// geometry, the steps of every epoch (sample_stream.hpp: every clip once per
// epoch, nothing dropped), learning rate after large-batch scaling, schedule in
// steps and the gradient traffic. Computed from the recipe alone, so `vexp run --dry-run` can
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
  int64_t train_size = 0;     // training clips (N): every one is seen once per epoch
  SampleStream stream;        // N and the global batch: which steps make which epoch
  int64_t epochs = 1;
  int64_t total_steps = 0;    // ceil(epochs x N / global batch)
  int64_t total_clips = 0;    // total_steps x global batch: clips trained by the whole run
  int64_t fill_clips = 0;     // of those, the last step's clips from the shuffle after the last epoch
  // Learning rate.
  bool scaled = false;        // optim.base_lr > 0
  double base_lr = 0;
  int64_t base_batch = 0;
  std::string lr_scaling;     // linear | sqrt | none
  double lr = 0;              // peak lr after scaling
  LrSchedule schedule;
  std::vector<int64_t> milestone_steps;  // first step (from 0) at each decayed rate
  // Gradients.
  int64_t grad_params = 0;    // trainable parameters (0: unknown)
  int64_t grad_bytes = 0;     // bytes each rank allreduces per optimizer step (wire format)
  int64_t buckets = 0;        // gradient buckets of the reducer (given the parameters' sizes: their layout,
                              // buckets.hpp; given only their total: ceil(grad_bytes / bucket), an estimate)
  std::string compression;    // none | fp16 | bf16
  std::string reduction;      // dist.reduction: exact | fast
  bool exact = false;         // reduction == "exact": the sum in the GPUs' order (exact_sum.hpp), int64 wire
  double bucket_mb = 25;      // dist.bucket_mb
};

// The global batch, dist.world_size x batch_per_gpu x accum_steps (clips per
// optimizer step); std::nullopt when the product does not fit in 64 bits.
std::optional<int64_t> global_batch_of(const dsl::DistConfig& dist);

// "" when a training split of `train_size` clips holds one global batch, else the one
// sentence saying it does not: "the training split has N clips, fewer than one global
// batch of G (dist.world_size W x batch_per_gpu B x accum_steps A): " and the fix
// (batch_fit_fix) (`vexp check` and the plan of a run).
std::string batch_fit_problem(const dsl::DistConfig& dist, int64_t train_size);
// The fix of a split smaller than one global batch: more data, or the world size (or
// batch) that fits it.
std::string batch_fit_fix(const dsl::DistConfig& dist, int64_t train_size);

// How the GPUs' gradients are summed, in one line (the dry run and the start of a run).
std::string reduction_text(const DistPlan& p);

// Throws std::runtime_error with a sentence when the geometry is impossible
// (world_size not a multiple of ranks, fewer clips than one global batch).
DistPlan make_dist_plan(const dsl::RecipePlan& plan, int64_t ranks, int64_t train_size, int64_t grad_params);
// The same with each trainable parameter's elements in registration order: `buckets`
// is then the reducer's own layout (bucket_layout), which a model of a few large
// tensors fills with fewer, fuller buckets than the total alone suggests.
DistPlan make_dist_plan(const dsl::RecipePlan& plan, int64_t ranks, int64_t train_size,
                        const std::vector<int64_t>& grad_numels);

// The learning rate after scaling: base_lr x (global/base_batch) or its square
// root when optim.base_lr > 0, else optim.lr as written.
double scaled_lr(const dsl::OptimConfig& optim, int64_t global_batch);

// Steps per epoch as "N/G = x, floor or ceil" ("240436/12288 = 19.57, 19 or 20";
// "192/16 = 12" when whole).
std::string steps_per_epoch_text(const DistPlan& p);

// Multi-line human-readable plan (what --dry-run prints).
std::string describe(const DistPlan& p);

}  // namespace vexp
