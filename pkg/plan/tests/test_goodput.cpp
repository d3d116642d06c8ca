// plan_to_target (goodput.hpp): the statistical efficiency, steps, clips and time of
// each row against the closed forms of McCandlish et al. (2018).
#include <gtest/gtest.h>

#include <cmath>

#include "vexp/plan/error.hpp"
#include "vexp/plan/goodput.hpp"
#include "vexp/plan/model.hpp"

namespace vexp::plan {
namespace {

Row row(int64_t gpus, int64_t batch, double step_ms) {
  Row r;
  r.gpus = gpus;
  r.global_batch = batch;
  r.step_ms = step_ms;
  r.clips_per_s = static_cast<double>(batch) / step_ms * 1e3;
  return r;
}

TEST(Goodput, RowsFollowTheEmpiricalModel) {
  // B_noise 1,000 clips; the reference batch 250 trains 10 epochs of 5,000 clips.
  const std::vector<Row> rows{row(1, 250, 100), row(4, 1000, 110), row(16, 4000, 130)};
  const TargetPlan t = plan_to_target(rows, 1000, 250, 50000, 5000);
  ASSERT_EQ(t.rows.size(), 3u);
  // E(B) = E_min (1 + B / B_noise) and S(B) = S_min (1 + B_noise / B) with E_min =
  // 50,000 / 1.25 = 40,000 and S_min = E_min / B_noise = 40.
  const double e_min = 40000, s_min = 40;
  for (size_t i = 0; i < rows.size(); ++i) {
    const double b = static_cast<double>(rows[i].global_batch);
    const TargetRow& x = t.rows[i];
    EXPECT_NEAR(x.clips, e_min * (1 + b / 1000), 1e-6);
    EXPECT_NEAR(x.steps, s_min * (1 + 1000 / b), 1e-9);
    // (S / S_min - 1)(E / E_min - 1) = 1.
    EXPECT_NEAR((x.steps / s_min - 1) * (x.clips / e_min - 1), 1.0, 1e-12);
    EXPECT_NEAR(x.efficiency, 1250 / (1000 + b), 1e-15);
    EXPECT_NEAR(x.epochs, x.clips / 5000, 1e-12);
    EXPECT_NEAR(x.time_s, x.steps * rows[i].step_ms / 1e3, 1e-12);
    EXPECT_NEAR(x.gpu_hours, static_cast<double>(rows[i].gpus) * x.time_s / 3600, 1e-12);
    EXPECT_NEAR(x.goodput, rows[i].clips_per_s * x.efficiency, 1e-9);
  }
  EXPECT_DOUBLE_EQ(t.rows[0].efficiency, 1.0);  // the reference batch
  EXPECT_EQ(t.critical_gpus, 4);                // batch 1,000 = B_noise
  // Times: 40 x 5 x 0.1 = 20 s, 40 x 2 x 0.11 = 8.8 s, 40 x 1.25 x 0.13 = 6.5 s.
  EXPECT_EQ(t.fastest_gpus, 16);
  EXPECT_EQ(t.best_goodput_gpus, 16);
  // The 10-epoch budget (+10 %) holds up to B = 1.1 x 1,250 - 1,000 = 375 clips.
  EXPECT_NEAR(t.budget_max_batch, 375, 1e-9);
  EXPECT_DOUBLE_EQ(t.budget_epochs, 10);
  EXPECT_TRUE(t.rows[0].within_budget);
  EXPECT_FALSE(t.rows[1].within_budget);  // 16 epochs
  EXPECT_FALSE(t.rows[2].within_budget);  // 40 epochs
}

TEST(Goodput, SlowerStepsCanMakeASmallerBatchFaster) {
  // Past the critical batch the steps barely fall; a step twice as slow loses.
  const std::vector<Row> rows{row(8, 800, 100), row(64, 6400, 200)};
  const TargetPlan t = plan_to_target(rows, 100, 800, 8000, 800);
  EXPECT_EQ(t.fastest_gpus, 8);  // 10 steps x 0.1 s = 1 s; 8,000 x 6,500 / 900 / 6,400 = 9.03 steps x 0.2 s = 1.8 s
  EXPECT_EQ(t.critical_gpus, 8);
}

TEST(Goodput, RefusesWhatIsNoNoiseScale) {
  const std::vector<Row> rows{row(1, 32, 10)};
  for (double bad : {0.0, -5.0, std::nan(""), HUGE_VAL}) EXPECT_THROW(plan_to_target(rows, bad, 32, 100, 10), PlanError);
  EXPECT_THROW(plan_to_target(rows, 10, 0, 100, 10), PlanError);
  EXPECT_THROW(plan_to_target(rows, 10, 32, 100, 0), PlanError);
}

}  // namespace
}  // namespace vexp::plan
