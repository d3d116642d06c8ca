// vexp bench data RECIPE [--threads 1,2] [--split val] [--clips N] [--pipelines] [--json]
// Decoded, sampled, augmented clips per second through the real loader, per
// wall-clock second and per CPU second of the process (all threads: on a shared
// machine the CPU figure is the per-core rate, the wall figure depends on load).
// The dataset runs the recipe's transform lists (data_pipeline.hpp). --pipelines
// times two pipelines back to back on the same clips, in alternating passes (after
// one untimed pass of each; `--repeat` passes per timing, two timings each): the
// dataset's built-in one and the transform plugins' (the recipe's list for the split,
// or else the built-in pipeline written as plugins, Dataset::default_transforms,
// whose clips must then be the built-in ones bit for bit), and prints the ratio.
#include <sys/resource.h>

#include <chrono>
#include <iomanip>
#include <iostream>
#include <sstream>

#include <ATen/Parallel.h>
#include <ATen/ops/equal.h>
#include <nlohmann/json.hpp>

#include "commands/common.hpp"
#include "vexp/runtime/data_pipeline.hpp"
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
  bool pipelines = false;
  bool json = false;
};

struct Measured {
  int64_t clips = 0;
  double secs = 0, cpu = 0;
};

// Clips 0..n-1 of `split` through a loader of `threads` threads, `repeat` times.
Measured measure(const Dataset& data, Split split, int64_t n, int64_t repeat, int threads) {
  // One clip per batch: the figure is clips, not batches; the loader still
  // decodes `t` clips at a time.
  std::vector<std::vector<int64_t>> batches;
  for (int64_t r = 0; r < repeat; ++r)
    for (int64_t i = 0; i < n; ++i) batches.push_back({i});
  LoaderOptions o;
  o.split = split;
  o.seed = 1;
  o.workers = threads;
  o.prefetch = 2 * threads + 2;
  Measured m;
  const auto t0 = std::chrono::steady_clock::now();
  const double c0 = cpu_seconds();
  Loader loader(data, batches, o);
  Batch b;
  while (loader.next(b)) m.clips += b.clips.size(0);
  m.secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  m.cpu = cpu_seconds() - c0;
  return m;
}

// --pipelines: the built-in pipeline against the transform plugins', per thread count.
void run_bench_pipelines(const BenchDataArgs& a, Session& s, Split split) {
  const auto& plan = *s.plan;
  auto builtin = s.host.make<Dataset>("dataset", plan.dataset, plan.dataset_params);
  auto plugins = s.host.make<Dataset>("dataset", plan.dataset, plan.dataset_params);
  const bool given = !(split == Split::Train ? plan.train_transforms : plan.test_transforms).empty();
  const std::string list = split == Split::Train ? "data.train_transforms" : "data.test_transforms";
  std::string what;
  if (given) {
    attach_transforms(*plugins, s.host, plan);
    what = "the recipe's " + list;
  } else {
    ClipPipeline p = make_default_pipeline(s.host, *plugins, split);
    if (p.empty() || !plugins->set_transforms(split, std::move(p)))
      throw base::invalid("--pipelines: dataset '" + plan.dataset +
                          "' does not describe its built-in pipeline as transform plugins, and the recipe gives no " +
                          list);
    what = "the built-in pipeline as transform plugins";
  }
  std::string chain;
  for (const TransformSpec& t : builtin->default_transforms(split)) chain += (chain.empty() ? "" : ", ") + t.type;
  const int64_t n = a.clips > 0 ? std::min(a.clips, builtin->size(split)) : builtin->size(split);
  // The same clips: with the built-in pipeline as plugins they must be identical.
  int64_t identical = -1;
  if (!given) {
    identical = 0;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t v = 0; v < builtin->views(split); ++v)
        identical += at::equal(builtin->get_view(split, i, v, 1).clip, plugins->get_view(split, i, v, 1).clip);
    if (identical != n * builtin->views(split))
      throw base::failure("--pipelines: the built-in pipeline written as plugins made " +
                          std::to_string(n * builtin->views(split) - identical) + " of " +
                          std::to_string(n * builtin->views(split)) + " clips that differ from the built-in ones");
  }
  if (!a.json)
    std::cout << split_name(split) << " split, " << n << " clips x " << a.repeat << " passes; built-in: " << chain
              << "; plugins: " << what << (identical >= 0 ? " (the same clips, bit for bit)" : "") << "\n";
  nlohmann::json results = nlohmann::json::array();
  for (int t : a.threads) {
    // One untimed pass of each (files in the page cache, decoders warm), then
    // alternating timed passes in both orders (built-in, plugins, plugins, built-in):
    // load drifts on a shared machine fall on both alike.
    measure(*builtin, split, n, 1, t);
    measure(*plugins, split, n, 1, t);
    Measured b, p;
    for (int round = 0; round < 2; ++round)
      for (int k = 0; k < 2; ++k) {
        const bool first_builtin = (k == 0) == (round == 0);
        const Measured m = measure(first_builtin ? *builtin : *plugins, split, n, a.repeat, t);
        Measured& into = first_builtin ? b : p;
        into.clips += m.clips, into.secs += m.secs, into.cpu += m.cpu;
      }
    const double ratio = (p.secs / p.clips) / (b.secs / b.clips);
    const double cpu_ratio = b.cpu > 0 ? (p.cpu / p.clips) / (b.cpu / b.clips) : 0.0;
    results.push_back({{"threads", t},
                       {"clips", b.clips},
                       {"builtin_clips_per_s", b.clips / b.secs},
                       {"plugins_clips_per_s", p.clips / p.secs},
                       {"builtin_clips_per_cpu_s", b.cpu > 0 ? b.clips / b.cpu : 0.0},
                       {"plugins_clips_per_cpu_s", p.cpu > 0 ? p.clips / p.cpu : 0.0},
                       {"time_ratio", ratio},
                       {"cpu_ratio", cpu_ratio}});
    if (!a.json)
      std::cout << std::fixed << std::setprecision(1) << "threads " << t << ": built-in " << b.clips / b.secs
                << " clips/s (" << (b.cpu > 0 ? b.clips / b.cpu : 0.0) << " per CPU s), plugins " << p.clips / p.secs
                << " clips/s (" << (p.cpu > 0 ? p.clips / p.cpu : 0.0) << " per CPU s): plugins / built-in time per clip "
                << std::setprecision(3) << ratio << " (CPU " << cpu_ratio << ")\n";
  }
  if (a.json) {
    nlohmann::json out{{"dataset", plan.dataset}, {"split", a.split},          {"clip", plan.data_facts.clip},
                       {"builtin", chain},        {"plugins", what},           {"results", results}};
    if (identical >= 0) out["identical_clips"] = identical;
    std::cout << out.dump(2) << "\n";
  }
}

void run_bench_data(const BenchDataArgs& a) {
  Session s;
  RecipeArgs recipe = a.recipe;
  recipe.require_data = true;
  if (!open_session(s, recipe)) throw base::invalid("");
  const auto& plan = *s.plan;
  at::set_num_threads(1);
  const Split split = a.split == "train" ? Split::Train : Split::Val;
  if (a.pipelines) return run_bench_pipelines(a, s, split);
  auto data = make_dataset(s.host, plan);
  const int64_t n = a.clips > 0 ? std::min(a.clips, data->size(split)) : data->size(split);
  nlohmann::json results = nlohmann::json::array();
  for (int t : a.threads) {
    const Measured m = measure(*data, split, n, a.repeat, t);
    const int64_t clips = m.clips;
    const double secs = m.secs, cpu = m.cpu;
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
  cmd->add_flag("--pipelines", a->pipelines,
                "Time the dataset's built-in pipeline and the transform plugins' (the recipe's list, or the built-in "
                "one as plugins) back to back on the same clips, and print the ratio");
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
