// vexp bench comm [--recipe R] [--reps N] [--nproc 2]: run under mpirun with 2+ ranks.
//  1. Gradient allreduce of the recipe's model (default: TSM ResNet-50, 24.3 M
//     parameters): the reducer (25 MiB buckets launched from backward hooks)
//     against one flat MPI allreduce of the same bytes; prints both bandwidths
//     and their ratio (goal >= 0.9).
//  2. Weak scaling of `vexp run`'s training step (the runtime's TrainStep) of the
//     quickstart model with 1 thread per rank, dist.world_size = the ranks: N ranks
//     (reducer) against rank 0 alone (no communication) on the same per-rank
//     batch; efficiency = t(1 rank) / t(N ranks) (goal >= 0.85). The step's rig
//     (rig.hpp) is the step recipe's: its reducer has that recipe's dist.bucket_mb
//     and dist.compression (printed), or none with dist.reduction = "exact".
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include "commands/common.hpp"
#include "vexp/base/process.hpp"
#include "vexp/runtime/graph.hpp"
#include "vexp/runtime/optimizer.hpp"
#include "vexp/runtime/precision.hpp"
#include "vexp/runtime/reducer.hpp"
#include "vexp/runtime/rig.hpp"
#include "vexp/runtime/train_step.hpp"
#include "commands/bench_train.hpp"
#include "commands/run_dist.hpp"
#include "vexp/comm.hpp"

namespace vexp::cli {

namespace {
using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void open_for_bench(Session& s, const std::string& path, const std::vector<dsl::Override>& sets) {
  RecipeArgs r;
  r.path = path;
  if (!open_session(s, r, planning_options(sets))) throw base::invalid("cannot open '" + path + "' for the benchmark");
}
}  // namespace

void add_bench_comm(CLI::App& app) {
  CLI::App* bench = nullptr;
  try {
    bench = app.get_subcommand("bench");
  } catch (const CLI::OptionNotFound&) {
    bench = app.add_subcommand("bench", "Benchmarks that print ratios against a baseline measured in the same run");
    bench->require_subcommand(1);
  }
  auto* cmd = bench->add_subcommand("comm", "Bucketed gradient allreduce vs flat MPI allreduce; weak scaling (run under mpirun)");
  auto recipe = std::make_shared<std::string>();
  auto step_recipe = std::make_shared<std::string>();
  auto reps = std::make_shared<int>(20);
  auto steps = std::make_shared<int>(10);
  auto nproc = std::make_shared<int>(0);
  cmd->add_option("--recipe", *recipe,
                  "Recipe whose model's gradients are reduced (default: tsm_k400_1536.toml of vexp's recipes)");
  cmd->add_option("--step-recipe", *step_recipe,
                  "Recipe whose training step is timed for weak scaling (default: vexp's quickstart/tsm_motion.toml)");
  cmd->add_option("--reps", *reps, "Repetitions of each allreduce")->check(CLI::PositiveNumber);
  cmd->add_option("--steps", *steps, "Timed training steps")->check(CLI::PositiveNumber);
  cmd->add_option("--nproc", *nproc, "Start this many local ranks through mpirun")->check(CLI::PositiveNumber);
  cmd->callback([=] {
    // The defaults are vexp's own recipes, found from the executable (installed or in
    // the build tree), not from the current directory.
    if (recipe->empty()) *recipe = shipped_recipe("tsm_k400_1536.toml");
    if (step_recipe->empty()) *step_recipe = shipped_recipe("quickstart/tsm_motion.toml");
    if (*nproc > 1 && !std::getenv("OMPI_COMM_WORLD_SIZE")) {
      std::string self = base::exe_path();
      if (self.empty()) throw base::failure("cannot find the vexp executable to start ranks");
      std::vector<std::string> argv =
          base::mpirun_argv(*nproc, {self, "bench", "comm", "--recipe", *recipe, "--step-recipe", *step_recipe,
                                     "--reps", std::to_string(*reps), "--steps", std::to_string(*steps)});
      std::vector<char*> c;
      for (auto& a : argv) c.push_back(a.data());
      c.push_back(nullptr);
      ::execvp("mpirun", c.data());
      throw base::failure("cannot start mpirun");
    }
    at::set_num_threads(1);
    Session s;
    open_for_bench(s, *recipe, {*dsl::parse_override("dist.backend=\"mpi\"")});
    auto comm = s.host.make<Comm>("comm", "mpi", s.plan->comm_params);
    if (comm->size() < 2) throw base::invalid("vexp bench comm needs 2 or more ranks: mpirun -np 2 vexp bench comm");
    const bool root = comm->rank() == 0;

    // 1. Gradient allreduce.
    std::vector<at::Tensor> params;
    {
      ModelGraph model(*s.plan, s.host);
      for (const auto& p : model.named_parameters(true))
        if (p.value().requires_grad()) params.push_back(p.value().detach().clone().set_requires_grad(true));
    }
    int64_t numel = 0;
    for (auto& p : params) numel += p.numel();
    const double bytes = static_cast<double>(numel) * 4;
    at::Tensor flat = at::randn({numel});
    comm->allreduce(flat, ReduceOp::Sum);  // warm-up
    std::vector<double> t_flat, t_bucket, t_local;
    ReducerOptions ro;  // the fp32 wire of the flat allreduce it is compared with
    ro.bucket_mb = s.plan->dist.bucket_mb;
    ro.prescaled = true;
    Reducer reducer(params, comm, ro);
    // "Backward" of a loss touching every parameter: gradients appear in reverse order.
    // As in the trainer, the loss carries 1/ranks, so the reducer sums and needs no
    // averaging pass (the flat allreduce does not average either).
    const double inv_ranks = 1.0 / static_cast<double>(comm->size());
    auto loss_of = [&] {
      at::Tensor l = at::zeros({});
      for (auto& p : params) l = l + p.sum();
      return l * inv_ranks;
    };
    for (int i = 0; i < *reps + 1; ++i) {
      comm->barrier();
      auto t0 = Clock::now();
      comm->allreduce(flat, ReduceOp::Sum);
      if (i) t_flat.push_back(since(t0));
      comm->barrier();
      for (auto& p : params) if (p.grad().defined()) p.mutable_grad().zero_();
      at::Tensor l = loss_of();
      t0 = Clock::now();
      reducer.prepare(false);
      l.backward();
      if (i) t_local.push_back(since(t0));
      for (auto& p : params) p.mutable_grad().zero_();
      l = loss_of();
      comm->barrier();
      t0 = Clock::now();
      reducer.prepare(true);
      l.backward();
      reducer.finish();
      if (i) t_bucket.push_back(since(t0));
    }
    const double tf = median(t_flat), tb = median(t_bucket), tl = median(t_local);
    if (root) {
      std::printf("gradient allreduce, %d ranks, %lld parameters (%.1f MB), %zu buckets of %.0f MiB, median of %d:\n",
                  comm->size(), (long long)numel, bytes / 1e6, reducer.bucket_members().size(), ro.bucket_mb, *reps);
      std::printf("  flat MPI_Allreduce:       %8.2f ms  %7.2f GB/s\n", tf * 1e3, bytes / tf / 1e9);
      std::printf("  reducer (hooks+buckets):  %8.2f ms  %7.2f GB/s  (backward alone %.2f ms)\n", tb * 1e3,
                  bytes / tb / 1e9, tl * 1e3);
      std::printf("  bandwidth ratio reducer/flat: %.3f (goal >= 0.9; the reducer's time includes backward)\n", tf / tb);
      // What the reducer adds to a step beyond computing the gradients.
      std::printf("  reducer beyond backward:  %8.2f ms  %7.2f GB/s  ratio to flat %.3f\n", (tb - tl) * 1e3,
                  bytes / std::max(1e-9, tb - tl) / 1e9, tf / std::max(1e-9, tb - tl));
    }

    // 2. Weak scaling of a training step: `vexp run`'s step (runtime TrainStep:
    // micro-batches, clip_grad_norm, the scheduled lr) with one GPU per rank, on
    // rank 0 alone (no reducer, its own model) and on every rank (the reducer).
    Session q;
    open_for_bench(q, *step_recipe,
                   {*dsl::parse_override("dist.backend=\"mpi\""),
                    *dsl::parse_override("dist.world_size=" + std::to_string(comm->size()))});
    const dsl::RecipePlan& qp = *q.plan;
    const uint64_t seed = static_cast<uint64_t>(qp.run.seed);
    RigOptions rig_options;  // the CPU, the step recipe's precision
    rig_options.precision = parse_precision(qp.run.precision);
    check_precision(rig_options.precision, rig_options.device,
                    run_setting_where(qp.run, qp.run.precision_loc, "precision", *step_recipe));
    // The plan of the timed steps (the warm-up step included): micro-batches, the lr
    // schedule and the reducer's settings (the step recipe's dist.bucket_mb and
    // dist.compression); rank 0 alone computes the same per-rank batch and exchanges nothing.
    const DistPlan dp = bench_dist_plan(qp, comm->size(), nullptr, *steps + 1, {});
    DistPlan alone_dp = dp;
    alone_dp.ranks = 1;
    alone_dp.world = 1;
    // One rig (rig.hpp: model, optimizer, scaler, reducer, step) per measurement, built alike.
    auto rig = [&](const DistPlan& plan) {
      at::manual_seed(seed);
      auto g = std::make_unique<Rig>(qp, q.host, std::make_shared<ModelGraph>(qp, q.host), comm, rig_options);
      g->start(plan);
      return g;
    };
    const auto& clip = qp.data_facts.clip;
    const int64_t per_gpu = qp.dist.batch_per_gpu;
    at::manual_seed(comm->rank());
    at::Tensor x = at::randn({per_gpu, clip[0], clip[1], clip[2], clip[3]});
    at::Tensor y = at::randint(0, std::max<int64_t>(2, qp.data_facts.classes), {per_gpu}, at::kLong);
    auto next = [&](int64_t) { return Batch{x, y}; };
    auto step_of = [&](Rig& g) {
      int64_t i = 0;
      return [&g, &next, &dp, i]() mutable {
        g.step().run(i, dp.schedule.at(i), next);
        ++i;
      };
    };
    std::vector<double> t1, tn;
    comm->barrier();
    if (root) {
      auto alone = rig(alone_dp);
      auto step = step_of(*alone);
      step();
      for (int i = 0; i < *steps; ++i) {
        auto t0 = Clock::now();
        step();
        t1.push_back(since(t0));
      }
    }
    comm->barrier();  // the other ranks idle while rank 0 measures the baseline
    auto together = rig(dp);
    auto step = step_of(*together);
    step();
    for (int i = 0; i < *steps; ++i) {
      comm->barrier();
      auto t0 = Clock::now();
      step();
      tn.push_back(since(t0));
    }
    if (root) {
      const double a = median(t1), b = median(tn);
      std::printf("training step of %s, %lld clips per rank, 1 thread per rank, median of %d:\n", step_recipe->c_str(),
                  (long long)(per_gpu * dp.micro), *steps);
      std::printf("  1 rank:   %8.2f ms\n  %d ranks: %8.2f ms\n  weak-scaling efficiency: %.3f (goal >= 0.85)\n",
                  a * 1e3, comm->size(), b * 1e3, a / b);
      // What the timed step exchanged its gradients with: the step recipe's settings.
      if (const Reducer* red = together->reducer()) {
        const ReducerOptions& o = red->options();
        std::printf("  step's reducer: %zu buckets of %g MiB, %s wire (the step recipe's dist.bucket_mb, "
                    "dist.compression)\n",
                    red->bucket_members().size(), o.bucket_mb, o.compression == "none" ? "fp32" : o.compression.c_str());
      } else {
        std::printf("  step's gradients: dist.reduction = \"exact\" (the exact sum, no bucketed reducer)\n");
      }
    }
    comm->barrier();
  });
}

}  // namespace vexp::cli
