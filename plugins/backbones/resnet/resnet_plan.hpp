// The ResNet architecture as plain numbers: which blocks exist, their channels and
// strides, and the exact shape arithmetic. Torch-free, so the shape hooks that
// validation calls and the module that runs share one description.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "../common/resnet_layout.hpp"
#include "vexp/schema/catalog.hpp"
#include "vexp/schema/value.hpp"

namespace vexp_resnet {

using vexp::schema::Shape;

struct BlockPlan {
  int stage = 1;  // 1..4 (torchvision's layer1..layer4)
  int index = 0;  // 0-based within the stage
  int64_t in_channels = 0;
  int64_t mid_channels = 0;  // the stage width
  int64_t out_channels = 0;  // mid (BasicBlock) or 4 * mid (Bottleneck)
  int64_t stride = 1;        // on the 3x3 conv (torchvision v1.5) and the downsample
  bool downsample = false;   // 1x1 conv + BN on the identity path

  // "layer{stage}/block{index}/" : the prefix of this block's insertion points.
  std::string prefix() const;
};

struct Plan {
  int64_t depth = 50;
  bool bottleneck = true;
  int64_t in_channels = 3;
  int64_t stem_channels = 64;
  bool imagenet_stem = true;  // 7x7/2 conv + 3x3/2 max-pool; else 3x3/1 conv, no pool
  bool zero_init_residual = false;
  std::vector<int64_t> stage_widths;  // 4 entries
  std::vector<BlockPlan> blocks;      // in execution order
  int64_t out_channels = 0;

  static Plan from(const vexp::schema::Params& p);
};

// The three points of every block, in execution order: "block_in", "residual_in", "block_out".
using vexp_resnet_layout::kPointKinds;

std::vector<std::string> insertion_points(const Plan& plan);
// Throws std::invalid_argument naming `point` and a few valid ones when unknown.
void check_point(const Plan& plan, const std::string& point);
std::string unknown_point_message(const Plan& plan, const std::string& point);

// Output shape of the backbone for input [M, in_channels, H, W]; -1 stays unknown.
// Throws vexp::schema::ShapeError.
Shape output_shape(const Plan& plan, const Shape& input);
// Shape of the tensor at `point` for this input.
Shape point_shape(const Plan& plan, const std::string& point, const Shape& input);

// floor((size + 2 * pad - kernel) / stride) + 1, or -1 for an unknown size.
using vexp_resnet_layout::conv_out_size;

}  // namespace vexp_resnet
