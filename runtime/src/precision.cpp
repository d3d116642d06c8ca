#include "vexp/runtime/precision.hpp"

#include <sched.h>

#include <algorithm>
#include <stdexcept>
#include <thread>

#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <ATen/autocast_mode.h>
#include <c10/core/GradMode.h>
#include <c10/core/Event.h>
#include <c10/core/Stream.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <torch/version.h>
#include "vexp/base/error.hpp"

// LibTorch 2.4 made autocast's state per device type (set_autocast_enabled(
// device, on)) and deprecated the CUDA / CPU-specific setters of 1.x.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
#define VEXP_AUTOCAST_PER_DEVICE 1
#endif

namespace vexp {

Precision parse_precision(const std::string& text) {
  if (text == "fp32") return Precision::Fp32;
  if (text == "bf16") return Precision::Bf16;
  if (text == "fp16") return Precision::Fp16;
  throw std::invalid_argument("precision '" + text + "' is not one of fp32, bf16, fp16");
}

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::Fp32: return "fp32";
    case Precision::Bf16: return "bf16";
    case Precision::Fp16: return "fp16";
  }
  return "?";
}

MemoryFormat parse_memory_format(const std::string& text) {
  if (text == "contiguous") return MemoryFormat::Contiguous;
  if (text == "channels_last" || text == "auto") return MemoryFormat::ChannelsLast;
  throw std::invalid_argument("memory format '" + text + "' is not one of auto, channels_last, contiguous");
}

const char* memory_format_name(MemoryFormat f) {
  return f == MemoryFormat::ChannelsLast ? "channels_last" : "contiguous";
}

MemoryFormat apply_memory_format(const std::vector<at::Tensor>& params, MemoryFormat f) {
  if (f == MemoryFormat::Contiguous) return f;
  c10::NoGradGuard no_grad;
  bool any = false;
  for (const at::Tensor& p : params) {
    at::Tensor t = p;  // shares the TensorImpl: set_data swaps the parameter's storage
    if (t.dim() == 4) t.set_data(t.contiguous(at::MemoryFormat::ChannelsLast)), any = true;
  }
  return any ? f : MemoryFormat::Contiguous;
}

bool cuda_available() {
  return at::globalContext().hasCUDA() && at::detail::getCUDAHooks().getNumGPUs() > 0;
}

c10::Device resolve_device(const std::string& setting, const std::string& where) {
  if (setting == "cpu" || (setting == "auto" && !cuda_available())) return c10::Device(c10::kCPU);
  if (setting != "cuda" && setting != "auto")
    throw base::failure(where + " = \"" + setting + "\": expected cpu, cuda or auto");
  if (!at::globalContext().hasCUDA())
    throw base::failure(where + " = \"cuda\": this vexp is linked with a CPU-only libtorch (build with "
                             "-DVEXP_CUDA=ON against a CUDA libtorch), or set it to \"cpu\" or \"auto\"");
  if (at::detail::getCUDAHooks().getNumGPUs() == 0)
    throw base::failure(where + " = \"cuda\": no CUDA device is visible (CUDA_VISIBLE_DEVICES, driver); "
                             "set it to \"cpu\" or \"auto\"");
  // The current device: the one a communication backend chose for this rank
  // (comm/nccl: the local rank's GPU), else GPU 0.
  return c10::impl::VirtualGuardImpl(c10::kCUDA).getDevice();
}

c10::Device resolve_device_option(const std::string& setting, const std::string& where) {
  const std::string prefix = "cuda:";
  if (setting.compare(0, prefix.size(), prefix) != 0) return resolve_device(setting, where);
  const std::string index = setting.substr(prefix.size());
  if (index.empty() || index.size() > 4 || index.find_first_not_of("0123456789") != std::string::npos)
    throw base::failure(where + " '" + setting.substr(0, 40) + "': expected cpu, cuda, cuda:N or auto");
  if (!at::globalContext().hasCUDA())
    throw base::failure(where + " '" + setting + "': this vexp was built without CUDA (linked with a CPU-only "
                             "libtorch); use cpu");
  const int n = std::stoi(index);
  const int visible = static_cast<int>(at::detail::getCUDAHooks().getNumGPUs());
  if (n >= visible)
    throw base::failure(where + " '" + setting + "': " + std::to_string(visible) + " CUDA device" +
                             (visible == 1 ? " is" : "s are") + " visible" +
                             (visible > 0 ? " (cuda:0 to cuda:" + std::to_string(visible - 1) + ")" : std::string()));
  return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(n));
}

int64_t usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  return std::max(1u, std::thread::hardware_concurrency());  // more CPUs than a cpu_set_t holds
}

int64_t set_intra_op_threads(int64_t requested, std::string* lowered) {
  const int64_t cores = usable_cores();
  int64_t threads = requested > 0 ? requested : cores;
  if (threads > cores) {
    if (lowered)
      *lowered = std::to_string(threads) + " threads asked for, more than the " + std::to_string(cores) +
                 " core(s) this process may run on; using " + std::to_string(cores);
    threads = cores;
  }
  at::set_num_threads(static_cast<int>(threads));
  // The pool starts here, while a stop signal still ends the process at once, not in
  // the first step.
  at::parallel_for(0, threads, 1, [](int64_t, int64_t) {});
  return threads;
}

std::string run_setting_where(const dsl::RunConfig& run, const dsl::Loc& value, const std::string& key,
                              const std::string& recipe_path) {
  const std::string file = !run.section.file.empty() ? run.section.file : recipe_path;
  return (value.known() ? value.str() : file.empty() ? std::string("the recipe") : file) + ": [run] " + key;
}

void check_precision(Precision p, const c10::Device& device, const std::string& where) {
  if (p == Precision::Fp16 && !device.is_cuda())
    throw base::failure(where + " = \"fp16\" needs a CUDA device (device is " + device.str() +
                             "); on the CPU use precision = \"bf16\"");
}

namespace {
bool autocast_enabled(c10::DeviceType d) {
#ifdef VEXP_AUTOCAST_PER_DEVICE
  return at::autocast::is_autocast_enabled(d);
#else
  return d == c10::kCUDA ? at::autocast::is_enabled() : at::autocast::is_cpu_enabled();
#endif
}
void set_autocast_enabled(c10::DeviceType d, bool on) {
#ifdef VEXP_AUTOCAST_PER_DEVICE
  at::autocast::set_autocast_enabled(d, on);
#else
  if (d == c10::kCUDA) at::autocast::set_enabled(on);
  else at::autocast::set_cpu_enabled(on);
#endif
}
at::ScalarType autocast_dtype(c10::DeviceType d) {
#ifdef VEXP_AUTOCAST_PER_DEVICE
  return at::autocast::get_autocast_dtype(d);
#else
  return d == c10::kCUDA ? at::autocast::get_autocast_gpu_dtype() : at::autocast::get_autocast_cpu_dtype();
#endif
}
void set_autocast_dtype(c10::DeviceType d, at::ScalarType t) {
#ifdef VEXP_AUTOCAST_PER_DEVICE
  at::autocast::set_autocast_dtype(d, t);
#else
  if (d == c10::kCUDA) at::autocast::set_autocast_gpu_dtype(t);
  else at::autocast::set_autocast_cpu_dtype(t);
#endif
}
}  // namespace

AutocastScope::AutocastScope(c10::DeviceType device, Precision p) : device_(device) {
  if (p == Precision::Fp32) return;
  if (device != c10::kCUDA && device != c10::kCPU)
    throw base::failure(std::string("autocast: no mixed precision on ") + c10::DeviceTypeName(device));
  active_ = true;
  prev_enabled_ = autocast_enabled(device);
  prev_dtype_ = autocast_dtype(device);
  set_autocast_dtype(device, p == Precision::Bf16 ? at::kBFloat16 : at::kHalf);
  set_autocast_enabled(device, true);
  at::autocast::increment_nesting();
}

AutocastScope::~AutocastScope() {
  if (!active_) return;
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  set_autocast_enabled(device_, prev_enabled_);
  set_autocast_dtype(device_, prev_dtype_);
}

GradScaler::GradScaler(bool enabled, GradScalerOptions options)
    : enabled_(enabled), opt_(options), scale_(enabled ? options.init_scale : 1.0) {
  if (!(opt_.init_scale > 0) || !(opt_.growth_factor > 1) || !(opt_.backoff_factor > 0 && opt_.backoff_factor < 1) ||
      opt_.growth_interval < 1)
    throw std::invalid_argument("GradScaler: needs init_scale > 0, growth_factor > 1, 0 < backoff_factor < 1, "
                                "growth_interval >= 1");
}

at::Tensor GradScaler::scale_loss(const at::Tensor& loss) const {
  return enabled_ ? loss * scale_ : loss;
}

bool GradScaler::unscale(const std::vector<at::Tensor>& params) const {
  if (!enabled_) return true;
  c10::NoGradGuard no_grad;
  const double inverse = 1.0 / scale_;
  std::vector<at::Tensor> sums;
  sums.reserve(params.size());
  for (const auto& p : params) {
    const at::Tensor& g = p.grad();
    if (!g.defined()) continue;
    g.mul_(inverse);
    // In double, a sum of finite float / half values cannot overflow: it is
    // finite exactly when every element is.
    sums.push_back(g.sum(at::kDouble));
  }
  if (sums.empty()) return true;
  return at::stack(sums).isfinite().all().item<bool>();  // one device sync
}

void GradScaler::update(bool finite) {
  if (!enabled_) return;
  if (!finite) {
    scale_ *= opt_.backoff_factor;
    good_steps_ = 0;
    ++skipped_;
    return;
  }
  if (++good_steps_ >= opt_.growth_interval) {
    scale_ *= opt_.growth_factor;
    good_steps_ = 0;
  }
}

void GradScaler::restore(double scale, int64_t good_steps, int64_t skipped) {
  if (!enabled_) return;
  if (!(scale > 0)) throw std::invalid_argument("GradScaler: a saved scale must be > 0");
  scale_ = scale;
  good_steps_ = good_steps;
  skipped_ = skipped;
}

struct DeviceFeeder::State {
  explicit State(c10::Device d) : impl(d.type()), copy_stream(impl.getStreamFromGlobalPool(d)) {}
  struct Pending {
    Batch batch;
    c10::Event copied;
  };
  c10::impl::VirtualGuardImpl impl;
  c10::Stream copy_stream;
  std::deque<Pending> pending;
};

DeviceFeeder::DeviceFeeder(c10::Device device) : device_(device) {
  if (!device_.is_cpu()) state_ = std::make_unique<State>(device_);
}

DeviceFeeder::~DeviceFeeder() = default;

void DeviceFeeder::put(Batch b) {
  if (!state_) {
    cpu_.push_back(std::move(b));
    return;
  }
  State& s = *state_;
  c10::Event copied(device_.type());
  {
    // Allocated and copied on the side stream; the compute stream is not held up.
    c10::StreamGuard on_copy_stream(s.copy_stream);
    b.clips = b.clips.to(device_, /*non_blocking=*/true);
    b.labels = b.labels.to(device_, /*non_blocking=*/true);
    if (b.targets.defined()) b.targets = b.targets.to(device_, /*non_blocking=*/true);
    copied.record(s.copy_stream);
  }
  s.pending.push_back(State::Pending{std::move(b), std::move(copied)});
}

Batch DeviceFeeder::take() {
  if (!state_) {
    if (cpu_.empty()) throw std::logic_error("DeviceFeeder::take: no batch was put");
    Batch b = std::move(cpu_.front());
    cpu_.pop_front();
    return b;
  }
  State& s = *state_;
  if (s.pending.empty()) throw std::logic_error("DeviceFeeder::take: no batch was put");
  State::Pending p = std::move(s.pending.front());
  s.pending.pop_front();
  const c10::Stream compute = s.impl.getStream(device_);
  p.copied.block(compute);
  // Memory allocated on the copy stream and used on the compute stream: the
  // allocator must not hand it out again before the compute stream is done with it.
  p.batch.clips.record_stream(compute);
  p.batch.labels.record_stream(compute);
  if (p.batch.targets.defined()) p.batch.targets.record_stream(compute);
  return std::move(p.batch);
}

bool DeviceFeeder::empty() const {
  return state_ ? state_->pending.empty() : cpu_.empty();
}

void device_sync(const c10::Device& device) {
  if (device.is_cpu()) return;
  c10::impl::VirtualGuardImpl impl(device.type());
  impl.synchronizeStream(impl.getStream(device));
}

}  // namespace vexp
