// The clip transform plugins (transforms.so), one by one: crops stay inside the
// frame, flip mirrors, grayscale gives equal channels, colour jitter at 0 is the
// identity, RandAugment is a function of its seed and treats every frame of a clip
// alike, normalize is the built-in arithmetic; and how a pipeline's views and stages
// combine (vexp/transform.hpp).
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "plugin_testing.hpp"
#include "vexp/kinetics/sampling.hpp"
#include "vexp/transform.hpp"

namespace {

using vexp::ClipGeometry;
using vexp::ClipPipeline;
using vexp::ClipTransform;
using vexp::Rng;
using vexp::schema::Value;

std::shared_ptr<ClipTransform> make(const std::string& name, std::map<std::string, Value> given = {}) {
  return vexp::testing::make<ClipTransform>("transform", name, std::move(given));
}

Value list(std::vector<double> v) {
  Value::Array a;
  for (double x : v) a.emplace_back(x);
  return Value::array(std::move(a));
}

ClipGeometry geometry_of(const ClipTransform& t, int W, int H, int out, Rng& rng, int64_t view = 0) {
  ClipGeometry g;
  g.src_w = g.w = W;
  g.src_h = g.h = H;
  g.out_w = g.out_h = out;
  t.geometry(g, rng, {view == 0, 0, view, t.views()});
  return g;
}

void expect_inside(const ClipGeometry& g, const std::string& what) {
  EXPECT_GE(g.x, 0) << what;
  EXPECT_GE(g.y, 0) << what;
  EXPECT_GE(g.w, 1) << what;
  EXPECT_GE(g.h, 1) << what;
  EXPECT_LE(g.x + g.w, g.src_w) << what;
  EXPECT_LE(g.y + g.h, g.src_h) << what;
}

// A clip of T identical frames (each a random image in [0, 1], 8-bit levels lo..hi-1).
at::Tensor same_frames(int64_t T, int64_t C, int64_t H, int64_t W, uint64_t seed, int lo = 0, int hi = 256) {
  at::manual_seed(seed);
  at::Tensor f = at::randint(lo, hi, {1, C, H, W}, at::kFloat) / 255.f;
  return f.repeat({T, 1, 1, 1}).contiguous();
}

void pixels(const ClipTransform& t, at::Tensor& clip, uint64_t seed) {
  Rng rng(seed, 3, 0x51);
  t.pixels(clip, rng, {true, 3, 0, 1});
}

void expect_frames_equal(const at::Tensor& clip, const std::string& what) {
  for (int64_t t = 1; t < clip.size(0); ++t) EXPECT_TRUE(at::equal(clip[0], clip[t])) << what << ": frame " << t;
}

TEST(ClipTransforms, CropsStayInsideTheFrameForEverySizeAndDraw) {
  const std::vector<std::pair<std::string, std::map<std::string, Value>>> crops{
      {"multiscale_crop", {}},
      {"multiscale_crop", {{"offsets", "fixed5"}, {"max_distort", 3}}},
      {"multiscale_crop", {{"offsets", "random"}, {"scales", list({1.0, 0.5, 0.3})}}},
      {"random_resized_crop", {}},
      {"random_resized_crop", {{"scale", list({0.9, 1.0})}, {"ratio", list({0.2, 0.25})}}},  // fallback crops
      {"random_resized_crop", {{"scale", list({0.01, 0.02})}, {"ratio", list({2.0, 5.0})}}},
  };
  for (const auto& [name, params] : crops) {
    auto t = make(name, params);
    EXPECT_EQ(t->stages(), ClipTransform::kGeometry);
    for (auto [W, H] : std::vector<std::pair<int, int>>{{340, 256}, {256, 340}, {32, 32}, {9, 300}, {1, 1}})
      for (uint64_t seed = 0; seed < 200; ++seed) {
        Rng rng(seed, 1, 0x51);
        expect_inside(geometry_of(*t, W, H, 32, rng), name + " " + std::to_string(W) + "x" + std::to_string(H));
      }
  }
  for (int crops : {1, 3, 10}) {
    auto t = make("test_crops", {{"crops", crops}, {"scale_size", 40}});
    EXPECT_EQ(t->views(), crops);
    for (auto [W, H] : std::vector<std::pair<int, int>>{{340, 256}, {256, 340}, {32, 32}, {80, 60}})
    {
      int flipped = 0;
      for (int64_t v = 0; v < crops; ++v) {
        Rng rng(0, 0, 0);
        const ClipGeometry g = geometry_of(*t, W, H, 32, rng, v);
        expect_inside(g, "test_crops " + std::to_string(crops));
        flipped += g.flip;
      }
      EXPECT_EQ(flipped, crops == 10 ? 5 : 0);
    }
  }
}

TEST(ClipTransforms, RandomResizedCropDrawsAreaAndRatioInRange) {
  auto t = make("random_resized_crop", {{"scale", list({0.25, 0.5})}, {"ratio", list({0.75, 1.3333333333333333})}});
  int64_t seen = 0;
  for (uint64_t seed = 0; seed < 500; ++seed) {
    Rng rng(seed, 0, 0x51);
    const ClipGeometry g = geometry_of(*t, 400, 300, 64, rng);
    const double area = static_cast<double>(g.w) * g.h / (400.0 * 300.0);
    // Rounded sides: the area and ratio within a pixel's rounding.
    EXPECT_GT(area, 0.25 * 0.98) << seed;
    EXPECT_LT(area, 0.5 * 1.02) << seed;
    EXPECT_GT(static_cast<double>(g.w) / g.h, 0.75 * 0.98) << seed;
    EXPECT_LT(static_cast<double>(g.w) / g.h, 1.3333 * 1.02) << seed;
    seen += g.x > 0;
  }
  EXPECT_GT(seen, 400) << "positions are drawn";
}

TEST(ClipTransforms, MultiscaleCropAndFlipDrawWhatTheBuiltInPipelineDraws) {
  auto crop = make("multiscale_crop");
  auto flip = make("flip");
  const ClipPipeline p{crop, flip};
  for (auto [W, H, out] : std::vector<std::array<int, 3>>{{340, 256, 224}, {80, 60, 32}, {60, 80, 58}, {64, 48, 46}})
    for (uint64_t seed = 0; seed < 300; ++seed) {
      Rng a(seed, 7, 0x51), b(seed, 7, 0x51);
      const auto want = vexp::kinetics::multiscale_crop(W, H, out, true, a);
      const ClipGeometry g = vexp::run_geometry(p, W, H, out, out, b, true, 7, 0);
      EXPECT_EQ(std::make_tuple(g.x, g.y, g.w, g.h, g.flip), std::make_tuple(want.x, want.y, want.w, want.h, want.flip))
          << W << "x" << H << " seed " << seed;
      EXPECT_EQ(a.next(), b.next()) << "the same number of draws";
    }
}

TEST(ClipTransforms, FlipMirrorsAndCropsAfterAFlipCountFromTheRight) {
  Rng rng(1, 1, 1);
  ClipGeometry g = geometry_of(*make("flip", {{"p", 1.0}}), 100, 50, 32, rng);
  EXPECT_TRUE(g.flip);
  g = geometry_of(*make("flip", {{"p", 0.0}}), 100, 50, 32, rng);
  EXPECT_FALSE(g.flip);
  // Two flips cancel; a flip draws once whatever p is.
  const ClipPipeline twice{make("flip", {{"p", 1.0}}), make("flip", {{"p", 1.0}})};
  Rng r1(5, 5, 5), r2(5, 5, 5);
  EXPECT_FALSE(vexp::run_geometry(twice, 100, 50, 32, 32, r1, true, 0, 0).flip);
  r2.uniform(), r2.uniform();
  EXPECT_EQ(r1.next(), r2.next());
  // The left third of a mirrored frame (its short side already scale_size) is the source's right third.
  const ClipPipeline flip_then_crop{make("flip", {{"p", 1.0}}),
                                    make("test_crops", {{"crops", 3}, {"scale_size", 100}})};  // no resize
  Rng r3(0, 0, 0);
  const ClipGeometry left = vexp::run_geometry(flip_then_crop, 300, 100, 100, 100, r3, false, 0, 0);
  EXPECT_EQ(left.x, 200);
  EXPECT_TRUE(left.flip);
}

TEST(ClipTransforms, GrayscaleGivesEqualChannels) {
  at::Tensor clip = same_frames(3, 3, 12, 10, 1);
  const at::Tensor before = clip.clone();
  pixels(*make("grayscale", {{"p", 0.0}}), clip, 1);
  EXPECT_TRUE(at::equal(clip, before));
  pixels(*make("grayscale", {{"p", 1.0}}), clip, 1);
  EXPECT_TRUE(at::equal(clip.select(1, 0), clip.select(1, 1)));
  EXPECT_TRUE(at::equal(clip.select(1, 0), clip.select(1, 2)));
  const at::Tensor luma = 0.2989f * before.select(1, 0) + 0.587f * before.select(1, 1) + 0.114f * before.select(1, 2);
  EXPECT_LT((clip.select(1, 0) - luma).abs().max().item<double>(), 1e-6);
}

TEST(ClipTransforms, ColorJitterAtZeroIsTheIdentityAndOneDrawServesEveryFrame) {
  at::Tensor clip = same_frames(4, 3, 16, 16, 2);
  const at::Tensor before = clip.clone();
  for (uint64_t seed = 0; seed < 5; ++seed) pixels(*make("color_jitter"), clip, seed);
  EXPECT_TRUE(at::equal(clip, before)) << "all factors 0: bit for bit";
  auto jitter = make("color_jitter", {{"brightness", 0.4}, {"contrast", 0.4}, {"saturation", 0.4}, {"hue", 0.1}});
  int changed = 0;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    at::Tensor c = before.clone();
    pixels(*jitter, c, seed);
    expect_frames_equal(c, "color_jitter seed " + std::to_string(seed));
    EXPECT_GE(c.min().item<float>(), 0.f);
    EXPECT_LE(c.max().item<float>(), 1.f);
    at::Tensor again = before.clone();
    pixels(*jitter, again, seed);
    EXPECT_TRUE(at::equal(c, again)) << "a function of the seed";
    changed += !at::equal(c, before);
  }
  EXPECT_EQ(changed, 20);
  // p = 0: never applied.
  at::Tensor c = before.clone();
  pixels(*make("color_jitter", {{"brightness", 0.4}, {"p", 0.0}}), c, 3);
  EXPECT_TRUE(at::equal(c, before));
  // One channel: brightness and contrast apply, saturation and hue do nothing.
  at::Tensor gray = same_frames(2, 1, 8, 8, 4), g2 = gray.clone();
  pixels(*make("color_jitter", {{"saturation", 0.9}, {"hue", 0.5}}), g2, 1);
  EXPECT_TRUE(at::equal(gray, g2));
}

TEST(ClipTransforms, RandAugmentIsAFunctionOfTheSeedAndTheSameForEveryFrame) {
  const auto& names = std::vector<std::string>{"identity",  "shear_x",    "shear_y",   "translate_x", "translate_y",
                                               "rotate",    "brightness", "color",     "contrast",    "sharpness",
                                               "posterize", "solarize",   "autocontrast", "equalize"};
  const at::Tensor base = same_frames(3, 3, 20, 24, 5, 30, 200);  // not the full range: autocontrast acts
  for (const std::string& op : names) {
    Value::Array ops{Value(op)};
    for (const char* interp : {"nearest", "bilinear"}) {
      auto ra = make("rand_augment", {{"num_ops", 1}, {"ops", Value::array(ops)}, {"interpolation", interp}});
      int changed = 0;
      for (uint64_t seed = 0; seed < 6; ++seed) {
        at::Tensor c = base.clone();
        pixels(*ra, c, seed);
        expect_frames_equal(c, op + " seed " + std::to_string(seed));
        // 8-bit levels in, 8-bit levels out.
        EXPECT_TRUE(at::equal(c, at::round(c * 255.f) / 255.f)) << op;
        changed += !at::equal(c, base);
      }
      if (op == "identity") EXPECT_EQ(changed, 0);
      else EXPECT_GT(changed, 0) << op;
    }
  }
  auto ra = make("rand_augment");  // torchvision's defaults: 2 ops at magnitude 9 of 31
  int differ = 0;
  for (uint64_t seed = 0; seed < 30; ++seed) {
    at::Tensor a = base.clone(), b = base.clone(), c = base.clone();
    pixels(*ra, a, seed);
    pixels(*ra, b, seed);
    pixels(*ra, c, seed + 1000);
    EXPECT_TRUE(at::equal(a, b)) << seed;
    expect_frames_equal(a, "rand_augment seed " + std::to_string(seed));
    differ += !at::equal(a, c);
  }
  EXPECT_GT(differ, 20) << "other seeds draw other ops";
  at::Tensor c = base.clone();
  pixels(*make("rand_augment", {{"num_ops", 0}}), c, 1);
  EXPECT_TRUE(at::equal(c, base));
}

TEST(ClipTransforms, NormalizeIsTheBuiltInArithmetic) {
  at::Tensor clip = same_frames(2, 3, 6, 5, 6);
  at::Tensor want = clip.clone();
  const double mean[3] = {0.485, 0.456, 0.406}, sd[3] = {0.229, 0.224, 0.225};
  for (int k = 0; k < 3; ++k) {
    const float m = static_cast<float>(mean[k]), inv = 1.f / static_cast<float>(sd[k]);
    want.select(1, k).sub_(m).mul_(inv);
  }
  pixels(*make("normalize"), clip, 0);
  EXPECT_TRUE(at::equal(clip, want));
  EXPECT_NO_THROW(make("normalize")->check({8, 3, 32, 32}));
  EXPECT_NO_THROW(make("normalize", {{"mean", list({0.5})}, {"std", list({0.25})}})->check({8, 1, 32, 32}));
  EXPECT_TRUE(vexp::testing::contains(vexp::testing::error_of([] { make("normalize")->check({8, 1, 32, 32}); }),
                                      "mean: 3 values for clips of 1 channel"));
}

TEST(ClipTransforms, ParametersTheSchemaCannotCheckAreRefusedByTheFactory) {
  using vexp::testing::contains;
  using vexp::testing::error_of;
  EXPECT_TRUE(contains(error_of([] { make("random_resized_crop", {{"scale", list({0.9, 0.1})}}); }),
                       "scale: expected [min, max] with 0 < min <= max <= 1"));
  EXPECT_TRUE(contains(error_of([] { make("random_resized_crop", {{"ratio", list({1.0})}}); }), "ratio: expected"));
  EXPECT_TRUE(contains(error_of([] { make("rand_augment", {{"magnitude", 31}}); }),
                       "magnitude: must be below num_magnitude_bins (31), got 31"));
  EXPECT_TRUE(contains(error_of([] { make("multiscale_crop", {{"scales", Value::array({})}}); }), "scales:"));
  EXPECT_TRUE(contains(error_of([] { make("multiscale_crop", {{"scales", list({0.0})}}); }), "scales:"));
}

TEST(ClipTransforms, TestViewsOfAPipelineMultiplyFirstTransformSlowest) {
  const ClipPipeline p{make("test_crops", {{"crops", 3}}), make("test_crops", {{"crops", 10}, {"scale_size", 32}})};
  EXPECT_EQ(vexp::pipeline_views(p), 30);
  Rng rng(0, 0, 0);
  // view 13 = first transform's view 1, second's view 3.
  const ClipGeometry g = vexp::run_geometry(p, 300, 100, 32, 32, rng, false, 0, 13);
  ClipGeometry want;
  want.src_w = 300, want.src_h = 100, want.out_w = want.out_h = 32;
  want.x = 0, want.y = 0, want.w = 300, want.h = 100;
  Rng r2(0, 0, 0);
  p[0]->geometry(want, r2, {false, 0, 1, 3});
  p[1]->geometry(want, r2, {false, 0, 3, 10});
  EXPECT_EQ(std::make_tuple(g.x, g.y, g.w, g.h, g.flip), std::make_tuple(want.x, want.y, want.w, want.h, want.flip));
}

}  // namespace
