// Exchanging weights with PyTorch: state dicts of torchvision, the official TSM
// code and mmaction2 mapped onto a vexp model (and back), 2D -> 3D inflation.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

namespace vexp {

using StateDict = std::vector<std::pair<std::string, at::Tensor>>;

// Which node ids play which role in the model (filled by ModelGraph::layout()).
struct ModelLayout {
  std::string backbone;    // node holding the network body ("features")
  std::string classifier;  // node holding the final `fc` ("head"); may be empty
};

struct WeightOptions {
  std::string inflate = "mean";  // 2D -> 3D kernels: "mean" (repeat over t, / t) or "center"
  // When set, only tensors of this node (and the classifier's fc when shapes
  // match) are targets, and keys map under this node: a node's `pretrained`.
  std::string scope;
};

struct WeightReport {
  std::vector<std::string> loaded;      // target names
  std::vector<std::string> missing;     // target tensors the file did not provide
  std::vector<std::string> unexpected;  // file keys with no target
  std::vector<std::string> reshaped;    // "target: [a] -> [b] (how)"
  std::vector<std::string> dropped;     // classifier tensors whose class count differs
  // "loaded 320 tensors from 'x.pth'; 2 dropped (...); 0 missing; ..." plus details.
  std::string summary(const std::string& path, bool details = true) const;
};

// The vexp name a file key maps to (before shape checks); `backbone` is the node
// id unprefixed backbone keys go under, `classifier` the node taking fc keys.
std::string map_key(const std::string& key, const ModelLayout& layout, const std::vector<std::string>& node_ids);

// Copies `sd` into `model` (parameters and buffers). Throws std::runtime_error
// naming the key and both shapes on a shape mismatch that is neither an
// inflation nor a classifier whose class count differs.
WeightReport load_weights(torch::nn::Module& model, const ModelLayout& layout, const std::vector<std::string>& node_ids,
                          const StateDict& sd, const WeightOptions& opts, const std::string& path);

// The model's tensors under another project's names:
//  "torchvision": backbone keys unprefixed, classifier fc -> fc.*;
//  "tsm": module.base_model.* with conv1 of shifted blocks as conv1.net.*, module.new_fc.*;
//  "mmaction": backbone.* with ConvModule names (conv1.conv, conv1.bn, downsample.conv/bn), cls_head.fc_cls.*;
//  "vexp": unchanged.
StateDict export_weights(torch::nn::Module& model, const ModelLayout& layout, const std::string& naming);

// Inflates a 2D kernel [O, I, k, k] to [O, I, t, k, k].
at::Tensor inflate_kernel(const at::Tensor& w2d, int64_t t, const std::string& mode);

}  // namespace vexp
