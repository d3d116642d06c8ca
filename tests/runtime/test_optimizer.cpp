// The host's side of the optimizer (gradient clipping and zeroing) and the lr
// schedules. The optimizers themselves are plugins: plugins/optim/optimizers.
#include <gtest/gtest.h>

#include <cmath>

#include <torch/torch.h>

#include "vexp/runtime/optimizer.hpp"
#include "vexp/runtime/schedule.hpp"

namespace {

TEST(ClipGradNorm, ScalesToTheLimit) {
  auto w = torch::zeros({2}, torch::requires_grad());
  (w * torch::tensor({3.0, 4.0})).sum().backward();
  double n = vexp::clip_grad_norm({w}, 1.0);
  EXPECT_NEAR(n, 5.0, 1e-6);
  EXPECT_NEAR(w.grad().norm().item<double>(), 1.0, 1e-4);
}

TEST(ZeroGrad, ZeroesInPlaceAndLeavesMissingGradientsAlone) {
  auto w = torch::ones({2}, torch::requires_grad());
  auto v = torch::ones({2}, torch::requires_grad());
  (w * 3).sum().backward();
  const void* storage = w.grad().data_ptr();
  vexp::zero_grad({w, v});
  EXPECT_TRUE(torch::equal(w.grad(), torch::zeros({2})));
  EXPECT_EQ(w.grad().data_ptr(), storage);  // the reducer's buckets stay bound to it
  EXPECT_FALSE(v.grad().defined());
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
