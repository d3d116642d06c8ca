// ResNet backbone with torchvision's topology and parameter names (v1.5: the
// bottleneck's stride is on its 3x3 conv), no pooling and no fc: the output is
// the last feature map. Every block exposes three insertion points.
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "../common/resnet_block.hpp"
#include "resnet_decl.hpp"
#include "resnet_plan.hpp"
#include "vexp/flops.hpp"
#include "vexp/layer.hpp"
#include "vexp/registrar.hpp"

namespace vexp_resnet {
namespace {

namespace nn = torch::nn;

using namespace vexp_resnet_layout::counting;  // counted_conv, counted_bn, counted_relu_, shape_text

nn::Conv2d make_conv(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t pad) {
  nn::Conv2d conv(nn::Conv2dOptions(in, out, kernel).stride(stride).padding(pad).bias(false));
  nn::init::kaiming_normal_(conv->weight, 0.0, torch::kFanOut, torch::kReLU);
  return conv;
}

// torchvision's BasicBlock (two 3x3 convs) or Bottleneck (1x1, 3x3 with stride, 1x1).
using Block = vexp_resnet_layout::ResidualBlock<nn::Conv2d, nn::BatchNorm2d>;

// The convs are made (and randomly initialised) in the order conv1, conv2, conv3, downsample.
std::shared_ptr<Block> make_block(const BlockPlan& b, bool bottleneck, bool zero_init_residual) {
  nn::Conv2d conv1{nullptr}, conv2{nullptr}, conv3{nullptr}, down{nullptr};
  if (bottleneck) {
    conv1 = make_conv(b.in_channels, b.mid_channels, 1, 1, 0);
    conv2 = make_conv(b.mid_channels, b.mid_channels, 3, b.stride, 1);
    conv3 = make_conv(b.mid_channels, b.out_channels, 1, 1, 0);
  } else {
    conv1 = make_conv(b.in_channels, b.mid_channels, 3, b.stride, 1);
    conv2 = make_conv(b.mid_channels, b.out_channels, 3, 1, 1);
  }
  if (b.downsample) down = make_conv(b.in_channels, b.out_channels, 1, b.stride, 0);
  return std::make_shared<Block>(b, zero_init_residual, conv1, conv2, conv3, down);
}

class ResNet : public vexp_resnet_layout::ResNetBody<Plan, Block> {
 public:
  explicit ResNet(const vexp::Params& p) : ResNetBody(Plan::from(p)) {
    if (plan_.imagenet_stem) {
      conv1_ = register_module("conv1", make_conv(plan_.in_channels, plan_.stem_channels, 7, 2, 3));
    } else {
      conv1_ = register_module("conv1", make_conv(plan_.in_channels, plan_.stem_channels, 3, 1, 1));
    }
    bn1_ = register_module("bn1", nn::BatchNorm2d(plan_.stem_channels));
    add_blocks([&](const BlockPlan& b) { return make_block(b, plan_.bottleneck, plan_.zero_init_residual); });
  }

  at::Tensor forward(const std::vector<at::Tensor>& inputs, const vexp::ForwardContext& ctx) override {
    if (inputs.size() != 1) throw std::runtime_error("resnet: expects one input, got " + std::to_string(inputs.size()));
    at::Tensor x = inputs[0];
    if (x.dim() != 4) {
      throw std::runtime_error("resnet: expects a 4-D input [M, " + std::to_string(plan_.in_channels) +
                               ", H, W], got " + shape_text(x));
    }
    if (x.size(1) != plan_.in_channels) {
      throw std::runtime_error("resnet: the input " + shape_text(x) + " has " + std::to_string(x.size(1)) +
                               " channels but in_channels = " + std::to_string(plan_.in_channels));
    }
    const bool counting = vexp::counting_macs();
    x = counted_relu_(counted_bn(bn1_, counted_conv(conv1_, x, counting), counting), counting);
    if (plan_.imagenet_stem) {
      if (counting) vexp::add_macs(static_cast<double>(x.numel()));
      x = at::max_pool2d(x, {3, 3}, {2, 2}, {1, 1});
    }
    for (const auto& block : blocks_) x = block->forward(x, points_, ctx);
    return x;
  }

 private:
  nn::Conv2d conv1_{nullptr};
  nn::BatchNorm2d bn1_{nullptr};
};

}  // namespace
}  // namespace vexp_resnet

VEXP_PLUGIN("resnet", "0.1.0") {
  registrar.add_backbone(vexp_resnet::declaration(),
                         [](const vexp::Params& p) { return std::make_shared<vexp_resnet::ResNet>(p); });
}
