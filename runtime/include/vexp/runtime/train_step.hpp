// One optimizer step of training: the step `vexp run` takes (trainer_loop.cpp) and
// the one `vexp bench train` (and so `vexp plan --measure-local`) and `vexp bench
// comm` time. There is no other copy: a benchmark that times a step `vexp run` does
// not take measures nothing.
//
// A step, for one rank:
//   forward_backward  each of the rank's `micro` micro-batches: the randomness
//                     reseeded from (seed, global step, GPU), the recipe's batch
//                     transforms (mixup, cutmix: objective.hpp), forward under
//                     autocast, the recipe's loss, the loss checked (a callback: the
//                     trainer's divergence rules, the benchmarks' refusal of a
//                     non-finite loss), backward of loss / (micro x ranks) through
//                     the GradScaler; only the last micro-batch's backward lets the
//                     reducer communicate; micro-batches of the GPUs a rank
//                     emulates beyond its own first (those after its first `accum`)
//                     leave the BatchNorm buffers as they found them
//   reduce            the reducer's all-reduce of the gradients, then the mean of
//                     the step's loss and whether any rank asked to stop; with
//                     dist.reduction = "exact" the sum of the GPUs' gradients and of
//                     their losses in an order of the GPUs (exact_sum.hpp), the same
//                     on any rank count
//   update            unscale (fp16), optim.clip_grad_norm, the optimizer step at
//                     the scheduled, scaled lr (DistPlan::schedule), the scaler's
//                     update, gradients zeroed
// Each phase's time is kept (times()); with `sync_phases` every phase ends with a
// device synchronisation, so that each is charged its own GPU time (benchmarks).
//
// The gradient noise scale (run.noise_scale_every = N, noise_scale.hpp,
// docs/batch-size.md): on global steps N, 2N, ... the step also measures the squared
// norm of every GPU's gradient (a GPU: a rank, or one a rank emulates; its
// accum_steps micro-batches together) and of the global gradient, unclipped, with
// the fp16 loss scale divided out, from the local fp32 gradients before any
// compression on the wire (noise()). With several GPUs on a rank, a copy of .grad
// after each GPU's micro-batches gives the next GPU's as a difference (exact
// reduction: its own gradient, set aside anyway); with the reducer the exchange of
// a measured step starts after the backward pass instead of overlapping it. The
// GPUs' squared norms are gathered (one allgather of a few doubles) and summed in
// the GPUs' order. Training is unchanged by measuring: the same gradients, summed
// the same way.
// Torch-light header: ATen's tensor type only.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "vexp/runtime/loader.hpp"
#include "vexp/runtime/precision.hpp"

namespace vexp {

class Comm;
class Dataset;
class ExactGradSum;
class ModelGraph;
class Objective;
class Optimizer;
class Reducer;
struct DistPlan;

// What a step works on (not owned; each must outlive the TrainStep): the rig's
// (rig.hpp), which builds them one way for the trainer and the benchmarks.
struct StepParts {
  ModelGraph* model = nullptr;
  Optimizer* optimizer = nullptr;  // the optimizer plugin (vexp/optimizer.hpp)
  GradScaler* scaler = nullptr;
  const std::vector<at::Tensor>* params = nullptr;  // the trainable parameters (the optimizer's)
  Reducer* reducer = nullptr;                       // null: no bucketed exchange (one rank, or exact)
  Comm* comm = nullptr;                             // the loss / stop all-reduce (and the exact sum's)
  const Objective* objective = nullptr;             // the loss and batch transforms (objective.hpp);
                                                    // null: cross-entropy over the labels
};

struct StepOptions {
  int64_t micro = 1;      // micro-batches per rank per step (DistPlan::micro)
  int64_t accum = 1;      // of them, the rank's own GPU's (DistPlan::accum); the rest emulate other GPUs
  int64_t ranks = 1;      // processes the gradients are averaged over
  int64_t world = 1;      // GPUs of the world (DistPlan::world)
  bool exact = false;     // dist.reduction = "exact" (DistPlan::exact)
  double bucket_mb = 25;  // the exact sum's largest message (dist.bucket_mb)
  int rank = 0;
  uint64_t seed = 0;      // run.seed
  double clip_grad_norm = 0;  // optim.clip_grad_norm (0: no clipping)
  c10::Device device{c10::kCPU};
  Precision precision = Precision::Fp32;
  bool sync_phases = false;  // device_sync at the end of every phase (benchmarks)
  int64_t noise_every = 0;   // run.noise_scale_every: measure the gradient noise every N steps; 0: never
};

// The squared gradient norms of a measured step (TrainStep::noise()), with the
// loss scale divided out: what noise_estimate (noise_scale.hpp) takes.
struct NoiseSample {
  bool measured = false;  // this step was one of run.noise_scale_every's
  bool finite = false;    // both norms finite (fp16: false on a step the scaler skips)
  double gpu_sq = 0;      // the mean over every GPU of the world of |its gradient|^2
  double global_sq = 0;   // |the global (averaged) gradient|^2
  int64_t gpus = 0;       // GPUs averaged over (dist.world_size)
};

// Seconds of the last step's phases.
struct StepTimes {
  double data = 0;       // inside the batch callback
  double forward = 0;    // batch transforms, forward passes and the losses read back
  double backward = 0;
  double comm = 0;       // reduce()
  double optimizer = 0;  // update()
  double noise = 0;      // of those, the noise scale's measurement (its norms, copies and gather)
};

class TrainStep {
 public:
  // Micro-batch `m` (0 .. micro-1) of the step, on the device.
  using NextBatch = std::function<Batch(int64_t m)>;
  // Sees micro-batch m's loss; returns the value to count (a test fault may change
  // it) or throws (divergence). May be empty: the loss is counted as it is.
  using CheckLoss = std::function<double(int64_t m, double loss)>;

  TrainStep(StepParts parts, StepOptions options);
  ~TrainStep();
  // The options of a run's plan: micro, accum, ranks from `dp`; rank, seed, clip,
  // device and precision are the caller's.
  static StepOptions options_of(const DistPlan& dp, StepOptions base);

  // The micro-batches of global step `global_step` (from 0), forward and backward;
  // returns the sum of their losses.
  double forward_backward(int64_t global_step, const NextBatch& next, const CheckLoss& check = {});
  // The gradient exchange: the reducer's all-reduce, or the exact sum; nothing for
  // one rank of the fast reduction. With a reducer, `loss_sum` becomes its mean over
  // the ranks and `stop` is true when it was on any rank; the exact reduction also
  // shares them (every GPU's loss summed in the GPUs' order).
  void reduce(double& loss_sum, bool& stop);
  // The step's mean loss over every GPU's micro-batches, once reduce() ran (before:
  // this rank's): what run() returns and the trainer logs.
  double mean_loss() const { return mean_loss_; }
  // Unscale, clip, optimizer step at `lr`, scaler update, zero_grad. Returns whether
  // the optimizer stepped (false: fp16 met an inf / NaN gradient and skipped).
  bool update(double lr);
  // All three; returns the mean loss of the step's micro-batches (over the ranks).
  double run(int64_t global_step, double lr, const NextBatch& next, const CheckLoss& check = {});

  const StepTimes& times() const { return times_; }
  const StepOptions& options() const { return opt_; }
  // The last step's noise measurement (measured = false on the steps between).
  const NoiseSample& noise() const { return noise_; }
  // Whether global step `global_step` (from 0) is measured: (global_step + 1) % N == 0.
  bool measures(int64_t global_step) const {
    return opt_.noise_every > 0 && (global_step + 1) % opt_.noise_every == 0;
  }
  // Measure every N steps from now on (0: never): the benchmarks compare the two.
  void set_noise_every(int64_t n);

 private:
  void keep_buffers();
  void restore_buffers();
  void reduce_grads(double& loss_sum, bool& stop);
  void measure_gpu(int64_t gpu);  // after GPU `gpu`'s (of this rank) last backward
  void measure_global();          // after the reduction

  StepParts parts_;
  StepOptions opt_;
  StepTimes times_;
  std::unique_ptr<ExactGradSum> exact_;
  std::vector<double> gpu_loss_;  // per GPU of this rank: the sum of its micro-batches' losses
  double mean_loss_ = 0;
  std::vector<at::Tensor> buffers_, kept_buffers_;
  bool measuring_ = false;            // this step measures the noise
  NoiseSample noise_;
  std::vector<double> gpu_sq_;        // per GPU of this rank: |its gradient|^2 (loss scale in)
  std::vector<at::Tensor> kept_grads_;  // .grad after the previous GPU (several GPUs, not exact)
};

// This rank's batches of global steps [first, end) of a run's sample stream, in
// order (micro-batches of DistPlan::per_gpu clips), through a Loader, each clip
// with its augmentation seed (run seed, the epoch whose shuffle it came from): what
// `vexp run` trains on. `lo`: workers, prefetch and pinning (its seed is unused).
std::unique_ptr<Loader> stream_loader(const Dataset& data, const DistPlan& dp, int rank, int64_t ranks,
                                      uint64_t seed, int64_t first, int64_t end, const LoaderOptions& lo);

}  // namespace vexp
