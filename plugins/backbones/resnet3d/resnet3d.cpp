// I3D ResNet backbone: ResNet-18..152 with 3D convolutions and a per-block
// inflation pattern (mmaction2's ResNet3d layout), torchvision-style parameter
// names (conv1, bn1, layer1.0.conv1, downsample.0/1) so 2D ImageNet weights load
// by inflation. Input is the clip batch [N, T, C, H, W]; output [N, C', T', H', W'].
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "../common/resnet_block.hpp"
#include "resnet3d_plan.hpp"
#include "vexp/flops.hpp"
#include "vexp/layer.hpp"
#include "vexp/registrar.hpp"

namespace vexp_resnet3d {
namespace {

namespace nn = torch::nn;

// MACs in mmcv's get_model_complexity_info convention, as the 2D resnet plugin counts.
using namespace vexp_resnet_layout::counting;  // counted_conv, counted_bn, counted_relu_, shape_text

at::Tensor counted_pool(const at::Tensor& x, const Window& w, bool counting) {
  if (counting) vexp::add_macs(static_cast<double>(x.numel()));
  return at::max_pool3d(x, {w.k[0], w.k[1], w.k[2]}, {w.s[0], w.s[1], w.s[2]}, {w.p[0], w.p[1], w.p[2]});
}

nn::Conv3d make_conv(int64_t in, int64_t out, const Window& w) {
  nn::Conv3d conv(nn::Conv3dOptions(in, out, {w.k[0], w.k[1], w.k[2]})
                      .stride({w.s[0], w.s[1], w.s[2]})
                      .padding({w.p[0], w.p[1], w.p[2]})
                      .bias(false));
  nn::init::kaiming_normal_(conv->weight, 0.0, torch::kFanOut, torch::kReLU);
  return conv;
}

using Block = vexp_resnet_layout::ResidualBlock<nn::Conv3d, nn::BatchNorm3d>;

// The convs are made (and randomly initialised) in the order conv1, conv2, conv3, downsample.
std::shared_ptr<Block> make_block(const BlockPlan& b, bool bottleneck, bool zero_init_residual) {
  nn::Conv3d conv1{nullptr}, conv2{nullptr}, conv3{nullptr}, down{nullptr};
  conv1 = make_conv(b.in_channels, b.mid_channels, b.conv1);
  conv2 = make_conv(b.mid_channels, bottleneck ? b.mid_channels : b.out_channels, b.conv2);
  if (bottleneck) conv3 = make_conv(b.mid_channels, b.out_channels, b.conv3);
  if (b.downsample) down = make_conv(b.in_channels, b.out_channels, b.down);
  return std::make_shared<Block>(b, zero_init_residual, conv1, conv2, conv3, down);
}

class ResNet3d : public vexp_resnet_layout::ResNetBody<Plan, Block> {
 public:
  explicit ResNet3d(const vexp::Params& p) : ResNetBody(Plan::from(p)) {
    conv1_ = register_module("conv1", make_conv(plan_.in_channels, plan_.stem_channels, plan_.stem));
    bn1_ = register_module("bn1", nn::BatchNorm3d(plan_.stem_channels));
    const bool zero_init = p.flag("zero_init_residual");
    add_blocks([&](const BlockPlan& b) { return make_block(b, plan_.bottleneck, zero_init); });
    for (size_t i = 0; i < plan_.blocks.size(); ++i)
      if (plan_.blocks[i].stage == 1) last_of_stage1_ = static_cast<int>(i);
  }

  at::Tensor forward(const std::vector<at::Tensor>& inputs, const vexp::ForwardContext& ctx) override {
    if (inputs.size() != 1) throw std::runtime_error("resnet3d: expects one input, got " + std::to_string(inputs.size()));
    const at::Tensor& clip = inputs[0];
    if (clip.dim() != 5 || clip.size(2) != plan_.in_channels)
      throw std::runtime_error("resnet3d: expects a clip batch [N, T, " + std::to_string(plan_.in_channels) +
                               ", H, W], got " + shape_text(clip));
    const bool counting = vexp::counting_macs();
    at::Tensor x = clip.transpose(1, 2).contiguous();  // [N, C, T, H, W]
    x = counted_relu_(counted_bn(bn1_, counted_conv(conv1_, x, counting), counting), counting);
    x = counted_pool(x, plan_.pool1, counting);
    for (size_t i = 0; i < blocks_.size(); ++i) {
      x = blocks_[i]->forward(x, points_, ctx);
      if (plan_.with_pool2 && static_cast<int>(i) == last_of_stage1_) x = counted_pool(x, plan_.pool2, counting);
    }
    return x;
  }

 private:
  nn::Conv3d conv1_{nullptr};
  nn::BatchNorm3d bn1_{nullptr};
  int last_of_stage1_ = -1;
};

}  // namespace
}  // namespace vexp_resnet3d

VEXP_PLUGIN("resnet3d", "0.1.0") {
  using namespace vexp_resnet3d;
  vexp::PluginDecl d("resnet3d",
      "I3D ResNet backbone (3D convs, per-block inflation, torchvision names): [N, T, C, H, W] -> [N, C', T', H', W']");
  d.schema.integer("depth", 50, "Number of layers: BasicBlocks for 18/34, Bottlenecks for 50+").one_of({18, 34, 50, 101, 152});
  d.schema.integer("in_channels", 3, "Channels of the input frames").at_least(1);
  d.schema.real("width", 1.0, "channel multiplier: stage widths 64,128,256,512 x width, at least 1").range(0.01, 4);
  d.schema.text("inflate", "all",
                "Inflated blocks: all, none, or one 0/1 digit per block in 4 comma-separated stage groups "
                "(\"111,1010,101010,010\"; a short group repeats)");
  d.schema.text("inflate_style", "3x1x1", "3x1x1: temporal kernel on the first 1x1 conv; 3x3x3: on the 3x3 conv")
      .one_of({"3x1x1", "3x3x3"});
  d.schema.integer("conv1_kernel_t", 5, "Temporal kernel of the stem conv (odd; spatial is 7x7)").at_least(1);
  d.schema.integer("conv1_stride_t", 2, "Temporal stride of the stem conv").at_least(1);
  d.schema.integer("pool1_stride_t", 2, "Temporal stride of the stem max-pool (1x3x3)").at_least(1);
  d.schema.boolean("with_pool2", true, "Temporal max-pool 2x1x1 (stride 2) after layer1");
  d.schema.boolean("zero_init_residual", false, "Zero the last BN weight of each block");
  d.insertion_points = [](const vexp::Params& p) { return insertion_points(Plan::from(p)); };
  d.infer_shape = [](const vexp::Params& p, const std::vector<vexp::Shape>& in, const vexp::schema::GraphContext&) {
    if (in.size() != 1) throw vexp::ShapeError("resnet3d: expects one input, got " + std::to_string(in.size()));
    return output_shape(Plan::from(p), in[0]);
  };
  d.point_shape = [](const vexp::Params& p, const std::string& point, const vexp::Shape& input) {
    return point_shape(Plan::from(p), point, input);
  };
  registrar.add_backbone(std::move(d), [](const vexp::Params& p) { return std::make_shared<ResNet3d>(p); });
}
