#include "bench/bench_train.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <set>
#include <stdexcept>
#include <thread>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include "vexp/runtime/graph.hpp"
#include "vexp/runtime/loader.hpp"
#include "vexp/runtime/optimizer.hpp"
#include "vexp/runtime/precision.hpp"
#include "vexp/runtime/reducer.hpp"
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

BenchTrainResult bench_train(Session& s, const BenchTrainOptions& opt) {
  if (opt.steps < 1) throw std::invalid_argument("bench train: --steps must be >= 1");
  if (opt.warmup < 0) throw std::invalid_argument("bench train: --warmup must be >= 0");
  const dsl::RecipePlan& plan = *s.plan;
  BenchTrainResult r;
  r.threads = set_intra_op_threads(plan.run.threads);

  const auto& clip = plan.data_facts.clip;
  if (clip.size() != 4) throw std::runtime_error("bench train: the dataset does not give a clip shape [T, C, H, W]");
  r.clip = clip;
  r.frames_per_clip = clip[0];
  const int64_t per_gpu = plan.dist.batch_per_gpu;
  r.clips_per_step = per_gpu;
  const uint64_t seed = static_cast<uint64_t>(plan.run.seed);
  at::manual_seed(seed);

  auto comm = s.host.make<Comm>("comm", plan.comm, plan.comm_params);
  r.ranks = comm->size();
  const bool device_from_cli = !opt.device.empty(), precision_from_cli = !opt.precision.empty();
  const c10::Device device = resolve_device(device_from_cli ? opt.device : plan.run.device,
                                            device_from_cli ? "--device" : run_setting_where(plan.run, plan.run.device_loc, "device", ""));
  Precision precision;
  try {
    precision = parse_precision(precision_from_cli ? opt.precision : plan.run.precision);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(std::string("--precision: ") + e.what());
  }
  check_precision(precision, device,
                  precision_from_cli ? "--precision" : run_setting_where(plan.run, plan.run.precision_loc, "precision", ""));
  r.device = device.str();
  r.precision = precision_name(precision);
  GradScaler scaler(precision == Precision::Fp16);
  auto model = std::make_shared<ModelGraph>(plan, s.host);
  model->train();
  if (!device.is_cpu()) model->to(device);
  MemoryFormat memory_format;
  try {
    memory_format = parse_memory_format(opt.memory_format.empty() ? plan.run.memory_format : opt.memory_format);
  } catch (const std::invalid_argument& e) {
    throw std::runtime_error(std::string("--memory-format: ") + e.what());
  }
  r.memory_format = memory_format_name(memory_format);
  apply_memory_format(model->parameters(true), memory_format);
  r.params = model->parameter_count();
  std::vector<at::Tensor> all;
  Sgd sgd(param_groups(*model, plan.optim, all), plan.optim.momentum, plan.optim.nesterov);
  if (plan.optim.lars) sgd.set_lars(plan.optim.lars_eta);
  const double lr = plan.optim.lr;

  std::unique_ptr<Reducer> reducer;
  if (r.ranks > 1) {
    ReducerOptions ro;
    ro.bucket_mb = plan.dist.bucket_mb;
    ro.compression = plan.dist.compression;
    ro.prescaled = true;  // as in the trainer: the loss carries 1/ranks
    reducer = std::make_unique<Reducer>(all, comm, ro);
  }

  const int64_t total = opt.warmup + opt.steps;
  // Data: random clips made up front (two, used in turn), or the dataset's
  // training split through the loader, as many batches as the steps need.
  std::shared_ptr<Dataset> data;
  std::unique_ptr<Loader> loader;
  std::vector<Batch> fake;
  if (opt.synthetic) {
    const int64_t classes = std::max<int64_t>(2, plan.data_facts.classes);
    // Made on the host (pinned for a GPU) and copied every step, as real batches are.
    for (int i = 0; i < 2; ++i) {
      Batch b{at::randn({per_gpu, clip[0], clip[1], clip[2], clip[3]}), at::randint(0, classes, {per_gpu}, at::kLong)};
      if (device.is_cuda()) b = {b.clips.pin_memory(), b.labels.pin_memory()};
      fake.push_back(b);
    }
  } else {
    data = s.host.make<Dataset>("dataset", plan.dataset, plan.dataset_params);
    const int64_t n = data->size(Split::Train);
    if (n < 1) throw std::runtime_error("bench train: the training split is empty");
    std::vector<std::vector<int64_t>> batches;
    for (int64_t b = 0; b < total; ++b) {
      batches.emplace_back();
      for (int64_t i = 0; i < per_gpu; ++i) batches.back().push_back((b * per_gpu + i) % n);
    }
    LoaderOptions lo;
    lo.seed = seed;
    lo.workers = plan.data.workers;
    lo.prefetch = plan.data.prefetch;
    lo.pin_memory = device.is_cuda();
    loader = std::make_unique<Loader>(*data, std::move(batches), lo);
  }

  // As in the trainer: the next batch is put to the device (its copy in flight)
  // before the current one computes. Phases end with a device sync, so that
  // each is charged its own GPU time.
  DeviceFeeder feeder(device);
  int64_t fetched = 0;
  auto fetch_next = [&] {
    if (fetched >= total) return;
    Batch b;
    if (opt.synthetic) {
      b = fake[static_cast<size_t>(fetched % 2)];
    } else if (!loader->next(b)) {
      throw std::logic_error("bench train: the loader ran out of batches");
    }
    ++fetched;
    feeder.put(std::move(b));
  };
  fetch_next();
  for (int64_t i = 0; i < total; ++i) {
    const bool timed = i >= opt.warmup;
    const auto t_step = Clock::now();
    Batch b = feeder.take();
    fetch_next();
    const double t_data = since(t_step);
    auto t0 = Clock::now();
    at::Tensor loss;
    {
      AutocastScope autocast(device.type(), precision);
      loss = at::cross_entropy_loss(model->forward(b.clips).to(at::kFloat), b.labels);
    }
    const double lv = loss.item<double>();
    const double t_fwd = since(t0);
    if (!std::isfinite(lv)) throw std::runtime_error("bench train: the loss became " + std::to_string(lv));
    t0 = Clock::now();
    if (reducer) reducer->prepare(true);
    scaler.scale_loss(reducer ? loss * (1.0 / static_cast<double>(r.ranks)) : loss).backward();
    device_sync(device);
    const double t_bwd = since(t0);
    t0 = Clock::now();
    if (reducer) reducer->finish();
    device_sync(device);
    const double t_comm = since(t0);
    t0 = Clock::now();
    const bool finite = scaler.unscale(all);
    if (finite) sgd.step(lr);
    scaler.update(finite);
    sgd.zero_grad();
    device_sync(device);
    const double t_opt = since(t0);
    const double t_all = since(t_step);
    r.final_loss = lv;
    if (!timed) continue;
    r.step.samples.push_back(t_all);
    r.data.samples.push_back(t_data);
    r.forward.samples.push_back(t_fwd);
    r.backward.samples.push_back(t_bwd);
    r.comm.samples.push_back(t_comm);
    r.optimizer.samples.push_back(t_opt);
  }
  const double step = r.step.median();
  r.clips_per_s = step > 0 ? static_cast<double>(per_gpu * r.ranks) / step : 0;
  r.frames_per_s = r.clips_per_s * static_cast<double>(r.frames_per_clip);
  r.loss_scale = scaler.enabled() ? scaler.scale() : 0;
  r.skipped_steps = scaler.skipped_steps();
  struct rusage ru {};
  ::getrusage(RUSAGE_SELF, &ru);
  r.peak_rss_kb = ru.ru_maxrss;
  return r;
}

}  // namespace vexp
