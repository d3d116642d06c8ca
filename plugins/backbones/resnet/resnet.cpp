// ResNet backbone with torchvision's topology and parameter names (v1.5: the
// bottleneck's stride is on its 3x3 conv), no pooling and no fc: the output is
// the last feature map. Every block exposes three insertion points.
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "resnet_plan.hpp"
#include "vexp/flops.hpp"
#include "vexp/layer.hpp"
#include "vexp/registrar.hpp"

namespace vexp_resnet {
namespace {

namespace nn = torch::nn;

// Multiply-adds in mmcv's get_model_complexity_info convention (the figures of
// mmaction2's model zoo): conv MACs (+1 per output for a bias), BatchNorm 2 per
// input element (affine), ReLU 1 per output element, max-pool 1 per input element.
at::Tensor counted_conv(nn::Conv2d& conv, const at::Tensor& x, bool counting) {
  at::Tensor y = conv->forward(x);
  if (counting) {
    const auto& o = conv->options;
    const auto& k = o.kernel_size();
    vexp::add_macs(vexp::conv_macs(y.numel(), o.in_channels() / o.groups(), k->at(0) * k->at(1)));
    if (o.bias()) vexp::add_macs(static_cast<double>(y.numel()));
  }
  return y;
}

at::Tensor counted_bn(nn::BatchNorm2d& bn, const at::Tensor& x, bool counting) {
  if (counting) vexp::add_macs((bn->options.affine() ? 2.0 : 1.0) * static_cast<double>(x.numel()));
  return bn->forward(x);
}

at::Tensor counted_relu_(at::Tensor x, bool counting) {
  if (counting) vexp::add_macs(static_cast<double>(x.numel()));
  return x.relu_();
}

std::string shape_text(const at::Tensor& x) {
  return vexp::dsl::shape_str(vexp::Shape(x.sizes().begin(), x.sizes().end()));
}

nn::Conv2d make_conv(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t pad) {
  nn::Conv2d conv(nn::Conv2dOptions(in, out, kernel).stride(stride).padding(pad).bias(false));
  nn::init::kaiming_normal_(conv->weight, 0.0, torch::kFanOut, torch::kReLU);
  return conv;
}

// torchvision's BasicBlock (two 3x3 convs) or Bottleneck (1x1, 3x3 with stride, 1x1).
class Block : public nn::Module {
 public:
  Block(const BlockPlan& b, bool bottleneck, bool zero_init_residual)
      : block_in_(b.prefix() + "block_in"),
        residual_in_(b.prefix() + "residual_in"),
        block_out_(b.prefix() + "block_out") {
    if (bottleneck) {
      conv1_ = register_module("conv1", make_conv(b.in_channels, b.mid_channels, 1, 1, 0));
      bn1_ = register_module("bn1", nn::BatchNorm2d(b.mid_channels));
      conv2_ = register_module("conv2", make_conv(b.mid_channels, b.mid_channels, 3, b.stride, 1));
      bn2_ = register_module("bn2", nn::BatchNorm2d(b.mid_channels));
      conv3_ = register_module("conv3", make_conv(b.mid_channels, b.out_channels, 1, 1, 0));
      bn3_ = register_module("bn3", nn::BatchNorm2d(b.out_channels));
    } else {
      conv1_ = register_module("conv1", make_conv(b.in_channels, b.mid_channels, 3, b.stride, 1));
      bn1_ = register_module("bn1", nn::BatchNorm2d(b.mid_channels));
      conv2_ = register_module("conv2", make_conv(b.mid_channels, b.out_channels, 3, 1, 1));
      bn2_ = register_module("bn2", nn::BatchNorm2d(b.out_channels));
    }
    if (b.downsample) {
      down_conv_ = make_conv(b.in_channels, b.out_channels, 1, b.stride, 0);
      down_bn_ = nn::BatchNorm2d(b.out_channels);
      register_module("downsample", nn::Sequential(down_conv_, down_bn_));  // downsample.0, downsample.1
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
  nn::Conv2d conv1_{nullptr}, conv2_{nullptr}, conv3_{nullptr}, down_conv_{nullptr};
  nn::BatchNorm2d bn1_{nullptr}, bn2_{nullptr}, bn3_{nullptr}, down_bn_{nullptr};
};

class ResNet : public vexp::Layer {
 public:
  explicit ResNet(const vexp::Params& p) : plan_(Plan::from(p)) {
    if (plan_.imagenet_stem) {
      conv1_ = register_module("conv1", make_conv(plan_.in_channels, plan_.stem_channels, 7, 2, 3));
    } else {
      conv1_ = register_module("conv1", make_conv(plan_.in_channels, plan_.stem_channels, 3, 1, 1));
    }
    bn1_ = register_module("bn1", nn::BatchNorm2d(plan_.stem_channels));
    nn::ModuleList stages[4];
    for (int s = 0; s < 4; ++s) stages[s] = register_module("layer" + std::to_string(s + 1), nn::ModuleList());
    for (const BlockPlan& b : plan_.blocks) {
      auto block = std::make_shared<Block>(b, plan_.bottleneck, plan_.zero_init_residual);
      stages[b.stage - 1]->push_back(block);  // named "0", "1", ...
      block->declare_points(points_);
      blocks_.push_back(std::move(block));
    }
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

  void insert(const std::string& point, std::shared_ptr<vexp::Layer> layer) override {
    if (!points_.has(point)) throw std::invalid_argument(unknown_point_message(plan_, point));
    points_.insert(point, std::move(layer));
  }

 private:
  Plan plan_;
  nn::Conv2d conv1_{nullptr};
  nn::BatchNorm2d bn1_{nullptr};
  std::vector<std::shared_ptr<Block>> blocks_;
  vexp::InsertionPoints points_;
};

}  // namespace
}  // namespace vexp_resnet

VEXP_PLUGIN("resnet", "0.1.0") {
  using namespace vexp_resnet;
  vexp::PluginDecl d;
  d.name = "resnet";
  d.doc = "ResNet backbone (torchvision topology and names, no pooling or fc): [M, C, H, W] -> last feature map";
  d.schema.integer("depth", 50, "Number of layers: BasicBlocks for 18/34, Bottlenecks for 50+")
      .one_of({18, 34, 50, 101, 152});
  d.schema.real("width", 1.0, "channel multiplier: stage widths 64,128,256,512 x width, at least 1").range(0.01, 4);
  d.schema.integer("in_channels", 3, "Channels of the input frames").at_least(1);
  d.schema.text("stem", "imagenet", "imagenet: 7x7/2 conv + 3x3/2 max-pool; cifar: 3x3/1 conv, no pool")
      .one_of({"imagenet", "cifar"});
  d.schema.boolean("zero_init_residual", false, "Zero the last BN weight of each block (each block starts as identity)");
  d.insertion_points = [](const vexp::Params& p) { return insertion_points(Plan::from(p)); };
  d.infer_shape = [](const vexp::Params& p, const std::vector<vexp::Shape>& in, const vexp::dsl::GraphContext&) {
    if (in.size() != 1) throw vexp::ShapeError("resnet: expects one input, got " + std::to_string(in.size()));
    return output_shape(Plan::from(p), in[0]);
  };
  d.point_shape = [](const vexp::Params& p, const std::string& point, const vexp::Shape& input) {
    return point_shape(Plan::from(p), point, input);
  };
  registrar.add<vexp::Layer>("backbone", std::move(d),
                             [](const vexp::Params& p) { return std::make_shared<ResNet>(p); });
}
