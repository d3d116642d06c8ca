// Learning-rate plans of the paper recipes against hand-computed values.
// Kinetics-400: 240,436 training clips (data.train_size of the recipes), every
// one seen once per epoch (sample_stream.hpp).
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "vexp/runtime/buckets.hpp"
#include "vexp/runtime/dist_plan.hpp"
#include "vexp/runtime/dry_run.hpp"
#include "vexp/runtime/session.hpp"

namespace vexp {
namespace {

// The recipe's plan on `ranks` ranks; with `numels`, for trainable parameters of
// those sizes (else of unknown sizes).
DistPlan paper_plan(const std::string& recipe, int64_t ranks = 1, std::vector<dsl::Override> sets = {},
                    const std::vector<int64_t>* numels = nullptr) {
  Session s;
  std::vector<std::string> problems;
  s.host.load_directory(VEXP_TEST_PLUGIN_DIR, problems);
  const std::string path = std::string(VEXP_SOURCE_DIR) + "/recipes/" + recipe;
  OpenOptions o = planning_options(sets);
  o.load_plugins = false;  // only the test's plugin folder
  bool ok = open_recipe(s, path, o);
  for (const auto& d : s.diags.sorted())
    if (d.severity == dsl::Severity::Error) ADD_FAILURE() << d.str();
  EXPECT_TRUE(ok) << path;
  if (numels) return make_dist_plan(*s.plan, ranks, s.plan->data.train_size, *numels);
  return make_dist_plan(*s.plan, ranks, s.plan->data.train_size, 0);
}

TEST(DistPlan, Tsm1536) {
  DistPlan p = paper_plan("tsm_k400_1536.toml");
  EXPECT_EQ(p.global_batch, 12288);      // 1536 x 8
  EXPECT_EQ(p.global_batch * p.frames, 98304);
  EXPECT_EQ(p.micro, 1536);              // emulated on one rank
  // 240436 / 12288 = 19.57 steps per epoch, none dropped: epoch 1 is steps
  // 0-19 (ceil 19.57 = 20), epoch 2 steps 20-39 (ceil 39.13 = 40), epoch 3
  // steps 40-58 (ceil 58.70 = 59); 50 epochs: ceil(978.33) = 979 steps.
  EXPECT_EQ(p.stream.first_step(1), 20);
  EXPECT_EQ(p.stream.first_step(2), 40);
  EXPECT_EQ(p.stream.first_step(3), 59);
  EXPECT_EQ(p.total_steps, 979);
  EXPECT_EQ(p.total_clips, 979 * 12288);
  EXPECT_EQ(p.fill_clips, 979 * 12288 - 50 * 240436);  // 8152
  EXPECT_NEAR(p.lr, 1.92, 1e-12);        // 0.02 x 12288 / 128
  // Warmup: 5 epochs = 1,202,180 clips; steps 0-97 start below it (97 x 12288 = 1,191,936).
  EXPECT_EQ(p.schedule.warmup_steps(), 98);
  EXPECT_NEAR(p.schedule.at(0), 0.0, 1e-12);
  EXPECT_NEAR(p.schedule.at(19), 1.92 * 19 * 12288 / 1202180, 1e-12);
  EXPECT_NEAR(p.schedule.at(97), 1.92 * 97 * 12288 / 1202180, 1e-12);
  // Cosine from 5 to 50 epochs of clips: step 98 is at 5.0084 epochs.
  const double x98 = 98.0 * 12288 / 240436;
  EXPECT_NEAR(p.schedule.at(98), 0.96 * (1 + std::cos(M_PI * (x98 - 5) / 45)), 1e-12);
  const double x500 = 500.0 * 12288 / 240436;
  EXPECT_NEAR(p.schedule.at(500), 0.96 * (1 + std::cos(M_PI * (x500 - 5) / 45)), 1e-12);
  EXPECT_NEAR(p.schedule.at(979), 0.0, 1e-12);
  DistPlan on8 = paper_plan("tsm_k400_1536.toml", 8);
  EXPECT_EQ(on8.micro, 192);
  EXPECT_EQ(on8.global_batch, 12288);
  EXPECT_THROW(paper_plan("tsm_k400_1536.toml", 7), std::runtime_error);
}

TEST(DistPlan, Accumulation3072And6144) {
  DistPlan a2 = paper_plan("tsm_k400_3072_accum2.toml", 1536);
  EXPECT_EQ(a2.global_batch, 24576);
  EXPECT_EQ(a2.micro, 2);
  EXPECT_EQ(a2.stream.first_step(1), 10);  // 240436 / 24576 = 9.78
  EXPECT_NEAR(a2.lr, 3.84, 1e-12);
  EXPECT_EQ(a2.schedule.warmup_steps(), 49);  // ceil(48.92)
  EXPECT_EQ(a2.total_steps, 490);             // ceil(489.17)
  DistPlan a4 = paper_plan("tsm_k400_6144_accum4.toml", 1536);
  EXPECT_EQ(a4.global_batch, 49152);
  EXPECT_EQ(a4.micro, 4);
  EXPECT_EQ(a4.stream.first_step(1), 5);  // 240436 / 49152 = 4.89
  EXPECT_EQ(a4.stream.first_step(2), 10);
  EXPECT_NEAR(a4.lr, 7.68, 1e-12);
  EXPECT_EQ(a4.schedule.warmup_steps(), 25);  // ceil(24.46)
  EXPECT_EQ(a4.total_steps, 245);             // ceil(244.58)
  EXPECT_NEAR(a4.schedule.at(10), 7.68 * 491520 / 1202180, 1e-12);  // 10 x 49152 clips of 5 epochs'
  // Before, 4 steps per epoch dropped 43,828 clips every epoch: 18 % of 50 epochs.
  EXPECT_EQ(a4.total_clips - a4.fill_clips, 50 * 240436);
}

TEST(DistPlan, EightGpuBaselinesAndTsn) {
  for (const char* r : {"tsm_k400_8gpu.toml", "tsn_k400_8gpu.toml"}) {
    DistPlan p = paper_plan(r);
    EXPECT_EQ(p.global_batch, 64);
    EXPECT_EQ(p.stream.first_step(1), 3757);  // 240436 / 64 = 3756.81
    EXPECT_EQ(p.total_steps, 187841);         // ceil(187840.63)
    EXPECT_NEAR(p.lr, 0.01, 1e-12);
    EXPECT_EQ(p.schedule.warmup_steps(), 0);
    // Epochs 21 and 41 (from 1) start at ceil(20 x 3756.81) and ceil(40 x 3756.81).
    EXPECT_EQ(p.milestone_steps, (std::vector<int64_t>{75137, 150273}));
    EXPECT_NEAR(p.schedule.at(75136), 0.01, 1e-12);
    EXPECT_NEAR(p.schedule.at(75137), 0.001, 1e-12);
    EXPECT_NEAR(p.schedule.at(150272), 0.001, 1e-12);
    EXPECT_NEAR(p.schedule.at(150273), 0.0001, 1e-12);
  }
  DistPlan tsn = paper_plan("tsn_k400_1536.toml");
  EXPECT_NEAR(tsn.lr, 1.92, 1e-12);
}

TEST(DistPlan, DescribeSaysEveryClipOncePerEpoch) {
  const std::string d = describe(paper_plan("tsm_k400_1536.toml"));
  for (const char* line :
       {"training clips:    240436 per epoch, each seen once per epoch (none dropped)\n",
        "steps per epoch:   240436/12288 = 19.57, 19 or 20 (steps from 0: epoch 1 = 0-19, 2 = 20-39, 3 = 40-58, ..., "
        "50 = 959-978)\n",
        "total:             979 steps, 12029952 clips = 50 epochs x 240436 + 8152 of the next shuffle filling the last "
        "step\n",
        "warmup:            98 steps (5 epochs of clips) from 0 to 1.92\n", "decay:             cosine over steps 98..979 to 0\n"})
    EXPECT_NE(d.find(line), std::string::npos) << line << "\nin\n" << d;
  // A whole number of steps per epoch: nothing to fill.
  const std::string w = describe(paper_plan("tsm_k400_1536.toml", 1, {*dsl::parse_override("data.train_size=245760")}));
  EXPECT_NE(w.find("steps per epoch:   245760/12288 = 20 (steps from 0: epoch 1 = 0-19, 2 = 20-39"), std::string::npos) << w;
  EXPECT_NE(w.find("total:             1000 steps, 12288000 clips = 50 epochs x 245760\n"), std::string::npos) << w;
  EXPECT_THROW(paper_plan("tsm_k400_1536.toml", 1, {*dsl::parse_override("data.train_size=12287")}), std::runtime_error);
}

TEST(DistPlan, ScalingRulesAndPrecedence) {
  DistPlan sq = paper_plan("tsm_k400_1536.toml", 1, {*dsl::parse_override("optim.lr_scaling=\"sqrt\"")});
  EXPECT_NEAR(sq.lr, 0.02 * std::sqrt(96.0), 1e-12);
  DistPlan none = paper_plan("tsm_k400_1536.toml", 1, {*dsl::parse_override("optim.lr_scaling=\"none\"")});
  EXPECT_NEAR(none.lr, 0.02, 1e-12);
  // base_lr = 0: optim.lr as written, unscaled.
  DistPlan lr = paper_plan("tsm_k400_1536.toml", 1,
                           {*dsl::parse_override("optim.base_lr=0"), *dsl::parse_override("optim.lr=0.3")});
  EXPECT_FALSE(lr.scaled);
  EXPECT_NEAR(lr.lr, 0.3, 1e-12);
}

// The plan's bucket count is the reducer's layout of the parameters' sizes
// (buckets.hpp), not the total divided by the bucket size: with 0.05 MiB buckets
// (52,429 bytes), two 36,864-element tensors (147,456 bytes each) and two small ones
// make 2 buckets (the last three parameters, then the first), where 295,712 bytes /
// 52,429 would say 6. `vexp run`'s summary, `vexp bench train --json` (the bucket
// cost --measure-local divides by) and `vexp plan` all count these 2.
TEST(DistPlan, BucketsAreTheReducersLayout) {
  const std::vector<int64_t> numels{36864, 36864, 100, 100};
  const std::vector<dsl::Override> sets{*dsl::parse_override("dist.bucket_mb=0.05")};
  const DistPlan laid = paper_plan("tsm_k400_1536.toml", 1, sets, &numels);
  EXPECT_EQ(laid.grad_params, 73928);
  EXPECT_EQ(laid.grad_bytes, 73928 * 4);
  EXPECT_EQ(laid.buckets, 2);
  EXPECT_EQ(static_cast<size_t>(laid.buckets), bucket_layout(numels, 4, 0.05).size());
  // Only the total known: the estimate.
  EXPECT_EQ(paper_plan("tsm_k400_1536.toml", 1, sets, nullptr).buckets, 0);
  const DistPlan total = [&] {
    const std::vector<int64_t> one{73928};
    return paper_plan("tsm_k400_1536.toml", 1, sets, &one);
  }();
  EXPECT_EQ(total.buckets, 1);  // one tensor: one bucket, however large
}

}  // namespace
}  // namespace vexp
