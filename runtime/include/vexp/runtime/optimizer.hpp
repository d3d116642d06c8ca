// The host's side of the optimizer. The update rule is a plugin (kind "optimizer",
// sdk/include/vexp/optimizer.hpp; vexp ships sgd, adamw and lamb in
// plugins/optim/optimizers); the host chooses the parameter groups ([[optim.groups]]
// by name glob, then the default rule), makes the optimizer [optim] type names,
// clips the global gradient norm and zeroes the gradients.
// Torch-light header: ATen's tensor type only.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "vexp/optimizer.hpp"
#include "vexp/schema/value.hpp"

namespace vexp {

class ModelGraph;
class PluginHost;
namespace dsl {
struct OptimConfig;
}

// The trainable parameters of a model in the optimizer's groups.
struct ParamGroups {
  // Every group of the recipe ([[optim.groups]], in order, each with the
  // parameters it was the first to match: possibly none), then the default rule's
  // groups that hold parameters, in the order decay, no_decay (biases and
  // BatchNorm: parameters of one dimension, optim.no_decay_bn_bias), fc_weight and
  // fc_bias (TSN's optim.fc_lr5: the classifier's weight lr x5, its bias lr x10 and
  // no decay). Every trainable parameter is in exactly one group.
  std::vector<ParamGroup> groups;
  // Per group, where its rule comes from: "optim.groups[0] at recipe.toml:31:1",
  // "default rule: optim.no_decay_bn_bias", ...
  std::vector<std::string> rules;
  size_t recipe_groups = 0;           // the first this many groups are the recipe's
  std::vector<at::Tensor> trainable;  // every trainable parameter, in registration order
  // What the recipe's globs did wrong, at the glob: errors (a glob that matches no
  // trainable parameter), warnings (a glob whose every match an earlier group took:
  // it changes nothing).
  struct Note {
    schema::Loc loc;
    std::string message;
  };
  std::vector<Note> errors, warnings;
};

// The groups of `model` as [optim] says (the errors recorded, not thrown).
ParamGroups param_groups(ModelGraph& model, const dsl::OptimConfig& optim);
// Throws base::invalid, one line, at the first error's location ("FILE:L:C:
// optim.groups[0] ('no_decay'): '*bnn*' matches no trainable parameter ...; also ...").
void check_param_groups(const ParamGroups& groups);

// The groups as a table (vexp info, vexp run --dry-run): one line per group (name,
// rule, tensors, elements, lr multiplier, weight decay), the header first.
std::vector<std::string> param_groups_table(const ParamGroups& g);

// The optimizer [optim] type names, made by `host` from optim.params, given `groups`.
std::shared_ptr<Optimizer> make_optimizer(const PluginHost& host, const dsl::OptimConfig& optim,
                                          std::vector<ParamGroup> groups);

// Zeroes every defined gradient in place (the reducer's buckets stay bound to them).
void zero_grad(const std::vector<at::Tensor>& params);

// Global L2 norm of all gradients; scales them down to max_norm when above it.
// Returns the norm before clipping.
double clip_grad_norm(const std::vector<at::Tensor>& params, double max_norm);

}  // namespace vexp
