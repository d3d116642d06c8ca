// The fit of S_min and E_min (report::fit_critical_batch) on known data: points on
// the curve S = S_min + E_min / B give both back exactly; noisy points give them
// back within their noise; the constraints S_min, E_min >= 0 and the cases without
// a fit.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "vexp/report/critical_batch.hpp"

namespace {

using vexp::report::BatchPoint;
using vexp::report::fit_critical_batch;

std::vector<BatchPoint> on_curve(double s_min, double e_min, const std::vector<double>& batches) {
  std::vector<BatchPoint> p;
  for (double b : batches) p.push_back({b, s_min + e_min / b});
  return p;
}

TEST(CriticalBatch, PointsOnTheCurveGiveSMinAndEMinBack) {
  // S_min = 1200 steps, E_min = 96,000 clips: B_crit = 80.
  const auto f = fit_critical_batch(on_curve(1200, 96000, {16, 32, 64, 128, 256, 512, 1024}));
  ASSERT_TRUE(f.fit) << f.why_not;
  EXPECT_NEAR(f.fit->s_min, 1200, 1200 * 1e-12);
  EXPECT_NEAR(f.fit->e_min, 96000, 96000 * 1e-12);
  EXPECT_NEAR(f.fit->b_crit, 80, 80 * 1e-12);
  EXPECT_LT(f.fit->rel_rms, 1e-13);
  EXPECT_FALSE(f.fit->s_min_at_zero || f.fit->e_min_at_zero);
  EXPECT_EQ(f.fit->points, 7u);
  EXPECT_EQ(f.fit->batches, 7u);
  // The clips follow E = E_min + S_min B, at the batch where both double their minimum.
  EXPECT_NEAR(f.fit->clips_at(80), 2 * 96000, 1e-6);
  EXPECT_NEAR(f.fit->steps_at(80), 2 * 1200, 1e-9);
  // Two points, two parameters: exact as well.
  const auto two = fit_critical_batch(on_curve(3.5, 70, {8, 64}));
  ASSERT_TRUE(two.fit);
  EXPECT_NEAR(two.fit->s_min, 3.5, 1e-12);
  EXPECT_NEAR(two.fit->e_min, 70, 1e-10);
}

TEST(CriticalBatch, NoisyPointsGiveThemBackWithinTheirNoise) {
  // +-10 % relative errors (a fixed list: the test is the same everywhere) on
  // S_min = 500, E_min = 64,000 (B_crit 128), batches 32 ... 4096, 3 seeds per batch.
  const double noise[] = {0.07, -0.04, 0.10, -0.09, 0.02, 0.05, -0.06, -0.01, 0.08, -0.10, 0.03, -0.03,
                          0.06, -0.08, 0.01, 0.04, -0.05, 0.09, -0.02, -0.07, 0.00};
  std::vector<BatchPoint> p;
  size_t k = 0;
  for (double b : {32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 4096.0})
    for (int seed = 0; seed < 3; ++seed) p.push_back({b, (500 + 64000 / b) * (1 + noise[k++])});
  const auto f = fit_critical_batch(p);
  ASSERT_TRUE(f.fit) << f.why_not;
  // (488.997 and 65116 by numpy's lstsq of the same weighted system: 2.2 % and 1.7 % off)
  EXPECT_NEAR(f.fit->s_min, 500, 0.05 * 500);
  EXPECT_NEAR(f.fit->e_min, 64000, 0.05 * 64000);
  EXPECT_NEAR(f.fit->b_crit, 128, 0.10 * 128);
  EXPECT_GT(f.fit->rel_rms, 0.04);  // the noise (sd 6 %) is seen, not fitted away
  EXPECT_LT(f.fit->rel_rms, 0.08);
  EXPECT_EQ(f.fit->points, 21u);
  EXPECT_EQ(f.fit->batches, 7u);
  // The least-squares minimum: nudging either parameter only makes the misfit worse.
  auto misfit = [&](double s, double e) {
    double sum = 0;
    for (const auto& q : p) sum += std::pow((q.steps - s - e / q.batch) / q.steps, 2);
    return sum;
  };
  const double at = misfit(f.fit->s_min, f.fit->e_min);
  for (double ds : {-1.0, 1.0})
    for (double de : {-100.0, 0.0, 100.0}) EXPECT_GT(misfit(f.fit->s_min + ds, f.fit->e_min + de), at);
}

TEST(CriticalBatch, ConstraintsHoldSMinAndEMinAtZero) {
  // Steps exactly E_min / B (perfect linear scaling over every batch): S_min = 0,
  // B_crit unbounded. A little noise pushes the unconstrained S_min below 0.
  auto f = fit_critical_batch({{8, 600 * 1.02}, {16, 300 * 0.97}, {32, 150 * 1.03}, {64, 75 * 0.96}});
  ASSERT_TRUE(f.fit);
  EXPECT_TRUE(f.fit->s_min_at_zero);
  EXPECT_EQ(f.fit->s_min, 0);
  EXPECT_NEAR(f.fit->e_min, 4800, 0.05 * 4800);
  EXPECT_TRUE(std::isinf(f.fit->b_crit));
  // Steps that grow with the batch: E_min = 0, S_min their weighted mean, B_crit 0.
  f = fit_critical_batch({{8, 100}, {16, 110}, {32, 120}});
  ASSERT_TRUE(f.fit);
  EXPECT_TRUE(f.fit->e_min_at_zero);
  EXPECT_EQ(f.fit->e_min, 0);
  EXPECT_GT(f.fit->s_min, 100);
  EXPECT_LT(f.fit->s_min, 120);
  EXPECT_EQ(f.fit->b_crit, 0);
}

TEST(CriticalBatch, SaysWhenThereIsNoFit) {
  EXPECT_EQ(fit_critical_batch({}).why_not, "no batch reached the target");
  const auto one = fit_critical_batch({{16, 30}, {16, 32}});
  EXPECT_FALSE(one.fit);
  EXPECT_EQ(one.why_not, "one batch size reached the target; the fit needs at least 2");
  for (const BatchPoint bad : {BatchPoint{0, 10}, BatchPoint{16, 0}, BatchPoint{-8, 5}, BatchPoint{16, NAN}}) {
    const auto f = fit_critical_batch({{8, 20}, bad});
    EXPECT_FALSE(f.fit);
    EXPECT_NE(f.why_not.find("must be positive and finite"), std::string::npos) << f.why_not;
  }
}

}  // namespace
