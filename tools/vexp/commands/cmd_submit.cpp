// vexp submit RECIPE [--set k=v]... --cluster clusters/NAME.toml [--nodes N] [--time T] [--partition P]
//   [--account A] [--out DIR] [--dry-run]
// vexp job-record RUN_DIR EVENT STATE [EXIT] (the batch script's own call)
// (vexp status and vexp cancel, which follow the jobs: cmd_jobs.cpp)
// Slurm is driven through its commands with argv (sbatch, scontrol), never a shell
// string; the job (its batch script, every value quoted, sbatch, the record) is
// vexp::slurm's one job of a run (run_job.hpp): this command makes its own choices.
#include <filesystem>
#include <iostream>
#include <memory>

#include "commands/cluster_file.hpp"
#include "commands/common.hpp"
#include "vexp/base/process.hpp"
#include "vexp/base/text.hpp"
#include "vexp/plan/cluster.hpp"
#include "vexp/rundir/files.hpp"
#include "vexp/slurm/job.hpp"
#include "vexp/slurm/run_job.hpp"

namespace vexp::cli {

namespace {

namespace fs = std::filesystem;
using base::printable;

struct SubmitArgs {
  RecipeArgs recipe;
  std::string cluster, out;
  slurm::Choices choices;  // --time, --partition, --account
  int64_t nodes = 0;
  bool dry_run = false;
};

// The submit as the user would type it again (the script's header).
std::string submit_line(const SubmitArgs& a) {
  std::string s = "vexp submit " + shell_quote(a.recipe.path);
  for (const auto& x : a.recipe.sets) s += " --set " + shell_quote(x);
  s += " --cluster " + shell_quote(a.cluster);
  if (a.nodes > 0) s += " --nodes " + std::to_string(a.nodes);
  if (!a.choices.empty()) s += " " + slurm::choices_words(a.choices);
  if (!a.out.empty()) s += " --out " + shell_quote(a.out);
  return s;
}

void run_submit(const SubmitArgs& a) {
  if (a.cluster.empty()) throw base::invalid("vexp submit needs --cluster FILE (a cluster file with [scheduler])");
  for (const auto& x : a.recipe.sets)
    if (base::has_control(x))
      throw base::invalid("--set '" + printable(x, 60) + "' holds a newline or control character");

  const plan::Cluster c = open_scheduler_cluster(a.cluster, "vexp submit");
  // The cluster's settings with this command line's choices, checked as the cluster
  // file's are (the time limit longer than signal_lead_s included).
  slurm::Settings sch = c.scheduler.settings;
  if (const std::string why = slurm::apply_choices(sch, a.choices, a.cluster); !why.empty())
    throw base::invalid(why + "; nothing submitted");

  // sbatch first: without it nothing else is worth doing.
  if (!a.dry_run && !base::find_program("sbatch"))
    throw base::failure("sbatch is not on PATH: vexp submit runs where Slurm's commands are (a login node); "
                             "nothing submitted (--dry-run prints the script)");

  Session s;
  if (!open_session_for_planning(s, a.recipe)) throw base::invalid("");
  const dsl::RecipePlan& plan = *s.plan;

  // Nodes and tasks: one task per GPU of the recipe's world, [cluster] gpus_per_node
  // to a node; fewer nodes emulate the world exactly.
  const slurm::Shape shape = slurm::job_shape(
      {plan.dist.world_size, plan.comm, c.nodes, c.gpus_per_node, sch.backend, a.nodes, a.cluster, a.recipe.path});

  // The run directory: as vexp run would choose it, made absolute (every start of
  // the job, on any node, continues the same one).
  std::string dir = !a.out.empty() ? a.out : !plan.run.out.empty() ? plan.run.out
                                            : (fs::path("runs") / (plan.run.name.empty()
                                                                       ? fs::path(a.recipe.path).stem().string()
                                                                       : plan.run.name)).string();
  std::error_code ec;
  dir = fs::absolute(dir).lexically_normal().string();
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  if (auto why = slurm::run_dir_problem(dir); !why.empty())
    throw base::invalid("run directory '" + printable(dir) + "' " + why +
                                 ", which an #SBATCH line cannot hold; choose another with --out; nothing submitted");
  // A finished run is not trained again: its job would "complete" at once (vexp run
  // --resume auto of a run that is done) and write its summary.json anew.
  if (fs::exists(fs::symlink_status(rundir::RunDir(dir).summary(), ec)))
    throw base::invalid("'" + printable(dir) + "' holds a finished run (summary.json): give another --out, or move "
                        "that run away to train it again from the start; nothing submitted");
  slurm::RunToSubmit run;
  run.run_dir = dir;
  run.job_name = slurm::job_name_of(plan.run.name.empty() ? fs::path(a.recipe.path).stem().string() : plan.run.name);
  run.exe = base::exe_path();
  if (run.exe.empty()) throw base::failure("cannot find the vexp executable (/proc/self/exe)");
  run.recipe = fs::absolute(a.recipe.path, ec).lexically_normal().string();
  run.sets = a.recipe.sets;
  run.plugin_dirs = canonical_plugin_paths(a.recipe.plugin_paths);
  run.cluster_file = a.cluster;
  run.submit_command = submit_line(a);
  const slurm::JobSpec j = slurm::run_job_spec(sch, shape, run);

  const std::string& emulation = shape.emulation;
  if (a.dry_run) {
    std::cout << slurm::batch_script(j);
    std::cerr << "vexp: dry run: " << shape.text << emulation << "; it would be written to " << printable(dir)
              << "/job.sbatch and submitted with sbatch; nothing written, nothing submitted\n";
    return;
  }
  const slurm::Submitted sub = slurm::submit_run(j, {shape.world, c.name}, "vexp submit");
  if (!sub.record_problem.empty())
    std::cerr << "vexp: warning: " << sub.record_problem << "; the job is submitted all the same (vexp status "
              << "cannot show it until the record can be written)\n";
  std::cout << "submitted Slurm job " << sub.job << ": " << printable(dir) << " (" << shape.text << emulation << ")\n";
  std::cerr << "vexp: follow it with: vexp status " << shell_quote(dir) << "   (log: " << printable(dir) << "/slurm-"
            << sub.job << ".out)\n";
}

}  // namespace

void add_submit(CLI::App& app) {
  auto* cmd = app.add_subcommand("submit", "Submit a recipe's run as a Slurm job that survives time limits");
  auto a = std::make_shared<SubmitArgs>();
  a->recipe.add_to(cmd);
  cmd->add_option("--cluster", a->cluster, "Cluster file with a [scheduler] table (docs/clusters.md)")->required();
  cmd->add_option("--nodes", a->nodes, "Nodes to ask for (fewer than the world needs: emulated exactly)")
      ->check(CLI::PositiveNumber);
  add_choice_options(cmd, a->choices);
  cmd->add_option("--out", a->out, "Run directory on the shared filesystem (default: as vexp run)");
  cmd->add_flag("--dry-run", a->dry_run, "Print the batch script; write and submit nothing");
  cmd->callback([a] { run_submit(*a); });

  // Called by the batch script at each start and end (docs/clusters.md): the record is
  // built and appended by vexp, never by the shell's >> (which follows links).
  auto* rec = app.add_subcommand("job-record", "Append a start or end event to RUN_DIR/jobs.jsonl (the batch "
                                               "script vexp submit writes calls it)");
  auto rd = std::make_shared<std::string>();
  auto ev = std::make_shared<std::string>();
  auto state = std::make_shared<std::string>();
  auto code = std::make_shared<int64_t>(-1);
  rec->add_option("run_dir", *rd, "The run directory")->required();
  rec->add_option("event", *ev, "start or end")->required();
  rec->add_option("state", *state, "running, completed, requeued, requeue_failed, requeue_limit, cancelled, failed")
      ->required();
  rec->add_option("exit", *code, "vexp run's exit code (-1: none)");
  rec->callback([=] {
    std::error_code ec;
    if (!fs::is_directory(*rd, ec)) throw base::failure("'" + printable(*rd) + "' is not a directory");
    slurm::append_event(*rd, slurm::job_event_line(*ev, *state, *code));
  });
}

}  // namespace vexp::cli
