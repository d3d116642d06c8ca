// temporal_smooth: an example operator plugin built outside vexp's tree.
//
// Each frame is blended with the mean of its two neighbours in time:
//   out[t] = (1 - w) * x[t] + w * (x[t-1] + x[t+1]) / 2
// where a missing neighbour (before the first or after the last frame) is the
// frame itself. Frames of one clip are consecutive along dimension 0, as
// everywhere in a vexp model after `fold_time`: [N*T, C, H, W].
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <ATen/ATen.h>  // tensor ops; in this .cpp only, never in a header

#include "vexp/layer.hpp"      // vexp::Layer, the base of every graph node
#include "vexp/registrar.hpp"  // VEXP_PLUGIN, vexp::Registrar, vexp::Params

namespace {

// The frames per clip: `segments` when set, else the clip's frame count (from the
// forward context at run time, from the graph context at check time).
int64_t frames_per_clip(int64_t segments, int64_t context_frames) {
  return segments > 0 ? segments : context_frames;
}

class TemporalSmooth : public vexp::Layer {
 public:
  // Params arrive validated against the schema below and filled with defaults;
  // checks here guard against callers that bypass validation (a plain C++ caller).
  // The host prefixes factory errors with "op 'temporal_smooth' (from ...)".
  explicit TemporalSmooth(const vexp::Params& p) : segments_(p.i64("segments")), weight_(p.f64("weight")) {
    if (segments_ < 0) throw std::invalid_argument("segments must be >= 0, got " + std::to_string(segments_));
    if (weight_ < 0 || weight_ > 1)
      throw std::invalid_argument("weight must be in [0, 1], got " + std::to_string(weight_));
  }

  at::Tensor forward(const std::vector<at::Tensor>& inputs, const vexp::ForwardContext& ctx) override {
    if (inputs.size() != 1)
      throw std::runtime_error("temporal_smooth: expects one input, got " + std::to_string(inputs.size()));
    const at::Tensor& x = inputs[0];
    const int64_t T = frames_per_clip(segments_, ctx.frames);
    if (T <= 0)
      throw std::runtime_error("temporal_smooth: segments = 0 takes the clip's frame count, but the forward "
                               "context has none; set segments");
    if (x.dim() < 1 || x.size(0) % T != 0)
      throw std::runtime_error("temporal_smooth: the first dimension (N*T) must be a multiple of " +
                               std::to_string(T) + " frames");
    if (T == 1 || weight_ == 0) return x;

    // [N*T, ...] -> [N, T, rest]; plain ATen ops, so autograd derives the backward.
    const at::Tensor clips = x.reshape({x.size(0) / T, T, -1});
    const at::Tensor prev = at::cat({clips.narrow(1, 0, 1), clips.narrow(1, 0, T - 1)}, 1);
    const at::Tensor next = at::cat({clips.narrow(1, 1, T - 1), clips.narrow(1, T - 1, 1)}, 1);
    const at::Tensor out = clips * (1 - weight_) + (prev + next) * (weight_ / 2);
    return out.reshape(x.sizes());
  }

 private:
  int64_t segments_;
  double weight_;
};

// Shape inference runs when a recipe is checked, before anything is built: errors
// reach the user after the recipe's file:line:col and the node or rewrite naming
// this op (the validator adds both), so the message itself is just the problem.
vexp::Shape infer_smooth_shape(const vexp::Params& p, const std::vector<vexp::Shape>& in,
                               const vexp::schema::GraphContext& ctx) {
  if (in.size() != 1) throw vexp::ShapeError("expects one input, got " + std::to_string(in.size()));
  const vexp::Shape& s = in[0];
  if (s.empty()) throw vexp::ShapeError("expects a tensor with frames along dimension 0");
  const int64_t segments = p.i64("segments");
  if (segments > 0 && ctx.frames > 0 && segments != ctx.frames)
    throw vexp::ShapeError("segments = " + std::to_string(segments) + " but clips have " +
                           std::to_string(ctx.frames) + " frames");
  const int64_t T = frames_per_clip(segments, ctx.frames);
  if (s[0] > 0 && T > 0 && s[0] % T != 0)
    throw vexp::ShapeError("the first dimension N*T = " + std::to_string(s[0]) +
                           " is not a multiple of " + std::to_string(T) + " frames per clip");
  return s;  // same shape out
}

}  // namespace

// The library's one entry point, `vexp_plugin_info`, and its register function.
VEXP_PLUGIN("temporal_smooth", "0.1.0") {
  vexp::PluginDecl d("temporal_smooth", "Blends each frame with the mean of its neighbours in time");
  d.schema.integer("segments", 0, "Frames per clip; 0: the clip's frames").at_least(0);
  d.schema.real("weight", 0.5, "Share of the neighbours' mean in each output frame").range(0, 1);
  d.infer_shape = infer_smooth_shape;
  registrar.add_op(std::move(d), [](const vexp::Params& p) { return std::make_shared<TemporalSmooth>(p); });
}
