#include "vexp/runtime/exact_sum.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "vexp/comm.hpp"

namespace vexp {

namespace {
// Bits of an int64 a GPU's value and the sum of W of them may use (one spare: the
// sign and the rounding of the last bit never reach 2^63).
constexpr int kSumBits = 62;

int ceil_log2(int64_t n) {
  int b = 0;
  while ((int64_t{1} << b) < n) ++b;
  return b;
}
}  // namespace

int ExactGradSum::grid_exponent(float max, int64_t world) {
  int e = 0;
  std::frexp(static_cast<double>(max), &e);  // max = f x 2^e, 0.5 <= f < 1: max < 2^e
  return e + ceil_log2(world) - kSumBits;    // |g| / q < 2^(62 - ceil(log2 W)): W of them < 2^62
}

ExactGradSum::ExactGradSum(std::vector<at::Tensor> params, Comm* comm, int64_t world, int64_t gpus, double bucket_mb)
    : params_(std::move(params)), comm_(comm), world_(world), gpus_(gpus) {
  if (world_ < 1 || gpus_ < 1 || world_ % gpus_ != 0)
    throw std::logic_error("ExactGradSum: " + std::to_string(gpus_) + " GPUs per rank of a world of " +
                           std::to_string(world_));
  if (comm_ && comm_->size() * gpus_ != world_)
    throw std::logic_error("ExactGradSum: " + std::to_string(comm_->size()) + " ranks x " + std::to_string(gpus_) +
                           " GPUs is not the world of " + std::to_string(world_));
  for (const auto& p : params_) {
    if (p.scalar_type() != at::kFloat)
      throw std::invalid_argument("exact reduction: parameters must be float32, got " +
                                  std::string(c10::toString(p.scalar_type())));
    offsets_.push_back(numel_);
    numel_ += p.numel();
  }
  chunk_ = std::max<int64_t>(1, static_cast<int64_t>(bucket_mb * 1024 * 1024 / 8));
  const at::TensorOptions f = params_.empty() ? at::TensorOptions().dtype(at::kFloat)
                                              : params_.front().options().dtype(at::kFloat);
  for (int64_t g = 0; g < gpus_; ++g) taken_.push_back(at::zeros({numel_}, f));
  have_.assign(static_cast<size_t>(gpus_), false);
}

void ExactGradSum::take(int64_t gpu) {
  if (gpu < 0 || gpu >= gpus_) throw std::logic_error("ExactGradSum::take: GPU " + std::to_string(gpu));
  c10::NoGradGuard no_grad;
  at::Tensor& flat = taken_[static_cast<size_t>(gpu)];
  for (size_t k = 0; k < params_.size(); ++k) {
    at::Tensor& p = params_[k];
    at::Tensor dst = flat.narrow(0, offsets_[k], p.numel());
    const at::Tensor& g = p.grad();
    if (g.defined()) {
      dst.view(p.sizes()).copy_(g);
      p.mutable_grad().zero_();  // in place: a bucket view stays one
    } else {
      dst.zero_();
    }
  }
  have_[static_cast<size_t>(gpu)] = true;
}

void ExactGradSum::finish() {
  c10::NoGradGuard no_grad;
  for (int64_t g = 0; g < gpus_; ++g)
    if (!have_[static_cast<size_t>(g)]) throw std::logic_error("ExactGradSum::finish: GPU " + std::to_string(g) + " not taken");
  const size_t n = params_.size();
  if (n == 0) return;
  // 2. The largest magnitude of each parameter's gradient over every GPU of the world
  // (a NaN counts as +inf: max is exact and order-free, NaN comparisons are not).
  at::Tensor maxes;
  for (const auto& flat : taken_) {
    std::vector<at::Tensor> per;
    per.reserve(n);
    for (size_t k = 0; k < n; ++k) per.push_back(flat.narrow(0, offsets_[k], params_[k].numel()).abs().amax());
    at::Tensor m = at::stack(per);
    maxes = maxes.defined() ? at::maximum(maxes, m) : m;
  }
  maxes = at::nan_to_num(maxes, std::numeric_limits<float>::infinity());
  if (comm_ && comm_->size() > 1) comm_->allreduce(maxes, ReduceOp::Max);
  const at::Tensor host = maxes.to(at::kCPU).contiguous();
  const float* mx = host.data_ptr<float>();

  // 3. Each GPU's values on its parameter's grid, summed as integers (exact).
  at::Tensor acc = at::zeros({numel_}, taken_.front().options().dtype(at::kLong));
  for (size_t k = 0; k < n; ++k) {
    if (!(mx[k] > 0) || !std::isfinite(mx[k])) continue;  // all zero, or non-finite (step 4)
    const double to_grid = std::ldexp(1.0, -grid_exponent(mx[k], world_));
    at::Tensor sum = acc.narrow(0, offsets_[k], params_[k].numel());
    for (const auto& flat : taken_)
      sum.add_(at::round(flat.narrow(0, offsets_[k], params_[k].numel()).to(at::kDouble).mul_(to_grid)).to(at::kLong));
  }
  if (comm_ && comm_->size() > 1) {
    std::vector<std::shared_ptr<Work>> work;
    for (int64_t off = 0; off < numel_; off += chunk_)
      work.push_back(comm_->allreduce_async(acc.narrow(0, off, std::min(chunk_, numel_ - off)), ReduceOp::Sum));
    for (auto& w : work) w->wait();
  }

  // 4. Back to float32: the integer sum x q, rounded once.
  for (size_t k = 0; k < n; ++k) {
    at::Tensor& p = params_[k];
    if (!p.grad().defined()) p.mutable_grad() = at::zeros_like(p);
    at::Tensor& grad = p.mutable_grad();
    if (!std::isfinite(mx[k])) {
      grad.fill_(std::numeric_limits<float>::quiet_NaN());
      continue;
    }
    if (!(mx[k] > 0)) {
      grad.zero_();
      continue;
    }
    const double q = std::ldexp(1.0, grid_exponent(mx[k], world_));
    grad.copy_(acc.narrow(0, offsets_[k], p.numel()).to(at::kDouble).mul_(q).to(at::kFloat).view(p.sizes()));
  }
  std::fill(have_.begin(), have_.end(), false);
}

}  // namespace vexp
