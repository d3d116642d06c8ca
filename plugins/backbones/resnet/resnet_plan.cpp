#include "resnet_plan.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace vexp_resnet {

using vexp::schema::ShapeError;

std::string BlockPlan::prefix() const { return vexp_resnet_layout::block_prefix(stage, index); }

namespace {

// Shape with the spatial dims replaced by a conv/pool's output.
void apply_window(Shape& s, int64_t kernel, int64_t stride, int64_t pad) {
  s[2] = conv_out_size(s[2], kernel, stride, pad);
  s[3] = conv_out_size(s[3], kernel, stride, pad);
}

Shape after_stem(const Plan& plan, const Shape& input) {
  if (input.size() != 4)
    throw ShapeError("resnet: expects a 4-D input [M, " + std::to_string(plan.in_channels) + ", H, W], got " +
                     vexp::schema::shape_str(input));
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
  vexp_resnet_layout::check_positive(s, input, "resnet: the input");
}

}  // namespace

Plan Plan::from(const vexp::schema::Params& p) {
  Plan plan;
  plan.depth = p.i64("depth");
  const std::vector<int> counts = vexp_resnet_layout::blocks_per_stage(plan.depth, "resnet");
  plan.bottleneck = plan.depth >= 50;
  plan.in_channels = p.i64("in_channels");
  if (plan.in_channels < 1) throw std::invalid_argument("resnet: in_channels must be >= 1");
  const std::string& stem = p.str("stem");
  if (stem != "imagenet" && stem != "cifar")
    throw std::invalid_argument("resnet: stem '" + stem + "' is not one of imagenet, cifar");
  plan.imagenet_stem = stem == "imagenet";
  plan.zero_init_residual = p.flag("zero_init_residual");

  int64_t widths[4];
  vexp_resnet_layout::stage_widths(p.f64("width"), "resnet", widths);
  plan.stage_widths.assign(widths, widths + 4);
  plan.stem_channels = plan.stage_widths[0];
  plan.out_channels = vexp_resnet_layout::layout_blocks(counts, widths, plan.bottleneck, plan.stem_channels,
                                                        plan.blocks, [](BlockPlan&) {});
  return plan;
}

std::vector<std::string> insertion_points(const Plan& plan) { return vexp_resnet_layout::insertion_points(plan.blocks); }

std::string unknown_point_message(const Plan& plan, const std::string& point) {
  return vexp_resnet_layout::unknown_point_message("resnet", "resnet" + std::to_string(plan.depth),
                                                   insertion_points(plan), point);
}

void check_point(const Plan& plan, const std::string& point) {
  if (!vexp_resnet_layout::find_point(plan.blocks, point).found())
    throw std::invalid_argument(unknown_point_message(plan, point));
}

Shape output_shape(const Plan& plan, const Shape& input) {
  Shape s = after_stem(plan, input);
  for (const BlockPlan& b : plan.blocks) s = after_block(b, s);
  check_positive(s, input);
  return s;
}

Shape point_shape(const Plan& plan, const std::string& point, const Shape& input) {
  const vexp_resnet_layout::PointRef at = vexp_resnet_layout::find_point(plan.blocks, point);
  if (!at.found()) throw ShapeError(unknown_point_message(plan, point));
  Shape s = after_stem(plan, input);
  for (int i = 0; i < at.block; ++i) s = after_block(plan.blocks[static_cast<size_t>(i)], s);
  if (std::string(kPointKinds[at.kind]) == "block_out") s = after_block(plan.blocks[static_cast<size_t>(at.block)], s);
  check_positive(s, input);
  return s;
}

}  // namespace vexp_resnet
