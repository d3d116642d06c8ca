// Model graph nodes: operators and backbones are Layers (torch::nn::Module
// subclasses so that parameter names follow PyTorch's dotted convention).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <torch/nn/module.h>

#include "vexp/registrar.hpp"

namespace vexp {

// What a layer may need to know about the batch it runs on.
struct ForwardContext {
  int64_t batch = 0;   // clips in this micro-batch (N)
  int64_t frames = 0;  // frames per clip (T)
};

class Layer : public torch::nn::Module {
 public:
  // Called once by the graph after construction and rewrites, before any
  // forward, with the input shapes found by shape inference (dimension 0 is the
  // batch; a shape is empty when unknown). Layers whose parameters depend on
  // their input (a classifier's in_features) create them here.
  virtual void build(const std::vector<schema::Shape>& input_shapes, const schema::GraphContext& ctx) {
    (void)input_shapes;
    (void)ctx;
  }

  virtual at::Tensor forward(const std::vector<at::Tensor>& inputs, const ForwardContext& ctx) = 0;

  // Backbones: attach `layer` at a named insertion point; several layers at one
  // point run in the order inserted. The default refuses (no insertion points).
  virtual void insert(const std::string& point, std::shared_ptr<Layer> layer);
};

// Helper for backbones: the layers inserted at each point, applied in order and
// registered as submodules (named after the point, "_" for "/") of `owner`.
class InsertionPoints {
 public:
  // Declares a point. `owner` registers inserted layers as its submodules under
  // `module_name` (e.g. "residual_in", or "residual_in_1" for a second one).
  void declare(const std::string& point, torch::nn::Module* owner, const std::string& module_name);
  bool has(const std::string& point) const { return points_.count(point) != 0; }
  std::vector<std::string> names() const;
  void insert(const std::string& point, std::shared_ptr<Layer> layer);  // throws on unknown point
  at::Tensor apply(const std::string& point, at::Tensor x, const ForwardContext& ctx) const;
  bool empty(const std::string& point) const;

 private:
  struct Point {
    torch::nn::Module* owner = nullptr;
    std::string module_name;
    std::vector<std::shared_ptr<Layer>> layers;
  };
  std::map<std::string, Point> points_;
};

}  // namespace vexp
