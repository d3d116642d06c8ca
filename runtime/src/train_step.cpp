// One optimizer step of training (train_step.hpp): the trainer's and the
// benchmarks' only copy.
#include "vexp/runtime/train_step.hpp"

#include <chrono>
#include <cmath>
#include <stdexcept>
#include <string>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "seed.hpp"
#include "vexp/comm.hpp"
#include "vexp/dataset.hpp"
#include "vexp/runtime/dist_plan.hpp"
#include "vexp/runtime/exact_sum.hpp"
#include "vexp/runtime/graph.hpp"
#include "vexp/runtime/objective.hpp"
#include "vexp/runtime/optimizer.hpp"
#include "vexp/runtime/reducer.hpp"

namespace vexp {

namespace {
using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Sum over the parameters of |.grad - minus|^2 (minus: none, or one tensor per
// parameter), read back once: each parameter's norm in the gradients' dtype (one
// vectorised pass, no copy), squared and summed in double.
double squared_norm(const std::vector<at::Tensor>& params, const std::vector<at::Tensor>* minus) {
  c10::NoGradGuard no_grad;
  std::vector<at::Tensor> parts;
  parts.reserve(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    const at::Tensor& g = params[i].grad();
    if (!g.defined()) continue;
    parts.push_back(minus && (*minus)[i].defined() ? at::sub(g, (*minus)[i]).norm() : g.norm());
  }
  if (parts.empty()) return 0;
  const at::Tensor n = at::stack(parts).to(at::kDouble);
  return (n * n).sum().item<double>();
}
}  // namespace

TrainStep::TrainStep(StepParts parts, StepOptions options) : parts_(parts), opt_(options) {
  if (!parts_.model || !parts_.optimizer || !parts_.scaler || !parts_.params)
    throw std::logic_error("TrainStep: model, optimizer, scaler and parameters are required");
  if (parts_.reducer && !parts_.comm) throw std::logic_error("TrainStep: a reducer needs its Comm");
  if (opt_.micro < 1 || opt_.accum < 1 || opt_.accum > opt_.micro || opt_.ranks < 1)
    throw std::logic_error("TrainStep: micro-batches " + std::to_string(opt_.micro) + ", accum " +
                           std::to_string(opt_.accum) + ", ranks " + std::to_string(opt_.ranks));
  if (opt_.exact) {
    if (opt_.micro % opt_.accum != 0 || (opt_.micro / opt_.accum) * opt_.ranks != opt_.world)
      throw std::logic_error("TrainStep: exact reduction of " + std::to_string(opt_.micro) + " micro-batches of " +
                             std::to_string(opt_.accum) + " per GPU on " + std::to_string(opt_.ranks) +
                             " rank(s) for a world of " + std::to_string(opt_.world));
    if (opt_.ranks > 1 && !parts_.comm) throw std::logic_error("TrainStep: the exact reduction of ranks needs a Comm");
    if (parts_.reducer) throw std::logic_error("TrainStep: the exact reduction takes no bucketed reducer");
    exact_ = std::make_unique<ExactGradSum>(*parts_.params, opt_.ranks > 1 ? parts_.comm : nullptr, opt_.world,
                                            opt_.micro / opt_.accum, opt_.bucket_mb);
  }
  set_noise_every(opt_.noise_every);
}

void TrainStep::set_noise_every(int64_t n) {
  if (n < 0) throw std::logic_error("TrainStep: noise every " + std::to_string(n) + " steps");
  if (n > 0 && (opt_.micro / opt_.accum) * opt_.ranks < 2)
    throw std::logic_error("TrainStep: the gradient noise scale needs at least two GPUs (ranks or emulated GPUs)");
  if (n > 0 && opt_.ranks > 1 && !parts_.comm) throw std::logic_error("TrainStep: the noise of ranks needs a Comm");
  opt_.noise_every = n;
}

TrainStep::~TrainStep() = default;

StepOptions TrainStep::options_of(const DistPlan& dp, StepOptions base) {
  base.micro = dp.micro;
  base.accum = dp.accum;
  base.ranks = dp.ranks;
  base.world = dp.world;
  base.exact = dp.exact;
  base.bucket_mb = dp.bucket_mb;
  return base;
}

double TrainStep::forward_backward(int64_t global_step, const NextBatch& next, const CheckLoss& check) {
  times_ = StepTimes{};
  const int64_t micro = opt_.micro;
  double loss_sum = 0;
  gpu_loss_.assign(static_cast<size_t>(micro / opt_.accum), 0.0);
  measuring_ = measures(global_step);
  noise_ = NoiseSample{};
  if (measuring_) gpu_sq_.assign(static_cast<size_t>(micro / opt_.accum), 0.0);
  for (int64_t m = 0; m < micro; ++m) {
    // Dropout and other randomness: a function of (seed, step, GPU) only, so a
    // resumed run draws exactly what an uninterrupted one would, and GPU g of
    // an emulated world draws what rank g of a real one does.
    const uint64_t gpu = static_cast<uint64_t>(opt_.rank * micro + m);
    at::manual_seed(mix_seed(mix_seed(opt_.seed ^ 0x5eedULL, static_cast<uint64_t>(global_step)), gpu));
    auto t = Clock::now();
    Batch b = next(m);
    times_.data += since(t);
    t = Clock::now();
    // Mixup, cutmix: drawn from (seed, step, GPU) as well (objective.hpp).
    if (parts_.objective) parts_.objective->transform(b, global_step, static_cast<int64_t>(gpu));
    // On a cluster every GPU's BatchNorm keeps running statistics of its own, and a
    // rank's first GPU's are the ones its checkpoints and evaluations use. A rank
    // that emulates several GPUs computes the others' micro-batches too (those after
    // its first GPU's accum_steps): they leave the statistics as they found them, so
    // that buffers, checkpoints and top-1 equal the real run's on any rank count.
    const bool other_gpu = m >= opt_.accum;
    if (other_gpu) keep_buffers();
    at::Tensor loss;
    {
      AutocastScope autocast(opt_.device.type(), opt_.precision);
      at::Tensor logits = parts_.model->forward(b.clips);
      loss = parts_.objective ? parts_.objective->loss(logits.to(at::kFloat), b)
                              : at::cross_entropy_loss(logits.to(at::kFloat), b.labels);
    }
    double lv = loss.item<double>();  // waits for the forward pass
    times_.forward += since(t);
    if (check) lv = check(m, lv);
    loss_sum += lv;
    gpu_loss_[static_cast<size_t>(m / opt_.accum)] += lv;
    t = Clock::now();
    // Only the last backward communicates; on a measured step none does: the last
    // GPU's own gradient is read after it (reduce() then exchanges them all).
    if (parts_.reducer) parts_.reducer->prepare(m == micro - 1 && !measuring_);
    // The global batch's mean loss: 1/micro for accumulation, 1/ranks for the
    // all-reduce (summed by the reducer, which then needs no averaging pass).
    const double loss_scale = 1.0 / static_cast<double>(micro * opt_.ranks);
    parts_.scaler->scale_loss(loss_scale != 1.0 ? loss * loss_scale : loss).backward();
    // After the backward pass, which reads the statistics batch norm saved.
    if (other_gpu) restore_buffers();
    // The GPU's gradient is complete after its last micro-batch: its squared norm, then
    // (exact reduction) it is set aside.
    if (measuring_ && (m + 1) % opt_.accum == 0) measure_gpu(m / opt_.accum);
    if (exact_ && (m + 1) % opt_.accum == 0) exact_->take(m / opt_.accum);
    if (opt_.sync_phases) device_sync(opt_.device);
    times_.backward += since(t);
  }
  mean_loss_ = loss_sum / static_cast<double>(micro);
  return loss_sum;
}

void TrainStep::reduce(double& loss_sum, bool& stop) {
  // A measured step's last backward launched nothing: the reducer starts every bucket now.
  if (measuring_ && parts_.reducer) parts_.reducer->prepare(true);
  reduce_grads(loss_sum, stop);
  if (measuring_) measure_global();
}

// GPU `gpu` of this rank has finished its micro-batches: |its gradient|^2 (with the
// loss scale and the loss's 1 / (micro x ranks) still in; measure_global takes them out).
void TrainStep::measure_gpu(int64_t gpu) {
  const auto t = Clock::now();
  const std::vector<at::Tensor>& params = *parts_.params;
  const int64_t gpus = opt_.micro / opt_.accum;
  double sq = 0;
  if (exact_ || gpus == 1) {
    sq = squared_norm(params, nullptr);  // .grad holds this GPU's alone (exact: zeroed by take())
  } else {
    // .grad holds the sum of this rank's GPUs so far: this one's is the difference
    // from the copy after the previous GPU.
    sq = squared_norm(params, gpu == 0 ? nullptr : &kept_grads_);
    if (gpu + 1 < gpus) {
      c10::NoGradGuard no_grad;
      if (kept_grads_.size() != params.size()) kept_grads_.assign(params.size(), at::Tensor());
      for (size_t i = 0; i < params.size(); ++i) {
        const at::Tensor& g = params[i].grad();
        if (!g.defined()) continue;
        if (!kept_grads_[i].defined()) kept_grads_[i] = at::empty_like(g);
        kept_grads_[i].copy_(g);
      }
    }
  }
  gpu_sq_[static_cast<size_t>(gpu)] = sq;
  times_.noise += since(t);
}

// After the reduction: |the global gradient|^2, and the GPUs' squared norms gathered
// from every rank and summed in the GPUs' order (rank r's GPU j is GPU r x gpus + j).
void TrainStep::measure_global() {
  const auto t = Clock::now();
  const int64_t gpus = opt_.micro / opt_.accum;
  const int64_t world = gpus * opt_.ranks;
  // .grad = S x (1 / world) x sum of the GPUs' gradients (S: the loss scale), and a
  // GPU's share of it was S / world times its gradient (the mean loss of its accum
  // micro-batches; the step's loss carries 1 / (micro x ranks) = 1 / (accum x world)).
  const double s = parts_.scaler->enabled() ? parts_.scaler->scale() : 1.0;
  const double gpu_factor = static_cast<double>(world) * static_cast<double>(world) / (s * s);
  at::Tensor mine = at::empty({gpus}, at::kDouble);
  for (int64_t g = 0; g < gpus; ++g) mine.data_ptr<double>()[g] = gpu_sq_[static_cast<size_t>(g)];
  const at::Tensor all =
      (opt_.ranks > 1 ? parts_.comm->allgather(mine) : mine.unsqueeze(0)).to(at::kCPU).contiguous();
  double sum = 0;
  const double* v = all.data_ptr<double>();
  for (int64_t i = 0; i < all.numel(); ++i) sum += v[i];
  noise_.measured = true;
  noise_.gpus = world;
  noise_.gpu_sq = sum * gpu_factor / static_cast<double>(world);
  noise_.global_sq = squared_norm(*parts_.params, nullptr) / (s * s);
  noise_.finite = std::isfinite(noise_.gpu_sq) && std::isfinite(noise_.global_sq);
  times_.noise += since(t);
}

void TrainStep::reduce_grads(double& loss_sum, bool& stop) {
  if (exact_) {
    const auto t = Clock::now();
    exact_->finish();
    // Every GPU's loss and the stop flags, summed in the GPUs' order on every rank:
    // the logged loss is the same on any rank count too.
    const int64_t k = static_cast<int64_t>(gpu_loss_.size());
    at::Tensor mine = at::empty({k + 1}, at::kDouble);
    for (int64_t g = 0; g < k; ++g) mine.data_ptr<double>()[g] = gpu_loss_[static_cast<size_t>(g)];
    mine.data_ptr<double>()[k] = stop ? 1.0 : 0.0;
    const at::Tensor all = (opt_.ranks > 1 ? parts_.comm->allgather(mine) : mine.unsqueeze(0)).to(at::kCPU).contiguous();
    double sum = 0;
    bool any_stop = false;
    for (int64_t r = 0; r < all.size(0); ++r) {
      const double* row = all.data_ptr<double>() + r * (k + 1);
      for (int64_t g = 0; g < k; ++g) sum += row[g];
      any_stop = any_stop || row[k] > 0;
    }
    mean_loss_ = sum / static_cast<double>(opt_.world * opt_.accum);
    loss_sum = mean_loss_ * static_cast<double>(opt_.micro);
    stop = any_stop;
    if (opt_.sync_phases) device_sync(opt_.device);
    times_.comm = since(t);
    return;
  }
  if (!parts_.reducer) return;
  const auto t = Clock::now();
  parts_.reducer->finish();
  // The step's loss is the mean over all GPUs; the stop flag rides along
  // (non-zero when any rank was asked to stop).
  at::Tensor l = at::empty({2}, at::kDouble);
  l.data_ptr<double>()[0] = loss_sum;
  l.data_ptr<double>()[1] = stop ? 1.0 : 0.0;
  parts_.comm->allreduce(l, ReduceOp::Avg);
  loss_sum = l.data_ptr<double>()[0];
  stop = l.data_ptr<double>()[1] > 0;
  mean_loss_ = loss_sum / static_cast<double>(opt_.micro);
  if (opt_.sync_phases) device_sync(opt_.device);
  times_.comm = since(t);
}

bool TrainStep::update(double lr) {
  const auto t = Clock::now();
  // fp16: gradients back to their true size; a step with an inf / NaN among
  // them is skipped and the loss scale backs off (every rank sees the same
  // reduced gradients, so every rank decides alike).
  const std::vector<at::Tensor>& params = *parts_.params;
  const bool finite = parts_.scaler->unscale(params);
  if (finite && opt_.clip_grad_norm > 0) clip_grad_norm(params, opt_.clip_grad_norm);
  if (finite) {
    c10::NoGradGuard no_grad;
    parts_.optimizer->step(lr);
  }
  parts_.scaler->update(finite);
  zero_grad(params);
  if (opt_.sync_phases) device_sync(opt_.device);
  times_.optimizer = since(t);
  return finite;
}

double TrainStep::run(int64_t global_step, double lr, const NextBatch& next, const CheckLoss& check) {
  double loss_sum = forward_backward(global_step, next, check);
  bool stop = false;
  reduce(loss_sum, stop);
  update(lr);
  return mean_loss_;
}

// The model's buffers (BatchNorm running statistics and counts) copied aside,
// into storage kept for the run, and put back.
void TrainStep::keep_buffers() {
  c10::NoGradGuard no_grad;
  if (buffers_.empty()) {
    buffers_ = parts_.model->buffers(true);
    for (const at::Tensor& b : buffers_) kept_buffers_.push_back(b.clone());
    return;
  }
  for (size_t i = 0; i < buffers_.size(); ++i) kept_buffers_[i].copy_(buffers_[i]);
}

void TrainStep::restore_buffers() {
  c10::NoGradGuard no_grad;
  for (size_t i = 0; i < buffers_.size(); ++i) buffers_[i].copy_(kept_buffers_[i]);
}

std::unique_ptr<Loader> stream_loader(const Dataset& data, const DistPlan& dp, int rank, int64_t ranks,
                                      uint64_t seed, int64_t first, int64_t end, const LoaderOptions& lo) {
  const DistributedSampler sampler(dp.train_size, rank, ranks, dp.per_gpu, dp.micro, seed);
  DistributedSampler::Batches b = sampler.steps(first, end);
  std::vector<std::vector<uint64_t>> seeds(b.epochs.size());
  for (size_t i = 0; i < b.epochs.size(); ++i)
    for (int64_t e : b.epochs[i]) seeds[i].push_back(mix_seed(seed, static_cast<uint64_t>(e)));
  return std::make_unique<Loader>(data, std::move(b.indices), std::move(seeds), lo);
}

}  // namespace vexp
