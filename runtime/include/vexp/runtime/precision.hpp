// Where and in which precision the training step runs ([run] device and
// [run] precision): device selection, autocast scopes, dynamic loss scaling for
// fp16, and host->device batch feeding. Device-generic (c10 stream / event
// interfaces), so this compiles against a CPU-only libtorch and runs on CUDA
// when the libtorch it is linked with has it.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "vexp/runtime/loader.hpp"
#include "vexp/dsl/config.hpp"

namespace vexp {

enum class Precision { Fp32, Bf16, Fp16 };

// "fp32" | "bf16" | "fp16"; throws std::invalid_argument otherwise.
Precision parse_precision(const std::string& text);
const char* precision_name(Precision p);

// True when libtorch can use a CUDA device here (a CUDA build and a visible GPU).
bool cuda_available();

// "cpu", "cuda" (the current CUDA device: the one the communication backend chose
// for this rank, else GPU 0) or "auto" (cuda when available, else the CPU).
// `where` names the setting in errors ("recipe.toml:4:1: [run] device"); asking
// for CUDA where there is none is a one-line std::runtime_error.
c10::Device resolve_device(const std::string& setting, const std::string& where);
// The same for command-line options, which also take "cuda:N": N must be a visible
// GPU. One-line std::runtime_error ("WHERE 'cuda:99': ...") otherwise, never
// libtorch's dispatcher listing.
c10::Device resolve_device_option(const std::string& setting, const std::string& where);

// The cores this process may run on: its CPU affinity (taskset, a Slurm or cgroup
// cpuset, a sweep's slot), at least 1.
int64_t usable_cores();

// Intra-op CPU threads ([run] threads): `requested`, or every usable core when it is
// 0 (Debian's libtorch starts with one), but never more than the usable cores: more
// threads than cores only slow the compute down, and hundreds of them on a few cores
// took minutes to start (one line in `lowered`, when given, says so). Sets them,
// starts libtorch's pool and returns the number.
int64_t set_intra_op_threads(int64_t requested, std::string* lowered = nullptr);

// Where a [run] key was set, for errors: "recipe.toml:7:1: [run] device" (or
// "--set run.device=cuda: [run] device"; the recipe file alone when the key
// took its default). `value` is the key's location (run.device_loc, ...).
std::string run_setting_where(const dsl::RunConfig& run, const dsl::Loc& value, const std::string& key,
                              const std::string& recipe_path);

// Checks that `p` can run on `device` (fp16 autocast needs CUDA: libtorch's CPU
// autocast runs bf16); throws std::runtime_error naming `where` otherwise.
void check_precision(Precision p, const c10::Device& device, const std::string& where);

// The layout of convolution weights ([run] memory_format), which sets the layout
// of the activations: libtorch's convolutions return channels-last when their
// weight is channels-last, and batch norm, ReLU, pooling, the residual adds and
// the temporal shift keep it.
enum class MemoryFormat { Contiguous, ChannelsLast };

// "contiguous" | "channels_last" | "auto" (channels_last: 15-19 % shorter TSM and
// TSN steps on the CPU with oneDNN, docs/benchmarks.md; the tensor-core layout on
// CUDA). Throws std::invalid_argument otherwise.
MemoryFormat parse_memory_format(const std::string& text);
const char* memory_format_name(MemoryFormat f);

// Re-lays out `params` in place (set_data: every holder of the parameter sees the
// new tensor): 4-D weights channels-last. 5-D (conv3d) weights stay as they are:
// libtorch 1.13's CPU conv3d returns NCHW outputs whatever the weight, and
// channels-last-3d through the I3D plugins has not run on a GPU yet. A no-op for
// MemoryFormat::Contiguous. Values are unchanged; checkpoints hold contiguous
// copies either way. Returns the layout in effect: Contiguous when no weight was
// re-laid out (an I3D model, whose weights are all 5-D), so that logs and summaries
// say what the run computes with rather than what was asked.
MemoryFormat apply_memory_format(const std::vector<at::Tensor>& params, MemoryFormat f);

// Autocast for the enclosed forward pass (torch.autocast's C++ equivalent):
// convolutions, matmuls and linear layers run in bf16 / fp16, precision-sensitive
// ops in fp32; the weights stay fp32. A no-op for Precision::Fp32. The cache of
// cast weights is cleared when the outermost scope ends (the weights change at
// every optimizer step).
class AutocastScope {
 public:
  AutocastScope(c10::DeviceType device, Precision p);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool active_ = false;
  c10::DeviceType device_;
  bool prev_enabled_ = false;
  at::ScalarType prev_dtype_ = at::ScalarType::Undefined;
};

// Dynamic loss scaling for fp16 (the rule of torch.cuda.amp.GradScaler): the loss
// is multiplied by `scale` before backward; the gradients are divided by it
// before the optimizer; a step whose gradients hold an inf / NaN is skipped and
// halves the scale; `growth_interval` good steps in a row double it.
struct GradScalerOptions {
  double init_scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
};

class GradScaler {
 public:
  explicit GradScaler(bool enabled, GradScalerOptions options = {});
  bool enabled() const { return enabled_; }
  double scale() const { return scale_; }
  int64_t good_steps() const { return good_steps_; }     // since the last change of the scale
  int64_t skipped_steps() const { return skipped_; }     // in total
  // loss x scale (the loss itself when disabled).
  at::Tensor scale_loss(const at::Tensor& loss) const;
  // Divides every defined gradient by the scale (in place). Returns true when all
  // of them are finite afterwards (always true when disabled).
  bool unscale(const std::vector<at::Tensor>& params) const;
  // Call once per optimizer step with unscale()'s answer: false backs the scale
  // off (the step must be skipped), true counts a good step and grows the scale
  // every growth_interval of them.
  void update(bool finite);
  // Resume: the state a checkpoint recorded.
  void restore(double scale, int64_t good_steps, int64_t skipped);

 private:
  bool enabled_;
  GradScalerOptions opt_;
  double scale_;
  int64_t good_steps_ = 0, skipped_ = 0;
};

// Hands batches to the device. On the CPU it passes them through. On CUDA each
// batch (pinned by the loader) is copied with non_blocking = true on a side
// stream as soon as it is put, so that the copy of the next batch overlaps the
// compute of the current one; take() makes the compute stream wait for the copy
// and tells the caching allocator the tensors are used there.
class DeviceFeeder {
 public:
  explicit DeviceFeeder(c10::Device device);
  ~DeviceFeeder();
  DeviceFeeder(const DeviceFeeder&) = delete;
  DeviceFeeder& operator=(const DeviceFeeder&) = delete;
  // Starts moving `b` to the device.
  void put(Batch b);
  // The oldest batch put, on the device and ready for the current stream.
  Batch take();
  bool empty() const;
  const c10::Device& device() const { return device_; }

 private:
  c10::Device device_;
  std::deque<Batch> cpu_;  // the CPU path: batches as they came
  struct State;            // the device path: side stream, copies in flight
  std::unique_ptr<State> state_;
};

// Waits until the device has finished the work queued on its current stream
// (a no-op on the CPU). For timing phases of a step.
void device_sync(const c10::Device& device);

}  // namespace vexp
