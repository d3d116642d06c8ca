#include "vexp/runtime/dist_plan.hpp"

#include <cmath>
#include <cstdio>
#include <sstream>
#include <stdexcept>

namespace vexp {

double scaled_lr(const dsl::OptimConfig& o, int64_t global_batch) {
  const double base = o.base_lr;
  if (base <= 0) return o.lr;
  const double ratio = static_cast<double>(global_batch) / static_cast<double>(o.base_batch);
  const std::string& how = o.lr_scaling;
  if (how == "linear") return base * ratio;
  if (how == "sqrt") return base * std::sqrt(ratio);
  return base;
}

std::optional<int64_t> global_batch_of(const dsl::DistConfig& d) {
  int64_t g = 0;
  if (__builtin_mul_overflow(d.world_size, d.batch_per_gpu, &g) || __builtin_mul_overflow(g, d.accum_steps, &g))
    return std::nullopt;
  return g;
}

DistPlan make_dist_plan(const dsl::RecipePlan& plan, int64_t ranks, int64_t train_size, int64_t grad_params) {
  const dsl::DistConfig& d = plan.dist;
  const dsl::OptimConfig& o = plan.optim;
  const dsl::ScheduleConfig& sc = plan.schedule;
  DistPlan p;
  p.world = d.world_size;
  p.ranks = ranks;
  p.per_gpu = d.batch_per_gpu;
  p.accum = d.accum_steps;
  if (ranks < 1 || p.world % ranks != 0)
    throw std::runtime_error("dist.world_size = " + std::to_string(p.world) + " is not a multiple of the " +
                             std::to_string(ranks) + " ranks launched");
  p.micro = (p.world / ranks) * p.accum;
  const std::optional<int64_t> global = global_batch_of(d);
  if (!global)
    throw std::runtime_error("the global batch (dist.world_size x batch_per_gpu x accum_steps) does not fit in 64 bits");
  p.global_batch = *global;
  p.frames = plan.data_facts.clip.empty() ? 0 : plan.data_facts.clip[0];
  p.train_size = train_size;
  p.steps_per_epoch = train_size / p.global_batch;
  if (p.steps_per_epoch < 1)
    throw std::runtime_error("the training split has " + std::to_string(train_size) +
                             " clips, fewer than one global batch of " + std::to_string(p.global_batch));
  p.epochs = plan.run.epochs;
  p.total_steps = p.steps_per_epoch * p.epochs;
  p.scaled = o.base_lr > 0;
  p.base_lr = o.base_lr;
  p.base_batch = o.base_batch;
  p.lr_scaling = o.lr_scaling;
  p.lr = scaled_lr(o, p.global_batch);

  LrSchedule& s = p.schedule;
  s.type = sc.type;
  s.base_lr = p.lr;
  s.min_lr = sc.min_lr;
  s.warmup_start = sc.warmup_start;
  s.warmup_steps = static_cast<int64_t>(std::llround(sc.warmup_epochs * static_cast<double>(p.steps_per_epoch)));
  s.steps_per_epoch = p.steps_per_epoch;
  s.total_steps = p.total_steps;
  s.milestones = sc.milestones;
  s.gamma = sc.gamma;
  for (int64_t m : s.milestones) p.milestone_steps.push_back(m * p.steps_per_epoch);

  p.compression = d.compression;
  p.grad_params = grad_params;
  p.grad_bytes = grad_params * (p.compression == "none" ? 4 : 2);
  const double bucket_bytes = d.bucket_mb * 1024.0 * 1024.0;
  p.buckets = grad_params > 0 ? static_cast<int64_t>(std::ceil(static_cast<double>(p.grad_bytes) / bucket_bytes)) : 0;
  return p;
}

std::string describe(const DistPlan& p) {
  std::ostringstream out;
  char buf[512];
  auto line = [&](const char* fmt, auto... args) {
    std::snprintf(buf, sizeof buf, fmt, args...);
    out << buf << "\n";
  };
  line("world size:        %lld GPUs (ranks launched: %lld)", (long long)p.world, (long long)p.ranks);
  if (p.world > p.ranks)
    line("emulation:         %lld GPUs on %lld rank(s), %lld micro-batches per rank per step", (long long)p.world,
         (long long)p.ranks, (long long)p.micro);
  line("accumulation:      %lld micro-batch(es) of %lld clips per GPU per step", (long long)p.accum, (long long)p.per_gpu);
  if (p.frames > 0)
    line("global batch:      %lld clips, %lld frames", (long long)p.global_batch, (long long)(p.global_batch * p.frames));
  else
    line("global batch:      %lld clips", (long long)p.global_batch);
  line("training clips:    %lld", (long long)p.train_size);
  line("steps per epoch:   %lld (%lld epochs, %lld steps)", (long long)p.steps_per_epoch, (long long)p.epochs,
       (long long)p.total_steps);
  if (p.scaled)
    line("learning rate:     %.6g (base_lr %.6g at %lld clips, %s scaling x%.6g)", p.lr, p.base_lr,
         (long long)p.base_batch, p.lr_scaling.c_str(), p.lr / p.base_lr);
  else
    line("learning rate:     %.6g (optim.lr, not scaled)", p.lr);
  const LrSchedule& s = p.schedule;
  line("warmup:            %lld steps from %.6g to %.6g", (long long)s.warmup_steps, s.base_lr * s.warmup_start, s.base_lr);
  if (s.type == "step") {
    std::string ms;
    for (size_t i = 0; i < p.milestone_steps.size(); ++i)
      ms += (i ? ", " : "") + std::to_string(p.milestone_steps[i]);
    line("decay:             step, x%.6g at steps [%s]", s.gamma, ms.c_str());
  } else if (s.type == "cosine") {
    line("decay:             cosine over steps %lld..%lld to %.6g", (long long)s.warmup_steps, (long long)s.total_steps,
         s.min_lr);
  } else {
    line("decay:             none (constant)");
  }
  if (p.grad_params > 0)
    line("gradient traffic:  %lld parameters, %.2f MB per step per rank (%s wire), %lld bucket(s)",
         (long long)p.grad_params, static_cast<double>(p.grad_bytes) / 1e6,
         p.compression == "none" ? "fp32" : p.compression.c_str(), (long long)p.buckets);
  return out.str();
}

}  // namespace vexp
