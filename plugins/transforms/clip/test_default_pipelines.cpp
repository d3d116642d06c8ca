// The datasets' pipelines: the built-in one (no lists in the recipe) is today's bit
// for bit (hashes recorded with the code before transform plugins existed), the
// built-in one written as transform plugins (Dataset::default_transforms, and by
// hand) gives the same clips, and a dataset runs a given list: geometry through the
// decoder, pixels after, views from the test list.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "pipeline_fixture.hpp"
#include "vexp/runtime/data_pipeline.hpp"

namespace {

using vexp::ClipPipeline;
using vexp::ClipTransform;
using vexp::Split;
using vexp::schema::Value;
namespace pl = vexp::testing::pipelines;

// Recorded with the kinetics and synthetic_motion plugins of commit 85c63ef (before
// the pipelines became transform plugins; the build /tmp/skeleton kept) on this
// fixture, as decoded by the FFmpeg and libjpeg-turbo whose decoded_fixture_hash is
// kFixture: {train split, val split}. The kinetics val hashes were re-recorded once,
// on purpose, when the test views became the official TSM test's (every crop count of
// the frame scaled to scale_size: `vexp eval`, checked by parity.eval_protocol); the
// train hashes are still 85c63ef's.
constexpr uint64_t kFixture = 0x5ca55e538f528f42ull;
const std::map<std::string, std::pair<uint64_t, uint64_t>> kGolden{
    {"kinetics_video_tsn", {0x842be89209d400ccull, 0x7af2897acdf4444eull}},
    {"kinetics_frames_tsn", {0x5b142ae3e198a825ull, 0xdc434caa9db0c048ull}},
    {"kinetics_video_dense", {0xea7361f9b6d25a9bull, 0x7c787bfb530bbfa0ull}},
    {"kinetics_video_3crops", {0x842be89209d400ccull, 0x947e289dac668dc7ull}},
    {"kinetics_video_10crops", {0x842be89209d400ccull, 0xbb5509ece2c24dc4ull}},
    {"kinetics_gray_noflip", {0x9b6726137ac156b6ull, 0x25e381f0eb40b28cull}},
    {"kinetics_snap_sizes", {0x0f5b5d2e328dee29ull, 0x41e5b6f28693c846ull}},
    {"synthetic_gray", {0xae4b97e4a39f440bull, 0x48a74e59f2ded803ull}},
    {"synthetic_rgb", {0x2779d3720847e90full, 0xb74a2e60d14843c7ull}},
};

std::shared_ptr<vexp::Dataset> make_dataset(const pl::Case& c) {
  return vexp::testing::make<vexp::Dataset>("dataset", c.dataset, c.params);
}

std::shared_ptr<ClipTransform> make(const std::string& name, std::map<std::string, Value> given = {}) {
  return vexp::testing::make<ClipTransform>("transform", name, std::move(given));
}

TEST(DefaultPipelines, BuiltInPipelinesAreTheRecordedOnes) {
  if (pl::decoded_fixture_hash() != kFixture)
    GTEST_SKIP() << "this FFmpeg / libjpeg-turbo decodes the fixture differently from the one that recorded the hashes";
  for (const pl::Case& c : pl::golden_cases()) {
    auto d = make_dataset(c);
    EXPECT_EQ(pl::hash_split(*d, Split::Train), kGolden.at(c.name).first) << c.name << ": train";
    EXPECT_EQ(pl::hash_split(*d, Split::Val), kGolden.at(c.name).second) << c.name << ": val";
  }
}

TEST(DefaultPipelines, TheBuiltInPipelinesAsTransformPluginsGiveTheSameClips) {
  for (const pl::Case& c : pl::golden_cases()) {
    auto builtin = make_dataset(c);
    auto plugins = make_dataset(c);
    for (Split s : {Split::Train, Split::Val}) {
      ClipPipeline p = vexp::make_default_pipeline(vexp::testing::host(), *plugins, s);
      ASSERT_FALSE(p.empty()) << c.name;
      ASSERT_TRUE(plugins->set_transforms(s, std::move(p))) << c.name;
    }
    EXPECT_EQ(plugins->views(Split::Val), builtin->views(Split::Val)) << c.name;
    EXPECT_EQ(pl::hash_dataset(*plugins), pl::hash_dataset(*builtin)) << c.name;
  }
}

TEST(DefaultPipelines, TheKineticsPipelineWrittenOutInARecipeGivesTheSameClips) {
  // What a recipe would list for kinetics' defaults (ImageNet mean and std, flip on).
  const ClipPipeline train{make("multiscale_crop",
                                {{"scales", Value::array({Value(1.0), Value(0.875), Value(0.75), Value(0.66)})},
                                 {"max_distort", 1},
                                 {"offsets", "fixed13"}}),
                           make("flip", {{"p", 0.5}}), make("normalize")};
  const ClipPipeline test{make("test_crops", {{"crops", 1}, {"scale_size", 40}}), make("normalize")};
  for (const char* list : {"videos.txt", "frames.txt"}) {
    const pl::Case c{"k", "kinetics", pl::kinetics_params(list)};
    auto builtin = make_dataset(c), plugins = make_dataset(c);
    plugins->set_transforms(Split::Train, train);
    plugins->set_transforms(Split::Val, test);
    EXPECT_EQ(pl::hash_dataset(*plugins), pl::hash_dataset(*builtin)) << list;
  }
}

TEST(DefaultPipelines, KineticsRunsAListGeometryInTheDecoderPixelsAfter) {
  const pl::Case c{"k", "kinetics", pl::kinetics_params("videos.txt", {{"test_clips", 2}})};
  // A mirrored clip is the plain one mirrored (no crop: the whole frame resized).
  auto plain = make_dataset(c), mirrored = make_dataset(c);
  plain->set_transforms(Split::Train, {make("flip", {{"p", 0.0}})});
  mirrored->set_transforms(Split::Train, {make("flip", {{"p", 1.0}})});
  for (int64_t i = 0; i < 3; ++i) {
    const at::Tensor a = plain->get(Split::Train, i, 4).clip, b = mirrored->get(Split::Train, i, 4).clip;
    EXPECT_TRUE(at::equal(a.flip({3}), b)) << i;
    EXPECT_GE(a.min().item<float>(), 0.f);  // no normalize in the list: [0, 1]
    EXPECT_LE(a.max().item<float>(), 1.f);
  }
  // Grayscale after the decode: equal channels.
  auto gray = make_dataset(c);
  gray->set_transforms(Split::Train, {make("random_resized_crop"), make("grayscale", {{"p", 1.0}})});
  const at::Tensor g = gray->get(Split::Train, 1, 9).clip;
  EXPECT_EQ(g.sizes(), (std::vector<int64_t>{4, 3, 32, 32}));
  EXPECT_TRUE(at::equal(g.select(1, 0), g.select(1, 2)));
  // Test views: test_clips x the list's views.
  auto ten = make_dataset(c);
  ten->set_transforms(Split::Val, {make("test_crops", {{"crops", 10}, {"scale_size", 40}}), make("normalize")});
  EXPECT_EQ(ten->views(Split::Val), 20);
  EXPECT_NO_THROW(ten->get_view(Split::Val, 0, 19, 0));
  // test_crops and a test list disagreeing on the crops: refused.
  const pl::Case three{"k", "kinetics", pl::kinetics_params("videos.txt", {{"test_crops", 3}})};
  auto conflicting = make_dataset(three);
  EXPECT_TRUE(vexp::testing::contains(
      vexp::testing::error_of([&] { conflicting->set_transforms(Split::Val, {make("normalize")}); }),
      "test_crops = 3 but data.test_transforms make 1 views of each clip"));
  EXPECT_NO_THROW(conflicting->set_transforms(Split::Val, {make("test_crops", {{"crops", 3}})}));
}

TEST(DefaultPipelines, SyntheticMotionRunsAListAndItsSeedDrawsTheAugmentation) {
  const pl::Case c{"s", "synthetic_motion", {{"train_clips", 4}, {"val_clips", 4}, {"channels", 3}}};
  auto builtin = make_dataset(c), flipped = make_dataset(c), aug = make_dataset(c);
  const auto norm = make("normalize", {{"mean", Value::array({Value(0.5)})}, {"std", Value::array({Value(0.25)})}});
  flipped->set_transforms(Split::Train, {make("flip", {{"p", 1.0}}), norm});
  for (int64_t i = 0; i < 4; ++i)
    EXPECT_TRUE(at::equal(builtin->get(Split::Train, i, 1).clip.flip({3}), flipped->get(Split::Train, i, 1).clip));
  aug->set_transforms(Split::Train, {make("random_resized_crop"), make("rand_augment"), norm});
  aug->set_transforms(Split::Val, {make("test_crops", {{"crops", 3}}), norm});
  EXPECT_EQ(aug->views(Split::Val), 3);
  int differ = 0;
  for (int64_t i = 0; i < 4; ++i) {
    EXPECT_TRUE(at::equal(aug->get(Split::Train, i, 1).clip, aug->get(Split::Train, i, 1).clip));
    differ += !at::equal(aug->get(Split::Train, i, 1).clip, aug->get(Split::Train, i, 2).clip);
    EXPECT_EQ(aug->get_view(Split::Val, i, 2, 0).clip.sizes(), (std::vector<int64_t>{8, 3, 32, 32}));
  }
  EXPECT_GT(differ, 0) << "the epoch seed draws the augmentation";
}

// A dataset written before ABI 5 (no set_transforms): its pipeline is fixed.
struct FixedDataset : vexp::Dataset {
  int64_t size(Split) const override { return 1; }
  vexp::Sample get(Split, int64_t, uint64_t) const override { return {at::zeros({1, 1, 8, 8}), 0}; }
  int64_t num_classes() const override { return 1; }
};

TEST(DefaultPipelines, ADatasetWithoutPipelinesRefusesOneAtTheRecipeList) {
  FixedDataset fixed;
  EXPECT_FALSE(fixed.set_transforms(Split::Train, {make("flip")}));
  EXPECT_TRUE(fixed.default_transforms(Split::Train).empty());
  vexp::dsl::RecipePlan plan;
  plan.dataset = "fixed";
  const auto& host = vexp::testing::host();
  plan.test_transforms.push_back(
      {"flip", vexp::testing::params("transform", "flip"), vexp::schema::Loc{"r.toml", 12, 3}});
  const std::string why = vexp::testing::error_of([&] { vexp::attach_transforms(fixed, host, plan); });
  EXPECT_TRUE(vexp::testing::contains(
      why, "r.toml:12:3: data.test_transforms: dataset 'fixed' takes no clip transforms (its pipeline is built in)"))
      << why;
  // A transform its factory refuses: at the parameter the message names.
  vexp::Params bad = vexp::testing::params("transform", "random_resized_crop",
                                           {{"scale", Value::array({Value(0.9), Value(0.1)})}});
  bad.values()["scale"].set_loc({"r.toml", 20, 9});
  plan.test_transforms = {{"random_resized_crop", bad, vexp::schema::Loc{"r.toml", 19, 1}}};
  const std::string why2 = vexp::testing::error_of([&] { vexp::attach_transforms(fixed, host, plan); });
  EXPECT_TRUE(vexp::testing::contains(why2, "r.toml:20:9: data.test_transforms[0] (random_resized_crop): scale: "
                                            "expected [min, max]"))
      << why2;
}

}  // namespace
