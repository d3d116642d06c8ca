// temporal_mix: an example operator with learnable weights, built outside vexp's tree.
//
// A depthwise convolution along time, then a per-channel gate. For channel c of
// frame t of a clip, with K taps (K odd):
//   y[t, c]   = sum_k weight[c, k] * x[t + k - K/2, c]     (zero outside the clip)
//   out[t, c] = x[t, c] + gate[c] * (y[t, c] - x[t, c])
// `weight` is [C, K] and `gate` is [C]: C is the channel count of the input, known
// only when the graph calls build() with the input's shape. Frames of one clip are
// consecutive along dimension 0, as everywhere in a vexp model after `fold_time`:
// [N*T, C, H, W].
//
// With init = "shift" the taps start as the temporal shift (TSM: 1/fold_div of the
// channels take frame t+1, 1/fold_div frame t-1, the rest frame t) and the gate at 1,
// so the model starts as TSM and learns from there; with init = "identity" it starts
// as TSN (every output frame is its input frame) and has to learn to look along time.
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <ATen/ATen.h>  // tensor ops; in this .cpp only, never in a header

#include "vexp/flops.hpp"      // vexp::counting_macs, vexp::add_macs, vexp::conv_macs
#include "vexp/layer.hpp"      // vexp::Layer, the base of every graph node
#include "vexp/registrar.hpp"  // VEXP_PLUGIN, vexp::Registrar, vexp::Params

namespace {

// What the recipe chose, read once from the validated Params with the typed readers.
struct MixOptions {
  int64_t kernel = 3;        // p.i64
  std::string init;          // p.str
  int64_t fold_div = 8;      // p.i64
  std::vector<double> taps;  // p.f64_list
  double init_std = 0;       // p.f64
  bool gate = true;          // p.flag

  static MixOptions from(const vexp::Params& p) {
    MixOptions o;
    o.kernel = p.i64("kernel");
    o.init = p.str("init");
    o.fold_div = p.i64("fold_div");
    o.taps = p.f64_list("taps");
    o.init_std = p.f64("init_std");
    o.gate = p.flag("gate");
    return o;
  }

  // The rules between parameters that a schema cannot state alone; "" when they hold.
  // Used by the shape hook (check time, with the recipe's location) and the
  // constructor (a plain C++ caller that built Params by hand).
  std::string problem() const {
    if (kernel < 1 || kernel % 2 == 0) return "kernel must be odd and >= 1, got " + std::to_string(kernel);
    if (init != "shift" && init != "identity" && init != "taps")
      return "init '" + init + "' is not one of shift, identity, taps";
    if (init == "shift" && kernel < 3)
      return "init = \"shift\" needs kernel >= 3 (a tap on each side of the frame), got kernel = " +
             std::to_string(kernel);
    if (init == "taps" && static_cast<int64_t>(taps.size()) != kernel)
      return "init = \"taps\" needs one value per tap in taps (kernel = " + std::to_string(kernel) + "), got " +
             std::to_string(taps.size());
    if (fold_div < 1) return "fold_div must be >= 1, got " + std::to_string(fold_div);
    if (init_std < 0) return "init_std must be >= 0";
    return "";
  }
};

// The clips [N, T, C, H, W] moved by `offset` frames in time: frame t of the result
// is frame t + offset of the input, zero where that lies outside the clip.
at::Tensor shifted(const at::Tensor& clips, int64_t offset) {
  const int64_t T = clips.size(1);
  if (offset == 0) return clips;
  if (std::abs(offset) >= T) return at::zeros_like(clips);
  std::vector<int64_t> pad_sizes = clips.sizes().vec();
  pad_sizes[1] = std::abs(offset);
  const at::Tensor pad = at::zeros(pad_sizes, clips.options());
  return offset > 0 ? at::cat({clips.narrow(1, offset, T - offset), pad}, 1)
                    : at::cat({pad, clips.narrow(1, 0, T + offset)}, 1);
}

class TemporalMix : public vexp::Layer {
 public:
  explicit TemporalMix(const vexp::Params& p) : opt_(MixOptions::from(p)) {
    const std::string problem = opt_.problem();
    if (!problem.empty()) throw std::invalid_argument(problem);  // the host prefixes "op 'temporal_mix' (from ...)"
  }

  // Called once, after the graph is assembled and before any forward, with the shape
  // that validation found for the input: here the insertion point's [N*T, C, H, W].
  // Parameters whose size depends on the input are created here, not in the
  // constructor (which never sees a shape).
  void build(const std::vector<vexp::Shape>& in, const vexp::schema::GraphContext&) override {
    if (weight_.defined()) throw std::runtime_error("temporal_mix: build() was called twice");
    if (in.size() != 1 || in[0].size() != 4 || in[0][1] <= 0)
      throw std::runtime_error("temporal_mix: needs one input [N*T, C, H, W] with a known C to size its weights");
    const int64_t C = in[0][1];
    // register_parameter takes one name component (libtorch refuses a '.'); the
    // state dict's dotted name is the path of modules down to this layer plus this
    // name: features.layer1.0.residual_in.weight for the first block's residual_in.
    weight_ = register_parameter("weight", starting_taps(C));
    if (opt_.gate) gate_ = register_parameter("gate", at::ones({C}));
  }

  at::Tensor forward(const std::vector<at::Tensor>& inputs, const vexp::ForwardContext& ctx) override {
    if (inputs.size() != 1)
      throw std::runtime_error("temporal_mix: expects one input, got " + std::to_string(inputs.size()));
    if (!weight_.defined()) throw std::runtime_error("temporal_mix: forward before build()");
    const at::Tensor& x = inputs[0];
    const int64_t C = weight_.size(0), K = weight_.size(1), T = ctx.frames;
    if (x.dim() != 4 || x.size(1) != C)
      throw std::runtime_error("temporal_mix: expects [N*T, " + std::to_string(C) + ", H, W] (built for " +
                               std::to_string(C) + " channels), got a " + std::to_string(x.dim()) + "-D input with " +
                               std::to_string(x.dim() > 1 ? x.size(1) : 0) + " channels");
    if (T <= 0 || x.size(0) % T != 0)
      throw std::runtime_error("temporal_mix: the first dimension (N*T) must be a multiple of the clip's " +
                               std::to_string(T) + " frames");
    // [N*T, C, H, W] -> [N, T, C, H, W]: splitting dimension 0 is a view in any layout
    // (channels-last included). Plain ATen ops below, so autograd derives the backward
    // for the input, `weight` and `gate` alike.
    const at::Tensor clips = x.view({x.size(0) / T, T, C, x.size(2), x.size(3)});
    at::Tensor y;
    for (int64_t k = 0; k < K; ++k) {
      const at::Tensor term = shifted(clips, k - K / 2) * weight_.select(1, k).view({1, 1, C, 1, 1});
      y = y.defined() ? y + term : term;
    }
    const at::Tensor out = gate_.defined() ? clips + gate_.view({1, 1, C, 1, 1}) * (y - clips) : y;
    // A depthwise convolution: K multiply-adds per output value (the gate is
    // element-wise, which vexp's counts leave out).
    if (vexp::counting_macs()) vexp::add_macs(vexp::conv_macs(x.numel(), 1, K));
    return out.reshape(x.sizes());
  }

 private:
  // [C, K]: the starting taps of every channel, on the CPU in float32 (the run moves
  // the model to its device afterwards).
  at::Tensor starting_taps(int64_t C) const {
    const int64_t K = opt_.kernel, centre = K / 2;
    at::Tensor w = at::zeros({C, K});
    if (opt_.init == "taps") {
      w.copy_(at::tensor(opt_.taps).to(at::kFloat).expand({C, K}));
    } else {
      w.select(1, centre).fill_(1);  // identity: every frame itself
      if (opt_.init == "shift") {    // TSM's pattern: channels [0, fold) from t+1, [fold, 2 fold) from t-1
        const int64_t fold = C / opt_.fold_div;
        w.narrow(0, 0, 2 * fold).select(1, centre).fill_(0);
        w.narrow(0, 0, fold).select(1, centre + 1).fill_(1);
        w.narrow(0, fold, fold).select(1, centre - 1).fill_(1);
      }
    }
    // Random draws come from libtorch's default generator, which vexp seeds with
    // run.seed before it builds the model: the same recipe starts from the same
    // weights in every run and on every rank (and rank 0's weights are broadcast
    // anyway). Never seed it here, nor draw from std::random_device or the clock.
    if (opt_.init_std > 0) w.add_(at::randn({C, K}) * opt_.init_std);
    return w;
  }

  MixOptions opt_;
  at::Tensor weight_, gate_;  // registered in build(); gate_ stays undefined with gate = false
};

// Shape inference runs when a recipe is checked, before anything is built: errors
// reach the user after the recipe's file:line:col and the node or rewrite naming
// this op (the validator adds both), so the message itself is just the problem.
vexp::Shape infer_mix_shape(const vexp::Params& p, const std::vector<vexp::Shape>& in,
                            const vexp::schema::GraphContext& ctx) {
  if (in.size() != 1) throw vexp::ShapeError("expects one input, got " + std::to_string(in.size()));
  const vexp::Shape& s = in[0];
  if (s.size() != 4) throw vexp::ShapeError("expects a 4-D input [N*T, C, H, W], got " + vexp::schema::shape_str(s));
  const MixOptions o = MixOptions::from(p);
  const std::string problem = o.problem();
  if (!problem.empty()) throw vexp::ShapeError(problem);
  if (o.init == "shift" && s[1] >= 0 && s[1] < o.fold_div)
    throw vexp::ShapeError(std::to_string(s[1]) + " channels < fold_div " + std::to_string(o.fold_div) +
                           ": init = \"shift\" would start no channel shifted");
  if (s[0] > 0 && ctx.frames > 0 && s[0] % ctx.frames != 0)
    throw vexp::ShapeError("the first dimension N*T = " + std::to_string(s[0]) + " is not a multiple of " +
                           std::to_string(ctx.frames) + " frames per clip");
  return s;  // same shape out
}

}  // namespace

// The library's one entry point, `vexp_plugin_info`, and its register function.
VEXP_PLUGIN("temporal_mix", "0.1.0") {
  vexp::PluginDecl d("temporal_mix",
                     "Learnable depthwise convolution along time with a per-channel gate; weight [C, K], gate [C]");
  d.schema.integer("kernel", 3, "Taps in time, centred on the frame").one_of({1, 3, 5, 7});
  d.schema.text("init", "shift", "Starting taps: shift (TSM's), identity (each frame itself) or taps (the list taps)")
      .one_of({"shift", "identity", "taps"});
  d.schema.integer("fold_div", 8, "init = shift: 1/fold_div of the channels start shifted each way").at_least(1);
  d.schema.real_list("taps", {}, "init = taps: every channel's starting taps, one per tap").range(-1, 1);
  d.schema.real("init_std", 0.0, "Gaussian noise added to the starting taps (drawn under run.seed)").range(0, 1);
  d.schema.boolean("gate", true, "Learnable per-channel gate g (from 1): out = x + g * (mix - x)");
  d.infer_shape = infer_mix_shape;
  registrar.add_op(std::move(d), [](const vexp::Params& p) { return std::make_shared<TemporalMix>(p); });
}
