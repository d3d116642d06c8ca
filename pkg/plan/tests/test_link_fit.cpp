// plan::fit_ring on recorded allreduce timings: a clean ring, a noisy one, and
// what a busy machine records (times that do not grow with size).
#include <gtest/gtest.h>

#include <stdexcept>

#include "vexp/plan/link_fit.hpp"

namespace {

using vexp::plan::fit_ring;
constexpr double kMiB = 1048576.0;

// Two ranks: t = 2 latency + S / bandwidth, latency 20 us, 5 GB/s.
std::vector<std::pair<double, double>> ideal() {
  std::vector<std::pair<double, double>> p;
  for (double mb : {0.0625, 1.0, 8.0, 32.0}) p.push_back({mb * kMiB, 2 * 20e-6 + mb * kMiB / 5e9});
  return p;
}

TEST(LinkFit, RecoversTheLinkOfExactTimes) {
  const auto f = fit_ring(ideal(), 2);
  EXPECT_TRUE(f.fitted);
  EXPECT_NEAR(f.bandwidth_GBps, 5.0, 1e-6);
  EXPECT_NEAR(f.latency_us, 20.0, 1e-3);
}

TEST(LinkFit, NoisyTimesStillFitClose) {
  // Recorded on a 2-rank laptop run (vexp bench allreduce --backend mpi), in seconds.
  const std::vector<std::pair<double, double>> p{
      {0.0625 * kMiB, 6.1e-05}, {1 * kMiB, 0.000262}, {8 * kMiB, 0.00171}, {32 * kMiB, 0.00702}};
  const auto f = fit_ring(p, 2);
  EXPECT_TRUE(f.fitted);
  EXPECT_GT(f.bandwidth_GBps, 4.0);
  EXPECT_LT(f.bandwidth_GBps, 6.0);
  EXPECT_GT(f.latency_us, 0.0);
  EXPECT_LT(f.latency_us, 61.0);
}

TEST(LinkFit, ANegativeInterceptKeepsHalfTheSmallestTime) {
  // Small sizes faster than the line through the large ones: intercept below zero.
  const std::vector<std::pair<double, double>> p{{1 * kMiB, 1.0e-4}, {8 * kMiB, 1.9e-3}, {32 * kMiB, 8.0e-3}};
  const auto f = fit_ring(p, 2);
  EXPECT_TRUE(f.fitted);
  EXPECT_NEAR(f.latency_us, 0.5 * 1.0e-4 / 2 * 1e6, 1e-9);
  EXPECT_GT(f.bandwidth_GBps, 0.0);
}

TEST(LinkFit, TimesThatDoNotGrowGiveAFallbackNotAFailure) {
  // A busy machine (the failure of cli.plan.measure_local under load): the small
  // sizes waited behind other work and took longer than the large ones.
  const std::vector<std::pair<double, double>> p{
      {0.0625 * kMiB, 0.0121}, {1 * kMiB, 0.0093}, {8 * kMiB, 0.0072}, {32 * kMiB, 0.0061}};
  const auto f = fit_ring(p, 4);
  EXPECT_FALSE(f.fitted);
  EXPECT_NE(f.how.find("did not grow"), std::string::npos);
  // Bandwidth of the largest size alone: 2(n-1)/n x 32 MiB / 6.1 ms; latency half
  // the smallest time over 2(n-1) hops.
  EXPECT_NEAR(f.bandwidth_GBps, 1.5 * 32 * kMiB / 0.0061 / 1e9, 1e-9);
  EXPECT_NEAR(f.latency_us, 0.5 * 0.0061 / 6 * 1e6, 1e-9);
}

TEST(LinkFit, RefusesWhatCannotBeFitted) {
  EXPECT_THROW(fit_ring({{kMiB, 1e-3}}, 2), std::invalid_argument);
  EXPECT_THROW(fit_ring({{kMiB, 1e-3}, {kMiB, 2e-3}}, 2), std::invalid_argument);
  EXPECT_THROW(fit_ring({{kMiB, 0.0}, {2 * kMiB, 2e-3}}, 2), std::invalid_argument);
  EXPECT_THROW(fit_ring(ideal(), 1), std::invalid_argument);
}

}  // namespace
