#include "heads_decl.hpp"

#include <string>
#include <vector>

namespace vexp_heads {

namespace {

using vexp::schema::Shape;
using vexp::schema::ShapeError;

const Shape& single_shape(const char* op, const std::vector<Shape>& in) {
  if (in.size() != 1) throw ShapeError(std::string(op) + ": expects one input, got " + std::to_string(in.size()));
  return in[0];
}

int64_t times(int64_t a, int64_t b) { return a < 0 || b < 0 ? -1 : a * b; }

Shape fold_time_shape(const vexp::schema::Params&, const std::vector<Shape>& in, const vexp::schema::GraphContext&) {
  const Shape& s = single_shape("fold_time", in);
  if (s.size() < 3)
    throw ShapeError("fold_time: expects a clip batch [N, T, C, ...] (at least 3-D), got " + vexp::schema::shape_str(s));
  Shape out{times(s[0], s[1])};
  out.insert(out.end(), s.begin() + 2, s.end());
  return out;
}

Shape classifier_shape(const vexp::schema::Params& p, const std::vector<Shape>& in, const vexp::schema::GraphContext& ctx) {
  const Shape& s = single_shape("classifier", in);
  if (s.size() != 4 && s.size() != 2)
    throw ShapeError("classifier: expects an input [M, C, H, W] or [M, C], got " + vexp::schema::shape_str(s));
  const int64_t classes = p.i64("classes") > 0 ? p.i64("classes") : (ctx.classes > 0 ? ctx.classes : -1);
  return {s[0], classes};
}

Shape consensus_shape(const vexp::schema::Params& p, const std::vector<Shape>& in, const vexp::schema::GraphContext& ctx) {
  const Shape& s = single_shape("segment_consensus", in);
  if (s.empty()) throw ShapeError("segment_consensus: expects an input [N*T, ...], got a scalar");
  const int64_t frames = p.i64("segments") > 0 ? p.i64("segments") : ctx.frames;
  Shape out = s;
  if (frames <= 0 || s[0] < 0) {
    out[0] = -1;
  } else if (s[0] % frames != 0) {
    throw ShapeError("segment_consensus: " + std::to_string(s[0]) + " rows are not whole clips of " +
                     std::to_string(frames) + " frames");
  } else {
    out[0] = s[0] / frames;
  }
  return out;
}

}  // namespace

vexp::schema::PluginDecl fold_time_declaration() {
  vexp::schema::PluginDecl d("fold_time", "Clips to frames: [N, T, C, H, W] -> [N*T, C, H, W] (a view when possible)");
  d.kind = "op";
  d.infer_shape = fold_time_shape;
  return d;
}

vexp::schema::PluginDecl classifier_declaration() {
  vexp::schema::PluginDecl d("classifier",
      "Global average pool (4-D input), dropout, linear `fc`: [M, C, H, W] or [M, C] -> [M, classes]");
  d.kind = "op";
  d.schema.integer("classes", 0, "0: the dataset's classes").at_least(0);
  d.schema.real("dropout", 0.5, "Dropout probability before the linear layer (training only)").at_least(0).below(1);
  d.schema.real("init_std", 0.001, "Standard deviation of the normal initialisation of fc.weight (bias 0)").above(0);
  d.infer_shape = classifier_shape;
  d.head_parameters = {"fc."};  // the model's classification head (optim.fc_lr5, checkpoint fc.*)
  return d;
}

vexp::schema::PluginDecl segment_consensus_declaration() {
  vexp::schema::PluginDecl d("segment_consensus",
                             "Per-clip consensus of frame scores (TSN): [N*T, K] -> [N, K], average or max over T");
  d.kind = "op";
  d.schema.text("mode", "avg", "avg: mean over the clip's frames (before softmax); max: maximum").one_of({"avg", "max"});
  d.schema.integer("segments", 0, "Frames per clip; 0: the clip's frames").at_least(0);
  d.infer_shape = consensus_shape;
  return d;
}

}  // namespace vexp_heads
