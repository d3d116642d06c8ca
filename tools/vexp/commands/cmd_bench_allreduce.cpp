// vexp bench allreduce [--backend local|mpi|nccl] [--mb 256] [--reps 20] [--device cpu|cuda]
//                      [--tensors 160] [--param key=value]... [--json]
// The allreduce bandwidth of a communication backend (the real plugin, as a run
// uses it): one float tensor of --mb MiB summed across all ranks, median of
// --reps after two untimed. Prints the algorithm bandwidth (bytes / time) and the
// bus bandwidth (x 2 (n - 1) / n, NCCL-tests' convention: what each link carries).
// Then the exact reduction's cost (dist.reduction = "exact", runtime/exact_sum.hpp)
// on the same bytes as --tensors parameters: set aside, the max all-reduce, the int64
// all-reduce and back to float, timed the same way; the ratio exact / float is
// printed (docs/distributed.md).
// Start one process per rank the way the backend expects: mpirun for mpi (and an
// MPI-built nccl), or RANK / WORLD_SIZE / LOCAL_RANK plus
// --param rendezvous=FILE for nccl (tools/bench/gpu.sh does this).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "commands/common.hpp"
#include "vexp/runtime/exact_sum.hpp"
#include "vexp/runtime/precision.hpp"
#include "vexp/comm.hpp"

namespace vexp::cli {

namespace {
using Clock = std::chrono::steady_clock;

struct BenchAllreduceArgs {
  std::string backend = "local";
  double mb = 256;
  int64_t reps = 20;
  std::string device = "cpu";
  int64_t tensors = 160;  // ResNet-50 has 161 trainable tensors
  std::vector<std::string> params;
  bool json = false;
};

void run_bench_allreduce(const BenchAllreduceArgs& a) {
  Session s;
  load_plugins(s);
  report_plugin_problems(s);
  const PluginDecl* decl = s.host.find("comm", a.backend);
  if (!decl) throw base::failure("--backend " + a.backend + ": no such communication plugin is loaded (see vexp plugins)");
  std::map<std::string, dsl::Value> given;
  for (const auto& kv : a.params) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) throw base::invalid("--param '" + kv + "': expected KEY=VALUE");
    const std::string key = kv.substr(0, eq), text = kv.substr(eq + 1);
    const dsl::ParamSpec* spec = decl->schema.find(key);
    try {
      if (spec && spec->type == dsl::ParamType::Float) given[key] = dsl::Value(std::stod(text));
      else if (spec && spec->type == dsl::ParamType::Int) given[key] = dsl::Value(static_cast<int64_t>(std::stoll(text)));
      else if (spec && spec->type == dsl::ParamType::Bool) given[key] = dsl::Value(text == "true");
      else given[key] = dsl::Value(text);
    } catch (const std::exception&) {
      throw base::invalid("--param '" + kv + "': '" + text + "' is not a " + dsl::param_type_name(spec->type));
    }
  }
  dsl::Params params;
  try {
    params = dsl::make_params(decl->schema, given);
  } catch (const std::exception& e) {
    throw base::invalid("--param: " + a.backend + ": " + e.what());
  }
  std::shared_ptr<Comm> comm;
  try {
    comm = s.host.make<Comm>("comm", a.backend, params);
  } catch (const std::exception& e) {
    throw base::failure("--backend " + a.backend + ": " + e.what());
  }
  at::Tensor x;
  try {
    // After the backend chose this rank's GPU: "cuda" is that device.
    const c10::Device device = resolve_device(a.device, "--device");
    const int64_t numel = std::max<int64_t>(1, static_cast<int64_t>(a.mb * 1024 * 1024 / 4));
    // On the CPU, a tensor larger than the memory is refused here: allocating it
    // fails deep in libtorch (a 28-line backtrace), or succeeds on overcommit and
    // the kernel kills the run.
    const double bytes = static_cast<double>(numel) * 4;
    const double ram = static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * static_cast<double>(::sysconf(_SC_PAGE_SIZE));
    if (device.is_cpu() && ram > 0 && bytes > ram / 2) {
      char msg[256];
      std::snprintf(msg, sizeof msg, "--mb %g: a %.1f GiB tensor is more than half of this machine's %.1f GiB of "
                    "memory; use --mb %lld or less", a.mb, bytes / 1073741824.0, ram / 1073741824.0,
                    static_cast<long long>(ram / 2 / 1048576));
      throw base::invalid(msg);
    }
    x = at::ones({numel}, at::TensorOptions().dtype(at::kFloat).device(device));
  } catch (const c10::Error& e) {
    const std::string why = e.what_without_backtrace();
    throw base::failure("--mb " + std::to_string(a.mb) + " on " + a.device + ": " + why.substr(0, why.find('\n')));
  }
  const double bytes = static_cast<double>(x.numel()) * 4;
  const int n = comm->size();
  std::vector<double> t;
  for (int64_t i = 0; i < a.reps + 2; ++i) {
    comm->barrier();
    const auto t0 = Clock::now();
    comm->allreduce(x, ReduceOp::Sum);
    device_sync(x.device());
    const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
    if (i >= 2) t.push_back(dt);
  }
  // Every element is now n^(reps + 2): checked on one element (exact in float for small n).
  const double expect = std::pow(static_cast<double>(n), static_cast<double>(a.reps + 2));
  const double got = x[0].item<double>();
  if (std::abs(got - expect) > 1e-5 * expect)
    throw base::failure("allreduce gave " + std::to_string(got) + ", expected " + std::to_string(expect));
  std::sort(t.begin(), t.end());
  const double med = t[t.size() / 2];
  const double algbw = bytes / med / 1e9, busbw = algbw * (n > 1 ? 2.0 * (n - 1) / n : 1.0);

  // The exact reduction of the same bytes as `tensors` parameters of one GPU per rank.
  const int64_t numel = x.numel(), pieces = std::min<int64_t>(a.tensors, numel);
  std::vector<at::Tensor> parts, grads;
  for (int64_t i = 0; i < pieces; ++i) {
    const int64_t len = numel / pieces + (i < numel % pieces ? 1 : 0);
    parts.push_back(at::zeros({len}, x.options()).set_requires_grad(true));
    grads.push_back(at::randn({len}, x.options()));
  }
  ExactGradSum exact(parts, comm.get(), n, 1, 25);
  std::vector<double> te;
  for (int64_t i = 0; i < a.reps + 2; ++i) {
    for (size_t k = 0; k < parts.size(); ++k) parts[k].mutable_grad() = grads[k].clone();
    device_sync(x.device());
    comm->barrier();
    const auto t0 = Clock::now();
    exact.take(0);
    exact.finish();
    device_sync(x.device());
    const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
    if (i >= 2) te.push_back(dt);
  }
  std::sort(te.begin(), te.end());
  const double med_exact = te[te.size() / 2];
  if (comm->rank() != 0) return;
  if (a.json) {
    std::cout << nlohmann::json{{"backend", a.backend}, {"ranks", n}, {"device", x.device().str()},
                                {"mb", bytes / 1048576.0}, {"reps", a.reps}, {"median_ms", med * 1e3},
                                {"algbw_gb_per_s", algbw}, {"busbw_gb_per_s", busbw},
                                {"exact", {{"tensors", pieces}, {"median_ms", med_exact * 1e3},
                                           {"ratio_to_float", n > 1 ? nlohmann::json(med_exact / med) : nlohmann::json()}}}}
                     .dump(2)
              << "\n";
    return;
  }
  std::printf("allreduce %s, %d rank(s), %.1f MiB float on %s, median of %lld: %.3f ms, algbw %.2f GB/s, busbw %.2f GB/s\n",
              a.backend.c_str(), n, bytes / 1048576.0, x.device().str().c_str(), (long long)a.reps, med * 1e3, algbw,
              busbw);
  std::printf("exact reduction (dist.reduction = \"exact\") of the same bytes as %lld tensors: %.3f ms", (long long)pieces,
              med_exact * 1e3);
  if (n > 1)
    std::printf(", %.2fx the float allreduce (int64 on the wire, a max all-reduce, the grid and back)\n",
                med_exact / med);
  else
    std::printf(" (one rank: the grid and back only; the float allreduce has nothing to do)\n");
}
}  // namespace

void add_bench_allreduce(CLI::App& bench) {
  auto* cmd = bench.add_subcommand("allreduce", "Allreduce bandwidth of a communication backend (one process per rank)");
  auto a = std::make_shared<BenchAllreduceArgs>();
  cmd->add_option("--backend", a->backend, "Communication plugin: local, mpi, nccl");
  cmd->add_option("--mb", a->mb, "Tensor size in MiB")->check(CLI::Range(0.001, 65536.0));
  cmd->add_option("--reps", a->reps, "Timed repetitions (the median is reported)")->check(CLI::Range(1, 100000));
  cmd->add_option("--device", a->device, "Where the tensor lives")->check(CLI::IsMember({"cpu", "cuda", "auto"}));
  cmd->add_option("--tensors", a->tensors, "Parameters the exact reduction's bytes are split into")
      ->check(CLI::Range(int64_t{1}, int64_t{100000}));
  cmd->add_option("--param", a->params, "Backend parameter KEY=VALUE (e.g. rendezvous=/shared/id for nccl)");
  cmd->add_flag("--json", a->json, "Print JSON (rank 0)");
  cmd->callback([a] { run_bench_allreduce(*a); });
}

}  // namespace vexp::cli
