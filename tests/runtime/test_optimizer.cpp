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

TEST(LrSchedule, WarmupThenCosine) {
  vexp::LrSchedule s;
  s.type = "cosine";
  s.base_lr = 0.1;
  s.warmup_steps = 10;
  s.total_steps = 110;
  EXPECT_DOUBLE_EQ(s.at(0), 0.0);
  EXPECT_NEAR(s.at(5), 0.05, 1e-12);
  EXPECT_NEAR(s.at(10), 0.1, 1e-12);
  EXPECT_NEAR(s.at(60), 0.05, 1e-12);  // half way through the cosine
  EXPECT_NEAR(s.at(110), 0.0, 1e-12);
}

TEST(LrSchedule, StepDecayAtMilestones) {
  vexp::LrSchedule s;
  s.type = "step";
  s.base_lr = 0.02;
  s.steps_per_epoch = 100;
  s.total_steps = 5000;
  s.milestones = {20, 40};
  EXPECT_NEAR(s.at(1999), 0.02, 1e-12);
  EXPECT_NEAR(s.at(2000), 0.002, 1e-12);
  EXPECT_NEAR(s.at(4000), 0.0002, 1e-12);
}

TEST(LrSchedule, WarmupStartFraction) {
  vexp::LrSchedule s;
  s.type = "constant";
  s.base_lr = 1.0;
  s.warmup_steps = 4;
  s.warmup_start = 0.2;
  EXPECT_NEAR(s.at(0), 0.2, 1e-12);
  EXPECT_NEAR(s.at(2), 0.6, 1e-12);
  EXPECT_NEAR(s.at(4), 1.0, 1e-12);
}

}  // namespace
