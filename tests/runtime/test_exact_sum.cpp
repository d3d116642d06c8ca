// dist.reduction = "exact" (runtime/exact_sum.hpp): the GPUs' gradients rounded once
// onto a power-of-two grid and summed as integers. The rank-count equality itself is
// tested with mpirun at 1, 2, 4 and 8 ranks (tests/dist: dist.exact_any_rank_count).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include <ATen/ATen.h>
#include <torch/csrc/autograd/variable.h>

#include "vexp/runtime/exact_sum.hpp"

using vexp::ExactGradSum;

namespace {
at::Tensor param(std::vector<int64_t> sizes) { return at::zeros(sizes).set_requires_grad(true); }
}  // namespace

TEST(ExactGradSum, GridLeavesRoomForTheWholeWorld) {
  // max = 1.0 = 0.5 x 2^1; W = 8: 3 bits for the sum, so q = 2^(1 + 3 - 62).
  EXPECT_EQ(ExactGradSum::grid_exponent(1.0f, 8), -58);
  EXPECT_EQ(ExactGradSum::grid_exponent(0.75f, 1), 0 + 0 - 62);
  EXPECT_EQ(ExactGradSum::grid_exponent(3.0f, 1536), 2 + 11 - 62);
  // The largest value of W GPUs, all at the max, fits in an int64.
  const float m = 0.999f;
  const double per = m / std::ldexp(1.0, ExactGradSum::grid_exponent(m, 2048));
  EXPECT_LT(per * 2048, std::ldexp(1.0, 62));
}

TEST(ExactGradSum, SumsTheGpusToWithinOneRoundingOfTheTrueSum) {
  at::manual_seed(3);
  std::vector<at::Tensor> params{param({4, 3}), param({5})};
  const int64_t gpus = 8;
  std::vector<std::vector<at::Tensor>> grads(gpus);
  for (int64_t g = 0; g < gpus; ++g)
    for (auto& p : params) grads[g].push_back(at::randn(p.sizes()) * std::pow(10.0, static_cast<double>(g % 3) - 1));
  auto exact_sum = [&](const std::vector<int64_t>& order) {
    ExactGradSum s(params, nullptr, gpus, gpus, 25);
    for (int64_t slot = 0; slot < gpus; ++slot) {
      for (size_t k = 0; k < params.size(); ++k) params[k].mutable_grad() = grads[order[slot]][k].clone();
      s.take(slot);
      for (auto& p : params) EXPECT_EQ(p.grad().abs().max().item<float>(), 0.0f);  // zeroed for the next GPU
    }
    s.finish();
    std::vector<at::Tensor> out;
    for (auto& p : params) out.push_back(p.grad().clone());
    return out;
  };
  const auto a = exact_sum({0, 1, 2, 3, 4, 5, 6, 7});
  const auto b = exact_sum({7, 3, 5, 1, 0, 6, 2, 4});  // another order: the same bits
  for (size_t k = 0; k < params.size(); ++k) {
    EXPECT_TRUE(at::equal(a[k], b[k]));
    at::Tensor truth = at::zeros(params[k].sizes(), at::kDouble);
    for (int64_t g = 0; g < gpus; ++g) truth += grads[g][k].to(at::kDouble);
    const double err = (a[k].to(at::kDouble) - truth).abs().max().item<double>();
    const double scale = truth.abs().max().item<double>();
    EXPECT_LE(err, scale * std::ldexp(1.0, -23)) << "parameter " << k;  // float32's own rounding
  }
}

TEST(ExactGradSum, ANonFiniteGradientMakesItsParameterNonFiniteOnly) {
  std::vector<at::Tensor> params{param({3}), param({2})};
  ExactGradSum s(params, nullptr, 2, 2, 25);
  params[0].mutable_grad() = at::tensor({1.0f, std::numeric_limits<float>::quiet_NaN(), 2.0f});
  params[1].mutable_grad() = at::tensor({1.0f, -1.0f});
  s.take(0);
  params[0].mutable_grad() = at::tensor({1.0f, 1.0f, 1.0f});
  params[1].mutable_grad() = at::tensor({0.5f, 0.25f});
  s.take(1);
  s.finish();
  EXPECT_TRUE(at::isnan(params[0].grad()).all().item<bool>());
  EXPECT_TRUE(at::equal(params[1].grad(), at::tensor({1.5f, -0.75f})));
}

TEST(ExactGradSum, ParametersWithoutGradientsSumToZero) {
  std::vector<at::Tensor> params{param({2})};
  ExactGradSum s(params, nullptr, 2, 2, 25);
  s.take(0);
  s.take(1);
  s.finish();
  EXPECT_TRUE(at::equal(params[0].grad(), at::zeros({2})));
  EXPECT_THROW(s.finish(), std::logic_error);  // a GPU not taken since
}
