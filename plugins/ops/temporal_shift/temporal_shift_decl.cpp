#include "temporal_shift_decl.hpp"

#include <string>
#include <vector>

namespace vexp_temporal_shift {

namespace {

using vexp::schema::Shape;
using vexp::schema::ShapeError;

Shape infer_shift_shape(const vexp::schema::Params& p, const std::vector<Shape>& in, const vexp::schema::GraphContext& ctx) {
  if (in.size() != 1) throw ShapeError("expects one input, got " + std::to_string(in.size()));
  const Shape& s = in[0];
  if (s.size() != 4)
    throw ShapeError("expects a 4-D input [N*T, C, H, W], got " + vexp::schema::shape_str(s));
  const int64_t segments = p.i64("segments");
  const int64_t fold_div = p.i64("fold_div");
  if (s[1] >= 0 && s[1] < fold_div)
    throw ShapeError(std::to_string(s[1]) + " channels < fold_div " +
                     std::to_string(fold_div) + ": no channel would move");
  if (segments > 0 && ctx.frames > 0 && segments != ctx.frames)
    throw ShapeError("segments = " + std::to_string(segments) + " but clips have " +
                     std::to_string(ctx.frames) + " frames");
  const int64_t frames = segments > 0 ? segments : ctx.frames;
  if (s[0] > 0 && frames > 0 && s[0] % frames != 0)
    throw ShapeError("the batch dimension N*T = " + std::to_string(s[0]) +
                           " is not a multiple of " + std::to_string(frames) + " frames per clip");
  return s;
}

}  // namespace

vexp::schema::PluginDecl declaration() {
  vexp::schema::PluginDecl d("temporal_shift",
      "Temporal shift (TSM): 1/fold_div of the channels take the next frame, 1/fold_div the previous one");
  d.kind = "op";
  d.schema.integer("segments", 0, "Frames per clip; 0: the clip's frames").at_least(0);
  d.schema.integer("fold_div", 8, "1/fold_div of the channels shift each way").at_least(1);
  d.schema.text("mode", "bidirectional", "bidirectional: fold channels from t+1 and fold from t-1; "
                                         "left: fold channels from t+1; right: fold channels from t-1 (causal)")
      .one_of({"bidirectional", "left", "right"});
  d.infer_shape = infer_shift_shape;
  return d;
}

}  // namespace vexp_temporal_shift
