#include "resnet3d_plan.hpp"

#include <stdexcept>

namespace vexp_resnet3d {

using vexp::schema::ShapeError;

std::string BlockPlan::prefix() const { return vexp_resnet_layout::block_prefix(stage, index); }

namespace {

std::vector<int> blocks_per_stage(int64_t depth) { return vexp_resnet_layout::blocks_per_stage(depth, "resnet3d"); }

Window window(int64_t kt, int64_t kh, int64_t kw, int64_t st, int64_t sh, int64_t sw, int64_t pt, int64_t ph,
              int64_t pw) {
  Window w;
  w.k[0] = kt, w.k[1] = kh, w.k[2] = kw;
  w.s[0] = st, w.s[1] = sh, w.s[2] = sw;
  w.p[0] = pt, w.p[1] = ph, w.p[2] = pw;
  return w;
}

void apply(Shape& s, const Window& w) {
  for (int d = 0; d < 3; ++d) s[2 + d] = vexp_resnet_layout::conv_out_size(s[2 + d], w.k[d], w.s[d], w.p[d]);
}

// The per-stage inflate pattern: "all", "none", or per-stage digit groups
// "111,1010,101010,010" (one digit per block; a shorter group repeats, as mmaction2's does).
std::vector<std::vector<bool>> parse_inflate(const std::string& text, const std::vector<int>& counts) {
  std::vector<std::vector<bool>> out(4);
  if (text == "all" || text == "none") {
    for (int s = 0; s < 4; ++s) out[s].assign(static_cast<size_t>(counts[s]), text == "all");
    return out;
  }
  std::vector<std::string> groups;
  std::string cur;
  for (char c : text) {
    if (c == ',') {
      groups.push_back(cur);
      cur.clear();
    } else if (c == '0' || c == '1') {
      cur += c;
    } else if (c != ' ') {
      throw std::invalid_argument("resnet3d: inflate '" + text +
                                  "' must be all, none, or four comma-separated groups of 0/1 digits (one per block)");
    }
  }
  groups.push_back(cur);
  if (groups.size() != 4)
    throw std::invalid_argument("resnet3d: inflate '" + text + "' has " + std::to_string(groups.size()) +
                                " groups; it needs one per stage (4)");
  for (int s = 0; s < 4; ++s) {
    if (groups[s].empty()) throw std::invalid_argument("resnet3d: inflate '" + text + "' has an empty group");
    for (int b = 0; b < counts[s]; ++b) out[s].push_back(groups[s][static_cast<size_t>(b) % groups[s].size()] == '1');
  }
  return out;
}

Shape after_stem(const Plan& plan, const Shape& input) {
  if (input.size() != 5)
    throw ShapeError("resnet3d: expects a clip batch [N, T, " + std::to_string(plan.in_channels) + ", H, W], got " +
                     vexp::schema::shape_str(input));
  if (input[2] >= 0 && input[2] != plan.in_channels)
    throw ShapeError("resnet3d: the clip has " + std::to_string(input[2]) + " channels (dim 2) but in_channels = " +
                     std::to_string(plan.in_channels));
  Shape s{input[0], plan.stem_channels, input[1], input[3], input[4]};
  apply(s, plan.stem);
  apply(s, plan.pool1);
  return s;
}

Shape after_block(const BlockPlan& b, Shape s, const Plan& plan) {
  apply(s, b.conv1);
  apply(s, b.conv2);
  s[1] = b.out_channels;
  if (plan.with_pool2 && b.stage == 1 && b.index + 1 == static_cast<int>(blocks_per_stage(plan.depth)[0]))
    apply(s, plan.pool2);
  return s;
}

void check_positive(const Shape& s, const Shape& input) {
  vexp_resnet_layout::check_positive(s, input, "resnet3d: the clip");
}

}  // namespace

Plan Plan::from(const vexp::schema::Params& p) {
  Plan plan;
  plan.depth = p.i64("depth");
  const std::vector<int> counts = blocks_per_stage(plan.depth);
  plan.bottleneck = plan.depth >= 50;
  plan.in_channels = p.i64("in_channels");
  if (plan.in_channels < 1) throw std::invalid_argument("resnet3d: in_channels must be >= 1");
  plan.inflate_style = p.str("inflate_style");
  if (plan.inflate_style != "3x1x1" && plan.inflate_style != "3x3x3")
    throw std::invalid_argument("resnet3d: inflate_style '" + plan.inflate_style + "' is not one of 3x1x1, 3x3x3");
  const int64_t kt = p.i64("conv1_kernel_t");
  const int64_t st = p.i64("conv1_stride_t");
  const int64_t pt = p.i64("pool1_stride_t");
  if (kt < 1 || kt % 2 == 0) throw std::invalid_argument("resnet3d: conv1_kernel_t must be odd and >= 1");
  if (st < 1 || pt < 1) throw std::invalid_argument("resnet3d: conv1_stride_t and pool1_stride_t must be >= 1");
  plan.stem = window(kt, 7, 7, st, 2, 2, (kt - 1) / 2, 3, 3);
  plan.pool1 = window(1, 3, 3, pt, 2, 2, 0, 1, 1);
  plan.pool2 = window(2, 1, 1, 2, 1, 1, 0, 0, 0);
  plan.with_pool2 = p.flag("with_pool2");
  const auto inflate = parse_inflate(p.str("inflate"), counts);
  const bool t333 = plan.inflate_style == "3x3x3";

  int64_t widths[4];
  vexp_resnet_layout::stage_widths(p.f64("width"), "resnet3d", widths);
  plan.stem_channels = widths[0];
  plan.out_channels =
      vexp_resnet_layout::layout_blocks(counts, widths, plan.bottleneck, plan.stem_channels, plan.blocks, [&](BlockPlan& b) {
        b.inflate = inflate[b.stage - 1][static_cast<size_t>(b.index)];
        const int64_t s = b.stride;
        if (plan.bottleneck) {
          // 3x1x1: the temporal kernel sits on the first 1x1 conv; 3x3x3: on the 3x3 conv.
          b.conv1 = (b.inflate && !t333) ? window(3, 1, 1, 1, 1, 1, 1, 0, 0) : window(1, 1, 1, 1, 1, 1, 0, 0, 0);
          b.conv2 = (b.inflate && t333) ? window(3, 3, 3, 1, s, s, 1, 1, 1) : window(1, 3, 3, 1, s, s, 0, 1, 1);
          b.conv3 = window(1, 1, 1, 1, 1, 1, 0, 0, 0);
        } else {
          // BasicBlock: both 3x3 convs carry the temporal kernel when inflated.
          b.conv1 = b.inflate ? window(3, 3, 3, 1, s, s, 1, 1, 1) : window(1, 3, 3, 1, s, s, 0, 1, 1);
          b.conv2 = b.inflate ? window(3, 3, 3, 1, 1, 1, 1, 1, 1) : window(1, 3, 3, 1, 1, 1, 0, 1, 1);
        }
        b.down = window(1, 1, 1, 1, s, s, 0, 0, 0);
      });
  return plan;
}

std::vector<std::string> insertion_points(const Plan& plan) { return vexp_resnet_layout::insertion_points(plan.blocks); }

std::string unknown_point_message(const Plan& plan, const std::string& point) {
  return vexp_resnet_layout::unknown_point_message("resnet3d", "resnet3d-" + std::to_string(plan.depth),
                                                   insertion_points(plan), point);
}

Shape output_shape(const Plan& plan, const Shape& input) {
  Shape s = after_stem(plan, input);
  for (const BlockPlan& b : plan.blocks) s = after_block(b, s, plan);
  check_positive(s, input);
  return s;
}

Shape point_shape(const Plan& plan, const std::string& point, const Shape& input) {
  Shape s = after_stem(plan, input);
  const vexp_resnet_layout::PointRef at = vexp_resnet_layout::find_point(plan.blocks, point);
  if (!at.found()) throw ShapeError(unknown_point_message(plan, point));
  for (int i = 0; i < at.block; ++i) s = after_block(plan.blocks[static_cast<size_t>(i)], s, plan);
  if (std::string(kPointKinds[at.kind]) == "block_out") {
    // block_out is before pool2 (pool2 follows the stage)
    const BlockPlan& b = plan.blocks[static_cast<size_t>(at.block)];
    apply(s, b.conv1);
    apply(s, b.conv2);
    s[1] = b.out_channels;
  }
  check_positive(s, input);
  return s;
}

}  // namespace vexp_resnet3d
