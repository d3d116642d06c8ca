// vexp's SGD and schedules against libtorch's reference implementation.
#include <gtest/gtest.h>

#include <cmath>

#include <torch/optim/sgd.h>
#include <torch/torch.h>

#include "vexp/runtime/optimizer.hpp"
#include "vexp/runtime/schedule.hpp"

namespace {

void check_against_torch(double momentum, bool nesterov, double wd) {
  torch::manual_seed(3);
  auto a = torch::randn({5, 4}, torch::requires_grad());
  auto b = torch::randn({4}, torch::requires_grad());
  auto ra = a.detach().clone().requires_grad_(true);
  auto rb = b.detach().clone().requires_grad_(true);

  vexp::ParamGroup g{"all", 1.0, wd, {"a", "b"}, {a, b}};
  vexp::Sgd ours({g}, momentum, nesterov);
  torch::optim::SGD ref({ra, rb}, torch::optim::SGDOptions(0.1).momentum(momentum).nesterov(nesterov).weight_decay(wd));
  for (int step = 0; step < 4; ++step) {
    auto x = torch::randn({3, 5});
    ((x.matmul(a) + b).pow(2).sum()).backward();
    ((x.matmul(ra) + rb).pow(2).sum()).backward();
    double lr = 0.1 / (step + 1);
    ours.step(lr);
    static_cast<torch::optim::SGDOptions&>(ref.param_groups()[0].options()).lr(lr);
    ref.step();
    ours.zero_grad();
    ref.zero_grad();
  }
  EXPECT_TRUE(torch::allclose(a, ra, 1e-6, 1e-7)) << (a - ra).abs().max();
  EXPECT_TRUE(torch::allclose(b, rb, 1e-6, 1e-7)) << (b - rb).abs().max();
}

TEST(Sgd, MatchesTorchPlain) { check_against_torch(0.0, false, 0.0); }
TEST(Sgd, MatchesTorchMomentumAndDecay) { check_against_torch(0.9, false, 1e-2); }
TEST(Sgd, MatchesTorchNesterov) { check_against_torch(0.9, true, 1e-4); }

TEST(Sgd, GroupMultipliersScaleTheStep) {
  auto w = torch::ones({2}, torch::requires_grad());
  auto v = torch::ones({2}, torch::requires_grad());
  vexp::Sgd sgd({{"w", 1.0, 0.0, {"w"}, {w}}, {"v", 5.0, 0.0, {"v"}, {v}}}, 0.0, false);
  (w.sum() + v.sum()).backward();
  sgd.step(0.1);
  EXPECT_NEAR(w[0].item<double>(), 0.9, 1e-7);
  EXPECT_NEAR(v[0].item<double>(), 0.5, 1e-7);
}

TEST(ClipGradNorm, ScalesToTheLimit) {
  auto w = torch::zeros({2}, torch::requires_grad());
  (w * torch::tensor({3.0, 4.0})).sum().backward();
  double n = vexp::clip_grad_norm({w}, 1.0);
  EXPECT_NEAR(n, 5.0, 1e-6);
  EXPECT_NEAR(w.grad().norm().item<double>(), 1.0, 1e-4);
}

// Schedules count clips: 10 clips per epoch, global batch 4 (2.5 steps per epoch).
vexp::LrSchedule clip_schedule(const char* type) {
  vexp::LrSchedule s;
  s.type = type;
  s.base_lr = 0.1;
  s.stream = vexp::SampleStream{10, 4};
  s.epochs = 6;  // 15 steps
  return s;
}

TEST(LrSchedule, WarmupThenCosineInClips) {
  vexp::LrSchedule s = clip_schedule("cosine");
  s.warmup_epochs = 2;  // 20 clips: steps 0-4
  EXPECT_EQ(s.warmup_steps(), 5);
  EXPECT_DOUBLE_EQ(s.at(0), 0.0);
  EXPECT_NEAR(s.at(2), 0.1 * 8 / 20, 1e-12);
  EXPECT_NEAR(s.at(4), 0.1 * 16 / 20, 1e-12);
  EXPECT_NEAR(s.at(5), 0.1, 1e-12);    // 20 clips: the cosine starts
  EXPECT_NEAR(s.at(10), 0.05, 1e-12);  // 40 clips = 4 epochs: half way from 2 to 6
  EXPECT_NEAR(s.at(14), 0.05 * (1 + std::cos(M_PI * (5.6 - 2) / 4)), 1e-12);
  EXPECT_NEAR(s.at(15), 0.0, 1e-12);   // 60 clips = 6 epochs
  // A warmup that ends inside a step: 1 epoch = 10 clips, so steps 0-2 (0, 4, 8 clips).
  s.warmup_epochs = 1;
  EXPECT_EQ(s.warmup_steps(), 3);
  EXPECT_NEAR(s.at(2), 0.1 * 8 / 10, 1e-12);
  EXPECT_NEAR(s.at(3), 0.05 * (1 + std::cos(M_PI * (1.2 - 1) / 5)), 1e-12);
  EXPECT_EQ(clip_schedule("cosine").warmup_steps(), 0);
}

TEST(LrSchedule, StepDecayAtTheFirstStepOfTheMilestoneEpoch) {
  vexp::LrSchedule s = clip_schedule("step");
  s.milestones = {1, 4};
  // Epoch 1 starts with the step whose clips start at >= 10: step 3 (12 clips);
  // epoch 4 with step 10 (40 clips): the epochs' first steps.
  EXPECT_EQ(s.stream.first_step(1), 3);
  EXPECT_EQ(s.stream.first_step(4), 10);
  EXPECT_NEAR(s.at(2), 0.1, 1e-12);
  EXPECT_NEAR(s.at(3), 0.01, 1e-12);
  EXPECT_NEAR(s.at(9), 0.01, 1e-12);
  EXPECT_NEAR(s.at(10), 0.001, 1e-12);
}

TEST(LrSchedule, TheRateIsAFunctionOfClipsSeen) {
  // The same clips seen at another global batch: the same rate.
  for (const char* type : {"cosine", "step"}) {
    vexp::LrSchedule a = clip_schedule(type), b = clip_schedule(type);
    a.milestones = b.milestones = {3};
    a.warmup_epochs = b.warmup_epochs = 1.5;
    b.stream = vexp::SampleStream{10, 2};
    for (int64_t s = 0; s <= 15; ++s) EXPECT_DOUBLE_EQ(a.at(s), b.at(2 * s)) << type << " step " << s;
  }
}

TEST(LrSchedule, WarmupStartFraction) {
  vexp::LrSchedule s;
  s.type = "constant";
  s.base_lr = 1.0;
  s.stream = vexp::SampleStream{4, 1};
  s.warmup_epochs = 1;
  s.warmup_start = 0.2;
  EXPECT_EQ(s.warmup_steps(), 4);
  EXPECT_NEAR(s.at(0), 0.2, 1e-12);
  EXPECT_NEAR(s.at(2), 0.6, 1e-12);
  EXPECT_NEAR(s.at(4), 1.0, 1e-12);
}

}  // namespace
