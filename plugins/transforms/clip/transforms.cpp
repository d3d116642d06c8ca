// transforms: vexp's clip transform plugins (kind "transform", vexp/transform.hpp),
// the pieces of the recipe's [[data.train_transforms]] / [[data.test_transforms]].
//
//   geometry (before decoding): multiscale_crop, random_resized_crop, flip, test_crops
//   pixels (after decoding):    color_jitter, grayscale, rand_augment, normalize
//
// Every draw comes from the Rng the dataset hands in (keyed by run.seed, epoch and
// clip), one set of draws per clip: every frame of a clip gets the same crop, flip,
// colour factors and RandAugment ops. The built-in kinetics pipeline is
// multiscale_crop, flip, normalize with their defaults (bit for bit, same draws);
// its test views are test_crops, normalize. README.md has every parameter.
#include <ATen/core/Tensor.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "image_ops.hpp"
#include "vexp/kinetics/sampling.hpp"
#include "vexp/registrar.hpp"
#include "vexp/transform.hpp"

namespace {

using vexp::ClipGeometry;
using vexp::ClipTransform;
using vexp::Rng;
using vexp::TransformContext;
namespace xf = vexp::xform;

[[noreturn]] void bad(const std::string& m) { throw std::invalid_argument(m); }

std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", v);
  return b;
}

// A crop (x, y, w, h) of the current rectangle, in its own coordinates as the
// output will show it: when an earlier transform mirrored the clip, x counts
// from the right.
void take_crop(ClipGeometry& g, int x, int y, int w, int h) {
  g.x += g.flip ? g.w - x - w : x;
  g.y += y;
  g.w = w;
  g.h = h;
}

// A clip's frames as [T, C, H, W] float32 (what pixels() receives).
struct Frames {
  float* data;
  int64_t T;
  int C, H, W;
  int64_t frame() const { return static_cast<int64_t>(C) * H * W; }
};
Frames frames_of(at::Tensor& clip, const char* who) {
  if (clip.dim() != 4 || clip.scalar_type() != at::kFloat || !clip.is_contiguous())
    bad(std::string(who) + ": expects a contiguous float32 clip [T, C, H, W]");
  return {clip.data_ptr<float>(), clip.size(0), static_cast<int>(clip.size(1)), static_cast<int>(clip.size(2)),
          static_cast<int>(clip.size(3))};
}

// ---- geometry ----

class MultiscaleCrop final : public ClipTransform {
 public:
  explicit MultiscaleCrop(const vexp::Params& p)
      : scales_(p.f64_list("scales")), max_distort_(static_cast<int>(p.i64("max_distort"))) {
    if (scales_.empty()) bad("scales: give at least one scale");
    for (double s : scales_)
      if (!(s > 0 && s <= 1)) bad("scales: each scale must be in (0, 1], got " + num(s));
    const std::string o = p.str("offsets");
    offsets_ = o == "fixed13" ? vexp::kinetics::CropOffsets::Fixed13
               : o == "fixed5" ? vexp::kinetics::CropOffsets::Fixed5
                               : vexp::kinetics::CropOffsets::Random;
  }
  unsigned stages() const override { return kGeometry; }
  void geometry(ClipGeometry& g, Rng& rng, const TransformContext&) const override {
    const auto c = vexp::kinetics::multiscale_crop_rect(g.w, g.h, g.out_w, g.out_h, scales_, max_distort_, offsets_, rng);
    take_crop(g, c.x, c.y, c.w, c.h);
  }

 private:
  std::vector<double> scales_;
  int max_distort_;
  vexp::kinetics::CropOffsets offsets_;
};

// torchvision RandomResizedCrop.get_params, drawing from the clip's Rng: ten tries
// of an area fraction uniform in `scale` and a log-uniform aspect ratio in `ratio`
// (w = round(sqrt(area * r)), h = round(sqrt(area / r)), half to even), a position
// uniform where it fits (top, then left); then the centre crop of the closest
// ratio, as torchvision's fallback.
class RandomResizedCrop final : public ClipTransform {
 public:
  explicit RandomResizedCrop(const vexp::Params& p) : scale_(p.f64_list("scale")), ratio_(p.f64_list("ratio")) {
    if (scale_.size() != 2 || !(scale_[0] > 0 && scale_[0] <= scale_[1] && scale_[1] <= 1))
      bad("scale: expected [min, max] with 0 < min <= max <= 1 (fractions of the frame's area)");
    if (ratio_.size() != 2 || !(ratio_[0] > 0 && ratio_[0] <= ratio_[1]))
      bad("ratio: expected [min, max] with 0 < min <= max (width / height)");
  }
  unsigned stages() const override { return kGeometry; }
  void geometry(ClipGeometry& g, Rng& rng, const TransformContext&) const override {
    const int W = g.w, H = g.h;
    const double area = static_cast<double>(W) * H;
    const double lr0 = std::log(ratio_[0]), lr1 = std::log(ratio_[1]);
    for (int attempt = 0; attempt < 10; ++attempt) {
      const double target = area * rng.uniform(scale_[0], scale_[1]);
      const double ar = std::exp(rng.uniform(lr0, lr1));
      const int w = static_cast<int>(std::nearbyint(std::sqrt(target * ar)));
      const int h = static_cast<int>(std::nearbyint(std::sqrt(target / ar)));
      if (w > 0 && w <= W && h > 0 && h <= H) {
        const int y = static_cast<int>(rng.below(H - h + 1));
        const int x = static_cast<int>(rng.below(W - w + 1));
        take_crop(g, x, y, w, h);
        return;
      }
    }
    const double in_ratio = static_cast<double>(W) / H;
    int w = W, h = H;
    if (in_ratio < ratio_[0]) {
      h = static_cast<int>(std::nearbyint(w / ratio_[0]));
    } else if (in_ratio > ratio_[1]) {
      w = static_cast<int>(std::nearbyint(h * ratio_[1]));
    }
    w = std::clamp(w, 1, W);
    h = std::clamp(h, 1, H);
    take_crop(g, (W - w) / 2, (H - h) / 2, w, h);
  }

 private:
  std::vector<double> scale_, ratio_;
};

class Flip final : public ClipTransform {
 public:
  explicit Flip(const vexp::Params& p) : p_(p.f64("p")) {}
  unsigned stages() const override { return kGeometry; }
  // One draw, always (a clip's later draws do not depend on p).
  void geometry(ClipGeometry& g, Rng& rng, const TransformContext&) const override {
    if (rng.uniform() < p_) g.flip = !g.flip;
  }

 private:
  double p_;
};

// The test views of the kinetics dataset as a transform: 1 centre crop, 3 crops
// along the long side, or 10 (4 corners and the centre, each also mirrored), of the
// frame with its short side resized to scale_size (as the official test, 3 crops too);
// the same formulas (vexp/kinetics/sampling.hpp: test_view).
class TestCrops final : public ClipTransform {
 public:
  explicit TestCrops(const vexp::Params& p)
      : crops_(static_cast<int>(p.i64("crops"))), scale_size_(static_cast<int>(p.i64("scale_size"))) {}
  unsigned stages() const override { return kGeometry; }
  int64_t views() const override { return crops_; }
  void geometry(ClipGeometry& g, Rng&, const TransformContext& ctx) const override {
    const auto c = vexp::kinetics::test_view(g.w, g.h, g.out_w, scale_size_, crops_, static_cast<int>(ctx.view));
    take_crop(g, c.x, c.y, c.w, c.h);
    if (c.flip) g.flip = !g.flip;
  }

 private:
  int crops_, scale_size_;
};

// ---- pixels ----

// torchvision ColorJitter on float clips: one draw per clip (the order of the four
// adjustments, a random permutation; then each factor that is not fixed: brightness,
// contrast, saturation uniform in [max(0, 1 - x), 1 + x], hue in [-x, x]), applied
// to every frame. p < 1: applied to a clip with probability p (one draw first).
class ColorJitter final : public ClipTransform {
 public:
  explicit ColorJitter(const vexp::Params& p)
      : b_(p.f64("brightness")), c_(p.f64("contrast")), s_(p.f64("saturation")), h_(p.f64("hue")), p_(p.f64("p")) {}
  unsigned stages() const override { return kPixels; }
  void pixels(at::Tensor& clip, Rng& rng, const TransformContext&) const override {
    if (p_ < 1 && !(rng.uniform() < p_)) return;
    int order[4] = {0, 1, 2, 3};
    for (int i = 3; i > 0; --i) std::swap(order[i], order[rng.below(i + 1)]);
    auto factor = [&](double x) { return x > 0 ? rng.uniform(std::max(0.0, 1 - x), 1 + x) : 1.0; };
    const double fb = factor(b_), fc = factor(c_), fs = factor(s_);
    const double fh = h_ > 0 ? rng.uniform(-h_, h_) : 0.0;
    const Frames f = frames_of(clip, "color_jitter");
    for (int64_t t = 0; t < f.T; ++t) {
      float* img = f.data + t * f.frame();
      for (int k : order) {
        if (k == 0 && b_ > 0) xf::adjust_brightness(img, f.C, f.H, f.W, fb);
        if (k == 1 && c_ > 0) xf::adjust_contrast(img, f.C, f.H, f.W, fc);
        if (k == 2 && s_ > 0) xf::adjust_saturation(img, f.C, f.H, f.W, fs);
        if (k == 3 && h_ > 0) xf::adjust_hue(img, f.C, f.H, f.W, fh);
      }
    }
  }

 private:
  double b_, c_, s_, h_, p_;
};

// torchvision RandomGrayscale: with probability p every frame becomes its luma
// (0.2989 R + 0.587 G + 0.114 B) in all three channels.
class Grayscale final : public ClipTransform {
 public:
  explicit Grayscale(const vexp::Params& p) : p_(p.f64("p")) {}
  unsigned stages() const override { return kPixels; }
  void pixels(at::Tensor& clip, Rng& rng, const TransformContext&) const override {
    if (!(rng.uniform() < p_)) return;
    const Frames f = frames_of(clip, "grayscale");
    for (int64_t t = 0; t < f.T; ++t) xf::to_grayscale(f.data + t * f.frame(), f.C, f.H, f.W);
  }

 private:
  double p_;
};

// torchvision RandAugment: num_ops ops drawn uniformly from `ops` (with
// replacement), each at bin `magnitude` of num_magnitude_bins with a random sign
// where the op has one (draws: op, then sign), drawn once per clip and applied to
// every frame in order, on the frames as 8-bit pixels (as torchvision on uint8
// tensors / PIL images), zero fill.
class RandAugment final : public ClipTransform {
 public:
  explicit RandAugment(const vexp::Params& p)
      : num_ops_(static_cast<int>(p.i64("num_ops"))),
        magnitude_(static_cast<int>(p.i64("magnitude"))),
        bins_(static_cast<int>(p.i64("num_magnitude_bins"))),
        bilinear_(p.str("interpolation") == "bilinear") {
    if (magnitude_ >= bins_)
      bad("magnitude: must be below num_magnitude_bins (" + std::to_string(bins_) + "), got " +
          std::to_string(magnitude_));
    const auto& names = xf::ra_op_names();
    for (const std::string& n : p.str_list("ops")) {
      const auto it = std::find(names.begin(), names.end(), n);
      if (it == names.end()) bad("ops: unknown op '" + n + "'");
      ops_.push_back(static_cast<xf::RaOp>(it - names.begin()));
    }
    if (ops_.empty() && num_ops_ > 0) bad("ops: give at least one op (or num_ops = 0)");
  }
  unsigned stages() const override { return kPixels; }
  void pixels(at::Tensor& clip, Rng& rng, const TransformContext&) const override {
    if (num_ops_ == 0) return;
    const Frames f = frames_of(clip, "rand_augment");
    std::vector<std::pair<xf::RaOp, double>> chosen;
    for (int k = 0; k < num_ops_; ++k) {
      const xf::RaOp op = ops_[static_cast<size_t>(rng.below(static_cast<int64_t>(ops_.size())))];
      double m = xf::ra_magnitude(op, magnitude_, bins_, f.H, f.W);
      if (xf::ra_signed(op) && rng.below(2) == 1) m = -m;
      chosen.emplace_back(op, m);
    }
    std::vector<uint8_t> px(static_cast<size_t>(f.frame())), scratch;
    for (int64_t t = 0; t < f.T; ++t) {
      float* img = f.data + t * f.frame();
      xf::to_u8(img, px.data(), f.frame());
      for (const auto& [op, m] : chosen) xf::ra_apply(op, m, px.data(), f.C, f.H, f.W, bilinear_, scratch);
      xf::from_u8(px.data(), img, f.frame());
    }
  }

 private:
  int num_ops_, magnitude_, bins_;
  bool bilinear_;
  std::vector<xf::RaOp> ops_;
};

// (x - mean) / std per channel, as (x - mean) * (1 / std) in float32: the built-in
// pipeline's arithmetic, bit for bit.
class Normalize final : public ClipTransform {
 public:
  explicit Normalize(const vexp::Params& p) : mean_(p.f64_list("mean")), std_(p.f64_list("std")) {
    if (mean_.empty() || std_.empty()) bad("mean and std need at least one value each");
    for (double s : std_)
      if (!(s > 0)) bad("std: values must be positive, got " + num(s));
  }
  unsigned stages() const override { return kPixels; }
  void check(const std::vector<int64_t>& shape) const override {
    if (shape.size() != 4 || shape[1] < 1) return;
    for (const auto* v : {&mean_, &std_})
      if (v->size() != 1 && static_cast<int64_t>(v->size()) != shape[1])
        bad(std::string(v == &mean_ ? "mean" : "std") + ": " + std::to_string(v->size()) + " values for clips of " +
            std::to_string(shape[1]) + " channel" + (shape[1] == 1 ? "" : "s") + " (give 1 or " +
            std::to_string(shape[1]) + ")");
  }
  void pixels(at::Tensor& clip, Rng&, const TransformContext&) const override {
    const Frames f = frames_of(clip, "normalize");
    for (const auto* v : {&mean_, &std_})
      if (v->size() != 1 && static_cast<int>(v->size()) != f.C)
        bad("normalize: " + std::to_string(v->size()) + " mean/std values for a clip of " + std::to_string(f.C) +
            " channels");
    const int64_t plane = static_cast<int64_t>(f.H) * f.W;
    for (int c = 0; c < f.C; ++c) {
      const float m = static_cast<float>(mean_.size() == 1 ? mean_[0] : mean_[static_cast<size_t>(c)]);
      const float inv = 1.f / static_cast<float>(std_.size() == 1 ? std_[0] : std_[static_cast<size_t>(c)]);
      for (int64_t t = 0; t < f.T; ++t) {
        float* p = f.data + t * f.frame() + c * plane;
        for (int64_t i = 0; i < plane; ++i) p[i] = (p[i] - m) * inv;
      }
    }
  }

 private:
  std::vector<double> mean_, std_;
};

template <class T>
auto factory() {
  return [](const vexp::Params& p) { return std::make_shared<T>(p); };
}

}  // namespace

VEXP_PLUGIN("transforms", "0.1.0") {
  {
    vexp::PluginDecl d("multiscale_crop",
                       "Train: official TSM multi-scale crop (GroupMultiScaleCrop), resized to the output size");
    d.schema.real_list("scales", {1.0, 0.875, 0.75, 0.66}, "Crop sides as fractions of the short side")
        .range(0.0, 1.0);
    d.schema.integer("max_distort", 1, "Most the width and height scale indices may differ").at_least(0);
    d.schema.text("offsets", "fixed13",
                  "fixed13: corners, centre, edge middles and quarters (more_fix_crop); fixed5: corners and centre; "
                  "random: anywhere")
        .one_of({"fixed13", "fixed5", "random"});
    registrar.add_transform(std::move(d), factory<MultiscaleCrop>());
  }
  {
    vexp::PluginDecl d("random_resized_crop",
        "Train: torchvision RandomResizedCrop (area fraction and aspect ratio), resized to the output size");
    d.schema.real_list("scale", {0.08, 1.0}, "[min, max] fraction of the frame's area").range(0.0, 1.0);
    d.schema.real_list("ratio", {3.0 / 4.0, 4.0 / 3.0}, "[min, max] aspect ratio (width / height), log-uniform")
        .above(0.0);
    registrar.add_transform(std::move(d), factory<RandomResizedCrop>());
  }
  {
    vexp::PluginDecl d("flip", "Horizontal flip of the whole clip with probability p (in the decoder: free)");
    d.schema.real("p", 0.5, "Probability of mirroring a clip").range(0.0, 1.0);
    registrar.add_transform(std::move(d), factory<Flip>());
  }
  {
    vexp::PluginDecl d("test_crops",
        "Test views, as the official TSM test: 1 centre, 3 left/right/centre, or 10 (corners + centre, and "
        "mirrored) crops per clip");
    d.schema.integer("crops", 1, "Crops per clip (views)").one_of({1, 3, 10});
    d.schema.integer("scale_size", 256, "Short side resized to this before cropping")
        .range(8, 2048);
    registrar.add_transform(std::move(d), factory<TestCrops>());
  }
  {
    vexp::PluginDecl d("color_jitter",
        "torchvision ColorJitter, one draw per clip: brightness, contrast, saturation, hue in a random order");
    d.schema.real("brightness", 0.0, "Factor uniform in [max(0, 1 - x), 1 + x]; 0: unchanged").at_least(0.0);
    d.schema.real("contrast", 0.0, "Factor uniform in [max(0, 1 - x), 1 + x]; 0: unchanged").at_least(0.0);
    d.schema.real("saturation", 0.0, "Factor uniform in [max(0, 1 - x), 1 + x]; 0: unchanged").at_least(0.0);
    d.schema.real("hue", 0.0, "Shift uniform in [-x, x] turns of the colour wheel; 0: unchanged").range(0.0, 0.5);
    d.schema.real("p", 1.0, "Probability of jittering a clip (RandomApply)").range(0.0, 1.0);
    registrar.add_transform(std::move(d), factory<ColorJitter>());
  }
  {
    vexp::PluginDecl d("grayscale", "torchvision RandomGrayscale: with probability p the clip's luma in every channel");
    d.schema.real("p", 0.1, "Probability of a gray clip").range(0.0, 1.0);
    registrar.add_transform(std::move(d), factory<Grayscale>());
  }
  {
    vexp::PluginDecl d("rand_augment",
        "torchvision RandAugment on 8-bit frames; the same ops and magnitudes for every frame of a clip");
    d.schema.integer("num_ops", 2, "Ops applied to each clip, in sequence").range(0, 16);
    d.schema.integer("magnitude", 9, "Magnitude bin of every op (below num_magnitude_bins)").at_least(0);
    d.schema.integer("num_magnitude_bins", 31, "Bins of the magnitude scale").range(2, 1000);
    std::vector<vexp::schema::Value> names;
    for (const auto& n : xf::ra_op_names()) names.emplace_back(n);
    d.schema.text_list("ops", xf::ra_op_names(), "Ops to draw from (torchvision's 14 by default)").one_of(names);
    d.schema.text("interpolation", "nearest", "Resampling of the geometric ops").one_of({"nearest", "bilinear"});
    registrar.add_transform(std::move(d), factory<RandAugment>());
  }
  {
    vexp::PluginDecl d("normalize", "(x - mean) / std per channel (x in [0, 1]); usually the last transform");
    d.schema.real_list("mean", {0.485, 0.456, 0.406}, "Per-channel mean (1 value: every channel)");
    d.schema.real_list("std", {0.229, 0.224, 0.225}, "Per-channel standard deviation (1 value: every channel)")
        .above(0.0);
    registrar.add_transform(std::move(d), factory<Normalize>());
  }
}
