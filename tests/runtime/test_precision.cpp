// Mixed precision pieces that run on the CPU: the fp16 loss scaler (with injected
// inf / NaN gradients), the autocast scope (bf16 on the CPU), the device setting's
// errors and the CPU path of the device feeder.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include <ATen/ATen.h>

#include "vexp/runtime/optimizer.hpp"
#include "vexp/runtime/precision.hpp"

namespace {

using vexp::GradScaler;
using vexp::GradScalerOptions;

at::Tensor param_with_grad(std::vector<float> grad) {
  at::Tensor p = at::zeros({static_cast<int64_t>(grad.size())}).requires_grad_(true);
  p.mutable_grad() = at::tensor(grad);
  return p;
}

TEST(GradScaler, ScalesTheLossAndUnscalesTheGradients) {
  GradScaler s(true, GradScalerOptions{1024.0, 2.0, 0.5, 3});
  EXPECT_DOUBLE_EQ(s.scale(), 1024.0);
  at::Tensor w = at::tensor({1.5f, -2.0f}).requires_grad_(true);
  at::Tensor loss = (w * w).sum();  // d/dw = 2w = [3, -4]
  at::Tensor scaled = s.scale_loss(loss);
  EXPECT_FLOAT_EQ(scaled.item<float>(), loss.item<float>() * 1024.0f);
  scaled.backward();
  EXPECT_FLOAT_EQ(w.grad()[0].item<float>(), 3.0f * 1024.0f);
  EXPECT_TRUE(s.unscale({w}));
  EXPECT_FLOAT_EQ(w.grad()[0].item<float>(), 3.0f);
  EXPECT_FLOAT_EQ(w.grad()[1].item<float>(), -4.0f);
}

TEST(GradScaler, InfOrNanGradientsSkipTheStepAndHalveTheScale) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (float bad : {inf, -inf, nan}) {
    GradScaler s(true, GradScalerOptions{65536.0, 2.0, 0.5, 2000});
    at::Tensor ok = param_with_grad({1.0f, 2.0f});
    at::Tensor broken = param_with_grad({0.5f, bad, 0.25f});
    at::Tensor no_grad = at::zeros({3}).requires_grad_(true);  // never received a gradient
    const bool finite = s.unscale({ok, broken, no_grad});
    EXPECT_FALSE(finite) << bad;
    // The step is skipped (TrainStep::update steps only when finite): the weights stay.
    EXPECT_TRUE(ok.detach().eq(0).all().item<bool>());
    s.update(finite);
    EXPECT_DOUBLE_EQ(s.scale(), 32768.0);
    EXPECT_EQ(s.skipped_steps(), 1);
    EXPECT_EQ(s.good_steps(), 0);
  }
}

TEST(GradScaler, LargeFiniteGradientsAreNotMistakenForOverflow) {
  // Their float sum overflows; the check must look at the elements.
  GradScaler s(true, GradScalerOptions{1.0, 2.0, 0.5, 10});
  at::Tensor big = param_with_grad(std::vector<float>(64, 3.0e38f));
  EXPECT_TRUE(s.unscale({big}));
}

TEST(GradScaler, GrowsAfterTheIntervalOfGoodStepsAndRestarts) {
  GradScaler s(true, GradScalerOptions{8.0, 2.0, 0.5, 3});
  s.update(true);
  s.update(true);
  EXPECT_DOUBLE_EQ(s.scale(), 8.0);
  s.update(true);
  EXPECT_DOUBLE_EQ(s.scale(), 16.0);
  EXPECT_EQ(s.good_steps(), 0);
  s.update(true);
  s.update(true);
  s.update(false);  // an overflow resets the count
  EXPECT_DOUBLE_EQ(s.scale(), 8.0);
  s.update(true);
  s.update(true);
  EXPECT_DOUBLE_EQ(s.scale(), 8.0);
  s.update(true);
  EXPECT_DOUBLE_EQ(s.scale(), 16.0);
  EXPECT_EQ(s.skipped_steps(), 1);
  s.restore(4.0, 2, 7);  // from a checkpoint
  s.update(true);
  EXPECT_DOUBLE_EQ(s.scale(), 8.0);
  EXPECT_EQ(s.skipped_steps(), 7);
}

TEST(GradScaler, DisabledIsTheIdentity) {
  GradScaler s(false);
  at::Tensor loss = at::tensor(2.5f);
  EXPECT_TRUE(s.scale_loss(loss).equal(loss));
  at::Tensor p = param_with_grad({std::numeric_limits<float>::infinity()});
  EXPECT_TRUE(s.unscale({p}));  // fp32 / bf16: the trainer's divergence check handles this
  s.update(false);
  EXPECT_DOUBLE_EQ(s.scale(), 1.0);
  EXPECT_THROW(GradScaler(true, GradScalerOptions{0.0, 2.0, 0.5, 1}), std::invalid_argument);
}

TEST(Autocast, Bf16ScopeOnTheCpu) {
  at::Tensor x = at::randn({4, 8}), w = at::randn({3, 8});
  at::Tensor y32 = at::linear(x, w);
  at::Tensor y16;
  {
    vexp::AutocastScope scope(c10::kCPU, vexp::Precision::Bf16);
    y16 = at::linear(x, w);
    {
      vexp::AutocastScope inner(c10::kCPU, vexp::Precision::Fp32);  // fp32: a no-op scope
      EXPECT_EQ(at::linear(x, w).scalar_type(), at::kBFloat16);
    }
  }
  EXPECT_EQ(y16.scalar_type(), at::kBFloat16);
  EXPECT_TRUE(at::allclose(y16.to(at::kFloat), y32, 0.05, 0.1)) << (y16.to(at::kFloat) - y32).abs().max();
  // Off again after the scope, and the weights were never changed.
  EXPECT_EQ(at::linear(x, w).scalar_type(), at::kFloat);
  EXPECT_EQ(w.scalar_type(), at::kFloat);
}

TEST(Precision, ParsesAndRefuses) {
  EXPECT_EQ(vexp::parse_precision("bf16"), vexp::Precision::Bf16);
  EXPECT_STREQ(vexp::precision_name(vexp::parse_precision("fp16")), "fp16");
  EXPECT_THROW(vexp::parse_precision("fp8"), std::invalid_argument);
  try {
    vexp::check_precision(vexp::Precision::Fp16, c10::Device(c10::kCPU), "r.toml:3:1: [run] precision");
    FAIL() << "fp16 on the CPU was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("r.toml:3:1: [run] precision = \"fp16\" needs a CUDA device"),
              std::string::npos)
        << e.what();
  }
  EXPECT_NO_THROW(vexp::check_precision(vexp::Precision::Bf16, c10::Device(c10::kCPU), "x"));
}

TEST(Device, CpuAutoAndCudaWithoutCuda) {
  EXPECT_TRUE(vexp::resolve_device("cpu", "x").is_cpu());
  if (vexp::cuda_available()) {
    EXPECT_TRUE(vexp::resolve_device("auto", "x").is_cuda());
    EXPECT_TRUE(vexp::resolve_device("cuda", "x").is_cuda());
    return;
  }
  EXPECT_TRUE(vexp::resolve_device("auto", "x").is_cpu());
  try {
    vexp::resolve_device("cuda", "r.toml:2:1: [run] device");
    FAIL() << "cuda was accepted without CUDA";
  } catch (const std::runtime_error& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.rfind("r.toml:2:1: [run] device = \"cuda\": ", 0), 0u) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  }
  EXPECT_THROW(vexp::resolve_device("gpu", "x"), std::runtime_error);
}

TEST(DeviceFeeder, CpuPassesBatchesThroughInOrder) {
  vexp::DeviceFeeder f(c10::Device(c10::kCPU));
  EXPECT_TRUE(f.empty());
  at::Tensor a = at::randn({2, 3}), b = at::randn({2, 3});
  f.put({a, at::zeros({2}, at::kLong)});
  f.put({b, at::ones({2}, at::kLong)});
  vexp::Batch x = f.take();
  EXPECT_TRUE(x.clips.is_same(a));  // no copy on the CPU
  EXPECT_TRUE(f.take().clips.is_same(b));
  EXPECT_TRUE(f.empty());
  EXPECT_THROW(f.take(), std::logic_error);
}

}  // namespace

namespace {

// [run] memory_format: 4-D weights become channels-last in place (the same
// parameter objects, same values), a convolution's output and the weight's
// gradient follow, and other tensors (1-D, 2-D, 5-D on the CPU) are untouched.
TEST(MemoryFormat, ChannelsLastRelaysOutConvWeightsInPlace) {
  EXPECT_EQ(vexp::parse_memory_format("auto"), vexp::MemoryFormat::ChannelsLast);
  EXPECT_EQ(vexp::parse_memory_format("channels_last"), vexp::MemoryFormat::ChannelsLast);
  EXPECT_EQ(vexp::parse_memory_format("contiguous"), vexp::MemoryFormat::Contiguous);
  EXPECT_THROW(vexp::parse_memory_format("nhwc"), std::invalid_argument);
  EXPECT_STREQ(vexp::memory_format_name(vexp::MemoryFormat::ChannelsLast), "channels_last");

  at::manual_seed(3);
  at::Tensor w = at::randn({8, 3, 3, 3}).requires_grad_(true);
  at::Tensor b = at::randn({8}).requires_grad_(true);
  at::Tensor fc = at::randn({4, 8}).requires_grad_(true);
  at::Tensor w3 = at::randn({8, 3, 3, 3, 3}).requires_grad_(true);
  const at::Tensor w_before = w.detach().clone(), w3_before = w3.detach().clone();
  at::Tensor alias = w;  // what an optimizer built earlier would hold

  vexp::apply_memory_format({w, b, fc, w3}, vexp::MemoryFormat::Contiguous);
  EXPECT_TRUE(w.is_contiguous());
  // An I3D-like model (5-D weights only) computes NCDHW: what is in effect is contiguous,
  // and the log and summary say so.
  EXPECT_EQ(vexp::apply_memory_format({b, fc, w3}, vexp::MemoryFormat::ChannelsLast), vexp::MemoryFormat::Contiguous);
  EXPECT_EQ(vexp::apply_memory_format({w, b, fc, w3}, vexp::MemoryFormat::ChannelsLast), vexp::MemoryFormat::ChannelsLast);
  EXPECT_FALSE(w.is_contiguous());
  EXPECT_TRUE(w.is_contiguous(at::MemoryFormat::ChannelsLast));
  EXPECT_TRUE(alias.is_contiguous(at::MemoryFormat::ChannelsLast));  // in place: every holder sees it
  EXPECT_TRUE(at::equal(w, w_before));
  EXPECT_TRUE(w.requires_grad() && w.is_leaf());
  EXPECT_TRUE(b.is_contiguous() && fc.is_contiguous());
  EXPECT_TRUE(w3.is_contiguous());  // 5-D weights stay as they are
  EXPECT_TRUE(at::equal(w3, w3_before));

  at::Tensor x = at::randn({2, 3, 9, 9});
  at::Tensor y = at::conv2d(x, w, b, 1, 1);
  EXPECT_TRUE(y.is_contiguous(at::MemoryFormat::ChannelsLast));
  at::Tensor y_ref = at::conv2d(x, w_before, b.detach(), 1, 1);
  EXPECT_TRUE(at::allclose(y, y_ref, 1e-5, 1e-5));
  y.sum().backward();
  EXPECT_TRUE(w.grad().is_contiguous(at::MemoryFormat::ChannelsLast));
}

}  // namespace
