// I3D ResNet (inflated 3D ResNet, mmaction2's ResNet3d layout) as plain numbers:
// blocks, channels, strides, which blocks are inflated, and the shape arithmetic.
// Torch-free: the validation hooks and the module share this description.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "../common/resnet_layout.hpp"
#include "vexp/schema/catalog.hpp"
#include "vexp/schema/value.hpp"

namespace vexp_resnet3d {

using vexp::schema::Shape;

// A 3-D window: kernel, stride and padding per (T, H, W).
struct Window {
  int64_t k[3] = {1, 1, 1};
  int64_t s[3] = {1, 1, 1};
  int64_t p[3] = {0, 0, 0};
};

struct BlockPlan {
  int stage = 1;  // 1..4
  int index = 0;
  int64_t in_channels = 0, mid_channels = 0, out_channels = 0;
  int64_t stride = 1;  // spatial stride (conv2 and downsample)
  bool downsample = false;
  bool inflate = false;
  Window conv1, conv2, conv3, down;
  std::string prefix() const;  // "layer{stage}/block{index}/"
};

struct Plan {
  int64_t depth = 50;
  bool bottleneck = true;
  int64_t in_channels = 3;
  int64_t stem_channels = 64;
  std::string inflate_style = "3x1x1";
  Window stem, pool1, pool2;
  bool with_pool2 = true;
  std::vector<BlockPlan> blocks;
  int64_t out_channels = 0;

  static Plan from(const vexp::schema::Params& p);
};

using vexp_resnet_layout::kPointKinds;  // "block_in", "residual_in", "block_out"

std::vector<std::string> insertion_points(const Plan& plan);
std::string unknown_point_message(const Plan& plan, const std::string& point);

// Input: a clip batch [N, T, C, H, W]; output [N, C', T', H', W'].
Shape output_shape(const Plan& plan, const Shape& input);
// [N, C, T, H, W] at `point`.
Shape point_shape(const Plan& plan, const std::string& point, const Shape& input);

}  // namespace vexp_resnet3d
