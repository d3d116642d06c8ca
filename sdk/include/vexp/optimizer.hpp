// Optimizer plugins (kind "optimizer", since plugin ABI 5): the update rule of
// training. The host groups the trainable parameters ([optim] and its groups:
// weight decay on or off, lr multipliers, chosen by name globs), hands the groups
// over once, then calls step() once per optimizer step at the scheduled learning
// rate. Everything an optimizer keeps between steps (momentum, moments, step
// counts) is its state(): checkpoints save it and resume restores it, so that a
// resumed run continues bit for bit.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

namespace vexp {

// Parameters sharing a learning-rate multiplier and a weight decay.
struct ParamGroup {
  std::string name;          // the recipe's group name ("decay", "no_decay", "fc_weight", ...)
  double lr_mult = 1.0;      // the group's lr is the scheduled lr times this
  double weight_decay = 0.0;
  std::vector<std::string> names;  // the parameters' dotted names, as in the model's state dict
  std::vector<at::Tensor> params;  // the same parameters, in the same order
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // Once, before the first step.
  virtual void set_groups(std::vector<ParamGroup> groups) { groups_ = std::move(groups); }
  // One update of every parameter that has a gradient, at learning rate `lr`
  // (times each group's lr_mult), under no-grad.
  virtual void step(double lr) = 0;
  // The state a checkpoint keeps, by name; load_state gets back what state() gave.
  virtual std::map<std::string, at::Tensor> state() const { return {}; }
  virtual void load_state(const std::map<std::string, at::Tensor>& state) { (void)state; }
  const std::vector<ParamGroup>& groups() const { return groups_; }

 protected:
  std::vector<ParamGroup> groups_;
};

}  // namespace vexp
