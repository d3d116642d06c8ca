#include "vexp/runtime/reducer.hpp"

#include "vexp/base/error.hpp"
#include "vexp/runtime/buckets.hpp"

#include <stdexcept>

#include <functional>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

namespace vexp {

namespace {
uint64_t fnv1a(const std::string& s, uint64_t h = 1469598103934665603ULL) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}
}  // namespace

namespace {
// Runs after a parameter's AccumulateGrad node has written .grad.
struct ReadyHook final : torch::autograd::FunctionPostHook {
  std::function<void()> fn;
  explicit ReadyHook(std::function<void()> f) : fn(std::move(f)) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list& /*inputs*/) override {
    fn();
    return outputs;
  }
};
}  // namespace

Reducer::Reducer(std::vector<at::Tensor> params, std::shared_ptr<Comm> comm, ReducerOptions options)
    : params_(std::move(params)), comm_(std::move(comm)), options_(options) {
  if (!comm_) throw std::invalid_argument("reducer: no communicator");
  at::ScalarType wire = at::kFloat;
  if (options.compression == "fp16") wire = at::kHalf;
  else if (options.compression == "bf16") wire = at::kBFloat16;
  else if (options.compression != "none")
    throw std::invalid_argument("reducer: unknown compression '" + options.compression + "' (none, fp16, bf16)");
  for (const auto& p : params_) {
    if (p.scalar_type() != at::kFloat)
      throw std::invalid_argument("reducer: parameters must be float32, got " + std::string(c10::toString(p.scalar_type())));
    if (!p.is_leaf() || !p.requires_grad())
      throw std::invalid_argument("reducer: parameters must be leaf tensors that require grad");
  }
  const int64_t elem = wire_bytes_per_element(options.compression);
  std::vector<int64_t> numels;
  for (const auto& p : params_) numels.push_back(p.numel());
  where_.resize(params_.size());
  // Reverse registration order: the last layers' gradients are ready first (buckets.hpp).
  for (auto& members : bucket_layout(numels, elem, options.bucket_mb)) {
    Bucket b;
    int64_t elems = 0;
    for (size_t k : members) {
      where_[k] = {buckets_.size(), b.members.size()};
      b.members.push_back(k);
      b.offsets.push_back(elems);
      elems += numels[k];
    }
    b.buffer = at::zeros({elems}, params_[b.members.front()].options().dtype(wire));
    b.views = wire == at::kFloat;
    buckets_.push_back(std::move(b));
  }
  seen_.assign(params_.size(), false);

  // Each parameter's slice of its bucket, with the parameter's own strides when
  // it is dense (channels-last weights keep channels-last gradients).
  c10::NoGradGuard no_grad;
  views_.resize(params_.size());
  for (size_t k = 0; k < params_.size(); ++k) {
    const auto [bi, slot] = where_[k];
    const Bucket& b = buckets_[bi];
    at::Tensor& p = params_[k];
    const int64_t off = b.offsets[slot];
    views_[k] = p.is_non_overlapping_and_dense() ? b.buffer.as_strided(p.sizes(), p.strides(), off)
                                                 : b.buffer.narrow(0, off, p.numel()).view(p.sizes());
    if (!b.views) continue;
    if (p.grad().defined()) views_[k].copy_(p.grad());
    p.mutable_grad() = views_[k];
  }
  for (size_t k = 0; k < params_.size(); ++k) {
    accumulators_.push_back(torch::autograd::impl::grad_accumulator(params_[k]));
    if (!accumulators_.back()) throw std::invalid_argument("reducer: a parameter has no gradient accumulator");
    hook_keys_.push_back(accumulators_.back()->add_post_hook(std::make_unique<ReadyHook>([this, k] { on_ready(k); })));
  }
}

Reducer::~Reducer() {
  for (size_t k = 0; k < accumulators_.size(); ++k) accumulators_[k]->del_post_hook(hook_keys_[k]);
  for (auto& b : buckets_)
    if (b.work) {
      try {
        b.work->wait();
      } catch (...) {
      }
    }
}

std::vector<std::vector<size_t>> Reducer::bucket_members() const {
  std::vector<std::vector<size_t>> out;
  for (const auto& b : buckets_) out.push_back(b.members);
  return out;
}

bool Reducer::grad_is_bucket_view(size_t k) const {
  const at::Tensor& g = params_.at(k).grad();
  return buckets_[where_[k].first].views && g.defined() && g.is_same(views_[k]);
}

void Reducer::prepare(bool sync) {
  std::lock_guard<std::mutex> lock(mu_);
  sync_ = sync;
  if (!sync) return;
  next_launch_ = 0;
  std::fill(seen_.begin(), seen_.end(), false);
  for (auto& b : buckets_) {
    b.pending = b.members.size();
    b.launched = false;
    b.work.reset();
  }
  stats_ = StepStats{};
  stats_.buckets = static_cast<int64_t>(buckets_.size());
}

void Reducer::pack(size_t k) {
  c10::NoGradGuard no_grad;
  at::Tensor& p = params_[k];
  const at::Tensor& g = p.grad();
  if (buckets_[where_[k].first].views) {
    if (g.defined() && g.is_same(views_[k])) return;  // autograd wrote into the bucket
    ++stats_.rebound;
    if (g.defined()) views_[k].copy_(g);
    else views_[k].zero_();
    p.mutable_grad() = views_[k];
  } else if (g.defined()) {
    views_[k].copy_(g);  // cast to the wire format
  } else {
    views_[k].zero_();
  }
}

void Reducer::on_ready(size_t k) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!sync_ || seen_[k]) return;
  seen_[k] = true;
  pack(k);
  Bucket& b = buckets_[where_[k].first];
  if (--b.pending == 0) launch_ready(true);
}

void Reducer::launch_ready(bool from_hook) {
  while (next_launch_ < buckets_.size() && buckets_[next_launch_].pending == 0) {
    Bucket& b = buckets_[next_launch_++];
    b.launched = true;
    stats_.launch.push_back(Clock::now());
    if (from_hook) ++stats_.launched_in_backward;
    b.work = comm_->allreduce_async(b.buffer, ReduceOp::Sum);
  }
}

void Reducer::finish() {
  std::unique_lock<std::mutex> lock(mu_);
  if (!sync_) return;
  stats_.backward_end = Clock::now();
  c10::NoGradGuard no_grad;
  // Parameters that got no gradient this step (unused branches): their current
  // .grad, or zeros, so every rank contributes the same layout.
  for (size_t k = 0; k < params_.size(); ++k) {
    if (seen_[k]) continue;
    seen_[k] = true;
    pack(k);
    --buckets_[where_[k].first].pending;
  }
  launch_ready(false);
  const auto t0 = Clock::now();
  for (auto& b : buckets_) b.work->wait();
  stats_.wait_s = std::chrono::duration<double>(Clock::now() - t0).count();
  const double inv = 1.0 / static_cast<double>(comm_->size());
  for (auto& b : buckets_) {
    if (b.views) {
      if (!options_.prescaled) b.buffer.mul_(inv);
      continue;
    }
    for (size_t s = 0; s < b.members.size(); ++s) {
      const size_t k = b.members[s];
      at::Tensor& p = params_[k];
      if (!p.grad().defined()) p.mutable_grad() = at::empty_like(p);
      if (options_.prescaled) p.mutable_grad().copy_(views_[k]);
      else at::mul_out(p.mutable_grad(), views_[k].to(at::kFloat), inv);
    }
  }
  sync_ = false;
}

void broadcast_from_rank0(Comm& comm, const std::vector<at::Tensor>& tensors) {
  c10::NoGradGuard no_grad;
  for (const auto& t : tensors) {
    at::Tensor c = t.contiguous();
    comm.broadcast(c, 0);
    if (!c.is_same(t)) const_cast<at::Tensor&>(t).copy_(c);
  }
}

void check_same_model(Comm& comm, const std::string& recipe_hash,
                      const std::vector<std::pair<std::string, at::Tensor>>& named_params) {
  std::string shapes;
  for (const auto& [name, t] : named_params) {
    shapes += name + "[";
    for (auto s : t.sizes()) shapes += std::to_string(s) + ",";
    shapes += "];";
  }
  // Hashes as two int64 each (bit patterns; compared for equality only).
  at::Tensor mine = at::empty({2}, at::kLong);
  mine[0] = static_cast<int64_t>(fnv1a(recipe_hash) >> 1);
  mine[1] = static_cast<int64_t>(fnv1a(shapes) >> 1);
  at::Tensor all = comm.allgather(mine);  // [size, 2]
  for (int64_t r = 1; r < all.size(0); ++r) {
    if (all[r][0].item<int64_t>() != all[0][0].item<int64_t>())
      throw base::failure("rank " + std::to_string(r) + " runs a different recipe than rank 0 (recipe hash " +
                               "differs; rank " + std::to_string(comm.rank()) + " has " + recipe_hash +
                               "): launch every rank with the same recipe and --set values");
    if (all[r][1].item<int64_t>() != all[0][1].item<int64_t>())
      throw base::failure("rank " + std::to_string(r) +
                               " built a model whose parameter names or shapes differ from rank 0's");
  }
}

}  // namespace vexp
