// vexp plan RECIPE... --cluster FILE [--gpus 8,64,...] [--layout frames|videos] [--threads-per-gpu N]
//   [--bucket-mb X] [--fixed-batch] [--noise-from RUN_DIR|CLIPS] [--json] [--plot FILE.png] [--tune OVERLAY.toml]
// vexp plan --measure-local [RECIPE...] [--out clusters/local.toml] [--ranks R] ... (plan/measure_local.hpp)
#include <cmath>
#include <filesystem>
#include <iostream>
#include <tuple>
#include <memory>

#include "commands/cluster_file.hpp"
#include "commands/common.hpp"
#include "vexp/rundir/files.hpp"
#include "vexp/rundir/noise.hpp"
#include "vexp/base/text.hpp"
#include "commands/measure_local.hpp"
#include "commands/plan_output.hpp"
#include "vexp/runtime/dry_run.hpp"
#include "vexp/plan/cluster.hpp"
#include "vexp/plan/planner.hpp"

namespace vexp::cli {

namespace {
namespace fs = std::filesystem;

struct PlanArgs {
  std::vector<std::string> recipes;
  std::string cluster;
  std::string gpus;
  std::string layout = "frames";
  double threads_per_gpu = 0;
  double bucket_mb = 0;
  bool fixed_batch = false;
  std::string noise_from;
  bool noise_given = false;  // --noise-from given (an empty value is refused, not ignored)
  bool json = false;
  std::string plot, tune;
  std::vector<std::string> sets;
  std::vector<std::string> plugin_paths;
  MeasureLocalArgs measure;  // --measure-local and its options
};

constexpr long long kMaxGpus = 100000000;

std::vector<int64_t> parse_gpus(const std::string& text) {
  std::vector<int64_t> out;
  for (const std::string& item : base::split(text, ',')) {
    char* stop = nullptr;
    const long long v = std::strtoll(item.c_str(), &stop, 10);
    if (item.empty() || *stop != '\0')
      throw base::invalid("--gpus '" + base::printable(text, 80) +
                                   "': expected GPU counts separated by commas, e.g. 8,64,512");
    // A cluster file has at most 100,000 nodes x 1,024 GPUs (docs/planning.md).
    if (v < 1 || v > kMaxGpus)
      throw base::invalid("--gpus '" + base::printable(text, 80) + "': '" + item + "' is out of range: a GPU count is 1 to " +
                                   std::to_string(kMaxGpus));
    out.push_back(v);
  }
  return out;
}

// --noise-from: a run folder that measured the noise scale (run.noise_scale_every),
// its last smoothed B_noise; or a number of clips. A folder by that name wins over
// the number. Returns the value and where it came from.
std::pair<double, std::string> noise_from(const std::string& arg) {
  const std::string shown = "'" + base::printable(arg, 200) + "'";
  std::error_code ec;
  if (!fs::exists(arg, ec)) {
    char* stop = nullptr;
    const double v = std::strtod(arg.c_str(), &stop);
    if (arg.empty() || *stop != '\0' || arg.find_first_of("0123456789") == std::string::npos)
      throw base::invalid("--noise-from " + shown +
                          ": no such run folder, and not a number of clips (give RUN_DIR or a noise scale, e.g. 2048)");
    if (!std::isfinite(v) || v <= 0 || v > 1e15)
      throw base::invalid("--noise-from " + shown + ": a noise scale is a positive number of clips, at most 1e15");
    return {v, "--noise-from " + base::printable(arg, 80)};
  }
  if (!fs::is_directory(arg, ec)) throw base::invalid("--noise-from " + shown + " is not a folder: give a run folder");
  const rundir::RunDir rd(arg);
  if (rd.is_sweep_dir())
    throw base::invalid("--noise-from " + shown +
                        " is a sweep folder: give one of its trials' run folders (vexp results lists them)");
  if (!rd.is_run_dir())
    throw base::invalid("--noise-from " + shown + " is not a run folder (no metrics.jsonl or summary.json)");
  const auto records = rundir::read_noise(arg);  // once: the value and the step it names
  const std::optional<double> v = rundir::last_noise_scale(arg, records);
  if (!v)
    throw base::invalid("--noise-from " + shown +
                        ": the run measured no noise scale (train with run.noise_scale_every = N; docs/batch-size.md)");
  if (!std::isfinite(*v) || *v <= 0)
    throw base::invalid("--noise-from " + shown + ": the run's last noise scale is " + std::to_string(*v) +
                        " clips, not a positive number (|G|^2 is not yet above the noise; measure longer)");
  std::string where = base::printable(arg, 200);
  if (!records.empty()) {
    const rundir::NoiseRecord& last = records.back();
    where += " (last smoothed value, step " + std::to_string(last.global_step) + ", global batch " +
             std::to_string(last.big_batch) + ")";
  }
  return {*v, where};
}

// The planner's RecipeOpener: a fresh session of `recipe` with `overrides`, validated
// for planning (as `vexp run --dry-run`); base::Error (invalid) with its diagnostics
// otherwise. The first opening prints the recipe's warnings; the re-plans at other
// GPU counts (`quiet`) only their errors.
void open_for_planning(Session& s, const std::string& recipe, const std::vector<dsl::Override>& overrides,
                       const std::vector<std::string>& plugin_paths, bool quiet) {
  load_session_plugins(s, plugin_paths);
  bool ok = false;
  ok = open_recipe(s, recipe, planning_options(overrides));
  if (quiet && ok) return;
  if (!print_recipe_diagnostics(s, recipe, ok)) throw base::invalid("");
  if (!s.stand_in_note.empty()) std::cerr << "vexp: note: " << s.stand_in_note << "\n";
}

void run_plan(const PlanArgs& a) {
  // --measure-local (tools/vexp/commands/measure_local.hpp): the recipes are the
  // profiles measured; no --cluster.
  if (a.measure.enabled) {
    if (!a.cluster.empty() || !a.gpus.empty() || a.json || !a.plot.empty() || !a.tune.empty() ||
        a.noise_given)
      throw base::invalid("--measure-local writes a cluster file (--out); it takes no --cluster, --gpus, --json, "
                               "--plot, --tune or --noise-from");
    MeasureLocalArgs m = a.measure;
    m.recipes = a.recipes;
    m.plugin_paths = a.plugin_paths;
    run_measure_local(m);
    return;
  }
  if (a.cluster.empty()) throw base::invalid("vexp plan needs --cluster FILE (a cluster description, docs/planning.md)");
  if (a.recipes.empty()) throw base::invalid("vexp plan needs at least one RECIPE");
  if (!a.tune.empty() && a.recipes.size() != 1)
    throw base::invalid("--tune writes one recipe's overlay: give one RECIPE");
  if (!a.plot.empty()) check_output_path(a.plot, "--plot");
  if (!a.tune.empty()) check_output_path(a.tune, "--tune");
  const std::vector<std::pair<std::string, std::string>> outputs = {{a.tune, "--tune"}, {a.plot, "--plot"}};
  // --tune R onto R would make R `extends = "R"`: a cycle, and the recipe lost.
  std::vector<std::pair<std::string, std::string>> inputs{{a.cluster, "the cluster file"}};
  for (const auto& r : a.recipes) inputs.emplace_back(r, "the recipe");
  for (const auto& [out, option] : outputs) rundir::refuse_output(out, option, inputs);
  const plan::Cluster cluster = open_cluster_file(a.cluster);
  plan::PlanOptions o;
  if (!a.gpus.empty()) o.gpus = parse_gpus(a.gpus);
  o.data.layout = a.layout;
  o.data.threads_per_gpu = a.threads_per_gpu;
  o.bucket_mb = a.bucket_mb;
  o.fixed_batch = a.fixed_batch;
  o.overrides = parse_sets(a.sets);
  if (a.noise_given) std::tie(o.noise_scale, o.noise_from) = noise_from(a.noise_from);
  const plan::RecipeOpener open = [&a](Session& s, const std::string& recipe,
                                       const std::vector<dsl::Override>& overrides, bool quiet) {
    open_for_planning(s, recipe, overrides, a.plugin_paths, quiet);
  };
  std::vector<plan::RecipeResult> results;
  for (const auto& r : a.recipes) {
    results.push_back(plan::plan_recipe(r, cluster, o, open));
  }
  // Every file planning read (the recipes' `extends` bases, the profiles the cluster
  // file names with `from`) is an input too: refused before anything is printed.
  for (const auto& [out, option] : outputs) rundir::refuse_output(out, option);
  if (a.json) std::cout << plan_json(cluster, results).dump(2) << "\n";
  else std::cout << plan_table(cluster, results);
  if (!a.plot.empty()) {
    write_plot(results, a.plot);
    if (!a.json) std::cout << "plot: " << base::printable(a.plot) << "\n";
  }
  if (!a.tune.empty()) {
    write_tune(cluster, results.front(), a.tune);
    if (!a.json)
      std::cout << "overlay: " << base::printable(a.tune) << " (vexp check " << base::printable(a.tune) << ")\n";
  }
}

}  // namespace

void add_plan(CLI::App& app) {
  auto* cmd = app.add_subcommand("plan", "Predict a recipe's step time, scaling and bottleneck on a described cluster");
  auto a = std::make_shared<PlanArgs>();
  cmd->add_option("recipes", a->recipes, "Recipe file(s); several are planned side by side");
  cmd->add_option("--cluster", a->cluster, "Cluster description (TOML with a [cluster] table; docs/planning.md)");
  cmd->add_option("--gpus", a->gpus, "GPU counts, comma-separated (default: the recipe's dist.world_size)");
  cmd->add_option("--layout", a->layout, "Training data as JPEG frame folders or video files")
      ->check(CLI::IsMember({"frames", "videos"}));
  cmd->add_option("--threads-per-gpu", a->threads_per_gpu,
                  "Decode threads per GPU (default: the cluster's cores_per_node / gpus_per_node)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--bucket-mb", a->bucket_mb, "Gradient bucket size in MiB (default: the recipe's dist.bucket_mb)")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--fixed-batch", a->fixed_batch,
                "Keep the recipe's dist.world_size (global batch) and emulate it on G GPUs; G must divide it "
                "(default: weak scaling, dist.world_size = G)");
  CLI::Option* noise = cmd->add_option("--noise-from", a->noise_from,
                  "A run folder that measured the gradient noise scale (run.noise_scale_every), or the noise scale in "
                  "clips: adds the time to accuracy (statistical efficiency, steps, time, goodput; docs/planning.md)");
  cmd->add_flag("--json", a->json, "Print JSON (docs/planning.md)");
  cmd->add_option("--plot", a->plot, "Write a PNG: efficiency and the step-time split against GPU count");
  cmd->add_option("--tune", a->tune, "Write the suggested settings as a recipe overlay (extends = RECIPE)");
  cmd->add_option("--set", a->sets, "Override a recipe value: --set dist.batch_per_gpu=16 (repeatable)");
  add_plugin_path_option(cmd, a->plugin_paths);
  add_measure_local_options(cmd, a->measure);
  cmd->callback([a, noise] {
    a->noise_given = noise->count() > 0;
    run_plan(*a);
  });
}

}  // namespace vexp::cli
