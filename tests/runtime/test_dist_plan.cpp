// Learning-rate plans of the paper recipes against hand-computed values.
// Kinetics-400: 240,436 training clips (data.train_size of the recipes).
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "vexp/runtime/dist_plan.hpp"
#include "vexp/runtime/dry_run.hpp"
#include "vexp/runtime/session.hpp"

namespace vexp {
namespace {

DistPlan paper_plan(const std::string& recipe, int64_t ranks = 1, std::vector<dsl::Override> sets = {}) {
  Session s;
  std::vector<std::string> problems;
  s.host.load_directory(VEXP_TEST_PLUGIN_DIR, problems);
  std::string note;
  const std::string path = std::string(VEXP_SOURCE_DIR) + "/recipes/" + recipe;
  bool ok = open_recipe_for_planning(s, path, sets, note);
  for (const auto& d : s.diags.sorted())
    if (d.severity == dsl::Severity::Error) ADD_FAILURE() << d.str();
  EXPECT_TRUE(ok) << path;
  return make_dist_plan(*s.plan, ranks, s.plan->data.train_size, 0);
}

TEST(DistPlan, Tsm1536) {
  DistPlan p = paper_plan("tsm_k400_1536.toml");
  EXPECT_EQ(p.global_batch, 12288);      // 1536 x 8
  EXPECT_EQ(p.global_batch * p.frames, 98304);
  EXPECT_EQ(p.micro, 1536);              // emulated on one rank
  EXPECT_EQ(p.steps_per_epoch, 19);      // 240436 / 12288 = 19.57
  EXPECT_EQ(p.total_steps, 950);         // 50 epochs
  EXPECT_NEAR(p.lr, 1.92, 1e-12);        // 0.02 x 12288 / 128
  EXPECT_EQ(p.schedule.warmup_steps, 95);  // 5 epochs
  EXPECT_NEAR(p.schedule.at(0), 0.0, 1e-12);
  EXPECT_NEAR(p.schedule.at(19), 1.92 * 19 / 95, 1e-12);
  EXPECT_NEAR(p.schedule.at(95), 1.92, 1e-12);
  EXPECT_NEAR(p.schedule.at(95 + 855 / 3), 0.5 * 1.92 * (1 + std::cos(M_PI * 285.0 / 855.0)), 1e-12);
  EXPECT_NEAR(p.schedule.at(950), 0.0, 1e-12);
  DistPlan on8 = paper_plan("tsm_k400_1536.toml", 8);
  EXPECT_EQ(on8.micro, 192);
  EXPECT_EQ(on8.global_batch, 12288);
  EXPECT_THROW(paper_plan("tsm_k400_1536.toml", 7), std::runtime_error);
}

TEST(DistPlan, Accumulation3072And6144) {
  DistPlan a2 = paper_plan("tsm_k400_3072_accum2.toml", 1536);
  EXPECT_EQ(a2.global_batch, 24576);
  EXPECT_EQ(a2.micro, 2);
  EXPECT_EQ(a2.steps_per_epoch, 9);
  EXPECT_NEAR(a2.lr, 3.84, 1e-12);
  EXPECT_EQ(a2.schedule.warmup_steps, 45);
  EXPECT_EQ(a2.total_steps, 450);
  DistPlan a4 = paper_plan("tsm_k400_6144_accum4.toml", 1536);
  EXPECT_EQ(a4.global_batch, 49152);
  EXPECT_EQ(a4.micro, 4);
  EXPECT_EQ(a4.steps_per_epoch, 4);
  EXPECT_NEAR(a4.lr, 7.68, 1e-12);
  EXPECT_EQ(a4.schedule.warmup_steps, 20);
  EXPECT_NEAR(a4.schedule.at(10), 3.84, 1e-12);
}

TEST(DistPlan, EightGpuBaselinesAndTsn) {
  for (const char* r : {"tsm_k400_8gpu.toml", "tsn_k400_8gpu.toml"}) {
    DistPlan p = paper_plan(r);
    EXPECT_EQ(p.global_batch, 64);
    EXPECT_EQ(p.steps_per_epoch, 3756);
    EXPECT_NEAR(p.lr, 0.01, 1e-12);
    EXPECT_EQ(p.milestone_steps, (std::vector<int64_t>{75120, 150240}));
    EXPECT_NEAR(p.schedule.at(75119), 0.01, 1e-12);
    EXPECT_NEAR(p.schedule.at(75120), 0.001, 1e-12);
    EXPECT_NEAR(p.schedule.at(150240), 0.0001, 1e-12);
  }
  DistPlan tsn = paper_plan("tsn_k400_1536.toml");
  EXPECT_NEAR(tsn.lr, 1.92, 1e-12);
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

}  // namespace
}  // namespace vexp
