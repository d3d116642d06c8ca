// vexp bench op temporal_shift [--shape NTxCxHxW] [--frames T] [--dtype float] [--channels-last] [--json]
// The shift operator (the real plugin, through the host) against a plain copy of
// the same tensor into a reused buffer: the memory-bound limit. Bandwidth counts
// bytes read + written (2 x the tensor forward, 4 x forward + backward).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <iostream>
#include <thread>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/GradMode.h>
#include <nlohmann/json.hpp>

#include "commands/common.hpp"
#include "vexp/runtime/precision.hpp"
#include "vexp/layer.hpp"

namespace vexp::cli {

namespace {
using Clock = std::chrono::steady_clock;

struct BenchOpArgs {
  std::string op;
  std::string shape = "16x256x56x56";
  int64_t frames = 8;
  int64_t fold_div = 8;
  int64_t reps = 20;
  int64_t threads = 0;
  std::string dtype = "float";
  std::string device = "cpu";
  bool channels_last = false;
  bool json = false;
};

std::vector<int64_t> parse_shape(const std::string& text) {
  return parse_four_sizes(text, "--shape", "N*T x C x H x W", "16x256x56x56");
}

// Median seconds of each function over `reps` rounds after two untimed ones.
// The functions are interleaved round by round, so that a machine shared with
// other work slows them alike; `sync` waits for the device (a one-element copy
// to the host), a no-op on the CPU.
std::vector<double> median_times(int64_t reps, const std::vector<std::function<void()>>& fs,
                                 const std::function<void()>& sync) {
  for (int w = 0; w < 2; ++w)
    for (const auto& f : fs) f();
  sync();
  std::vector<std::vector<double>> t(fs.size());
  for (int64_t i = 0; i < reps; ++i) {
    for (size_t k = 0; k < fs.size(); ++k) {
      auto t0 = Clock::now();
      fs[k]();
      sync();
      t[k].push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    }
  }
  std::vector<double> out;
  for (auto& v : t) {
    std::sort(v.begin(), v.end());
    out.push_back(v[v.size() / 2]);
  }
  return out;
}

void run_bench_op(const BenchOpArgs& a) {
  const std::vector<int64_t> shape = parse_shape(a.shape);
  if (shape[0] % a.frames != 0)
    throw base::invalid("--shape '" + a.shape + "': N*T = " + std::to_string(shape[0]) +
                                 " is not a multiple of --frames " + std::to_string(a.frames));
  const at::ScalarType dtype = a.dtype == "half" ? at::kHalf : a.dtype == "bfloat16" ? at::kBFloat16
                               : a.dtype == "double" ? at::kDouble : at::kFloat;
  // Checked here, in one line: libtorch's own refusal of a device this build or
  // machine lacks is a 40-line dispatcher listing.
  c10::Device device(c10::kCPU);
  try {
    device = resolve_device_option(a.device, "--device");
  } catch (const std::exception& e) {
    throw base::invalid(e.what());
  }
  Session s;
  load_plugins(s);
  report_plugin_problems(s);
  if (!s.host.find("op", a.op)) throw base::failure("the op plugin '" + a.op + "' is not loaded (see vexp plugins)");
  std::shared_ptr<Layer> layer;
  try {
    layer = s.host.make<Layer>("op", a.op,
                               Params({{"segments", a.frames}, {"fold_div", a.fold_div}, {"mode", "bidirectional"}}));
  } catch (const std::exception& e) {
    throw base::failure(e.what());
  }
  int64_t threads = a.threads > 0 ? a.threads : std::max(1u, std::thread::hardware_concurrency());
  at::set_num_threads(static_cast<int>(threads));
  const auto fmt = a.channels_last ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous;
  at::manual_seed(0);
  at::Tensor x;
  try {
    x = at::randn(shape, at::TensorOptions().dtype(dtype)).to(device).contiguous(fmt);
  } catch (const c10::Error& e) {
    const std::string why = e.what_without_backtrace();
    throw base::failure("--shape " + a.shape + " on " + device.str() + ": " + why.substr(0, why.find('\n')));
  }
  const bool on_device = !x.device().is_cpu();
  auto sync = [&] {
    if (on_device) (void)x.view(-1).slice(0, 0, 1).cpu();
  };
  at::Tensor buffer = at::empty_like(x);
  at::Tensor grad_out = at::randn_like(x);
  const ForwardContext ctx{shape[0] / a.frames, a.frames};
  const double bytes = static_cast<double>(x.numel()) * static_cast<double>(x.element_size());

  double t_copy = 0, t_clone = 0, t_fwd = 0, t_fwd_bwd = 0;
  try {
    at::Tensor xg = x.detach().requires_grad_(true);
    const std::vector<double> t = median_times(
        a.reps,
        {[&] { buffer.copy_(x); }, [&] { at::Tensor c = x.clone(fmt); },
         [&] {
           c10::NoGradGuard ng;
           at::Tensor y = layer->forward({x}, ctx);
         },
         [&] {
           xg.mutable_grad() = at::Tensor();
           at::Tensor y = layer->forward({xg}, ctx);
           y.backward(grad_out);
         }},
        sync);
    t_copy = t[0];
    t_clone = t[1];
    t_fwd = t[2];
    t_fwd_bwd = t[3];
    // The result is checked, so a fast wrong operator cannot pass unnoticed.
    c10::NoGradGuard ng;
    at::Tensor y = layer->forward({x}, ctx);
    const int64_t fold = shape[1] / a.fold_div, T = a.frames;
    at::Tensor xv = x.view({shape[0] / T, T, shape[1], shape[2], shape[3]});
    at::Tensor yv = y.reshape({shape[0] / T, T, shape[1], shape[2], shape[3]});
    bool ok = at::equal(yv.slice(1, 0, T - 1).slice(2, 0, fold), xv.slice(1, 1, T).slice(2, 0, fold)) &&
              at::equal(yv.slice(1, 1, T).slice(2, fold, 2 * fold), xv.slice(1, 0, T - 1).slice(2, fold, 2 * fold)) &&
              at::equal(yv.slice(2, 2 * fold), xv.slice(2, 2 * fold)) &&
              yv.select(1, T - 1).slice(1, 0, fold).eq(0).all().item<bool>();
    if (!ok) throw base::failure("the '" + a.op + "' output is not the expected shift of its input");
  } catch (const c10::Error& e) {
    throw base::failure(e.what_without_backtrace());
  }
  auto gbs = [&](double factor, double t) { return factor * bytes / t / 1e9; };
  const double ratio_fwd = t_copy / t_fwd, ratio_fwd_bwd = 2 * t_copy / t_fwd_bwd;
  if (a.json) {
    nlohmann::json out{{"op", a.op}, {"device", a.device}, {"shape", shape}, {"frames", a.frames}, {"dtype", a.dtype},
                       {"channels_last", a.channels_last}, {"threads", threads}, {"reps", a.reps},
                       {"tensor_mb", bytes / 1e6},
                       {"copy", {{"ms", t_copy * 1e3}, {"gb_per_s", gbs(2, t_copy)}}},
                       {"clone_fresh", {{"ms", t_clone * 1e3}, {"gb_per_s", gbs(2, t_clone)}}},
                       {"forward", {{"ms", t_fwd * 1e3}, {"gb_per_s", gbs(2, t_fwd)}}},
                       {"forward_backward", {{"ms", t_fwd_bwd * 1e3}, {"gb_per_s", gbs(4, t_fwd_bwd)}}},
                       {"forward_vs_copy", ratio_fwd}, {"forward_backward_vs_copy", ratio_fwd_bwd}};
    std::cout << out.dump(2) << "\n";
    return;
  }
  std::printf("bench op %s: [%s] %s on %s%s, %.1f MB, %lld threads, median of %lld\n", a.op.c_str(),
              a.shape.c_str(), a.dtype.c_str(), a.device.c_str(), a.channels_last ? " channels-last" : "", bytes / 1e6, (long long)threads,
              (long long)a.reps);
  std::printf("  copy into a reused buffer  %8.2f ms  %6.1f GB/s\n", t_copy * 1e3, gbs(2, t_copy));
  std::printf("  clone (fresh allocation)   %8.2f ms  %6.1f GB/s\n", t_clone * 1e3, gbs(2, t_clone));
  std::printf("  shift forward              %8.2f ms  %6.1f GB/s\n", t_fwd * 1e3, gbs(2, t_fwd));
  std::printf("  shift forward + backward   %8.2f ms  %6.1f GB/s\n", t_fwd_bwd * 1e3, gbs(4, t_fwd_bwd));
  std::printf("  forward / copy bandwidth: %.2f; forward+backward / copy: %.2f (goal >= 0.8)\n", ratio_fwd,
              ratio_fwd_bwd);
}
}  // namespace

void add_bench_op(CLI::App& bench) {
  auto* cmd = bench.add_subcommand("op", "An operator's GB/s against a plain copy of the same tensor (memory-bound limit)");
  auto a = std::make_shared<BenchOpArgs>();
  cmd->add_option("op", a->op, "Operator")->required()->check(CLI::IsMember({"temporal_shift"}));
  cmd->add_option("--shape", a->shape, "Input N*T x C x H x W");
  cmd->add_option("--frames", a->frames, "Frames per clip (T)")->check(CLI::Range(1, 100000));
  cmd->add_option("--fold-div", a->fold_div, "1/fold_div of the channels shift each way")->check(CLI::Range(1, 100000));
  cmd->add_option("--reps", a->reps, "Timed repetitions (the median is reported)")->check(CLI::Range(1, 100000));
  cmd->add_option("--threads", a->threads, "Intra-op threads (0: all cores)")->check(CLI::Range(0, 4096));
  cmd->add_option("--dtype", a->dtype, "Element type")->check(CLI::IsMember({"float", "double", "half", "bfloat16"}));
  cmd->add_option("--device", a->device, "cpu, or cuda / cuda:N in a CUDA build");
  cmd->add_flag("--channels-last", a->channels_last, "Input in channels-last layout");
  cmd->add_flag("--json", a->json, "Print JSON");
  cmd->callback([a] { run_bench_op(*a); });
}

}  // namespace vexp::cli
