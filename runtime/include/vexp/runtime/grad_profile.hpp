// Where a model's forward multiply-adds sit among its trainable parameters: what
// `vexp plan` needs to know when each gradient bucket is ready during backward.
// Torch-free header.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "vexp/schema/catalog.hpp"

namespace vexp {

class ModelGraph;

struct GradientProfile {
  // Trainable parameters in registration order, the order the trainer hands them
  // to the Reducer (param_groups: named_parameters, requires_grad).
  std::vector<std::string> names;
  std::vector<int64_t> numels;
  // Forward MACs of one clip attributed to each parameter: the MACs a layer
  // counts (flops.hpp) go to the parameters its last ATen call took as inputs.
  std::vector<double> macs;
  double macs_per_clip = 0;  // all of the forward's MACs (what `vexp info` prints)
  // False when no counted MAC could be tied to a parameter (a layer that copies
  // its weights before use): `macs` is then spread in proportion to numels.
  bool attributed = false;
};

// Runs one clip of `clip` ([T, C, H, W]) through `model` (eval mode, no grad,
// as ModelGraph::macs_per_clip) and attributes its MACs to the parameters.
GradientProfile gradient_profile(ModelGraph& model, const dsl::Shape& clip);

}  // namespace vexp
