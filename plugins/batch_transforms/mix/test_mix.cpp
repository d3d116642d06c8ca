// mixup, cutmix and mixup_cutmix, and the samplers they draw from
// (vexp/distributions.hpp): moments of Gamma and Beta draws, determinism per key,
// targets that stay probabilities, the blend and the box.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "plugin_testing.hpp"
#include "vexp/distributions.hpp"
#include "vexp/transform.hpp"

namespace {

using vexp::testing::contains;
using vexp::testing::error_of;

std::shared_ptr<vexp::BatchTransform> make(const std::string& name,
                                           std::map<std::string, vexp::schema::Value> given = {}) {
  return vexp::testing::make<vexp::BatchTransform>("batch_transform", name, std::move(given));
}

// Mean and variance of `n` draws.
template <class F>
std::pair<double, double> moments(int n, F draw) {
  double s = 0, s2 = 0;
  for (int i = 0; i < n; ++i) {
    const double v = draw();
    s += v;
    s2 += v * v;
  }
  const double m = s / n;
  return {m, s2 / n - m * m};
}

TEST(Distributions, GammaHasShapeAsMeanAndVariance) {
  for (double k : {0.1, 0.3, 1.0, 2.5, 9.0}) {
    vexp::Rng rng(7, 1, 2);
    const int n = 40000;
    const auto [m, v] = moments(n, [&] { return vexp::gamma(rng, k); });
    // Gamma(k, 1): mean k, variance k; the standard error of the mean is sqrt(k / n).
    EXPECT_NEAR(m, k, 5 * std::sqrt(k / n)) << "k = " << k;
    EXPECT_NEAR(v, k, 0.06 * k + 0.01) << "k = " << k;
  }
}

TEST(Distributions, BetaMoments) {
  for (auto [a, b] : std::vector<std::pair<double, double>>{{0.1, 0.1}, {0.2, 0.2}, {1, 1}, {4, 4}, {0.5, 2}}) {
    vexp::Rng rng(11, 3, 5);
    const int n = 40000;
    double lo = 1, hi = 0;
    const auto [m, v] = moments(n, [&] {
      const double x = vexp::beta(rng, a, b);
      lo = std::min(lo, x), hi = std::max(hi, x);
      return x;
    });
    const double mean = a / (a + b), var = a * b / ((a + b) * (a + b) * (a + b + 1));
    EXPECT_GE(lo, 0.0);
    EXPECT_LE(hi, 1.0);
    EXPECT_NEAR(m, mean, 5 * std::sqrt(var / n)) << a << ", " << b;
    EXPECT_NEAR(v, var, 0.05 * var) << a << ", " << b;
  }
}

TEST(Distributions, NormalAndPermutation) {
  vexp::Rng rng(1, 2, 3);
  const auto [m, v] = moments(40000, [&] { return vexp::normal(rng); });
  EXPECT_NEAR(m, 0, 0.025);
  EXPECT_NEAR(v, 1, 0.03);
  std::vector<int64_t> p = vexp::permutation(rng, 50);
  EXPECT_EQ(std::set<int64_t>(p.begin(), p.end()).size(), 50u);
  EXPECT_EQ(*std::max_element(p.begin(), p.end()), 49);
  EXPECT_TRUE(vexp::permutation(rng, 0).empty());
}

TEST(Distributions, AFunctionOfTheKey) {
  vexp::Rng a(5, 6, 7), b(5, 6, 7), c(5, 6, 8);
  const double x = vexp::beta(a, 0.4, 0.4);
  EXPECT_EQ(x, vexp::beta(b, 0.4, 0.4));
  EXPECT_NE(x, vexp::beta(c, 0.4, 0.4));
}

// A micro-batch of n clips [n, T=3, C=2, H=8, W=10] with distinct values, clip i of
// class i (so a mixed target row shows the partner), classes = n.
struct MicroBatch {
  at::Tensor clips, targets;
};
MicroBatch micro_batch(int64_t n = 6) {
  at::Tensor clips = at::arange(n * 3 * 2 * 8 * 10, at::kFloat).reshape({n, 3, 2, 8, 10}).div(1000.0);
  at::Tensor targets = at::eye(n, at::kFloat);
  return {clips, targets};
}

vexp::BatchContext ctx_of(int64_t step = 0, double epoch = 0, int64_t micro = 0) {
  vexp::BatchContext c;
  c.step = step;
  c.epoch = epoch;
  c.micro_batch = micro;
  return c;
}

// Each row's partner (the other class with weight) and its own weight.
void partners_of(const at::Tensor& targets, std::vector<int64_t>& partner, std::vector<double>& own) {
  const int64_t n = targets.size(0);
  partner.assign(n, -1);
  own.assign(n, 0);
  for (int64_t i = 0; i < n; ++i) {
    own[i] = targets[i][i].item<double>();
    for (int64_t j = 0; j < n; ++j)
      if (j != i && targets[i][j].item<double>() > 0) partner[i] = j;
    if (partner[i] < 0) partner[i] = i;  // the middle clip of an odd batch, reversed
  }
}

TEST(Mixup, BlendsClipsAndTargetsWithOneLambdaAndTheReversedBatch) {
  auto mixup = make("mixup", {{"alpha", 0.4}});
  MicroBatch b = micro_batch();
  const at::Tensor original = b.clips.clone();
  at::Tensor input = b.clips;
  vexp::Rng rng(0, 3, 9);
  mixup->apply(b.clips, b.targets, rng, ctx_of());
  EXPECT_TRUE(at::equal(input, original)) << "the caller's clips were written into";
  EXPECT_TRUE(at::allclose(b.targets.sum(1), at::ones({6}), 0, 1e-6));
  std::vector<int64_t> partner;
  std::vector<double> own;
  partners_of(b.targets, partner, own);
  const double lam = own[0];
  EXPECT_GT(lam, 0.0);
  EXPECT_LT(lam, 1.0);
  for (int64_t i = 0; i < 6; ++i) {
    EXPECT_EQ(partner[i], 5 - i);
    EXPECT_NEAR(own[i], lam, 1e-6);
  }
  const at::Tensor want = original.mul(lam).add_(original.flip(0).mul(1.0 - lam));
  EXPECT_TRUE(at::allclose(b.clips, want, 1e-5, 1e-6));
  // The same key draws the same lambda, another step or micro-batch another one.
  MicroBatch c = micro_batch();
  vexp::Rng same(0, 3, 9), other(0, 4, 9);
  mixup->apply(c.clips, c.targets, same, ctx_of());
  EXPECT_TRUE(at::equal(c.clips, b.clips));
  EXPECT_TRUE(at::equal(c.targets, b.targets));
  MicroBatch d = micro_batch();
  mixup->apply(d.clips, d.targets, other, ctx_of());
  EXPECT_FALSE(at::equal(d.targets, b.targets));
}

TEST(Mixup, ShufflePairsByAPermutation) {
  auto mixup = make("mixup", {{"pairing", "shuffle"}});
  MicroBatch b = micro_batch(8);
  const at::Tensor original = b.clips.clone();
  vexp::Rng rng(2, 0, 1);
  mixup->apply(b.clips, b.targets, rng, ctx_of());
  std::vector<int64_t> partner;
  std::vector<double> own;
  partners_of(b.targets, partner, own);
  EXPECT_EQ(std::set<int64_t>(partner.begin(), partner.end()).size(), 8u) << "not a permutation";
  std::vector<int64_t> reversed{7, 6, 5, 4, 3, 2, 1, 0};
  EXPECT_NE(partner, reversed);
  const double lam = own[0];
  const at::Tensor idx = at::tensor(partner, at::kLong);
  EXPECT_TRUE(at::allclose(b.clips, original.mul(lam).add_(original.index_select(0, idx).mul(1.0 - lam)), 1e-5, 1e-6));
}

TEST(Mixup, ProbZeroAndUntilEpochLeaveTheBatch) {
  MicroBatch b = micro_batch();
  const at::Tensor clips = b.clips;
  vexp::Rng r1(0, 0, 0);
  make("mixup", {{"prob", 0.0}})->apply(b.clips, b.targets, r1, ctx_of());
  EXPECT_TRUE(b.clips.is_same(clips));
  EXPECT_TRUE(at::equal(b.targets, at::eye(6)));
  vexp::Rng r2(0, 0, 0);
  make("mixup", {{"until_epoch", 2.0}})->apply(b.clips, b.targets, r2, ctx_of(40, 2.0));
  EXPECT_TRUE(b.clips.is_same(clips));
  vexp::Rng r3(0, 0, 0);
  make("mixup", {{"until_epoch", 2.0}})->apply(b.clips, b.targets, r3, ctx_of(39, 1.95));
  EXPECT_FALSE(b.clips.is_same(clips));
  // prob 0.5: about half the micro-batches.
  int mixed = 0;
  auto half = make("mixup", {{"prob", 0.5}});
  for (int s = 0; s < 400; ++s) {
    MicroBatch m = micro_batch(2);
    vexp::Rng r(0, static_cast<uint64_t>(s), 0);
    half->apply(m.clips, m.targets, r, ctx_of(s));
    mixed += m.targets[0][0].item<double>() < 1.0;
  }
  EXPECT_NEAR(mixed, 200, 40);
}

// The box CutMix pasted: where the output differs from the input, per [H, W].
at::Tensor changed(const at::Tensor& out, const at::Tensor& in) { return out.ne(in); }

TEST(CutMix, OneBoxForEveryFrameAndClipAndLambdaIsItsArea) {
  auto cutmix = make("cutmix", {{"alpha", 1.0}});
  int boxes = 0;
  for (uint64_t step = 0; step < 30; ++step) {
    MicroBatch b = micro_batch();
    const at::Tensor original = b.clips.clone();
    vexp::Rng rng(1, step, 0);
    cutmix->apply(b.clips, b.targets, rng, ctx_of(static_cast<int64_t>(step)));
    EXPECT_TRUE(at::allclose(b.targets.sum(1), at::ones({6}), 0, 1e-6));
    // Every clip has a partner (the batch reversed; 6 clips: none is its own).
    const at::Tensor diff = changed(b.clips, original);              // [N, T, C, H, W]
    const at::Tensor mask = diff[0][0][0];                           // [H, W]
    for (int64_t n = 0; n < 6; ++n)
      for (int64_t t = 0; t < 3; ++t)
        for (int64_t c = 0; c < 2; ++c) EXPECT_TRUE(at::equal(diff[n][t][c], mask)) << "step " << step;
    // Inside the box the partner's pixels, outside the clip's own.
    const at::Tensor want = at::where(mask, original.flip(0), original);
    EXPECT_TRUE(at::equal(b.clips, want));
    // The mask is a rectangle, and lambda is the share of the frame kept.
    const int64_t area = mask.sum().item<int64_t>();
    if (area > 0) {
      ++boxes;
      const at::Tensor rows = mask.any(1).nonzero().reshape({-1}), cols = mask.any(0).nonzero().reshape({-1});
      const int64_t h = rows.numel(), w = cols.numel();
      EXPECT_EQ(area, h * w);
      EXPECT_EQ(rows[-1].item<int64_t>() - rows[0].item<int64_t>() + 1, h);
      EXPECT_EQ(cols[-1].item<int64_t>() - cols[0].item<int64_t>() + 1, w);
    }
    const double lam = b.targets[0][0].item<double>();
    EXPECT_NEAR(lam, 1.0 - static_cast<double>(area) / 80.0, 1e-6) << "step " << step;
    if (area > 0) {
      EXPECT_NEAR(b.targets[0][5].item<double>(), static_cast<double>(area) / 80.0, 1e-6);
    }
  }
  EXPECT_GT(boxes, 20);
}

TEST(MixupCutmix, SwitchProbChoosesTheKind) {
  MicroBatch a = micro_batch(), b = micro_batch();
  const at::Tensor original = a.clips.clone();
  vexp::Rng r1(0, 1, 0), r2(0, 1, 0);
  make("mixup_cutmix", {{"switch_prob", 0.0}})->apply(a.clips, a.targets, r1, ctx_of());
  make("mixup_cutmix", {{"switch_prob", 1.0}})->apply(b.clips, b.targets, r2, ctx_of());
  // Mixup changes every pixel of every clip; cutmix only its box.
  EXPECT_TRUE(changed(a.clips, original).all().item<bool>());
  EXPECT_FALSE(changed(b.clips, original).all().item<bool>());
  EXPECT_TRUE(at::allclose(a.targets.sum(1), at::ones({6}), 0, 1e-6));
  EXPECT_TRUE(at::allclose(b.targets.sum(1), at::ones({6}), 0, 1e-6));
}

TEST(Mix, SchemaRefusesBadParameters) {
  EXPECT_TRUE(contains(error_of([] { make("mixup", {{"alpha", 0.0}}); }), "alpha"));
  EXPECT_TRUE(contains(error_of([] { make("cutmix", {{"prob", 1.5}}); }), "prob"));
  EXPECT_TRUE(contains(error_of([] { make("mixup", {{"pairing", "random"}}); }), "pairing"));
  MicroBatch b = micro_batch();
  at::Tensor wrong = at::ones({5, 6});
  vexp::Rng rng(0, 0, 0);
  const std::string e = error_of([&] { make("mixup")->apply(b.clips, wrong, rng, ctx_of()); });
  EXPECT_TRUE(contains(e, "batch transform 'mixup': expects clips [N, ..., H, W] and targets [N, classes]")) << e;
}

}  // namespace
