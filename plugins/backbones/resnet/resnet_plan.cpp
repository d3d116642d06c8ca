#include "resnet_plan.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace vexp_resnet {

using vexp::dsl::ShapeError;

const char* const kPointKinds[3] = {"block_in", "residual_in", "block_out"};

std::string BlockPlan::prefix() const {
  return "layer" + std::to_string(stage) + "/block" + std::to_string(index) + "/";
}

namespace {

std::vector<int> blocks_per_stage(int64_t depth) {
  switch (depth) {
    case 18: return {2, 2, 2, 2};
    case 34: return {3, 4, 6, 3};
    case 50: return {3, 4, 6, 3};
    case 101: return {3, 4, 23, 3};
    case 152: return {3, 8, 36, 3};
    default:
      throw std::invalid_argument("resnet: depth " + std::to_string(depth) + " is not one of 18, 34, 50, 101, 152");
  }
}

// Shape with the spatial dims replaced by a conv/pool's output.
void apply_window(Shape& s, int64_t kernel, int64_t stride, int64_t pad) {
  s[2] = conv_out_size(s[2], kernel, stride, pad);
  s[3] = conv_out_size(s[3], kernel, stride, pad);
}

Shape after_stem(const Plan& plan, const Shape& input) {
  if (input.size() != 4)
    throw ShapeError("resnet: expects a 4-D input [M, " + std::to_string(plan.in_channels) + ", H, W], got " +
                     vexp::dsl::shape_str(input));
  if (input[1] >= 0 && input[1] != plan.in_channels)
    throw ShapeError("resnet: the input has " + std::to_string(input[1]) + " channels but in_channels = " +
                     std::to_string(plan.in_channels));
  Shape s = input;
  s[1] = plan.stem_channels;
  if (plan.imagenet_stem) {
    apply_window(s, 7, 2, 3);
    apply_window(s, 3, 2, 1);  // max-pool
  } else {
    apply_window(s, 3, 1, 1);
  }
  return s;
}

Shape after_block(const BlockPlan& b, Shape s) {
  s[1] = b.out_channels;
  apply_window(s, 3, b.stride, 1);
  return s;
}

void check_positive(const Shape& s, const Shape& input) {
  for (size_t i = 2; i < s.size(); ++i)
    if (s[i] == 0)
      throw ShapeError("resnet: the input " + vexp::dsl::shape_str(input) + " is too small: a feature map would be empty");
}

}  // namespace

int64_t conv_out_size(int64_t size, int64_t kernel, int64_t stride, int64_t pad) {
  if (size < 0) return -1;
  const int64_t span = size + 2 * pad - kernel;
  if (span < 0) return 0;
  return span / stride + 1;
}

Plan Plan::from(const vexp::dsl::Params& p) {
  Plan plan;
  plan.depth = p.i64("depth");
  const std::vector<int> counts = blocks_per_stage(plan.depth);
  plan.bottleneck = plan.depth >= 50;
  plan.in_channels = p.i64("in_channels");
  if (plan.in_channels < 1) throw std::invalid_argument("resnet: in_channels must be >= 1");
  const double width = p.f64("width");
  if (!(width > 0)) throw std::invalid_argument("resnet: width must be > 0");
  const std::string& stem = p.str("stem");
  if (stem != "imagenet" && stem != "cifar")
    throw std::invalid_argument("resnet: stem '" + stem + "' is not one of imagenet, cifar");
  plan.imagenet_stem = stem == "imagenet";
  plan.zero_init_residual = p.flag("zero_init_residual");

  const int64_t base[4] = {64, 128, 256, 512};
  for (int64_t b : base)
    plan.stage_widths.push_back(std::max<int64_t>(1, static_cast<int64_t>(std::llround(static_cast<double>(b) * width))));
  plan.stem_channels = plan.stage_widths[0];

  const int64_t expansion = plan.bottleneck ? 4 : 1;
  int64_t channels = plan.stem_channels;
  for (int stage = 1; stage <= 4; ++stage) {
    const int64_t mid = plan.stage_widths[stage - 1];
    for (int i = 0; i < counts[stage - 1]; ++i) {
      BlockPlan b;
      b.stage = stage;
      b.index = i;
      b.in_channels = channels;
      b.mid_channels = mid;
      b.out_channels = mid * expansion;
      b.stride = (stage > 1 && i == 0) ? 2 : 1;
      b.downsample = b.stride != 1 || b.in_channels != b.out_channels;
      plan.blocks.push_back(b);
      channels = b.out_channels;
    }
  }
  plan.out_channels = channels;
  return plan;
}

std::vector<std::string> insertion_points(const Plan& plan) {
  std::vector<std::string> names;
  names.reserve(plan.blocks.size() * 3);
  for (const BlockPlan& b : plan.blocks)
    for (const char* kind : kPointKinds) names.push_back(b.prefix() + kind);
  return names;
}

std::string unknown_point_message(const Plan& plan, const std::string& point) {
  const std::vector<std::string> names = insertion_points(plan);
  std::string msg = "resnet: no insertion point '" + point + "' (resnet" + std::to_string(plan.depth) + " has " +
                    std::to_string(names.size()) + ": " + names[0] + ", " + names[1] + ", " + names[2] + ", ..., " +
                    names.back() + ")";
  return msg;
}

void check_point(const Plan& plan, const std::string& point) {
  for (const BlockPlan& b : plan.blocks) {
    const std::string prefix = b.prefix();
    if (point.compare(0, prefix.size(), prefix) != 0) continue;
    for (const char* kind : kPointKinds)
      if (point.size() == prefix.size() + std::char_traits<char>::length(kind) &&
          point.compare(prefix.size(), std::string::npos, kind) == 0)
        return;
  }
  throw std::invalid_argument(unknown_point_message(plan, point));
}

Shape output_shape(const Plan& plan, const Shape& input) {
  Shape s = after_stem(plan, input);
  for (const BlockPlan& b : plan.blocks) s = after_block(b, s);
  check_positive(s, input);
  return s;
}

Shape point_shape(const Plan& plan, const std::string& point, const Shape& input) {
  try {
    check_point(plan, point);
  } catch (const std::invalid_argument& e) {
    throw ShapeError(e.what());
  }
  Shape s = after_stem(plan, input);
  for (const BlockPlan& b : plan.blocks) {
    const std::string prefix = b.prefix();
    if (point.compare(0, prefix.size(), prefix) == 0) {
      if (point.compare(prefix.size(), std::string::npos, "block_out") == 0) s = after_block(b, s);
      check_positive(s, input);
      return s;
    }
    s = after_block(b, s);
  }
  throw ShapeError(unknown_point_message(plan, point));  // unreachable: check_point passed
}

}  // namespace vexp_resnet
