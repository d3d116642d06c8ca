// The model: plugin layers wired as the recipe's graph says, rewrites applied.
#pragma once

#include <string>
#include <vector>

#include <torch/nn/module.h>

#include "vexp/dsl/validate.hpp"
#include "vexp/layer.hpp"
#include "vexp/runtime/plugin_host.hpp"
#include "vexp/runtime/weights.hpp"

namespace vexp {

class ModelGraph : public torch::nn::Module {
 public:
  ModelGraph(const dsl::RecipePlan& plan, const PluginHost& host);
  // clip: [N, T, C, H, W] -> the output node's tensor.
  at::Tensor forward(const at::Tensor& clip);
  // Names (as in named_parameters) of the parameters that the nodes' plugins
  // declare as a classification head (PluginDecl::head_parameters).
  std::vector<std::string> head_parameter_names() const;
  int64_t parameter_count() const;
  // Multiply-adds of one clip's forward pass, counted by running it.
  double macs_per_clip(const dsl::Shape& clip_shape);
  // Which nodes are the backbone and the classifier (for weight exchange).
  ModelLayout layout() const;
  std::vector<std::string> node_ids() const;
  // Reports of the nodes' `pretrained` files, loaded at construction.
  const std::vector<std::string>& pretrained_reports() const { return pretrained_reports_; }

 private:
  struct Node {
    std::string id;
    std::string op;
    std::string kind;
    std::vector<int> inputs;  // index into node outputs; -1 = the model input
    std::shared_ptr<Layer> layer;
    std::vector<std::string> head;  // its plugin's PluginDecl::head_parameters
    // For the fatal-signal handler (PluginActivityScope around forward): the
    // plugin library's path ("" for code compiled into the host) and
    // "running op 'x' of node 'y'", formatted once here, not per forward.
    std::string library;
    std::string activity;
  };
  std::vector<Node> nodes_;
  int output_ = -1;
  std::vector<std::string> pretrained_reports_;
};

}  // namespace vexp
