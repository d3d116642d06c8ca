// The residual block that the 2-D (resnet) and I3D (resnet3d) backbones share
// and the body above the blocks (ResNetBody: stages, insertion points, insert()):
// torchvision's BasicBlock (two 3x3 convs) or Bottleneck (1x1, 3x3, 1x1) with
// torchvision's module names (conv1, bn1, ..., downsample.0/1), its three
// insertion points, and the MAC counting. Templated on the conv and batch-norm
// module holders (nn::Conv2d/BatchNorm2d or nn::Conv3d/BatchNorm3d). Included
// only by the two plugins' .cpp files, which already use torch/nn.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/module.h>
#include <torch/utils.h>

#include "vexp/flops.hpp"
#include "vexp/layer.hpp"

namespace vexp_resnet_layout {

// Multiply-adds in mmcv's get_model_complexity_info convention (the figures of
// mmaction2's model zoo): conv MACs (+1 per output for a bias), BatchNorm 2 per
// input element (affine), ReLU 1 per output element, max-pool 1 per input element.
// A backbone takes them with `using namespace vexp_resnet_layout::counting;`.
inline namespace counting {

template <class Conv>
at::Tensor counted_conv(Conv& conv, const at::Tensor& x, bool counting) {
  at::Tensor y = conv->forward(x);
  if (counting) {
    const auto& o = conv->options;
    int64_t volume = 1;
    for (int64_t k : *o.kernel_size()) volume *= k;
    vexp::add_macs(vexp::conv_macs(y.numel(), o.in_channels() / o.groups(), volume));
    if (o.bias()) vexp::add_macs(static_cast<double>(y.numel()));
  }
  return y;
}

template <class BN>
at::Tensor counted_bn(BN& bn, const at::Tensor& x, bool counting) {
  if (counting) vexp::add_macs((bn->options.affine() ? 2.0 : 1.0) * static_cast<double>(x.numel()));
  return bn->forward(x);
}

inline at::Tensor counted_relu_(at::Tensor x, bool counting) {
  if (counting) vexp::add_macs(static_cast<double>(x.numel()));
  return x.relu_();
}

inline std::string shape_text(const at::Tensor& x) {
  return vexp::schema::shape_str(vexp::Shape(x.sizes().begin(), x.sizes().end()));
}

}  // namespace counting

// B is the plugin's BlockPlan (prefix(), mid_channels, out_channels). The convs
// come built (and initialised, in the order conv1, conv2, conv3, downsample);
// conv3 is empty for a BasicBlock, down empty without downsampling.
template <class Conv, class BN>
class ResidualBlock : public torch::nn::Module {
 public:
  template <class B>
  ResidualBlock(const B& b, bool zero_init_residual, Conv conv1, Conv conv2, Conv conv3, Conv down)
      : block_in_(b.prefix() + "block_in"),
        residual_in_(b.prefix() + "residual_in"),
        block_out_(b.prefix() + "block_out") {
    const bool bottleneck = !conv3.is_empty();
    conv1_ = register_module("conv1", conv1);
    bn1_ = register_module("bn1", BN(b.mid_channels));
    conv2_ = register_module("conv2", conv2);
    bn2_ = register_module("bn2", BN(bottleneck ? b.mid_channels : b.out_channels));
    if (bottleneck) {
      conv3_ = register_module("conv3", conv3);
      bn3_ = register_module("bn3", BN(b.out_channels));
    }
    if (!down.is_empty()) {
      down_conv_ = down;
      down_bn_ = BN(b.out_channels);
      register_module("downsample", torch::nn::Sequential(down_conv_, down_bn_));  // downsample.0, downsample.1
    }
    if (zero_init_residual) {
      torch::NoGradGuard no_grad;
      (bottleneck ? bn3_ : bn2_)->weight.zero_();
    }
  }

  void declare_points(vexp::InsertionPoints& points) {
    points.declare(block_in_, this, "block_in");
    points.declare(residual_in_, this, "residual_in");
    points.declare(block_out_, this, "block_out");
  }

  at::Tensor forward(at::Tensor x, const vexp::InsertionPoints& points, const vexp::ForwardContext& ctx) {
    const bool counting = vexp::counting_macs();
    x = points.apply(block_in_, x, ctx);
    at::Tensor identity = x;
    if (down_conv_) identity = counted_bn(down_bn_, counted_conv(down_conv_, x, counting), counting);
    at::Tensor out = points.apply(residual_in_, x, ctx);
    out = counted_relu_(counted_bn(bn1_, counted_conv(conv1_, out, counting), counting), counting);
    out = counted_bn(bn2_, counted_conv(conv2_, out, counting), counting);
    if (conv3_) {
      out = counted_relu_(out, counting);
      out = counted_bn(bn3_, counted_conv(conv3_, out, counting), counting);
    }
    out += identity;
    out = counted_relu_(out, counting);
    return points.apply(block_out_, out, ctx);
  }

 private:
  std::string block_in_, residual_in_, block_out_;
  Conv conv1_{nullptr}, conv2_{nullptr}, conv3_{nullptr}, down_conv_{nullptr};
  BN bn1_{nullptr}, bn2_{nullptr}, bn3_{nullptr}, down_bn_{nullptr};
};

// What the 2-D and the I3D backbone share above their blocks: the plan, the
// blocks in execution order, registered as torchvision's layer1..layer4 (each a
// ModuleList: layer1.0, layer1.1, ...), their insertion points and insert().
// `Plan` has `blocks` (each with `stage`) and a free unknown_point_message(plan,
// point) in its namespace.
template <class Plan, class Block>
class ResNetBody : public vexp::Layer {
 public:
  void insert(const std::string& point, std::shared_ptr<vexp::Layer> layer) override {
    if (!points_.has(point)) throw std::invalid_argument(unknown_point_message(plan_, point));
    points_.insert(point, std::move(layer));
  }

 protected:
  explicit ResNetBody(Plan plan) : plan_(std::move(plan)) {}

  // Registers layer1..layer4 and in them make(b), a std::shared_ptr<Block>, for
  // each block of the plan; call it after registering the stem's modules.
  template <class Make>
  void add_blocks(Make make) {
    torch::nn::ModuleList stages[4];
    for (int s = 0; s < 4; ++s) stages[s] = register_module("layer" + std::to_string(s + 1), torch::nn::ModuleList());
    for (const auto& b : plan_.blocks) {
      std::shared_ptr<Block> block = make(b);
      stages[b.stage - 1]->push_back(block);  // named "0", "1", ...
      block->declare_points(points_);
      blocks_.push_back(std::move(block));
    }
  }

  Plan plan_;
  std::vector<std::shared_ptr<Block>> blocks_;
  vexp::InsertionPoints points_;
};

}  // namespace vexp_resnet_layout
