// The head of a 3D network (mmaction2's I3DHead): global average pool over
// (T, H, W), dropout, linear `fc`: [N, C, T, H, W] -> [N, classes].
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "vexp/flops.hpp"
#include "vexp/layer.hpp"
#include "vexp/registrar.hpp"

namespace {

namespace nn = torch::nn;
using vexp::Shape;
using vexp::ShapeError;

class Classifier3d : public vexp::Layer {
 public:
  explicit Classifier3d(const vexp::Params& p)
      : classes_(p.i64("classes")), dropout_(p.f64("dropout")), init_std_(p.f64("init_std")) {
    if (dropout_ < 0 || dropout_ >= 1) throw std::invalid_argument("classifier3d: dropout must be in [0, 1)");
    if (!(init_std_ > 0)) throw std::invalid_argument("classifier3d: init_std must be > 0");
  }

  void build(const std::vector<Shape>& in, const vexp::schema::GraphContext& ctx) override {
    if (fc_) throw std::runtime_error("classifier3d: build() was called twice");
    if (in.size() != 1 || in[0].size() != 5 || in[0][1] <= 0)
      throw std::runtime_error("classifier3d: needs one input [N, C, T, H, W] with a known C to size its linear layer");
    const int64_t classes = classes_ > 0 ? classes_ : ctx.classes;
    if (classes <= 0)
      throw std::runtime_error("classifier3d: classes = 0 takes the dataset's class count, which is unknown here; set classes");
    fc_ = register_module("fc", nn::Linear(in[0][1], classes));
    torch::NoGradGuard no_grad;
    fc_->weight.normal_(0.0, init_std_);
    fc_->bias.zero_();
  }

  at::Tensor forward(const std::vector<at::Tensor>& inputs, const vexp::ForwardContext&) override {
    if (inputs.size() != 1) throw std::runtime_error("classifier3d: expects one input, got " + std::to_string(inputs.size()));
    if (!fc_) throw std::runtime_error("classifier3d: forward before build()");
    at::Tensor x = inputs[0];
    if (x.dim() != 5 || x.size(1) != fc_->options.in_features())
      throw std::runtime_error("classifier3d: expects [N, " + std::to_string(fc_->options.in_features()) +
                               ", T, H, W], got " + vexp::schema::shape_str(Shape(x.sizes().begin(), x.sizes().end())));
    const bool counting = vexp::counting_macs();
    if (counting) vexp::add_macs(static_cast<double>(x.numel()));  // adaptive average pool: its input elements
    x = x.mean({2, 3, 4});
    if (dropout_ > 0) x = torch::dropout(x, dropout_, is_training());
    if (counting) vexp::add_macs(static_cast<double>(x.numel()) * static_cast<double>(fc_->options.out_features()));
    return fc_->forward(x);
  }

 private:
  int64_t classes_;
  double dropout_, init_std_;
  nn::Linear fc_{nullptr};
};

}  // namespace

VEXP_PLUGIN("head3d", "0.1.0") {
  vexp::PluginDecl d("classifier3d",
      "Global average pool over (T, H, W), dropout, linear `fc`: [N, C, T, H, W] -> [N, classes] (I3D head)");
  d.schema.integer("classes", 0, "0: the dataset's classes").at_least(0);
  d.schema.real("dropout", 0.5, "Dropout probability before the linear layer (training only)").range(0, 1);
  d.schema.real("init_std", 0.01, "Standard deviation of the normal initialisation of fc.weight (bias 0)");
  d.infer_shape = [](const vexp::Params& p, const std::vector<Shape>& in, const vexp::schema::GraphContext& ctx) {
    if (in.size() != 1) throw ShapeError("classifier3d: expects one input, got " + std::to_string(in.size()));
    if (in[0].size() != 5) throw ShapeError("classifier3d: expects [N, C, T, H, W], got " + vexp::schema::shape_str(in[0]));
    const int64_t classes = p.i64("classes") > 0 ? p.i64("classes") : (ctx.classes > 0 ? ctx.classes : -1);
    return Shape{in[0][0], classes};
  };
  d.head_parameters = {"fc."};  // the model's classification head (optim.fc_lr5, checkpoint fc.*)
  registrar.add_op(std::move(d), [](const vexp::Params& p) { return std::make_shared<Classifier3d>(p); });
}
