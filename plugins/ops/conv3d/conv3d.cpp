// 3D convolution: [N, C, T, H, W] -> [N, out_channels, T', H', W'], parameters
// `weight` [out, C / groups, t, k, k] and `bias` as torch.nn.Conv3d names them.
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "vexp/flops.hpp"
#include "vexp/layer.hpp"
#include "vexp/registrar.hpp"

namespace {

namespace nn = torch::nn;
using vexp::Shape;
using vexp::ShapeError;

struct Conv3dPlan {
  int64_t out_channels = 0, groups = 1;
  std::vector<int64_t> kernel, stride, padding, dilation;
  bool bias = true;
  bool clip_layout = false;  // input [N, T, C, H, W] (transposed first)

  static std::vector<int64_t> triple(const vexp::Params& p, const char* name, int64_t min) {
    std::vector<int64_t> v = p.i64_list(name);
    if (v.size() == 1) v = {v[0], v[0], v[0]};
    if (v.size() != 3)
      throw std::invalid_argument(std::string("conv3d: ") + name + " needs 1 or 3 values (t, h, w), got " +
                                  std::to_string(v.size()));
    for (int64_t x : v)
      if (x < min) throw std::invalid_argument(std::string("conv3d: ") + name + " values must be >= " + std::to_string(min));
    return v;
  }

  static Conv3dPlan from(const vexp::Params& p) {
    Conv3dPlan c;
    c.out_channels = p.i64("out_channels");
    c.groups = p.i64("groups");
    c.kernel = triple(p, "kernel", 1);
    c.stride = triple(p, "stride", 1);
    c.padding = triple(p, "padding", 0);
    c.dilation = triple(p, "dilation", 1);
    c.bias = p.flag("bias");
    c.clip_layout = p.str("layout") == "ntchw";
    if (c.out_channels < 1) throw std::invalid_argument("conv3d: out_channels must be >= 1");
    if (c.groups < 1 || c.out_channels % c.groups != 0)
      throw std::invalid_argument("conv3d: out_channels (" + std::to_string(c.out_channels) +
                                  ") must be a multiple of groups (" + std::to_string(c.groups) + ")");
    return c;
  }

  Shape output(const Shape& given) const {
    Shape in = given;
    if (clip_layout && in.size() == 5) std::swap(in[1], in[2]);
    if (in.size() != 5) throw ShapeError("conv3d: expects [N, C, T, H, W], got " + vexp::schema::shape_str(in));
    if (in[1] >= 0 && in[1] % groups != 0)
      throw ShapeError("conv3d: " + std::to_string(in[1]) + " input channels are not a multiple of groups (" +
                       std::to_string(groups) + ")");
    Shape out{in[0], out_channels, -1, -1, -1};
    for (int d = 0; d < 3; ++d) {
      if (in[2 + d] < 0) continue;
      const int64_t span = in[2 + d] + 2 * padding[d] - dilation[d] * (kernel[d] - 1) - 1;
      if (span < 0)
        throw ShapeError("conv3d: the input " + vexp::schema::shape_str(in) + " is smaller than the (dilated) kernel");
      out[2 + d] = span / stride[d] + 1;
    }
    return out;
  }
};

class Conv3d : public vexp::Layer {
 public:
  explicit Conv3d(const vexp::Params& p) : plan_(Conv3dPlan::from(p)) {}

  void build(const std::vector<Shape>& in, const vexp::schema::GraphContext&) override {
    if (weight.defined()) throw std::runtime_error("conv3d: build() was called twice");
    if (in.size() != 1 || in[0].size() != 5)
      throw std::runtime_error("conv3d: needs one 5-D input to size its weight");
    plan_.output(in[0]);
    const int64_t channels = in[0][plan_.clip_layout ? 2 : 1];
    if (channels <= 0) throw std::runtime_error("conv3d: the input's channel count is unknown");
    // torch.nn.Conv3d's initialisation; parameters live directly on this node
    // (`<id>.weight`, `<id>.bias`), as a torch.nn.Conv3d's do.
    using E3 = torch::ExpandingArray<3>;
    nn::Conv3d init(nn::Conv3dOptions(channels, plan_.out_channels, E3(at::IntArrayRef(plan_.kernel)))
                        .stride(E3(at::IntArrayRef(plan_.stride)))
                        .padding(E3(at::IntArrayRef(plan_.padding)))
                        .dilation(E3(at::IntArrayRef(plan_.dilation)))
                        .groups(plan_.groups)
                        .bias(plan_.bias));
    weight = register_parameter("weight", init->weight.detach().clone());
    if (plan_.bias) bias = register_parameter("bias", init->bias.detach().clone());
  }

  at::Tensor forward(const std::vector<at::Tensor>& inputs, const vexp::ForwardContext&) override {
    if (inputs.size() != 1) throw std::runtime_error("conv3d: expects one input, got " + std::to_string(inputs.size()));
    if (!weight.defined()) throw std::runtime_error("conv3d: forward before build()");
    at::Tensor x = inputs[0];
    if (plan_.clip_layout && x.dim() == 5) x = x.transpose(1, 2);
    if (x.dim() != 5 || x.size(1) != weight.size(1) * plan_.groups)
      throw std::runtime_error("conv3d: expects [N, " + std::to_string(weight.size(1) * plan_.groups) +
                               ", T, H, W], got " + vexp::schema::shape_str(Shape(x.sizes().begin(), x.sizes().end())));
    at::Tensor y = at::conv3d(x, weight, bias, plan_.stride, plan_.padding, plan_.dilation, plan_.groups);
    if (vexp::counting_macs()) {
      vexp::add_macs(vexp::conv_macs(y.numel(), weight.size(1), weight.size(2) * weight.size(3) * weight.size(4)));
      if (bias.defined()) vexp::add_macs(static_cast<double>(y.numel()));
    }
    return y;
  }

  at::Tensor weight, bias;

 private:
  Conv3dPlan plan_;
};

}  // namespace

VEXP_PLUGIN("conv3d", "0.1.0") {
  vexp::PluginDecl d("conv3d",
      "3D convolution (torch.nn.Conv3d semantics and parameter names): [N, C, T, H, W] -> [N, out, T', H', W']");
  d.schema.integer("out_channels", 64, "Output channels").at_least(1);
  d.schema.int_list("kernel", {3, 3, 3}, "Kernel size (t, h, w), or one value for all three");
  d.schema.int_list("stride", {1}, "Stride (t, h, w), or one value");
  d.schema.int_list("padding", {0}, "Zero padding (t, h, w), or one value");
  d.schema.int_list("dilation", {1}, "Dilation (t, h, w), or one value");
  d.schema.integer("groups", 1, "Channel groups (in and out channels must be multiples)").at_least(1);
  d.schema.boolean("bias", true, "Learnable bias");
  d.schema.text("layout", "ncthw", "Input layout: ncthw, or ntchw (a clip batch, transposed first)").one_of({"ncthw", "ntchw"});
  d.infer_shape = [](const vexp::Params& p, const std::vector<Shape>& in, const vexp::schema::GraphContext&) {
    if (in.size() != 1) throw ShapeError("conv3d: expects one input, got " + std::to_string(in.size()));
    try {
      return Conv3dPlan::from(p).output(in[0]);
    } catch (const std::invalid_argument& e) {
      throw ShapeError(e.what());
    }
  };
  registrar.add_op(std::move(d), [](const vexp::Params& p) { return std::make_shared<Conv3d>(p); });
}
