// Transform plugins (since plugin ABI 5): the data pipelines.
//
//   transform        (vexp::ClipTransform) one clip, in the loader threads, in the
//                    order the recipe lists them ([data] train_transforms /
//                    test_transforms). geometry() chooses, before decoding, the
//                    rectangle of the source frames and the mirror (crops, flips:
//                    the decoder resizes the rectangle straight to the output);
//                    pixels() changes the decoded clip (colour, RandAugment,
//                    normalisation), the same for every frame of the clip.
//   batch_transform  (vexp::BatchTransform) one micro-batch on the training rank,
//                    before the forward pass (mixup, cutmix); it may replace the
//                    labels by soft targets, which the loss must accept.
//
// Randomness comes from the Rng handed in only: clip transforms draw from one
// keyed by (run.seed, epoch, clip), batch transforms from one keyed by (run.seed,
// step, GPU), so exact resume and exact emulation of more GPUs hold.
#pragma once

#include <cstdint>

#include <ATen/core/Tensor.h>

#include "vexp/rng.hpp"

namespace vexp {

// What the dataset decodes: the rectangle (source pixels) of every frame, resized
// to out_w x out_h, mirrored when flip.
struct ClipGeometry {
  int src_w = 0, src_h = 0;         // the source frames' size
  int x = 0, y = 0, w = 0, h = 0;   // the rectangle; starts as the whole frame
  int out_w = 0, out_h = 0;         // starts as the dataset's input_size
  bool flip = false;
};

struct TransformContext {
  bool train = true;
  int64_t index = 0;   // the clip's index in its split
  int64_t view = 0;    // test view (clip x crop), 0 in training
  int64_t views = 1;   // test views of the split
};

class ClipTransform {
 public:
  virtual ~ClipTransform() = default;
  // Before decoding: may change the rectangle, output size and mirror.
  virtual void geometry(ClipGeometry& g, Rng& rng, const TransformContext& ctx) {
    (void)g, (void)rng, (void)ctx;
  }
  // After decoding: `clip` is [T, C, H, W] float32, values in [0, 1] before a
  // normalisation. May change it in place or replace it.
  virtual void pixels(at::Tensor& clip, Rng& rng, const TransformContext& ctx) {
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
