// cutout: an example clip transform built outside vexp's tree (docs/writing-a-plugin.md,
// "Walk-through: a clip transform").
//
// Random erasing (Zhong et al. 2020, "Random Erasing Data Augmentation"; DeVries &
// Taylor 2017's Cutout), as torchvision's RandomErasing draws it, for clips: with
// probability p one rectangle of the frame is filled with `value`, the same rectangle
// in every frame and channel of the clip (a still occluder over the whole clip: a
// clip transform treats every frame alike). The rectangle, as
// RandomErasing.get_params: ten tries of an area uniform in `scale` x the frame's and
// an aspect ratio (height / width) log-uniform in `ratio`, h = round(sqrt(area x
// ratio)), w = round(sqrt(area / ratio)), kept when h < H and w < W, at a top-left
// corner uniform where it fits (the row first); no rectangle fits in ten tries: the
// clip stays as it is.
//
// A pixel transform: it runs after decoding on [T, C, H, W] float32. After `normalize`
// (as timm and torchvision place RandomErasing) value = 0 is the mean; before it, a
// value is a pixel in [0, 1]. Every draw comes from the Rng handed in, so a clip is
// erased alike on any number of ranks and after a resume.
#include <cmath>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <ATen/ATen.h>  // tensor ops; in this .cpp only, never in a header

#include "vexp/registrar.hpp"  // VEXP_PLUGIN, vexp::Registrar, vexp::Params
#include "vexp/transform.hpp"  // vexp::ClipTransform, vexp::Rng, vexp::TransformContext

namespace {

std::string pair_text(const std::vector<double>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    char b[32];
    std::snprintf(b, sizeof b, "%g", v[i]);
    s += (i ? ", " : "") + std::string(b);
  }
  return s + "]";
}

class Cutout final : public vexp::ClipTransform {
 public:
  // What the schema cannot say (two values, in order) is refused here, with the
  // parameter's name first: `vexp check` then reports it at that parameter's line.
  explicit Cutout(const vexp::Params& p)
      : p_(p.f64("p")), scale_(p.f64_list("scale")), ratio_(p.f64_list("ratio")), value_(p.f64("value")) {
    if (scale_.size() != 2 || !(scale_[0] > 0 && scale_[0] <= scale_[1] && scale_[1] <= 1))
      throw std::invalid_argument("scale: expected [min, max] with 0 < min <= max <= 1 (fractions of the frame's area), got " +
                                  pair_text(scale_));
    if (ratio_.size() != 2 || !(ratio_[0] > 0 && ratio_[0] <= ratio_[1]))
      throw std::invalid_argument("ratio: expected [min, max] with 0 < min <= max (height / width), got " +
                                  pair_text(ratio_));
  }

  unsigned stages() const override { return kPixels; }

  // const, and no state: one object serves every loader thread.
  void pixels(at::Tensor& clip, vexp::Rng& rng, const vexp::TransformContext&) const override {
    if (!(rng.uniform() < p_)) return;  // one draw per clip; p = 0 draws nothing more
    if (clip.dim() != 4) throw std::invalid_argument("cutout: expects a clip [T, C, H, W]");
    const int64_t H = clip.size(2), W = clip.size(3);
    const double area = static_cast<double>(H) * static_cast<double>(W);
    const double log_lo = std::log(ratio_[0]), log_hi = std::log(ratio_[1]);
    for (int attempt = 0; attempt < 10; ++attempt) {
      const double target = area * rng.uniform(scale_[0], scale_[1]);
      const double aspect = std::exp(rng.uniform(log_lo, log_hi));
      const auto h = static_cast<int64_t>(std::nearbyint(std::sqrt(target * aspect)));  // half to even, as Python's round
      const auto w = static_cast<int64_t>(std::nearbyint(std::sqrt(target / aspect)));
      if (!(h < H && w < W)) continue;
      const int64_t top = rng.below(H - h + 1), left = rng.below(W - w + 1);
      clip.narrow(2, top, h).narrow(3, left, w).fill_(value_);  // every frame, every channel
      return;
    }
  }

 private:
  double p_;
  std::vector<double> scale_, ratio_;
  double value_;
};

}  // namespace

VEXP_PLUGIN("cutout", "0.1.0") {
  vexp::PluginDecl d("cutout",
                     "Random erasing (torchvision RandomErasing) of one rectangle, the same in every frame of a clip");
  d.schema.real("p", 0.5, "Probability of erasing a rectangle from a clip").range(0.0, 1.0);
  d.schema.real_list("scale", {0.02, 0.33}, "[min, max] area of the rectangle, a fraction of the frame's").range(0.0, 1.0);
  d.schema.real_list("ratio", {0.3, 3.3}, "[min, max] aspect ratio (height / width), log-uniform").above(0.0);
  d.schema.real("value", 0.0, "What the rectangle is filled with (after normalize: 0 is the mean)");
  registrar.add_transform(std::move(d), [](const vexp::Params& p) { return std::make_shared<Cutout>(p); });
}
