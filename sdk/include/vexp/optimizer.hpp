// Optimizer plugins (kind "optimizer", since plugin ABI 5): the update rule of
// training. A recipe names one with [optim] type = "NAME"; the plugin's own
// parameters sit beside it (momentum, betas, ...) and reach its factory as Params.
//
// The host owns everything around the update: it groups the trainable parameters
// (the recipe's [[optim.groups]] by name glob, then the default rule: no decay on
// biases and BatchNorm, TSN's fc_lr5), hands the groups over once (set_groups),
// averages and unscales the gradients, clips their global norm, then calls step()
// once per optimizer step at the scheduled learning rate and zeroes the gradients
// afterwards. A step whose gradients held an inf / NaN (fp16) is not stepped.
//
// Everything an optimizer keeps between steps (momentum, moments, step counts) is
// its state(): checkpoints save it and a resume gives it back through
// load_state(), and with several ranks rank 0's state is broadcast the same way
// (state(), every tensor overwritten in place with rank 0's, load_state()), so a
// resumed or distributed run continues bit for bit.
//
// Torch-light: ATen's tensor type only (implementations include ATen/ATen.h).
#pragma once

#include <map>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

namespace vexp {

// Parameters sharing a learning-rate multiplier and a weight decay. Every
// trainable parameter is in exactly one group.
struct ParamGroup {
  std::string name;          // the group's name ("decay", "no_decay", "fc_weight", a recipe group's name, ...)
  double lr_mult = 1.0;      // the group's lr is the scheduled lr times this
  double weight_decay = 0.0; // as the optimizer applies it (L2 for sgd, decoupled for adamw)
  std::vector<std::string> names;  // the parameters' dotted names, as in the model's state dict
  std::vector<at::Tensor> params;  // the same parameters (the model's own tensors), in the same order
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // Once, before the first step and before load_state. An override that keeps
  // its own index calls this one (groups() is what the host shows).
  virtual void set_groups(std::vector<ParamGroup> groups) { groups_ = std::move(groups); }
  // One update, in place, of every parameter that has a gradient (p.grad() defined),
  // at learning rate `lr` times its group's lr_mult. The host calls it under
  // no-grad; parameters and gradients may be on a GPU and channels-last.
  virtual void step(double lr) = 0;
  // The state a checkpoint keeps, by name. Names are stable across versions (a
  // checkpoint names them); a convention: "<slot>/<parameter name>" (adamw:
  // "exp_avg/fc.weight", "step/fc.weight"). Tensors of any dtype, on any device;
  // they may be the optimizer's own (the host only reads them or overwrites them
  // before giving them back to load_state).
  virtual std::map<std::string, at::Tensor> state() const { return {}; }
  // What state() gave (from a checkpoint: contiguous CPU copies, to be placed
  // beside their parameters: device, dtype, memory format). Replaces the whole
  // state; an entry the optimizer does not know throws (a message naming it).
  virtual void load_state(const std::map<std::string, at::Tensor>& state) { (void)state; }
  const std::vector<ParamGroup>& groups() const { return groups_; }

 protected:
  std::vector<ParamGroup> groups_;
};

}  // namespace vexp
