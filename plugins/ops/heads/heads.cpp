// The pieces around a 2D backbone that make it a video model (TSN/TSM):
// fold_time turns clips into frames, classifier scores each frame, and
// segment_consensus averages the frame scores of each clip.
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "heads_decl.hpp"
#include "vexp/flops.hpp"
#include "vexp/layer.hpp"
#include "vexp/registrar.hpp"

namespace {

namespace nn = torch::nn;
using vexp::Shape;
using vexp::ShapeError;

std::string shape_text(const at::Tensor& x) {
  return vexp::schema::shape_str(Shape(x.sizes().begin(), x.sizes().end()));
}

const at::Tensor& single_input(const char* op, const std::vector<at::Tensor>& inputs) {
  if (inputs.size() != 1) throw std::runtime_error(std::string(op) + ": expects one input, got " + std::to_string(inputs.size()));
  return inputs[0];
}

// ---- fold_time: [N, T, ...] -> [N*T, ...] -------------------------------------

class FoldTime : public vexp::Layer {
 public:
  at::Tensor forward(const std::vector<at::Tensor>& inputs, const vexp::ForwardContext&) override {
    const at::Tensor& x = single_input("fold_time", inputs);
    if (x.dim() < 3)
      throw std::runtime_error("fold_time: expects a clip batch [N, T, C, ...] (at least 3-D), got " + shape_text(x));
    return x.flatten(0, 1);  // a view whenever N and T can be merged in place
  }
};

// ---- classifier: global average pool, dropout, linear ---------------------------

class Classifier : public vexp::Layer {
 public:
  explicit Classifier(const vexp::Params& p)
      : classes_(p.i64("classes")), dropout_(p.f64("dropout")), init_std_(p.f64("init_std")) {
    if (classes_ < 0) throw std::invalid_argument("classifier: classes must be >= 0");
    if (dropout_ < 0 || dropout_ >= 1) throw std::invalid_argument("classifier: dropout must be in [0, 1)");
    if (!(init_std_ > 0)) throw std::invalid_argument("classifier: init_std must be > 0");
  }

  void build(const std::vector<Shape>& input_shapes, const vexp::schema::GraphContext& ctx) override {
    if (fc_) throw std::runtime_error("classifier: build() was called twice");
    if (input_shapes.size() != 1)
      throw std::runtime_error("classifier: expects one input, got " + std::to_string(input_shapes.size()));
    const Shape& s = input_shapes[0];
    if ((s.size() != 2 && s.size() != 4) || s[1] <= 0)
      throw std::runtime_error("classifier: needs an input [M, C, H, W] or [M, C] with a known C to size its "
                               "linear layer, got " + vexp::schema::shape_str(s));
    const int64_t classes = classes_ > 0 ? classes_ : ctx.classes;
    if (classes <= 0)
      throw std::runtime_error("classifier: classes = 0 takes the dataset's class count, which is unknown here; "
                               "set classes");
    fc_ = register_module("fc", nn::Linear(s[1], classes));
    torch::NoGradGuard no_grad;
    fc_->weight.normal_(0.0, init_std_);
    fc_->bias.zero_();
  }

  at::Tensor forward(const std::vector<at::Tensor>& inputs, const vexp::ForwardContext&) override {
    at::Tensor x = single_input("classifier", inputs);
    if (!fc_) throw std::runtime_error("classifier: forward before build(): its linear layer does not exist yet");
    if (x.dim() != 4 && x.dim() != 2)
      throw std::runtime_error("classifier: expects an input [M, C, H, W] or [M, C], got " + shape_text(x));
    if (x.size(1) != fc_->options.in_features())
      throw std::runtime_error("classifier: the input " + shape_text(x) + " has " + std::to_string(x.size(1)) +
                               " channels but the classifier was built for " +
                               std::to_string(fc_->options.in_features()));
    // mmcv's convention (mmaction2's model zoo): adaptive average pooling counts
    // its input elements, a linear layer in * out per row and nothing for the bias.
    const bool counting = vexp::counting_macs();
    if (x.dim() == 4) {
      if (counting) vexp::add_macs(static_cast<double>(x.numel()));
      x = x.mean({2, 3});
    }
    if (dropout_ > 0) x = torch::dropout(x, dropout_, is_training());
    if (counting) vexp::add_macs(static_cast<double>(x.numel()) * static_cast<double>(fc_->options.out_features()));
    return fc_->forward(x);
  }

 private:
  int64_t classes_;
  double dropout_;
  double init_std_;
  nn::Linear fc_{nullptr};
};

// ---- segment_consensus: [N*T, ...] -> [N, ...] ----------------------------------

class SegmentConsensus : public vexp::Layer {
 public:
  explicit SegmentConsensus(const vexp::Params& p) : max_(p.str("mode") == "max"), segments_(p.i64("segments")) {
    if (p.str("mode") != "avg" && p.str("mode") != "max")
      throw std::invalid_argument("segment_consensus: mode '" + p.str("mode") + "' is not one of avg, max");
  }

  at::Tensor forward(const std::vector<at::Tensor>& inputs, const vexp::ForwardContext& ctx) override {
    const at::Tensor& x = single_input("segment_consensus", inputs);
    const int64_t frames = segments_ > 0 ? segments_ : ctx.frames;
    if (frames <= 0)
      throw std::runtime_error("segment_consensus: segments = 0 takes the clip's frame count, but the forward "
                               "context has frames = " + std::to_string(ctx.frames) + "; set segments");
    if (x.dim() < 1 || x.size(0) % frames != 0)
      throw std::runtime_error("segment_consensus: the input " + shape_text(x) + " does not hold whole clips of " +
                               std::to_string(frames) + " frames (dim 0 must be a multiple of " +
                               std::to_string(frames) + ")");
    std::vector<int64_t> clips{x.size(0) / frames, frames};
    clips.insert(clips.end(), x.sizes().begin() + 1, x.sizes().end());
    at::Tensor grouped = x.reshape(clips);
    return max_ ? std::get<0>(grouped.max(1)) : grouped.mean(1);
  }

 private:
  bool max_;
  int64_t segments_;
};

}  // namespace

VEXP_PLUGIN("heads", "0.1.0") {
  registrar.add_op(vexp_heads::fold_time_declaration(), [](const vexp::Params&) { return std::make_shared<FoldTime>(); });
  registrar.add_op(vexp_heads::classifier_declaration(),
                   [](const vexp::Params& p) { return std::make_shared<Classifier>(p); });
  registrar.add_op(vexp_heads::segment_consensus_declaration(),
                   [](const vexp::Params& p) { return std::make_shared<SegmentConsensus>(p); });
}
