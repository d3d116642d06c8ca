// The batch transforms of library `mix` (README.md): mixup, cutmix and
// mixup_cutmix (timm's Mixup: one of the two per micro-batch).
#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "vexp/distributions.hpp"
#include "vexp/plugin_abi.h"
#include "vexp/registrar.hpp"
#include "vexp/transform.hpp"

namespace {

// What every mixing transform shares: when it mixes and with which partners.
struct Common {
  double prob = 1.0;         // probability of mixing a micro-batch
  bool shuffle = false;      // partners: a permutation from the Rng (else the batch reversed)
  double until_epoch = 0;    // > 0: no mixing from this epoch on

  explicit Common(const vexp::Params& p)
      : prob(p.f64("prob")), shuffle(p.str("pairing") == "shuffle"), until_epoch(p.f64("until_epoch")) {}

  // Draws first (always, so that prob does not shift the other draws' order).
  bool mixes(vexp::Rng& rng, const vexp::BatchContext& ctx) const {
    const bool on = rng.uniform() < prob;
    return on && !(until_epoch > 0 && ctx.epoch >= until_epoch);
  }
  // partner[i]: the clip clip i is mixed with. Reversed (timm: x.flip(0)) or a
  // permutation drawn from the Rng (mmaction2's randperm).
  at::Tensor partners(vexp::Rng& rng, int64_t n, const at::Device& device) const {
    std::vector<int64_t> p;
    if (shuffle) {
      p = vexp::permutation(rng, n);
    } else {
      for (int64_t i = n - 1; i >= 0; --i) p.push_back(i);
    }
    return at::tensor(p, at::kLong).to(device);
  }
};

void check_clips(const char* name, const at::Tensor& clips, const at::Tensor& targets) {
  if (clips.dim() < 3 || targets.dim() != 2 || clips.size(0) != targets.size(0))
    throw std::invalid_argument(std::string("batch transform '") + name +
                                "': expects clips [N, ..., H, W] and targets [N, classes]");
}

// The targets as mixed clips are: lam x own + (1 - lam) x partner's.
void mix_targets(at::Tensor& targets, const at::Tensor& partner, double lam) {
  targets = targets.mul(lam).add_(targets.index_select(0, partner).mul(1.0 - lam));
}

// Mixup (Zhang et al. 2018): one lambda ~ Beta(alpha, alpha) per micro-batch.
void mixup(at::Tensor& clips, at::Tensor& targets, const at::Tensor& partner, double lam) {
  clips = clips.mul(lam).add_(clips.index_select(0, partner).mul(1.0 - lam));
  mix_targets(targets, partner, lam);
}

// CutMix (Yun et al. 2019): one box over H x W (the last two dims), the same for
// every clip and every frame of the micro-batch, filled from the partner's clip; the
// box as timm's rand_bbox draws it (centre uniform, sides H x sqrt(1 - lam) and
// W x sqrt(1 - lam), clipped to the frame), and lambda corrected to the share of
// the frame left unchanged (timm correct_lam, mmaction2 CutmixBlending).
void cutmix(at::Tensor& clips, at::Tensor& targets, const at::Tensor& partner, double lam, vexp::Rng& rng) {
  const int64_t h = clips.size(-2), w = clips.size(-1);
  const double cut = std::sqrt(1.0 - lam);
  const int64_t cut_h = static_cast<int64_t>(static_cast<double>(h) * cut);
  const int64_t cut_w = static_cast<int64_t>(static_cast<double>(w) * cut);
  const int64_t cy = rng.below(h), cx = rng.below(w);
  const int64_t y0 = std::clamp<int64_t>(cy - cut_h / 2, 0, h), y1 = std::clamp<int64_t>(cy + cut_h / 2, 0, h);
  const int64_t x0 = std::clamp<int64_t>(cx - cut_w / 2, 0, w), x1 = std::clamp<int64_t>(cx + cut_w / 2, 0, w);
  const double corrected = 1.0 - static_cast<double>((y1 - y0) * (x1 - x0)) / static_cast<double>(h * w);
  if (y1 > y0 && x1 > x0) {
    at::Tensor out = clips.clone();
    const int64_t hd = clips.dim() - 2, wd = clips.dim() - 1;
    // The partners' boxes only (slicing H, W commutes with picking clips).
    out.slice(hd, y0, y1).slice(wd, x0, x1).copy_(clips.slice(hd, y0, y1).slice(wd, x0, x1).index_select(0, partner));
    clips = out;
  }
  mix_targets(targets, partner, corrected);
}

class Mixup : public vexp::BatchTransform {
 public:
  explicit Mixup(const vexp::Params& p) : common_(p), alpha_(p.f64("alpha")) {}
  void apply(at::Tensor& clips, at::Tensor& targets, vexp::Rng& rng, const vexp::BatchContext& ctx) override {
    check_clips("mixup", clips, targets);
    if (!common_.mixes(rng, ctx)) return;
    const double lam = vexp::beta(rng, alpha_, alpha_);
    mixup(clips, targets, common_.partners(rng, clips.size(0), clips.device()), lam);
  }

 private:
  Common common_;
  double alpha_;
};

class CutMix : public vexp::BatchTransform {
 public:
  explicit CutMix(const vexp::Params& p) : common_(p), alpha_(p.f64("alpha")) {}
  void apply(at::Tensor& clips, at::Tensor& targets, vexp::Rng& rng, const vexp::BatchContext& ctx) override {
    check_clips("cutmix", clips, targets);
    if (!common_.mixes(rng, ctx)) return;
    const double lam = vexp::beta(rng, alpha_, alpha_);
    const at::Tensor partner = common_.partners(rng, clips.size(0), clips.device());
    cutmix(clips, targets, partner, lam, rng);
  }

 private:
  Common common_;
  double alpha_;
};

// timm's Mixup with both alphas: each mixed micro-batch is cutmix with probability
// switch_prob, else mixup.
class MixupCutmix : public vexp::BatchTransform {
 public:
  explicit MixupCutmix(const vexp::Params& p)
      : common_(p),
        mixup_alpha_(p.f64("mixup_alpha")),
        cutmix_alpha_(p.f64("cutmix_alpha")),
        switch_prob_(p.f64("switch_prob")) {}
  void apply(at::Tensor& clips, at::Tensor& targets, vexp::Rng& rng, const vexp::BatchContext& ctx) override {
    check_clips("mixup_cutmix", clips, targets);
    if (!common_.mixes(rng, ctx)) return;
    const bool use_cutmix = rng.uniform() < switch_prob_;
    const double alpha = use_cutmix ? cutmix_alpha_ : mixup_alpha_;
    const double lam = vexp::beta(rng, alpha, alpha);
    const at::Tensor partner = common_.partners(rng, clips.size(0), clips.device());
    if (use_cutmix) {
      cutmix(clips, targets, partner, lam, rng);
    } else {
      mixup(clips, targets, partner, lam);
    }
  }

 private:
  Common common_;
  double mixup_alpha_, cutmix_alpha_, switch_prob_;
};

void common_params(vexp::Schema& s) {
  s.real("prob", 1.0, "Probability that a micro-batch is mixed (timm mix_prob)").at_least(0).at_most(1);
  s.text("pairing", "reverse",
         "Which clip each clip is mixed with: reverse (the micro-batch reversed, as timm) or shuffle (a "
         "random permutation, as mmaction2)")
      .one_of({vexp::schema::Value("reverse"), vexp::schema::Value("shuffle")});
  s.real("until_epoch", 0.0, "Mix only before this epoch (timm mixup_off_epoch); 0: the whole run").at_least(0);
}

}  // namespace

VEXP_PLUGIN("mix", "0.1.0") {
  {
    vexp::PluginDecl d("mixup",
        "Mixup: clips and targets blended as lam x own + (1 - lam) x partner's, lam ~ Beta(alpha, alpha) per "
        "micro-batch; soft targets");
    d.schema.real("alpha", 1.0, "Beta(alpha, alpha) of the mixing weight (timm mixup_alpha, mmaction2 alpha)").above(0);
    common_params(d.schema);
    registrar.add_batch_transform(std::move(d), [](const vexp::Params& p) { return std::make_shared<Mixup>(p); });
  }
  {
    vexp::PluginDecl d("cutmix",
        "CutMix: one box over H x W (every frame, every clip of the micro-batch) pasted from the partner clip, "
        "lam ~ Beta(alpha, alpha) corrected to the box's area; soft targets");
    d.schema.real("alpha", 1.0, "Beta(alpha, alpha) of the kept area (timm cutmix_alpha, mmaction2 alpha)").above(0);
    common_params(d.schema);
    registrar.add_batch_transform(std::move(d), [](const vexp::Params& p) { return std::make_shared<CutMix>(p); });
  }
  {
    vexp::PluginDecl d("mixup_cutmix",
        "timm's Mixup with both: each mixed micro-batch is cutmix with probability switch_prob, else mixup; "
        "soft targets");
    d.schema.real("mixup_alpha", 0.8, "Beta(alpha, alpha) of mixup's weight").above(0);
    d.schema.real("cutmix_alpha", 1.0, "Beta(alpha, alpha) of cutmix's kept area").above(0);
    d.schema.real("switch_prob", 0.5, "Probability of cutmix rather than mixup").at_least(0).at_most(1);
    common_params(d.schema);
    registrar.add_batch_transform(std::move(d),
                                  [](const vexp::Params& p) { return std::make_shared<MixupCutmix>(p); });
  }
}
