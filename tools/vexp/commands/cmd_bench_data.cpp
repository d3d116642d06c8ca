// vexp bench data RECIPE [--threads 1,2] [--split val] [--clips N] [--json]
// Decoded, sampled, augmented clips per second through the real loader, per
// wall-clock second and per CPU second of the process (all threads: on a shared
// machine the CPU figure is the per-core rate, the wall figure depends on load).
#include <sys/resource.h>

#include <chrono>
#include <iomanip>
#include <iostream>
#include <sstream>

#include <ATen/Parallel.h>
#include <nlohmann/json.hpp>

#include "commands/common.hpp"
#include "vexp/runtime/loader.hpp"
#include "vexp/dataset.hpp"

namespace vexp::cli {

namespace {
double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

// data.workers' limit (dsl/src/sections.cpp): the loader starts one thread per count.
constexpr int kMaxBenchThreads = 256;

struct BenchDataArgs {
  RecipeArgs recipe;
  std::vector<int> threads{1};
  std::string split = "val";
  int64_t clips = 0;  // 0: the whole split
  int64_t repeat = 1;
  bool json = false;
};

void run_bench_data(const BenchDataArgs& a) {
  Session s;
  RecipeArgs recipe = a.recipe;
  recipe.require_data = true;
  if (!open_session(s, recipe)) throw base::invalid("");
  const auto& plan = *s.plan;
  at::set_num_threads(1);
  auto data = s.host.make<Dataset>("dataset", plan.dataset, plan.dataset_params);
  const Split split = a.split == "train" ? Split::Train : Split::Val;
  const int64_t n = a.clips > 0 ? std::min(a.clips, data->size(split)) : data->size(split);
  nlohmann::json results = nlohmann::json::array();
  for (int t : a.threads) {
    // One clip per batch: the figure is clips, not batches; the loader still
    // decodes `t` clips at a time.
    std::vector<std::vector<int64_t>> batches;
    for (int64_t r = 0; r < a.repeat; ++r)
      for (int64_t i = 0; i < n; ++i) batches.push_back({i});
    LoaderOptions o;
    o.split = split;
    o.seed = 1;
    o.workers = t;
    o.prefetch = 2 * t + 2;
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = cpu_seconds();
    Loader loader(*data, batches, o);
    Batch b;
    int64_t clips = 0;
    while (loader.next(b)) clips += b.clips.size(0);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double cpu = cpu_seconds() - c0;
    const double rate = static_cast<double>(clips) / secs;
    const double cpu_rate = cpu > 0 ? static_cast<double>(clips) / cpu : 0.0;
    results.push_back({{"threads", t}, {"clips", clips}, {"seconds", secs}, {"clips_per_s", rate},
                       {"clips_per_s_per_thread", rate / t}, {"cpu_seconds", cpu}, {"clips_per_cpu_s", cpu_rate}});
    if (!a.json)
      std::cout << std::fixed << std::setprecision(1) << "threads " << t << ": " << clips << " clips in "
                << std::setprecision(2) << secs << " s = " << std::setprecision(1) << rate << " clips/s ("
                << rate / t << " per thread), " << cpu_rate << " per CPU second\n";
  }
  if (a.json) {
    nlohmann::json out{{"dataset", plan.dataset}, {"split", a.split}, {"clip", plan.data_facts.clip},
                       {"skipped_samples", data->skipped_samples()}, {"results", results}};
    std::cout << out.dump(2) << "\n";
  }
}
}  // namespace

void add_bench_data(CLI::App& bench) {
  auto* cmd = bench.add_subcommand("data", "Decoded clips/s of a recipe's dataset through the loader, per thread count");
  auto a = std::make_shared<BenchDataArgs>();
  a->recipe.add_to(cmd);
  cmd->add_option("--threads", a->threads, "Loader thread counts to measure (e.g. 1,2), each 1 to 256 (data.workers' limit)")
      ->delimiter(',');
  cmd->add_option("--split", a->split, "Split to read")->check(CLI::IsMember({"train", "val"}));
  cmd->add_option("--clips", a->clips, "Clips per measurement (0: the whole split)")
      ->check(CLI::Range(int64_t{0}, int64_t{1000000000}));
  cmd->add_option("--repeat", a->repeat, "Passes over the clips")->check(CLI::Range(1, 1000));
  cmd->add_flag("--json", a->json, "Print JSON");
  cmd->callback([a] {
    for (int t : a->threads)
      if (t < 1 || t > kMaxBenchThreads)
        throw base::invalid("--threads " + std::to_string(t) + ": each thread count must be 1 to " +
                                     std::to_string(kMaxBenchThreads) + " (the limit of data.workers)");
    run_bench_data(*a);
  });
}

}  // namespace vexp::cli
