#include "commands/bench_train.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <limits>
#include <optional>
#include <stdexcept>
#include <thread>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <nlohmann/json.hpp>

#include "vexp/base/error.hpp"
#include "vexp/runtime/checkpoint.hpp"
#include "vexp/runtime/data_pipeline.hpp"
#include "vexp/runtime/dist_plan.hpp"
#include "vexp/runtime/graph.hpp"
#include "vexp/runtime/loader.hpp"
#include "vexp/runtime/optimizer.hpp"
#include "vexp/runtime/precision.hpp"
#include "vexp/runtime/rig.hpp"
#include "vexp/runtime/train_step.hpp"
#include "vexp/comm.hpp"
#include "vexp/dataset.hpp"

namespace vexp {
namespace {
using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

double PhaseTimes::median() const {
  if (samples.empty()) return 0;
  std::vector<double> v = samples;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

DistPlan bench_dist_plan(const dsl::RecipePlan& plan, int64_t ranks, const Dataset* data, int64_t steps,
                         const std::vector<int64_t>& grad_numels) {
  int64_t train_size = 0;
  if (data) {
    train_size = data->size(Split::Train);
  } else if (plan.data.train_size > 0) {
    train_size = plan.data.train_size;
  } else {
    const std::optional<int64_t> gb = global_batch_of(plan.dist);
    if (!gb || *gb > std::numeric_limits<int64_t>::max() / std::max<int64_t>(1, steps))
      throw base::failure("the global batch times the steps does not fit in 64 bits");
    train_size = *gb * std::max<int64_t>(1, steps);
  }
  return make_dist_plan(plan, ranks, train_size, grad_numels);
}

namespace {
// CPU seconds of this process (every thread): on a machine shared with other work the
// noise scale's cost shows in them even when the wall clock is dominated by waiting.
double process_cpu_s() {
  timespec ts{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}
}  // namespace

BenchTrainResult bench_train(Session& s, const BenchTrainOptions& opt) {
  if (opt.steps < 1) throw std::invalid_argument("bench train: --steps must be >= 1");
  if (opt.warmup < 0) throw std::invalid_argument("bench train: --warmup must be >= 0");
  const dsl::RecipePlan& plan = *s.plan;
  BenchTrainResult r;
  r.threads = set_intra_op_threads(plan.run.threads);

  const auto& clip = plan.data_facts.clip;
  if (clip.size() != 4) throw base::failure("bench train: the dataset does not give a clip shape [T, C, H, W]");
  r.clip = clip;
  r.frames_per_clip = clip[0];
  const uint64_t seed = static_cast<uint64_t>(plan.run.seed);

  auto comm = s.host.make<Comm>("comm", plan.comm, plan.comm_params);
  r.ranks = comm->size();
  const bool device_from_cli = !opt.device.empty(), precision_from_cli = !opt.precision.empty();
  const c10::Device device = resolve_device(device_from_cli ? opt.device : plan.run.device,
                                            device_from_cli ? "--device" : run_setting_where(plan.run, plan.run.device_loc, "device", ""));
  Precision precision;
  try {
    precision = parse_precision(precision_from_cli ? opt.precision : plan.run.precision);
  } catch (const std::invalid_argument& e) {
    throw base::failure(std::string("--precision: ") + e.what());
  }
  check_precision(precision, device,
                  precision_from_cli ? "--precision" : run_setting_where(plan.run, plan.run.precision_loc, "precision", ""));
  r.device = device.str();
  r.precision = precision_name(precision);
  MemoryFormat memory_format;
  try {
    memory_format = parse_memory_format(opt.memory_format.empty() ? plan.run.memory_format : opt.memory_format);
  } catch (const std::invalid_argument& e) {
    throw base::failure(std::string("--memory-format: ") + e.what());
  }
  if (opt.noise_every < 0) throw std::invalid_argument("bench train: --noise-scale-every must be >= 0");
  // With the noise scale: `steps` blocks of N steps whose last one measures and `steps`
  // blocks of N plain steps, alternating (a measurement's after-effects, as freed
  // memory, fall in its own block; the alternation cancels the machine's drift).
  const int64_t block = opt.noise_every;
  const int64_t total = opt.warmup + (opt.noise_every > 0 ? 2 * block : 1) * opt.steps;

  // In the trainer's order (trainer.cpp, build), from the same seed: the dataset,
  // the model, the rig (the model on its device and in its layout, the optimizer,
  // the scaler), then the plan, and the rig's reducer and step (rig.hpp).
  at::manual_seed(seed);
  std::shared_ptr<Dataset> data;
  if (!opt.synthetic) data = make_dataset(s.host, plan);
  auto model = std::make_shared<ModelGraph>(plan, s.host);
  RigOptions ro;
  ro.device = device;
  ro.precision = precision;
  ro.memory_format = memory_format;
  ro.sync_phases = true;  // each phase is charged its own GPU time
  Rig rig(plan, s.host, model, comm, ro);
  r.memory_format = memory_format_name(rig.memory_format());
  r.params = model->parameter_count();
  if (data && data->size(Split::Train) < 1) throw base::failure("bench train: the training split is empty");
  const DistPlan dp = bench_dist_plan(plan, r.ranks, data.get(), total, rig.grad_numels());
  r.micro = dp.micro;
  r.buckets = dp.buckets;
  r.bucket_mb = plan.dist.bucket_mb;
  r.clips_per_step = dp.per_gpu * dp.micro;
  r.global_batch = dp.global_batch;
  r.lr_first = dp.schedule.at(0);
  r.lr_last = dp.schedule.at(total - 1);
  TrainStep& step = rig.start(dp);
  const GradScaler& scaler = rig.scaler();
  if (opt.noise_every > 0 && dp.world < 2)
    throw base::failure("bench train --noise-scale-every: the gradient noise scale needs at least two GPUs or "
                             "emulated GPUs per step, and dist.world_size is 1 (--set dist.world_size=2 emulates two)");
  step.set_noise_every(0);  // the recipe's run.noise_scale_every does not apply: the benchmark chooses
  r.noise_every = opt.noise_every;

  // Data: random clips made up front (two, used in turn), or the batches `vexp run`
  // takes in its first steps (its sample stream, through the loader).
  const int64_t micro_batches = total * dp.micro;
  std::unique_ptr<Loader> loader;
  std::vector<Batch> fake;
  if (opt.synthetic) {
    const int64_t classes = std::max<int64_t>(2, plan.data_facts.classes);
    const int64_t per_gpu = dp.per_gpu;
    // Made on the host (pinned for a GPU) and copied every step, as real batches are.
    for (int i = 0; i < 2; ++i) {
      Batch b{at::randn({per_gpu, clip[0], clip[1], clip[2], clip[3]}), at::randint(0, classes, {per_gpu}, at::kLong)};
      if (device.is_cuda()) b = {b.clips.pin_memory(), b.labels.pin_memory()};
      fake.push_back(b);
    }
  } else {
    LoaderOptions lo;
    lo.workers = plan.data.workers;
    lo.prefetch = plan.data.prefetch;
    lo.pin_memory = device.is_cuda();
    // The stream runs on past the last timed step, unconsumed (the loader is stopped
    // with it): the loader still decodes ahead through every timed step, as in a long
    // run. With a stream of exactly `total` steps it would have nothing left to decode
    // in the last prefetch / micro of them and leave their cores to the compute: where
    // the compute threads hold every core (2 threads, or 2 busy ranks, on 2 cores) the
    // small I3D then measured 29 ms a step, and 33-35 in `vexp run` (its loader
    // working through every step: 1.7-3.6 ms of data wait and a slower compute).
    r.data_workers = lo.workers;
    r.loader_ahead_steps = (lo.prefetch + dp.micro - 1) / dp.micro + 1;
    loader = stream_loader(*data, dp, comm->rank(), r.ranks, seed, 0, total + r.loader_ahead_steps, lo);
  }

  // As in the trainer: the next batch is put to the device (its copy in flight)
  // before the current one computes.
  DeviceFeeder feeder(device);
  int64_t fetched = 0;
  auto fetch_next = [&] {
    if (fetched >= micro_batches) return;
    Batch b;
    if (opt.synthetic) {
      b = fake[static_cast<size_t>(fetched % 2)];
    } else if (!loader->next(b)) {
      throw std::logic_error("bench train: the loader ran out of batches");
    }
    ++fetched;
    feeder.put(std::move(b));
  };
  auto next = [&](int64_t) {
    Batch b = feeder.take();
    fetch_next();
    return b;
  };
  auto check = [](int64_t, double lv) {
    if (!std::isfinite(lv)) throw base::failure("bench train: the loss became " + std::to_string(lv));
    return lv;
  };
  fetch_next();
  for (int64_t i = 0; i < total; ++i) {
    // The last step of every other block measures the noise; the last warm-up step too,
    // so that both paths are warm.
    const int64_t k = i - opt.warmup;  // timed step (negative: warm-up)
    const bool measuring_block = block > 0 && k >= 0 && (k / block) % 2 == 1;
    const bool measured = block > 0 && (k < 0 ? i + 1 == opt.warmup : measuring_block && k % block == block - 1);
    if (block > 0) step.set_noise_every(measured ? 1 : 0);
    const auto t_step = Clock::now();
    const double cpu_start = process_cpu_s();
    double loss_sum = step.forward_backward(i, next, check);
    bool stop = false;
    step.reduce(loss_sum, stop);
    step.update(dp.schedule.at(i));
    const double t_all = since(t_step);
    r.final_loss = step.mean_loss();
    if (i < opt.warmup) continue;
    if (block > 0) {
      (measuring_block ? r.noise_block_s : r.plain_block_s) += t_all;
      (measuring_block ? r.noise_block_cpu_s : r.plain_block_cpu_s) += process_cpu_s() - cpu_start;
    }
    if (measured) {
      r.noise_step.samples.push_back(t_all);
      r.noise_work.samples.push_back(step.times().noise);
      continue;
    }
    if (measuring_block) continue;  // the plain steps of a measuring block count in its total only
    const StepTimes& t = step.times();
    r.step.samples.push_back(t_all);
    r.data.samples.push_back(t.data);
    r.forward.samples.push_back(t.forward);
    r.backward.samples.push_back(t.backward);
    r.comm.samples.push_back(t.comm);
    r.optimizer.samples.push_back(t.optimizer);
  }
  const double step_s = r.step.median();
  if (opt.noise_every > 0 && step_s > 0 && r.plain_block_s > 0) {
    r.noise_step_ratio = r.noise_step.median() / step_s;
    r.noise_interval_ratio = r.noise_block_s / r.plain_block_s;
    if (r.plain_block_cpu_s > 0) r.noise_cpu_ratio = r.noise_block_cpu_s / r.plain_block_cpu_s;
    r.noise_work_fraction = r.noise_work.median() / step_s / static_cast<double>(opt.noise_every);
  }
  r.clips_per_s = step_s > 0 ? static_cast<double>(r.clips_per_step * r.ranks) / step_s : 0;
  r.frames_per_s = r.clips_per_s * static_cast<double>(r.frames_per_clip);
  r.loss_scale = scaler.enabled() ? scaler.scale() : 0;
  r.skipped_steps = scaler.skipped_steps();
  struct rusage ru {};
  ::getrusage(RUSAGE_SELF, &ru);
  r.peak_rss_kb = ru.ru_maxrss;
  if (!opt.save_weights.empty() && comm->rank() == 0) {
    Checkpoint c;
    for (const auto& p : model->named_parameters(true)) c.model[p.key()] = p.value();
    for (const auto& b : model->named_buffers(true)) c.model[b.key()] = b.value();
    c.optimizer = rig.optimizer().state();
    c.meta_json = nlohmann::json{{"written_by", "vexp bench train"}, {"global_step", total},
                                 {"synthetic", opt.synthetic}}.dump();
    save_checkpoint(opt.save_weights, c);
  }
  return r;
}

}  // namespace vexp
