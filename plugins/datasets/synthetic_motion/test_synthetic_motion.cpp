// synthetic_motion, created through the real plugin host.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <unistd.h>

#include <filesystem>
#include <map>
#include <thread>
#include <vector>

#include "plugin_testing.hpp"
#include "vexp/dataset.hpp"
#include "vexp/media/media.hpp"

namespace {

using vexp::Split;
using vexp::schema::Value;

std::shared_ptr<vexp::Dataset> motion(std::map<std::string, Value> given = {}) {
  return vexp::testing::make<vexp::Dataset>("dataset", "synthetic_motion", std::move(given));
}

at::Tensor clip(const vexp::Dataset& d, int64_t index, Split split = Split::Train) {
  return d.get(split, index, 0).clip;
}

TEST(SyntheticMotion, ClipShapeTypeAndRange) {
  auto d = motion({{"train_clips", 64}});
  EXPECT_EQ(d->size(Split::Train), 64);
  EXPECT_EQ(d->size(Split::Val), 800);
  EXPECT_EQ(d->num_classes(), 8);
  vexp::Sample s = d->get(Split::Train, 5, 0);
  EXPECT_EQ(s.clip.sizes(), (std::vector<int64_t>{8, 1, 32, 32}));
  EXPECT_EQ(s.clip.scalar_type(), at::kFloat);
  EXPECT_TRUE(s.clip.is_contiguous());
  EXPECT_EQ(s.label, 5);
  // (x - 0.5) / 0.25 with x in [0, 1] after noise.
  EXPECT_GE(s.clip.min().item<float>(), -2.f);
  EXPECT_LE(s.clip.max().item<float>(), 2.f);

  auto rgb = motion({{"channels", 3}, {"frames", 4}, {"size", 48}});
  at::Tensor c = clip(*rgb, 3);
  EXPECT_EQ(c.sizes(), (std::vector<int64_t>{4, 3, 48, 48}));
  EXPECT_TRUE(at::equal(c.select(1, 0), c.select(1, 1)));
  EXPECT_TRUE(at::equal(c.select(1, 0), c.select(1, 2)));
}

TEST(SyntheticMotion, SameSeedSameClipsOtherSeedOtherClips) {
  auto a = motion(), b = motion(), other = motion({{"seed", 1}});
  for (int64_t i : {0, 1, 7, 799}) {
    EXPECT_TRUE(at::equal(clip(*a, i), clip(*a, i))) << i;
    EXPECT_TRUE(at::equal(clip(*a, i), clip(*b, i))) << i;
    EXPECT_FALSE(at::equal(clip(*a, i), clip(*other, i))) << i;
    EXPECT_TRUE(at::equal(clip(*a, i, Split::Val), clip(*b, i, Split::Val))) << i;
  }
  // No augmentation: the epoch seed does not change a clip.
  EXPECT_TRUE(at::equal(a->get(Split::Train, 9, 0).clip, a->get(Split::Train, 9, 12345).clip));
}

TEST(SyntheticMotion, TrainAndValAreDifferentStreams) {
  auto d = motion({{"noise", 0.0}});
  for (int64_t i : {0, 1, 2, 13}) {
    EXPECT_EQ(d->get(Split::Train, i, 0).label, d->get(Split::Val, i, 0).label);
    EXPECT_FALSE(at::equal(clip(*d, i, Split::Train), clip(*d, i, Split::Val))) << i;
  }
}

TEST(SyntheticMotion, LabelsAreBalancedAndNamed) {
  auto d = motion({{"classes", 6}, {"train_clips", 600}, {"val_clips", 60}});
  for (Split split : {Split::Train, Split::Val}) {
    std::vector<int> counts(6, 0);
    for (int64_t i = 0; i < d->size(split); ++i) {
      int64_t label = d->get(split, i, 0).label;
      ASSERT_EQ(label, i % 6);
      counts[label]++;
    }
    for (int c : counts) EXPECT_EQ(c, d->size(split) / 6);
  }
  EXPECT_EQ(d->class_names(), (std::vector<std::string>{"square_right", "square_left", "hollow_down",
                                                        "hollow_up", "disc_grow", "disc_shrink"}));
  EXPECT_EQ(motion()->class_names().size(), 8u);
  EXPECT_EQ(motion()->class_names()[7], "bar_ccw");
  EXPECT_EQ(motion({{"classes", 10}})->class_names()[9], "cross_upleft");
}

// The defining property: the second class of a pair is the first played backwards,
// so the set of frames (and their mean, all a TSN sees) is the same for both.
TEST(SyntheticMotion, SecondClassOfAPairIsTheFirstReversedInTime) {
  const int64_t classes = 10;
  auto d = motion({{"classes", classes}, {"noise", 0.0}});
  for (int64_t round : {0, 1, 37}) {
    for (int64_t k = 0; k < classes / 2; ++k) {
      const int64_t i = round * classes + 2 * k;
      vexp::Sample forward = d->get(Split::Train, i, 0), backward = d->get(Split::Train, i + 1, 0);
      ASSERT_EQ(forward.label, 2 * k);
      ASSERT_EQ(backward.label, 2 * k + 1);
      EXPECT_TRUE(at::equal(backward.clip, forward.clip.flip({0}))) << "pair " << k << " round " << round;
      EXPECT_FALSE(at::equal(backward.clip, forward.clip)) << "pair " << k;
    }
  }
  // The validation split keeps the property.
  vexp::Sample f = d->get(Split::Val, 4, 0), b = d->get(Split::Val, 5, 0);
  EXPECT_TRUE(at::equal(b.clip, f.clip.flip({0})));
}

TEST(SyntheticMotion, FramesMoveInEveryClass) {
  auto d = motion({{"classes", 10}, {"noise", 0.0}});
  for (int64_t i = 0; i < 40; ++i) {
    at::Tensor c = clip(*d, i);
    for (int64_t t = 1; t < c.size(0); ++t) {
      // At least a few pixels change by a visible amount between consecutive frames.
      at::Tensor changed = (c[t] - c[t - 1]).abs().gt(0.4).sum();
      EXPECT_GE(changed.item<int64_t>(), 3) << "clip " << i << " (label " << i % 10 << ") frame " << t;
    }
    // And the object is visible: the frame is not flat.
    EXPECT_GT((c[0].max() - c[0].min()).item<float>(), 1.0f) << "clip " << i;
  }
}

TEST(SyntheticMotion, ClipsDifferWithinAClass) {
  auto d = motion({{"noise", 0.0}});
  EXPECT_FALSE(at::equal(clip(*d, 0), clip(*d, 8)));
  EXPECT_FALSE(at::equal(clip(*d, 0), clip(*d, 16)));
}

TEST(SyntheticMotion, NoiseHasTheRequestedSpread) {
  auto clean = motion({{"noise", 0.0}}), noisy = motion({{"noise", 0.05}});
  // Same object draw, independent noise: the difference is the noise (x 4 for the
  // normalisation), a little less where saturation at 0 or 1 clips it.
  std::vector<at::Tensor> diffs;
  for (int64_t i = 0; i < 16; ++i) diffs.push_back((clip(*noisy, i) - clip(*clean, i)) / 4);
  const double sd = at::stack(diffs).std().item<double>();
  EXPECT_GT(sd, 0.035);
  EXPECT_LT(sd, 0.055);
}

TEST(SyntheticMotion, ManyThreadsSeeTheSameClips) {
  auto d = motion({{"train_clips", 200}});
  std::vector<at::Tensor> serial;
  for (int64_t i = 0; i < 200; ++i) serial.push_back(clip(*d, i));
  std::vector<std::vector<at::Tensor>> parallel(4);
  std::vector<std::thread> threads;
  for (int w = 0; w < 4; ++w)
    threads.emplace_back([&, w] {
      for (int64_t i = 0; i < 200; ++i) parallel[w].push_back(clip(*d, i));
    });
  for (auto& t : threads) t.join();
  for (int w = 0; w < 4; ++w)
    for (int64_t i = 0; i < 200; ++i) ASSERT_TRUE(at::equal(parallel[w][i], serial[i])) << w << " " << i;
}

TEST(SyntheticMotion, OddClassCountIsRefusedByFactoryAndFacts) {
  try {
    motion({{"classes", 7}});
    FAIL() << "expected an error";
  } catch (const vexp::PluginError& e) {
    EXPECT_NE(std::string(e.what()).find("classes must be even"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("7"), std::string::npos) << e.what();
  }
  const vexp::PluginDecl* decl = vexp::testing::host().find("dataset", "synthetic_motion");
  ASSERT_NE(decl, nullptr);
  ASSERT_TRUE(decl->dataset_facts);
  auto odd = vexp::testing::params("dataset", "synthetic_motion", {{"classes", 5}});
  EXPECT_THROW(decl->dataset_facts(odd), std::runtime_error);
  // The schema itself bounds the count.
  EXPECT_THROW(vexp::testing::params("dataset", "synthetic_motion", {{"classes", 12}}), std::invalid_argument);
}

TEST(SyntheticMotion, DatasetFactsMatchTheClips) {
  const vexp::PluginDecl* decl = vexp::testing::host().find("dataset", "synthetic_motion");
  ASSERT_NE(decl, nullptr);
  std::map<std::string, Value> given{{"classes", 4}, {"frames", 6}, {"size", 24}, {"channels", 3}};
  vexp::schema::DatasetFacts f = decl->dataset_facts(vexp::testing::params("dataset", "synthetic_motion", given));
  EXPECT_EQ(f.clip, (vexp::schema::Shape{6, 3, 24, 24}));
  EXPECT_EQ(f.classes, 4);
  auto d = motion(given);
  EXPECT_EQ(clip(*d, 0).sizes().vec(), f.clip);
  EXPECT_EQ(d->num_classes(), f.classes);
}

TEST(SyntheticMotion, IndexOutsideTheSplitIsAnError) {
  auto d = motion({{"train_clips", 10}, {"val_clips", 4}});
  EXPECT_THROW(d->get(Split::Train, 10, 0), std::out_of_range);
  EXPECT_THROW(d->get(Split::Val, 4, 0), std::out_of_range);
  EXPECT_THROW(d->get(Split::Train, -1, 0), std::out_of_range);
  EXPECT_NO_THROW(d->get(Split::Val, 3, 0));
}

// vexp predict's video: a clip written as a video (x as bytes, as `vexp data
// make-synthetic` writes them) comes back through file_views as the clip, in the
// dataset's normalisation; another shape resizes the whole frame.
TEST(SyntheticMotion, FileViewsReadAVideoAsItsClipsAreMade) {
  auto d = motion({{"classes", 4}, {"frames", 4}, {"size", 16}, {"noise", 0.0}});
  const at::Tensor c = clip(*d, 1, Split::Val);  // [4, 1, 16, 16], (x - 0.5) / 0.25
  const at::Tensor x = (c * 0.25 + 0.5).clamp(0, 1);
  const std::string dir = ::testing::TempDir() + "vexp_motion_views_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  const std::string video = dir + "/clip.mp4";
  {
    // H.264 at crf 0, 4 frames: the segment centres of 4 segments are the frames.
    at::Tensor bytes = (x * 255).round().to(at::kByte).contiguous();
    vexp::media::VideoWriter w(video, 16, 16, 1, 25, 0, 1);
    for (int64_t t = 0; t < 4; ++t) w.write(bytes[t].data_ptr<uint8_t>());
    w.close();
  }
  vexp::FileViews v = d->file_views({video, {4, 1, 16, 16}, 0});
  ASSERT_TRUE(v.clips.defined());
  ASSERT_EQ(v.clips.sizes(), (std::vector<int64_t>{1, 4, 1, 16, 16}));
  // Equal up to the bytes' rounding and the gray -> limited-range YUV -> gray round
  // trip (a few levels of 255, x 4 in the normalisation); the clip spans [-2, 2].
  EXPECT_LE((v.clips[0] - c).abs().max().item<double>(), 4 * 3.0 / 255);
  EXPECT_NE(v.how.find("(x - 0.5) / 0.25"), std::string::npos) << v.how;
  EXPECT_NE(v.how.find("4 segment centres, shorter side 16, centre crop 16x16, gray"), std::string::npos) << v.how;
  // RGB and another size: the gray frame replicated, resized.
  vexp::FileViews rgb = d->file_views({video, {2, 3, 8, 8}, 0});
  ASSERT_EQ(rgb.clips.sizes(), (std::vector<int64_t>{1, 2, 3, 8, 8}));
  EXPECT_TRUE(rgb.clips[0][0][0].allclose(rgb.clips[0][0][2], 0, 4.0 / 255));
  EXPECT_THROW(d->file_views({video, {4, 2, 16, 16}, 0}), std::invalid_argument);
  EXPECT_TRUE(vexp::testing::contains(vexp::testing::error_of([&] { d->file_views({dir + "/none.mp4", {4, 1, 16, 16}, 0}); }),
                                      "none.mp4"));
  std::filesystem::remove_all(dir);
  // Its dataset reads the files itself: no separate reader.
  EXPECT_FALSE(vexp::testing::host().has_file_reader("synthetic_motion"));
}

}  // namespace
