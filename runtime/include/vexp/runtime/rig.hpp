// The training rig: what one rank's TrainStep (train_step.hpp) works with, built
// one way for `vexp run` (trainer.cpp), `vexp bench train` (and so `vexp plan
// --measure-local`) and `vexp bench comm`, so that a benchmark times the step a run
// takes, with the run's settings:
//   model      the caller's ModelGraph of the recipe, in training mode, moved to
//              the device ([run] device) and laid out ([run] memory_format)
//   optimizer  the optimizer plugin [optim] type names (sgd, adamw, lamb, ...; made by
//              the PluginHost with its parameters) over param_groups ([[optim.groups]]
//              by name glob, then decay / no decay, fc_lr5)
//   scaler     the GradScaler, enabled for fp16 ([run] precision)
//   objective  the loss plugin ([loss]) and the batch transforms
//              ([[data.batch_transforms]]), made from the host (objective.hpp)
//   reducer    DDP's bucketed all-reduce with the plan's dist.bucket_mb and
//              dist.compression (the loss carries 1/ranks: prescaled), when the plan
//              has more than one rank and dist.reduction = "fast"; none on one rank,
//              and none for "exact", whose sum is TrainStep's own (exact_sum.hpp)
//   step       the TrainStep with the plan's options (TrainStep::options_of): rank,
//              run.seed, optim.clip_grad_norm, device and precision
// Built in two stages: the constructor (the model on its device, the optimizer: the
// trainable parameters a DistPlan counts, the state a checkpoint restores), then
// start(plan) once the plan is made and the weights are final (resumed, rank 0's
// broadcast): the reducer binds the gradients to its buckets and the step is made.
// Torch-light header: ATen's tensor type only.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "vexp/runtime/precision.hpp"
#include "vexp/runtime/reducer.hpp"
#include "vexp/runtime/train_step.hpp"

namespace vexp {

class Comm;
class ModelGraph;
class Objective;
class Optimizer;
class PluginHost;
struct ParamGroups;
struct DistPlan;
namespace dsl {
struct RecipePlan;
}

// Where and how the rig's steps compute (the caller resolves them: the recipe's
// [run] keys, or a benchmark's command-line options).
struct RigOptions {
  c10::Device device{c10::kCPU};
  Precision precision = Precision::Fp32;
  MemoryFormat memory_format = MemoryFormat::Contiguous;
  bool sync_phases = false;  // StepOptions::sync_phases (benchmarks)
};

class Rig {
 public:
  // `model`: built from `plan` (ModelGraph(plan, host)) by the caller, which seeds
  // and logs around it; the rig puts it in training mode, on the device and in its
  // layout, then builds the optimizer, the scaler and the objective (the optimizer
  // and the objective's plugins made from `host`, which must outlive the rig). `comm`:
  // this rank's. A glob of [[optim.groups]] that matches no parameter throws base::invalid.
  Rig(const dsl::RecipePlan& plan, const PluginHost& host, std::shared_ptr<ModelGraph> model,
      std::shared_ptr<Comm> comm, RigOptions options);
  ~Rig();
  Rig(const Rig&) = delete;
  Rig& operator=(const Rig&) = delete;

  // Whether a run of `dp` exchanges its gradients through a Reducer: more than one
  // rank and the fast reduction.
  static bool uses_reducer(const DistPlan& dp);
  // The Reducer's settings for a run of `dp`: dist.bucket_mb, dist.compression,
  // prescaled (TrainStep's loss carries 1/ranks).
  static ReducerOptions reducer_options(const DistPlan& dp);
  // The TrainStep's options for a run of `dp` (TrainStep::options_of) on this rig.
  StepOptions step_options(const DistPlan& dp) const;

  // The second stage, once: the reducer (uses_reducer(dp)) and the step.
  TrainStep& start(const DistPlan& dp);
  bool started() const { return step_ != nullptr; }

  ModelGraph& model() const { return *model_; }
  // The trainable parameters in registration order (the optimizer's).
  const std::vector<at::Tensor>& params() const { return params_; }
  // Each one's elements (make_dist_plan's grad_numels: the reducer's bucket layout).
  std::vector<int64_t> grad_numels() const;
  Optimizer& optimizer() const { return *optimizer_; }
  // The parameter groups the optimizer was given, with their rules (optimizer.hpp).
  const ParamGroups& param_groups() const { return *groups_; }
  GradScaler& scaler() const { return *scaler_; }
  const Objective& objective() const { return *objective_; }
  // The layout in effect (apply_memory_format: Contiguous when no weight was re-laid out).
  MemoryFormat memory_format() const { return memory_format_; }
  const RigOptions& options() const { return opt_; }
  // After start(): the reducer (null: one rank, or the exact reduction) and the step.
  Reducer* reducer() const { return reducer_.get(); }
  TrainStep& step() const;

 private:
  uint64_t seed_ = 0;          // run.seed
  double clip_grad_norm_ = 0;  // optim.clip_grad_norm
  int64_t noise_every_ = 0;    // run.noise_scale_every
  std::shared_ptr<ModelGraph> model_;
  std::shared_ptr<Comm> comm_;
  RigOptions opt_;
  MemoryFormat memory_format_ = MemoryFormat::Contiguous;
  std::vector<at::Tensor> params_;
  std::unique_ptr<ParamGroups> groups_;
  std::shared_ptr<Optimizer> optimizer_;
  std::unique_ptr<GradScaler> scaler_;
  std::unique_ptr<Objective> objective_;
  std::unique_ptr<Reducer> reducer_;
  std::unique_ptr<TrainStep> step_;
};

}  // namespace vexp
