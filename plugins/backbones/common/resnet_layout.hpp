// The parts of the ResNet layout that the 2-D (resnet) and the I3D (resnet3d)
// backbones share: blocks per stage for each depth, the stage/block walk with
// channels, strides and downsampling, the insertion-point names, finding a
// point's block and the unknown-point message. Torch-free and header-only.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "vexp/schema/catalog.hpp"
#include "vexp/schema/value.hpp"

namespace vexp_resnet_layout {

using vexp::schema::Shape;

// The three points of every block, in execution order.
inline constexpr const char* kPointKinds[3] = {"block_in", "residual_in", "block_out"};

// "layer{stage}/block{index}/" : the prefix of a block's insertion points.
inline std::string block_prefix(int stage, int index) {
  return "layer" + std::to_string(stage) + "/block" + std::to_string(index) + "/";
}

// Blocks in each of the four stages; `plugin` names the caller in the error.
inline std::vector<int> blocks_per_stage(int64_t depth, const std::string& plugin) {
  switch (depth) {
    case 18: return {2, 2, 2, 2};
    case 34: return {3, 4, 6, 3};
    case 50: return {3, 4, 6, 3};
    case 101: return {3, 4, 23, 3};
    case 152: return {3, 8, 36, 3};
    default:
      throw std::invalid_argument(plugin + ": depth " + std::to_string(depth) + " is not one of 18, 34, 50, 101, 152");
  }
}

// The four stages' widths, 64, 128, 256, 512 x `width` (rounded, at least 1): the
// `width` parameter of both backbones; `plugin` names the caller in the error.
inline void stage_widths(double width, const std::string& plugin, int64_t (&out)[4]) {
  if (!(width > 0)) throw std::invalid_argument(plugin + ": width must be > 0");
  const int64_t base[4] = {64, 128, 256, 512};
  for (int i = 0; i < 4; ++i)
    out[i] = std::max<int64_t>(1, static_cast<int64_t>(std::llround(static_cast<double>(base[i]) * width)));
}

// floor((size + 2 * pad - kernel) / stride) + 1, 0 when the window does not fit,
// or -1 for an unknown size.
inline int64_t conv_out_size(int64_t size, int64_t kernel, int64_t stride, int64_t pad) {
  if (size < 0) return -1;
  const int64_t span = size + 2 * pad - kernel;
  if (span < 0) return 0;
  return span / stride + 1;
}

// Walks the stages in execution order, filling the fields every ResNet block has
// (stage, index, in/mid/out channels, stride, downsample) of a default-constructed
// B, then calls finish(b) for the caller's own fields, and appends b to `blocks`.
// Returns the channels of the last block.
template <class B, class Finish>
int64_t layout_blocks(const std::vector<int>& counts, const int64_t (&widths)[4], bool bottleneck,
                      int64_t stem_channels, std::vector<B>& blocks, Finish finish) {
  const int64_t expansion = bottleneck ? 4 : 1;
  int64_t channels = stem_channels;
  for (int stage = 1; stage <= 4; ++stage) {
    for (int i = 0; i < counts[stage - 1]; ++i) {
      B b;
      b.stage = stage;
      b.index = i;
      b.in_channels = channels;
      b.mid_channels = widths[stage - 1];
      b.out_channels = b.mid_channels * expansion;
      b.stride = (stage > 1 && i == 0) ? 2 : 1;
      b.downsample = b.stride != 1 || b.in_channels != b.out_channels;
      finish(b);
      blocks.push_back(b);
      channels = b.out_channels;
    }
  }
  return channels;
}

template <class B>
std::vector<std::string> insertion_points(const std::vector<B>& blocks) {
  std::vector<std::string> names;
  names.reserve(blocks.size() * 3);
  for (const B& b : blocks)
    for (const char* kind : kPointKinds) names.push_back(b.prefix() + kind);
  return names;
}

// Where `point` is: the index of its block in `blocks` and its kind (an index
// into kPointKinds); block -1 when no block has that point.
struct PointRef {
  int block = -1;
  int kind = -1;
  bool found() const { return block >= 0; }
};

template <class B>
PointRef find_point(const std::vector<B>& blocks, const std::string& point) {
  for (size_t i = 0; i < blocks.size(); ++i) {
    const std::string prefix = blocks[i].prefix();
    if (point.compare(0, prefix.size(), prefix) != 0) continue;
    for (int k = 0; k < 3; ++k)
      if (point.compare(prefix.size(), std::string::npos, kPointKinds[k]) == 0) return {static_cast<int>(i), k};
    return {};
  }
  return {};
}

// "{plugin}: no insertion point '{point}' ({model} has N: first three, ..., last)".
inline std::string unknown_point_message(const std::string& plugin, const std::string& model,
                                         const std::vector<std::string>& names, const std::string& point) {
  return plugin + ": no insertion point '" + point + "' (" + model + " has " + std::to_string(names.size()) + ": " +
         names[0] + ", " + names[1] + ", " + names[2] + ", ..., " + names.back() + ")";
}

// Throws vexp::schema::ShapeError("{what} {input} is too small: ...") when a spatial or
// temporal dim (from dim 2 on) of `s` became empty.
inline void check_positive(const Shape& s, const Shape& input, const std::string& what) {
  for (size_t i = 2; i < s.size(); ++i)
    if (s[i] == 0)
      throw vexp::schema::ShapeError(what + " " + vexp::schema::shape_str(input) +
                                     " is too small: a feature map would be empty");
}

}  // namespace vexp_resnet_layout
