// The training rig (rig.hpp): the trainer's and the benchmarks' only copy.
#include "vexp/runtime/rig.hpp"

#include <stdexcept>

#include <ATen/ATen.h>

#include "vexp/comm.hpp"
#include "vexp/runtime/dist_plan.hpp"
#include "vexp/runtime/graph.hpp"
#include "vexp/log.hpp"
#include "vexp/runtime/objective.hpp"
#include "vexp/runtime/optimizer.hpp"

namespace vexp {

Rig::Rig(const dsl::RecipePlan& plan, const PluginHost& host, std::shared_ptr<ModelGraph> model,
         std::shared_ptr<Comm> comm, RigOptions options)
    : seed_(static_cast<uint64_t>(plan.run.seed)),
      clip_grad_norm_(plan.optim.clip_grad_norm),
      noise_every_(plan.run.noise_scale_every),
      model_(std::move(model)),
      comm_(std::move(comm)),
      opt_(options) {
  if (!model_ || !comm_) throw std::logic_error("Rig: a model and a communicator are required");
  model_->train();
  // Parameters and buffers move in place (set_data), so the tensors taken from the
  // model below are the device's; checkpoints hold CPU copies.
  if (!opt_.device.is_cpu()) model_->to(opt_.device);
  memory_format_ = apply_memory_format(model_->parameters(true), opt_.memory_format);
  // Parameter groups: the recipe's [[optim.groups]], then decay / no decay (biases,
  // BatchNorm) and TSN's fc_lr5 policy; the optimizer plugin [optim] type names.
  groups_ = std::make_unique<ParamGroups>(vexp::param_groups(*model_, plan.optim));
  check_param_groups(*groups_);
  params_ = groups_->trainable;
  if (comm_->rank() == 0)
    for (const auto& w : groups_->warnings) log_warn(w.loc.str() + ": " + w.message);
  optimizer_ = make_optimizer(host, plan.optim, groups_->groups);
  scaler_ = std::make_unique<GradScaler>(opt_.precision == Precision::Fp16);
  objective_ = std::make_unique<Objective>(plan, host);
}

Rig::~Rig() = default;

bool Rig::uses_reducer(const DistPlan& dp) { return dp.ranks > 1 && !dp.exact; }

ReducerOptions Rig::reducer_options(const DistPlan& dp) {
  ReducerOptions ro;
  ro.bucket_mb = dp.bucket_mb;
  ro.compression = dp.compression;
  ro.prescaled = true;  // TrainStep's loss carries 1/ranks: the reducer sums
  return ro;
}

StepOptions Rig::step_options(const DistPlan& dp) const {
  StepOptions so;
  so.rank = comm_->rank();
  so.seed = seed_;
  so.clip_grad_norm = clip_grad_norm_;
  so.noise_every = noise_every_;
  so.device = opt_.device;
  so.precision = opt_.precision;
  so.sync_phases = opt_.sync_phases;
  return TrainStep::options_of(dp, so);
}

TrainStep& Rig::start(const DistPlan& dp) {
  if (step_) throw std::logic_error("Rig::start: already started");
  objective_->set_schedule(dp.total_steps, dp.global_batch, dp.train_size);
  if (uses_reducer(dp)) reducer_ = std::make_unique<Reducer>(params_, comm_, reducer_options(dp));
  step_ = std::make_unique<TrainStep>(
      StepParts{model_.get(), optimizer_.get(), scaler_.get(), &params_, reducer_.get(), comm_.get(), objective_.get()},
      step_options(dp));
  return *step_;
}

std::vector<int64_t> Rig::grad_numels() const {
  std::vector<int64_t> n;
  for (const auto& p : params_) n.push_back(p.numel());
  return n;
}

TrainStep& Rig::step() const {
  if (!step_) throw std::logic_error("Rig::step: start() was not called");
  return *step_;
}

}  // namespace vexp
