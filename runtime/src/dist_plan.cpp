#include "vexp/runtime/dist_plan.hpp"

#include "vexp/base/error.hpp"
#include "vexp/runtime/buckets.hpp"

#include <algorithm>
#include <climits>
#include <cstdint>
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

std::string batch_fit_problem(const dsl::DistConfig& dist, int64_t train_size) {
  const std::optional<int64_t> global = global_batch_of(dist);  // nullopt: past 2^63 - 1
  if (global && *global <= train_size) return "";
  return "the training split has " + std::to_string(train_size) + " clips, fewer than one global batch of " +
         (global ? std::to_string(*global) : std::string("more than 9e18")) + " (dist.world_size " +
         std::to_string(dist.world_size) + " x batch_per_gpu " + std::to_string(dist.batch_per_gpu) +
         " x accum_steps " + std::to_string(dist.accum_steps) + "): " + batch_fit_fix(dist, train_size);
}

// What to change: the data (a root or list with the full split) or the batch (the
// largest world size whose batch the split holds, else batch_per_gpu).
std::string batch_fit_fix(const dsl::DistConfig& dist, int64_t train_size) {
  std::string fix = "give data with at least one global batch of training clips (data.root or the lists)";
  const int64_t per_world = dist.batch_per_gpu > 0 && dist.accum_steps > 0 && dist.batch_per_gpu <= INT64_MAX / dist.accum_steps
                                ? dist.batch_per_gpu * dist.accum_steps
                                : 0;
  if (per_world > 0 && train_size >= per_world)
    fix += ", or a smaller world (--set dist.world_size=" + std::to_string(train_size / per_world) + " or less)";
  else if (train_size > 0)
    fix += ", or a smaller batch (--set dist.world_size=1 --set dist.accum_steps=1 --set dist.batch_per_gpu=" +
           std::to_string(train_size) + " or less)";
  return fix;
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
    throw base::failure("dist.world_size = " + std::to_string(p.world) + " is not a multiple of the " +
                             std::to_string(ranks) + " ranks launched");
  p.micro = (p.world / ranks) * p.accum;
  const std::optional<int64_t> global = global_batch_of(d);
  if (!global)
    throw base::failure("the global batch (dist.world_size x batch_per_gpu x accum_steps) does not fit in 64 bits");
  p.global_batch = *global;
  p.frames = plan.data_facts.clip.empty() ? 0 : plan.data_facts.clip[0];
  p.train_size = train_size;
  if (const std::string why = batch_fit_problem(d, train_size); !why.empty()) throw base::failure(why);
  p.epochs = plan.run.epochs;
  // Stream positions run to (epochs + 1) x N at most (the last step's fill).
  int64_t end = 0;
  if (__builtin_mul_overflow(p.epochs + 1, train_size, &end) || __builtin_add_overflow(end, p.global_batch, &end))
    throw base::failure("run.epochs x the " + std::to_string(train_size) +
                             " training clips does not fit in 64 bits");
  p.stream = SampleStream{train_size, p.global_batch};
  p.total_steps = p.stream.first_step(p.epochs);
  p.total_clips = p.total_steps * p.global_batch;
  p.fill_clips = p.total_clips - p.epochs * train_size;
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
  s.warmup_epochs = sc.warmup_epochs;
  s.epochs = p.epochs;
  s.milestones = sc.milestones;
  s.gamma = sc.gamma;
  s.stream = p.stream;
  // A milestone past the last epoch is never reached: its step is total_steps.
  for (int64_t m : s.milestones) p.milestone_steps.push_back(p.stream.first_step(std::clamp<int64_t>(m, 0, p.epochs)));

  p.compression = d.compression;
  p.reduction = d.reduction;
  p.exact = d.reduction == "exact";
  p.bucket_mb = d.bucket_mb;
  p.grad_params = grad_params;
  // The exact reduction sends 64-bit integers (exact_sum.hpp).
  p.grad_bytes = grad_params * (p.exact ? 8 : wire_bytes_per_element(p.compression));
  const double bucket_bytes = d.bucket_mb * 1024.0 * 1024.0;
  p.buckets = grad_params > 0 ? static_cast<int64_t>(std::ceil(static_cast<double>(p.grad_bytes) / bucket_bytes)) : 0;
  return p;
}

DistPlan make_dist_plan(const dsl::RecipePlan& plan, int64_t ranks, int64_t train_size,
                        const std::vector<int64_t>& grad_numels) {
  int64_t params = 0;
  for (int64_t n : grad_numels) params += n;
  DistPlan p = make_dist_plan(plan, ranks, train_size, params);
  if (params > 0)
    p.buckets = static_cast<int64_t>(
        bucket_layout(grad_numels, wire_bytes_per_element(p.compression), plan.dist.bucket_mb).size());
  return p;
}

namespace {

// "epoch 1 = 0-19, 2 = 20-39, 3 = 40-58, ..., 50 = 959-978": each epoch's steps.
std::string epoch_ranges(const SampleStream& st, int64_t epochs) {
  std::string out;
  auto add = [&](int64_t e) {
    out += (out.empty() ? "epoch " : ", ") + std::to_string(e + 1) + " = " + std::to_string(st.first_step(e)) + "-" +
           std::to_string(st.first_step(e + 1) - 1);
  };
  for (int64_t e = 0; e < epochs && e < 3; ++e) add(e);
  if (epochs > 4) out += ", ...";
  if (epochs > 3) add(epochs - 1);
  return out;
}

}  // namespace

std::string steps_per_epoch_text(const DistPlan& p) {
  char buf[160];
  const long long n = p.train_size, g = p.global_batch;
  if (n % g == 0) {
    std::snprintf(buf, sizeof buf, "%lld/%lld = %lld", n, g, n / g);
  } else {
    std::snprintf(buf, sizeof buf, "%lld/%lld = %.2f, %lld or %lld", n, g, static_cast<double>(n) / static_cast<double>(g),
                  n / g, n / g + 1);
  }
  return buf;
}

std::string reduction_text(const DistPlan& p) {
  if (p.exact)
    return "exact: the GPUs' gradients summed as integers in an order of the GPUs, bit-identical on any rank count "
           "that divides the world";
  if (p.world == 1) return "fast (one GPU: nothing to sum)";
  return "fast: the backend's allreduce overlapping backward; the sum's rounding depends on the rank count, so a run "
         "resumed or repeated on another number of ranks differs in the last bits (dist.reduction = \"exact\" makes "
         "it bit-identical)";
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
  const SampleStream& st = p.stream;
  line("training clips:    %lld per epoch, each seen once per epoch (none dropped)", (long long)p.train_size);
  line("steps per epoch:   %s (steps from 0: %s)", steps_per_epoch_text(p).c_str(), epoch_ranges(st, p.epochs).c_str());
  if (p.fill_clips > 0)
    line("total:             %lld steps, %lld clips = %lld epochs x %lld + %lld of the next shuffle filling the last step",
         (long long)p.total_steps, (long long)p.total_clips, (long long)p.epochs, (long long)p.train_size,
         (long long)p.fill_clips);
  else
    line("total:             %lld steps, %lld clips = %lld epochs x %lld", (long long)p.total_steps,
         (long long)p.total_clips, (long long)p.epochs, (long long)p.train_size);
  if (p.scaled)
    line("learning rate:     %.6g (base_lr %.6g at %lld clips, %s scaling x%.6g)", p.lr, p.base_lr,
         (long long)p.base_batch, p.lr_scaling.c_str(), p.lr / p.base_lr);
  else
    line("learning rate:     %.6g (optim.lr, not scaled)", p.lr);
  const LrSchedule& s = p.schedule;
  const int64_t warmup = s.warmup_steps();
  if (warmup > 0)
    line("warmup:            %lld steps (%.6g epochs of clips) from %.6g to %.6g", (long long)warmup, s.warmup_epochs,
         s.base_lr * s.warmup_start, s.base_lr);
  else
    line("warmup:            none");
  if (s.type == "step") {
    std::string ms, es;
    for (size_t i = 0; i < p.milestone_steps.size(); ++i) {
      ms += (i ? ", " : "") + std::to_string(p.milestone_steps[i]);
      es += (i ? ", " : "") + std::to_string(s.milestones[i] + 1);
    }
    line("decay:             step, x%.6g at steps [%s] (the first steps of epochs %s)", s.gamma, ms.c_str(), es.c_str());
  } else if (s.type == "cosine") {
    line("decay:             cosine over steps %lld..%lld to %.6g", (long long)warmup, (long long)p.total_steps, s.min_lr);
  } else {
    line("decay:             none (constant)");
  }
  if (p.grad_params > 0)
    line("gradient traffic:  %lld parameters, %.2f MB per step per rank (%s wire), %lld bucket(s)",
         (long long)p.grad_params, static_cast<double>(p.grad_bytes) / 1e6,
         p.exact ? "int64" : p.compression == "none" ? "fp32" : p.compression.c_str(), (long long)p.buckets);
  line("reduction:         %s", reduction_text(p).c_str());
  return out.str();
}

}  // namespace vexp
