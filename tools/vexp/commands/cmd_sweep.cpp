// vexp sweep SWEEP.toml [--out DIR] [--jobs N] [--ranks-per-trial R] [--dry-run]
// Runs every trial of a sweep as a child `vexp run` in DIR/trials/NNN/, records
// them in DIR/sweep.db, and resumes when run again. The command line; the engine
// is vexp::sweep (pkg/sweep: definition, expansion, directory and store, the
// local and Slurm drivers), whose errors (vexp::base::Error kinds) main.cpp maps to exit codes; the
// results table, best recipe and plots are report/sweep_results.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <functional>
#include <iostream>
#include <optional>
#include <utility>

#include "commands/cluster_file.hpp"
#include "commands/common.hpp"
#include "vexp/base/attempt.hpp"
#include "vexp/report/html_report.hpp"
#include "vexp/report/sweep_results.hpp"
#include "vexp/rundir/files.hpp"
#include "vexp/sweep/definition.hpp"
#include "vexp/sweep/directory.hpp"
#include "vexp/sweep/expansion.hpp"
#include "vexp/sweep/local_driver.hpp"
#include "vexp/sweep/store.hpp"
#include "vexp/base/lock.hpp"
#include "vexp/sweep/slurm_driver.hpp"
#include "vexp/base/process.hpp"
#include "vexp/base/text.hpp"

namespace vexp::cli {
namespace fs = std::filesystem;
using namespace vexp::sweep;

namespace {

struct SweepArgs {
  std::string path, out;
  std::vector<std::string> plugin_paths;  // --plugin-path, passed on to every trial
  std::vector<std::string> sets;          // --set, applied to every trial before the sweep's own values
  int jobs = 1, ranks = 1, gpus = -1;
  bool dry_run = false, retry_failed = false, retry_cancelled = false, no_report = false;
  // --cluster: every trial a Slurm job (vexp::sweep's Slurm driver).
  std::string cluster;
  slurm::Choices choices;  // --time, --partition, --account (with --cluster)
  int max_running = 0;
  double poll_s = 30;
  bool jobs_given = false, ranks_given = false, gpus_given = false;
};

void print_trials(const std::vector<Trial>& trials) {
  for (const auto& t : trials) {
    std::printf("trial %03lld  global_batch %-6lld lr %-10.6g", static_cast<long long>(t.id),
                static_cast<long long>(t.figures.global_batch), t.figures.lr);
    for (const auto& o : t.overrides) std::printf(" --set %s=%s", o.path.c_str(), o.text.c_str());
    std::printf("\n");
  }
}

// The definition and its trials, every recipe validated; base::Error (invalid) with every problem.
std::pair<Definition, std::vector<Trial>> load_sweep(const SweepArgs& a, Session& s) {
  dsl::Diagnostics d;
  std::optional<Definition> def;
  def = load_definition(a.path, d);
  std::vector<Trial> trials;
  s.require_data = !a.dry_run;  // listing trials needs no data; running them does
  if (def) {
    def->cli_sets = parse_sets(a.sets);
    const std::string conflict = cli_set_conflict(*def);
    if (!conflict.empty()) throw base::invalid(a.path + ": " + conflict);
    // Counted before anything is expanded or validated, so that a sweep of 10^12
    // trials is one line, not an exhausted memory.
    const std::optional<int64_t> n = trial_count(*def);
    if (!n || *n > kMaxTrials)
      throw base::invalid(a.path + ": " + (n ? std::to_string(*n) : std::string("more than 2^63")) +
                                   " trials (the grid and list axes multiplied, times [sweep.random] count); a "
                                   "sweep may have at most " + std::to_string(kMaxTrials) +
                                   ": narrow the axes or split the sweep");
    trials = expand(*def, s, a.ranks, d);
  }
  for (const auto& diag : d.sorted()) std::cerr << diag.str() << "\n";
  if (d.has_errors()) {
    size_t n = d.error_count();
    throw base::invalid(a.path + ": " + std::to_string(n) + (n == 1 ? " error" : " errors") +
                                 (def ? "; no trial was started" : ""));
  }
  return {std::move(*def), std::move(trials)};
}

// The command: validate and expand the sweep, then run (or list) its trials.
// Engine errors (vexp::sweep::Error, a base::Error) travel to main.cpp unchanged.
void sweep_command(const SweepArgs& a) {
  Session s;
  load_session_plugins(s, a.plugin_paths);
  // --cluster: the cluster file and Slurm first (nothing is expanded, written or
  // submitted when they are wrong).
  std::optional<SlurmLaunch> cl;
  if (!a.cluster.empty()) {
    for (const auto& [given, name] : {std::pair<bool, const char*>{a.jobs_given, "--jobs"},
                                      {a.ranks_given, "--ranks-per-trial"}, {a.gpus_given, "--gpus"}})
      if (given)
        throw base::invalid(std::string(name) + " places trials on this machine's cores; with --cluster every "
                                                     "trial is a Slurm job of its own recipe's shape (--max-running "
                                                     "K limits how many are queued or running at once)");
    if (!(a.poll_s >= 1) || a.poll_s > 3600)
      throw base::invalid("--poll " + base::printable(std::to_string(a.poll_s)) +
                                   ": seconds between two polls of Slurm, from 1 to 3600 (one squeue call each)");
    cl.emplace();
    cl->cluster_file = a.cluster;
    cl->cluster = open_scheduler_cluster(a.cluster, "vexp sweep --cluster");
    // vexp submit's options, checked as vexp submit checks them (slurm::apply_choices).
    if (const std::string why = slurm::apply_choices(cl->cluster.scheduler.settings, a.choices, a.cluster);
        !why.empty())
      throw base::invalid(why + "; nothing submitted");
    cl->choices = a.choices;
    cl->retry_cancelled = a.retry_cancelled;
    cl->max_running = a.max_running;
    cl->poll_s = a.poll_s;
    cl->retry_failed = a.retry_failed;
    cl->diverged_exit_code = kExitDiverged;
    cl->plugin_dirs = s.plugin_dirs;
    if (!a.dry_run && !base::find_program("sbatch"))
      throw base::failure("sbatch is not on PATH: vexp sweep --cluster runs where Slurm's commands are (a login "
                               "node); nothing submitted (--dry-run prints every trial's batch script)");
  }
  if (a.cluster.empty())
    for (const auto& [given, name] : {std::pair<bool, const char*>{!a.choices.empty(), "--time, --partition and --account"},
                                      {a.retry_cancelled, "--retry-cancelled"}})
      if (given)
        throw base::invalid(std::string(name) + " apply to a cluster sweep (--cluster FILE), whose trials are Slurm jobs");
  auto [def, trials] = load_sweep(a, s);
  std::cout << a.path << ": " << trials.size() << " trials, every recipe valid\n";
  if (def.target)
    std::cout << "target: " << def.target->text()
              << " (each trial's steps, clips and wall-clock time to its first evaluation that reaches it)\n";
  if (a.dry_run) {
    print_trials(trials);
    if (cl) {
      const fs::path dir = !a.out.empty() ? fs::path(a.out) : !def.out.empty() ? fs::path(def.out)
                                                                               : fs::path("runs/sweeps") / def.name;
      cl->exe = base::exe_path();
      std::cout << slurm_dry_run(trials, s, def, dir, *cl);
      std::cerr << "vexp: dry run: " << trials.size() << " batch script(s); nothing written, nothing submitted\n";
    }
    return;
  }

  const Slots slots = cl ? Slots{} : plan_slots(a.jobs, a.ranks, a.gpus);
  Launch launch;
  launch.retry_failed = a.retry_failed;
  if (a.ranks > 1 && !cl) {
    launch.mpirun = base::find_program("mpirun").value_or("");
    if (launch.mpirun.empty())
      throw base::invalid("--ranks-per-trial " + std::to_string(a.ranks) + " needs mpirun on PATH");
  }
  launch.exe = base::exe_path();
  if (launch.exe.empty()) throw base::failure("cannot find the vexp executable (/proc/self/exe)");

  // The store: new, or the same sweep resumed.
  const fs::path dir = !a.out.empty() ? fs::path(a.out) : !def.out.empty() ? fs::path(def.out)
                                                                           : fs::path("runs/sweeps") / def.name;
  // A run directory is not a sweep directory: its files would mix with the trials'.
  if (const rundir::RunDir rd(dir); !rd.is_sweep_dir())
    for (const char* f : {rundir::kResolved, rundir::kMetrics, rundir::kSummary, rundir::kCheckpoints}) {
      std::error_code ec;
      if (fs::exists(dir / f, ec))
        throw base::failure("'" + dir.string() + "' is a run directory (it holds " + f +
                                     "), not a sweep directory: give --out another directory");
    }
  std::error_code mk;
  fs::create_directories(dir / "trials", mk);
  if (mk) throw base::failure("cannot create the sweep directory '" + dir.string() + "': " + mk.message());
  // One sweep at a time in a directory (until the reports are written); each
  // trial's `vexp run` locks its own folder.
  base::DirLock lock;
  lock = base::DirLock(dir.string(), "vexp sweep");
  Store store;
  RunsOn how;  // recorded at creation; a folder runs one way
  if (cl) how = RunsOn{true, fs::absolute(a.cluster).lexically_normal().string()};
  open_sweep_store(store, dir, def, trials, how, s);
  if (cl) {
    cl->exe = launch.exe;
    run_trials_on_slurm(store, s, def, dir, *cl);
  } else {
    run_trials(store, s, def, dir, slots, launch);
  }

  std::cout << "\n" << report::results_text(dir.string(), "table", "");
  if (!a.no_report) {
    // The three outputs of a finished sweep; one that cannot be written (a trial's run
    // file the report cannot read, no gnuplot) is a warning, the others still come.
    const std::vector<std::function<void()>> outputs = {
        [&] {
          const report::BestRecipe best = report::write_best_recipe(dir.string(), (dir / "best_recipe.toml").string());
          std::cout << report::best_recipe_line(best, (dir / "best_recipe.toml").string()) << "\n";
        },
        [&] {
          auto w = report::write_html_report({dir.string()}, (dir / "report.html").string());
          std::cout << "report: " << w.path << "\n";
        },
        [&] {
          auto files = report::write_report(dir.string(), (dir / "report").string());
          std::cout << "plots: " << files.size() << " PNG files in " << (dir / "report").string() << "\n";
        }};
    for (const auto& write : outputs)
      if (auto wrote = base::attempt(write); !wrote)
        std::cerr << "vexp: warning: " << base::printable(wrote.message(), 4096) << "\n";
  }
  int failed = 0, cancelled = 0;  // this invocation's and earlier ones' (kept unless --retry-failed / --retry-cancelled)
  for (const auto& r : store.rows()) {
    failed += r.status == "failed" ? 1 : 0;
    cancelled += r.status == "cancelled" ? 1 : 0;
  }
  if (cancelled > 0)
    std::cout << cancelled << " trial(s) cancelled by vexp cancel (not failed); --retry-cancelled submits them again\n";
  if (failed > 0)
    throw base::failure(std::to_string(failed) + " trial(s) failed; see their log.txt (rerun with --retry-failed)");
}

}  // namespace

void add_sweep(CLI::App& app) {
  auto* cmd = app.add_subcommand("sweep", "Run a batch-size / learning-rate study (or any grid/random sweep)");
  auto a = std::make_shared<SweepArgs>();
  cmd->add_option("sweep", a->path, "Sweep definition (.toml)")->required();
  cmd->add_option("--out", a->out, "Sweep directory (default: [sweep] out, else runs/sweeps/<name>)");
  cmd->add_option("--jobs", a->jobs, "Trials run at once; the cores (and GPUs) are split between them")
      ->check(CLI::Range(1, 1024))
      ->each([a](const std::string&) { a->jobs_given = true; });
  cmd->add_option("--ranks-per-trial", a->ranks, "Ranks per trial (> 1: each trial is launched with mpirun -np R)")
      ->check(CLI::Range(1, 1024))
      ->each([a](const std::string&) { a->ranks_given = true; });
  cmd->add_option("--gpus", a->gpus, "GPUs to split between trials (default: the /dev/nvidiaN devices present)")
      ->check(CLI::Range(0, 1024))
      ->each([a](const std::string&) { a->gpus_given = true; });
  cmd->add_option("--cluster", a->cluster,
                  "Cluster file with a [scheduler] table: every trial is a Slurm job of its own recipe's shape, "
                  "submitted and followed by this process (docs/clusters.md)");
  cmd->add_option("--max-running", a->max_running,
                  "With --cluster: trials queued or running at once (0: all)")
      ->check(CLI::Range(0, 100000));
  cmd->add_option("--poll", a->poll_s, "With --cluster: seconds between two polls of Slurm (one squeue call each)");
  // vexp submit's --time, --partition, --account: every trial's job (recorded in sweep.db).
  add_choice_options(cmd, a->choices);
  cmd->add_flag("--dry-run", a->dry_run, "Validate every trial and print them; run nothing");
  cmd->add_option("--set", a->sets,
                  "Override a recipe value in every trial, as if the base recipe had it: --set run.epochs=2 "
                  "(repeatable; a key the sweep itself sets is an error)")
      ->allow_extra_args(false)  // one KEY=VALUE each time: never the sweep file after it
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  add_plugin_path_option(cmd, a->plugin_paths);
  cmd->add_flag("--retry-failed", a->retry_failed, "When resuming, rerun trials that failed");
  cmd->add_flag("--retry-cancelled", a->retry_cancelled,
                "With --cluster, when resuming: submit again the trials that vexp cancel cancelled");
  cmd->add_flag("--no-report", a->no_report, "Do not write the best recipe, report.html and the PNG plots at the end");
  cmd->callback([a] { sweep_command(*a); });
}

}  // namespace vexp::cli
