// The gradient noise scale: the estimator's maths (noise_scale.hpp) and the step's
// measurement of it (train_step.hpp): the fp16 loss scale divided out, the same
// figures from one rank's emulated GPUs with either reduction.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "vexp/comm.hpp"
#include "vexp/runtime/dist_plan.hpp"
#include "vexp/runtime/graph.hpp"
#include "vexp/runtime/noise_scale.hpp"
#include "vexp/runtime/objective.hpp"
#include "vexp/runtime/optimizer.hpp"
#include "vexp/runtime/precision.hpp"
#include "vexp/runtime/rig.hpp"
#include "vexp/runtime/session.hpp"
#include "vexp/runtime/train_step.hpp"

namespace {

using vexp::NoiseEstimate;
using vexp::NoiseScale;
using vexp::noise_estimate;

// E|G_B|^2 = |G|^2 + tr(Sigma) / B: the norms of exact expectations give the truth back.
TEST(NoiseScale, EstimatesInvertTheExpectedNorms) {
  const double g2 = 4, tr = 16, bs = 8, bb = 32;
  const NoiseEstimate e = noise_estimate(g2 + tr / bs, g2 + tr / bb, bs, bb);
  EXPECT_NEAR(e.g2, g2, 1e-12);
  EXPECT_NEAR(e.trace, tr, 1e-12);
  EXPECT_THROW(noise_estimate(1, 1, 8, 8), std::invalid_argument);
  EXPECT_THROW(noise_estimate(1, 1, 0, 8), std::invalid_argument);
  EXPECT_THROW(noise_estimate(1, 1, 16, 8), std::invalid_argument);
}

TEST(NoiseScale, RatioOfMovingAverages) {
  NoiseScale ns(0.5);
  EXPECT_TRUE(std::isnan(ns.scale()));
  EXPECT_EQ(ns.g2(), 0);
  EXPECT_TRUE(ns.add({2, 10}));
  // Bias-corrected: the first measurement itself.
  EXPECT_DOUBLE_EQ(ns.g2(), 2);
  EXPECT_DOUBLE_EQ(ns.trace(), 10);
  EXPECT_DOUBLE_EQ(ns.scale(), 5);
  EXPECT_TRUE(ns.add({-1, 20}));  // a negative |G|^2 estimate is averaged in, not dropped
  // Raw averages: |G|^2 0.5 x 1 + 0.5 x -1 = 0, tr 0.5 x 5 + 0.5 x 20 = 12.5.
  EXPECT_DOUBLE_EQ(ns.raw_g2(), 0.0);
  EXPECT_TRUE(std::isnan(ns.scale()));  // smoothed |G|^2 not positive: no scale
  EXPECT_TRUE(ns.add({4, 0}));
  EXPECT_DOUBLE_EQ(ns.scale(), ns.raw_trace() / ns.raw_g2());
  EXPECT_DOUBLE_EQ(ns.scale(), ns.trace() / ns.g2());  // the correction cancels
  EXPECT_FALSE(ns.add({NAN, 1}));
  EXPECT_FALSE(ns.add({1, INFINITY}));
  EXPECT_EQ(ns.count(), 3);
  // The checkpoint's state gives the same figures back.
  NoiseScale back(0.5);
  back.restore(ns.raw_g2(), ns.raw_trace(), ns.count());
  EXPECT_DOUBLE_EQ(back.scale(), ns.scale());
  EXPECT_DOUBLE_EQ(back.g2(), ns.g2());
  // No smoothing: the last measurement.
  NoiseScale last(0);
  last.add({1, 3});
  last.add({2, 30});
  EXPECT_DOUBLE_EQ(last.scale(), 15);
}

// Per-clip gradients g = G + Gaussian noise of covariance Sigma (diagonal): the mean of
// the per-step estimates is |G|^2 and tr(Sigma), whatever the batches.
TEST(NoiseScale, UnbiasedOnGaussianGradients) {
  at::manual_seed(3);
  const int64_t dim = 64, gpus = 4, steps = 4000;
  const at::Tensor g = at::randn({dim}, at::kDouble) * 0.3;
  const at::Tensor sd = at::rand({dim}, at::kDouble) + 0.5;
  const double g2 = (g * g).sum().item<double>(), tr = (sd * sd).sum().item<double>();
  for (int64_t per_gpu : {2, 16}) {
    double sum_g2 = 0, sum_tr = 0;
    for (int64_t s = 0; s < steps; ++s) {
      // [gpus, per_gpu, dim] per-clip gradients, then each GPU's mean and theirs.
      const at::Tensor clips = g + sd * at::randn({gpus, per_gpu, dim}, at::kDouble);
      const at::Tensor gpu = clips.mean(1);
      const double small = (gpu * gpu).sum(1).mean().item<double>();
      const at::Tensor all = gpu.mean(0);
      const double big = (all * all).sum().item<double>();
      const NoiseEstimate e = noise_estimate(small, big, static_cast<double>(per_gpu),
                                             static_cast<double>(per_gpu * gpus));
      sum_g2 += e.g2;
      sum_tr += e.trace;
    }
    const double mg2 = sum_g2 / steps, mtr = sum_tr / steps;
    // The standard errors of the means are about 2 % (|G|^2 at per_gpu 2) and 1 %.
    EXPECT_NEAR(mtr / tr, 1.0, 0.04) << "per_gpu " << per_gpu;
    EXPECT_NEAR(mg2 / g2, 1.0, 0.08) << "per_gpu " << per_gpu;
  }
}

// The step's measurement, on the tiny quickstart model of test_rig.cpp.
const std::string kRecipe = std::string(VEXP_SOURCE_DIR) + "/recipes/quickstart/tsm_motion.toml";

struct Built {
  vexp::Session s;
  std::shared_ptr<vexp::Comm> comm;
  std::unique_ptr<vexp::Rig> rig;
  vexp::DistPlan dp;
};

std::unique_ptr<Built> build(const std::vector<std::string>& more) {
  auto b = std::make_unique<Built>();
  std::vector<vexp::dsl::Override> o;
  for (const char* t : {"data.params.train_clips=48", "data.params.val_clips=16", "data.params.size=16",
                        "data.params.frames=4", "data.params.classes=4", "dist.batch_per_gpu=4", "run.epochs=2",
                        "run.progress=\"none\"", "run.threads=1", "run.noise_scale_every=1"})
    o.push_back(*vexp::dsl::parse_override(t));
  for (const auto& t : more) o.push_back(*vexp::dsl::parse_override(t));
  std::vector<std::string> problems;
  b->s.host.load_directory(VEXP_TEST_PLUGIN_DIR, problems);
  if (!problems.empty()) throw std::runtime_error(problems.front());
  vexp::OpenOptions options;
  options.load_plugins = false;
  options.overrides = std::move(o);
  if (!vexp::open_recipe(b->s, kRecipe, options)) throw std::runtime_error(b->s.diags.str());
  const vexp::dsl::RecipePlan& plan = *b->s.plan;
  b->comm = b->s.host.make<vexp::Comm>("comm", plan.comm, plan.comm_params);
  at::manual_seed(0);
  b->rig = std::make_unique<vexp::Rig>(plan, b->s.host, std::make_shared<vexp::ModelGraph>(plan, b->s.host), b->comm,
                                       vexp::RigOptions{});
  b->dp = vexp::make_dist_plan(plan, 1, 48, b->rig->grad_numels());
  return b;
}

// Micro-batch m of a step: fixed random clips.
std::vector<vexp::Batch> batches(int64_t n) {
  at::manual_seed(11);
  std::vector<vexp::Batch> out;
  for (int64_t i = 0; i < n; ++i) out.emplace_back(at::randn({4, 4, 1, 16, 16}), at::randint(0, 4, {4}, at::kLong));
  return out;
}

vexp::NoiseSample measure(Built& b, vexp::TrainStep& step, int64_t micro) {
  const auto bs = batches(micro);
  double loss = step.forward_backward(0, [&](int64_t m) { return bs[static_cast<size_t>(m)]; });
  bool stop = false;
  step.reduce(loss, stop);
  vexp::NoiseSample s = step.noise();
  (void)b;
  return s;
}

// fp16's loss scale multiplies every gradient: the measured norms divide it out.
TEST(NoiseScale, StepDividesTheLossScaleOut) {
  auto plain = build({"dist.world_size=2"});
  auto scaled = build({"dist.world_size=2"});
  vexp::TrainStep& a = plain->rig->start(plain->dp);
  // The second rig's parts with a scaler of loss scale 1024 (fp16's, on fp32 arithmetic).
  vexp::GradScaler scaler(true, vexp::GradScalerOptions{1024.0, 2.0, 0.5, 2000});
  vexp::Rig& r = *scaled->rig;
  vexp::TrainStep b(vexp::StepParts{&r.model(), &r.optimizer(), &scaler, &r.params(), nullptr, scaled->comm.get(),
                                    &r.objective()},
                    r.step_options(scaled->dp));
  const vexp::NoiseSample x = measure(*plain, a, 2), y = measure(*scaled, b, 2);
  ASSERT_TRUE(x.measured && y.measured && x.finite && y.finite);
  EXPECT_EQ(x.gpus, 2);
  EXPECT_GT(x.gpu_sq, x.global_sq);  // each GPU's gradient is noisier than their mean
  EXPECT_NEAR(y.gpu_sq / x.gpu_sq, 1.0, 1e-5);
  EXPECT_NEAR(y.global_sq / x.global_sq, 1.0, 1e-5);
}

// One rank emulating 2 GPUs x accum 2: the GPUs' norms by difference (fast) equal
// those of the exact reduction, which sets each GPU's gradient aside on its own; and
// the step's figures are the GPUs' gradients computed one by one.
TEST(NoiseScale, EmulatedGpusWithAccumulationAndEitherReduction) {
  auto fast = build({"dist.world_size=2", "dist.accum_steps=2"});
  auto exact = build({"dist.world_size=2", "dist.accum_steps=2", "dist.reduction=\"exact\""});
  vexp::TrainStep& f = fast->rig->start(fast->dp);
  vexp::TrainStep& e = exact->rig->start(exact->dp);
  ASSERT_EQ(f.options().micro, 4);
  const vexp::NoiseSample x = measure(*fast, f, 4), y = measure(*exact, e, 4);
  ASSERT_TRUE(x.finite && y.finite);
  EXPECT_NEAR(y.gpu_sq / x.gpu_sq, 1.0, 1e-5);
  EXPECT_NEAR(y.global_sq / x.global_sq, 1.0, 1e-5);
  EXPECT_GT(x.gpu_sq, x.global_sq);
  // Not measured on the steps between, and switched off.
  f.set_noise_every(2);
  EXPECT_FALSE(f.measures(0));
  EXPECT_TRUE(f.measures(1));
  f.set_noise_every(0);
  EXPECT_FALSE(f.measures(1));
}

// The scale of a GPU's gradient against the global one: GPUs given the same clips and
// the same dropout (the callback reseeds after the step does) compute the same
// gradient, so every GPU's squared norm is the global one's and tr(Sigma) is 0; with
// accumulation, a GPU's gradient is the mean of its micro-batches', as the global one.
TEST(NoiseScale, IdenticalGpusMeasureNoNoise) {
  for (const char* reduction : {"\"fast\"", "\"exact\""}) {
    auto b = build({"dist.world_size=2", "dist.accum_steps=2", std::string("dist.reduction=") + reduction});
    vexp::TrainStep& step = b->rig->start(b->dp);
    const auto bs = batches(2);
    double loss = step.forward_backward(0, [&](int64_t m) {
      at::manual_seed(42 + static_cast<uint64_t>(m % 2));
      return bs[static_cast<size_t>(m % 2)];
    });
    bool stop = false;
    step.reduce(loss, stop);
    const vexp::NoiseSample& s = step.noise();
    ASSERT_TRUE(s.measured && s.finite);
    EXPECT_GT(s.global_sq, 0);
    EXPECT_NEAR(s.gpu_sq / s.global_sq, 1.0, 1e-5) << reduction;
    const NoiseEstimate e = noise_estimate(s.gpu_sq, s.global_sq, 8, 16);
    EXPECT_NEAR(e.trace / (8 * s.gpu_sq), 0.0, 1e-4) << reduction;
  }
}

TEST(NoiseScale, OneGpuIsRefused) {
  auto b = build({"dist.world_size=2"});
  vexp::TrainStep& s = b->rig->start(b->dp);
  vexp::StepOptions o = s.options();
  o.micro = 1;
  o.world = 1;
  vexp::Rig& r = *b->rig;
  EXPECT_THROW(vexp::TrainStep(vexp::StepParts{&r.model(), &r.optimizer(), &r.scaler(), &r.params(), nullptr,
                                               b->comm.get(), &r.objective()},
                               o),
               std::logic_error);
}

}  // namespace
