// vexp eval's engine (evaluation.hpp): the shards, the figures, and one rank's
// evaluation of a dataset with several views and broken videos, against the model run
// by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "vexp/comm.hpp"
#include "vexp/runtime/evaluation.hpp"
#include "vexp/runtime/graph.hpp"
#include "vexp/runtime/session.hpp"

namespace {

TEST(EvalShard, EveryVideoOnceInWholeChunks) {
  for (int64_t videos : {0, 1, 7, 11, 100}) {
    for (int64_t views : {1, 3, 30}) {
      for (int64_t batch : {1, 4, 18, 64}) {
        for (int ranks : {1, 2, 3, 8}) {
          const int64_t per = std::max<int64_t>(1, batch / views);
          int64_t next = 0;
          for (int r = 0; r < ranks; ++r) {
            const auto [a, b] = vexp::eval_shard(videos, views, batch, r, ranks);
            ASSERT_EQ(a, next) << videos << " " << views << " " << batch << " " << ranks;  // contiguous, no overlap
            ASSERT_LE(a, b);
            if (a < videos) {
              ASSERT_EQ(a % per, 0);  // chunk boundaries depend on the index alone
            }
            next = b;
          }
          ASSERT_EQ(next, videos);
        }
      }
    }
  }
}

TEST(EvalFigures, DenominatorsPerClassAndConfusion) {
  vexp::EvalOutput out;
  out.videos = 6;
  out.classes = 3;
  out.logits = at::tensor({0.9f, 0.1f, 0.0f,  // label 0: right
                           0.1f, 0.2f, 0.9f,  // label 1: wrong (2), top-2 right
                           NAN, NAN, NAN,     // label 1: failed
                           0.0f, 0.1f, 0.9f,  // label 2: right
                           0.8f, 0.1f, 0.3f,  // label 2: wrong (0)
                           NAN, NAN, NAN})    // label -1: failed, its label unknown
                   .view({6, 3});
  out.labels = at::tensor({0, 1, 1, 2, 2, -1}, at::kLong);
  out.failures = {{2, 1, "b.mp4", "broken"}, {5, -1, "", "gone"}};
  const vexp::EvalFigures f = vexp::eval_figures(out);
  EXPECT_EQ(f.k, 3);
  EXPECT_EQ(f.evaluated, 4);
  EXPECT_EQ(f.failed, 2);
  EXPECT_EQ(f.correct1, 2);
  EXPECT_DOUBLE_EQ(f.top1, 0.5);
  EXPECT_DOUBLE_EQ(f.top1_all, 2.0 / 6);
  EXPECT_DOUBLE_EQ(f.top5, 1.0);  // top-3 of 3 classes
  EXPECT_DOUBLE_EQ(f.top5_all, 4.0 / 6);
  // Per class: 0: 1/1; 1: 0/1 (of 2 listed); 2: 1/2.
  EXPECT_EQ(f.per_class[1].videos, 2);
  EXPECT_EQ(f.per_class[1].evaluated, 1);
  EXPECT_DOUBLE_EQ(f.mean_class, (1.0 + 0.0 + 0.5) / 3);
  EXPECT_DOUBLE_EQ(f.mean_class_all, (1.0 + 0.0 + 0.5) / 3);
  EXPECT_EQ(f.confusion[1][2], 1);
  EXPECT_EQ(f.confusion[2][0], 1);
  EXPECT_EQ(f.confusion[0][0], 1);
  EXPECT_EQ(f.predicted, (std::vector<int64_t>{0, 2, -1, 2, 0, -1}));
}

// synthetic_motion's validation clips as a dataset of 3 test views (the clip plus
// 0, 0.25, 0.5) whose videos 2 and 5 do not load.
class Views final : public vexp::Dataset {
 public:
  explicit Views(std::shared_ptr<vexp::Dataset> d) : d_(std::move(d)) {}
  int64_t size(vexp::Split s) const override { return d_->size(s); }
  vexp::Sample get(vexp::Split s, int64_t i, uint64_t seed) const override { return get_view(s, i, 0, seed); }
  int64_t num_classes() const override { return d_->num_classes(); }
  int64_t views(vexp::Split) const override { return 3; }
  vexp::Sample get_view(vexp::Split s, int64_t i, int64_t v, uint64_t seed) const override {
    if (broken(i)) throw std::runtime_error("video " + std::to_string(i) + " is broken");
    vexp::Sample x = d_->get(s, i, seed);
    x.clip = x.clip + 0.25 * static_cast<double>(v);
    return x;
  }
  vexp::ItemReport inspect(vexp::Split s, int64_t i) const override {
    vexp::ItemReport r;
    r.path = "video_" + std::to_string(i);
    r.label = d_->get(s, i, 0).label;
    if (broken(i)) r.error = "broken";
    return r;
  }
  static bool broken(int64_t i) { return i == 2 || i == 5; }

 private:
  std::shared_ptr<vexp::Dataset> d_;
};

TEST(EvalVideos, ViewsAveragedFailuresNamedNeverReplaced) {
  vexp::Session s;
  std::vector<std::string> problems;
  s.host.load_directory(VEXP_TEST_PLUGIN_DIR, problems);
  ASSERT_TRUE(problems.empty()) << problems.front();
  vexp::OpenOptions options;
  options.load_plugins = false;
  for (const char* t : {"data.params.train_clips=16", "data.params.val_clips=9", "data.params.size=16",
                        "data.params.frames=4", "data.params.classes=4", "run.threads=1"})
    options.overrides.push_back(*vexp::dsl::parse_override(t));
  ASSERT_TRUE(vexp::open_recipe(s, std::string(VEXP_SOURCE_DIR) + "/recipes/quickstart/tsm_motion.toml", options))
      << s.diags.str();
  const vexp::dsl::RecipePlan& plan = *s.plan;
  auto comm = s.host.make<vexp::Comm>("comm", plan.comm, plan.comm_params);
  Views data(s.host.make<vexp::Dataset>("dataset", plan.dataset, plan.dataset_params));
  at::manual_seed(0);
  vexp::ModelGraph model(plan, s.host);
  vexp::EvalOptions o;
  o.batch = 4;  // one video (3 views) per chunk
  o.workers = 2;
  int64_t calls = 0;
  o.progress = [&](int64_t done, int64_t total) {
    ++calls;
    EXPECT_EQ(total, 9);
    EXPECT_LE(done, total);
  };
  const vexp::EvalOutput out = vexp::evaluate_videos(model, data, *comm, o);
  EXPECT_EQ(calls, 9);
  ASSERT_EQ(out.videos, 9);
  ASSERT_EQ(out.views, 3);
  ASSERT_EQ(out.failures.size(), 2u);
  EXPECT_EQ(out.failures[0].index, 2);
  EXPECT_EQ(out.failures[0].item, "video_2");
  EXPECT_EQ(out.failures[0].error, "video 2 is broken");
  EXPECT_EQ(out.failures[1].index, 5);
  c10::NoGradGuard no_grad;
  model.eval();
  for (int64_t i = 0; i < 9; ++i) {
    EXPECT_EQ(out.labels[i].item<int64_t>(), data.inspect(vexp::Split::Val, i).label);
    if (Views::broken(i)) {
      EXPECT_TRUE(at::isnan(out.logits[i]).all().item<bool>()) << i;
      continue;
    }
    std::vector<at::Tensor> v;
    for (int64_t k = 0; k < 3; ++k) v.push_back(data.get_view(vexp::Split::Val, i, k, 0).clip);
    const at::Tensor want = model.forward(at::stack(v)).mean(0);
    EXPECT_TRUE(at::allclose(out.logits[i], want, 1e-5, 1e-6)) << i;
  }
  const vexp::EvalFigures f = vexp::eval_figures(out);
  EXPECT_EQ(f.evaluated, 7);
  EXPECT_EQ(f.videos, 9);
}

TEST(EvalProtocolName, FromTheDatasetParameters) {
  vexp::EvalProtocol p;
  p.sampling = "dense";
  p.clips = 10;
  p.crops = 3;
  p.full_res = true;
  EXPECT_EQ(p.name(), "dense-10x3-fullres");
  p.sampling = "tsn";
  p.clips = 1;
  p.full_res = false;
  p.twice_sample = true;
  EXPECT_EQ(p.name(), "tsn-1x3-twice");
  p.sampling.clear();
  p.twice_sample = false;
  p.crops = 1;
  EXPECT_EQ(p.name(), "1x1");
  EXPECT_EQ(p.to_json()["views"], 1);
}

}  // namespace
