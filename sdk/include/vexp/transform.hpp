// Transform plugins (since plugin ABI 5): the data pipelines.
//
//   transform        (vexp::ClipTransform) one clip, in the loader threads, in the
//                    order the recipe lists them ([[data.train_transforms]] /
//                    [[data.test_transforms]]). A dataset that takes a pipeline
//                    (Dataset::set_transforms) runs it in two stages:
//                      1. geometry(), before decoding, of every transform that has
//                         the kGeometry stage, in list order: the rectangle of the
//                         source frames, the output size and the mirror (crops,
//                         flips); the decoder resizes the rectangle straight to the
//                         output, once (no full-size frame is ever made);
//                      2. pixels(), after decoding, of every transform that has the
//                         kPixels stage, in list order (colour, RandAugment,
//                         normalisation), the same parameters for every frame.
//                    So a transform with the geometry stage may not follow one with
//                    the pixel stage in a list (the host refuses it at the recipe
//                    line): geometry is decided before there are pixels.
//   batch_transform  (vexp::BatchTransform) one micro-batch on the training rank,
//                    before the forward pass (mixup, cutmix); it may replace the
//                    labels by soft targets, which the loss must accept.
//
// Randomness comes from the Rng handed in only: clip transforms draw from the one
// the dataset keys by (run.seed, epoch, clip) (after the dataset's own sampling
// draws; the transforms in list order, geometry first), batch transforms from one
// keyed by (run.seed, step, GPU), so exact resume and exact emulation of more
// GPUs hold. A transform object is shared by every loader thread: geometry() and
// pixels() must be const in effect (no mutable state; derive everything from the
// arguments).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "vexp/rng.hpp"
#include "vexp/schema/value.hpp"

namespace vexp {

// What the dataset decodes: the rectangle (source pixels) of every frame, resized
// to out_w x out_h, mirrored when flip. A transform changes it relative to what the
// transforms before it chose (a crop takes a part of x, y, w, h).
struct ClipGeometry {
  int src_w = 0, src_h = 0;         // the source frames' size
  int x = 0, y = 0, w = 0, h = 0;   // the rectangle; starts as the whole frame
  int out_w = 0, out_h = 0;         // starts as the dataset's output size (input_size)
  bool flip = false;                // mirror the output left-right
};

struct TransformContext {
  bool train = true;
  int64_t index = 0;   // the clip's index in its split
  int64_t view = 0;    // this transform's test view, in [0, views()) (0 in training)
  int64_t views = 1;   // this transform's views() (1 in training)
};

// One use of a transform plugin by name: its type and the parameters given (the
// host fills the schema's defaults). Datasets describe their built-in pipelines so
// (Dataset::default_transforms).
struct TransformSpec {
  std::string type;
  std::map<std::string, schema::Value> params;
};

class ClipTransform {
 public:
  // The stages a transform takes part in (a bit set).
  enum Stage : unsigned { kGeometry = 1u, kPixels = 2u };

  virtual ~ClipTransform() = default;
  // kGeometry, kPixels or both: the host calls geometry() / pixels() only for the
  // stages named here, and checks the list's order with them.
  virtual unsigned stages() const = 0;
  // Test views this transform makes of every clip (3 or 10 crops): a test list's
  // views multiply (the first transform's index varies slowest); a training list
  // may hold only transforms of one view.
  virtual int64_t views() const { return 1; }
  // Refuses a clip it cannot work on ([T, C, H, W] after decoding; std::invalid_argument
  // naming the problem, e.g. 3 means for a 1-channel clip). Called once, when a
  // recipe is opened, with the dataset's clip shape.
  virtual void check(const std::vector<int64_t>& clip_shape) const { (void)clip_shape; }
  // Before decoding: may change the rectangle, output size and mirror.
  virtual void geometry(ClipGeometry& g, Rng& rng, const TransformContext& ctx) const {
    (void)g, (void)rng, (void)ctx;
  }
  // After decoding: `clip` is [T, C, H, W] float32, contiguous, values in [0, 1]
  // before a normalisation. May change it in place or replace it (same shape).
  virtual void pixels(at::Tensor& clip, Rng& rng, const TransformContext& ctx) const {
    (void)clip, (void)rng, (void)ctx;
  }
};

// Where a batch transform runs: the host's step, for plugins whose behaviour
// follows the schedule (mixup switched off for the last epochs).
struct BatchContext {
  int64_t step = 0;        // the global optimizer step, from 0
  int64_t steps = 0;       // the run's optimizer steps (a benchmark: the steps it times)
  double epoch = 0;        // epochs of training done when the step starts (step x global batch / clips)
  int64_t micro_batch = 0; // its place in the global step: GPU g's accumulation step a is g x accum + a
};

// A split's pipeline: transforms in list order.
using ClipPipeline = std::vector<std::shared_ptr<const ClipTransform>>;

// ---- running a pipeline (header-only, what a dataset calls) ----

// The test views of a pipeline: the product of its transforms' views().
inline int64_t pipeline_views(const ClipPipeline& p) {
  int64_t v = 1;
  for (const auto& t : p) v *= t->views();
  return v;
}

// Stage 1: the geometry of a W x H source clip for an out_w x out_h output, view
// `view` of pipeline_views(p) (0 in training).
inline ClipGeometry run_geometry(const ClipPipeline& p, int W, int H, int out_w, int out_h, Rng& rng, bool train,
                                 int64_t index, int64_t view) {
  ClipGeometry g;
  g.src_w = g.w = W;
  g.src_h = g.h = H;
  g.out_w = out_w;
  g.out_h = out_h;
  int64_t below = pipeline_views(p);  // views of this transform and the ones after it
  for (const auto& t : p) {
    const int64_t n = t->views();
    below /= n;
    if (!(t->stages() & ClipTransform::kGeometry)) continue;
    t->geometry(g, rng, {train, index, n > 1 ? (view / below) % n : 0, n});
  }
  return g;
}

// Stage 2: the pixels of the decoded clip (same view as run_geometry).
inline void run_pixels(const ClipPipeline& p, at::Tensor& clip, Rng& rng, bool train, int64_t index, int64_t view) {
  int64_t below = pipeline_views(p);
  for (const auto& t : p) {
    const int64_t n = t->views();
    below /= n;
    if (!(t->stages() & ClipTransform::kPixels)) continue;
    t->pixels(clip, rng, {train, index, n > 1 ? (view / below) % n : 0, n});
  }
}

class BatchTransform {
 public:
  virtual ~BatchTransform() = default;
  // One micro-batch (one GPU's clips) before the forward pass.
  //   clips    [N, T, C, H, W] float32 on the training device. Do not write into
  //            it (it may be the loader's or a benchmark's buffer): assign the
  //            result to `clips`.
  //   targets  [N, classes] float32 probabilities on the same device, each row
  //            summing to 1: the labels one-hot, or an earlier batch transform's
  //            soft targets. A fresh tensor: change it in place or replace it;
  //            rows must still sum to 1.
  //   rng      keyed by (run.seed, step, micro_batch, the transform's place in the
  //            list): the only randomness to use (not torch's generator), so
  //            that exact resume and exact emulation of more GPUs hold.
  virtual void apply(at::Tensor& clips, at::Tensor& targets, Rng& rng, const BatchContext& ctx) = 0;
};

}  // namespace vexp
