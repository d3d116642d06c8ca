// vexp submit RECIPE [--set k=v]... --cluster clusters/NAME.toml [--nodes N] [--time T] [--partition P]
//   [--account A] [--out DIR] [--dry-run]
// vexp status RUN_DIR
// Slurm is driven through its commands with argv (sbatch, scontrol), never a shell
// string; the job (its batch script, every value quoted, sbatch, the record) is
// vexp::slurm's one job of a run (run_job.hpp): this command makes its own choices.
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>

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
  std::string cluster, out, time, partition, account;
  int64_t nodes = 0;
  bool dry_run = false;
};

// The submit as the user would type it again (the script's header).
std::string submit_line(const SubmitArgs& a) {
  std::string s = "vexp submit " + shell_quote(a.recipe.path);
  for (const auto& x : a.recipe.sets) s += " --set " + shell_quote(x);
  s += " --cluster " + shell_quote(a.cluster);
  if (a.nodes > 0) s += " --nodes " + std::to_string(a.nodes);
  if (!a.time.empty()) s += " --time " + shell_quote(a.time);
  if (!a.partition.empty()) s += " --partition " + shell_quote(a.partition);
  if (!a.account.empty()) s += " --account " + shell_quote(a.account);
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
  struct Choice {
    const char* key;
    const std::string& given;
    std::string& setting;
  };
  const Choice choices[] = {{"partition", a.partition, sch.partition}, {"account", a.account, sch.account},
                            {"time", a.time, sch.time}};
  for (const auto& ch : choices)
    if (!ch.given.empty()) ch.setting = ch.given;
  for (const auto& p : slurm::settings_problems(sch, a.cluster))
    for (const auto& ch : choices)
      if (p.key == ch.key && !ch.given.empty())
        throw base::invalid("--" + p.key + " '" + printable(ch.given, 60) + "' " + p.why + "; nothing submitted");

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
  dir = fs::absolute(dir).lexically_normal().string();
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  if (auto why = slurm::run_dir_problem(dir); !why.empty())
    throw base::invalid("run directory '" + printable(dir) + "' " + why +
                                 ", which an #SBATCH line cannot hold; choose another with --out; nothing submitted");
  slurm::RunToSubmit run;
  run.run_dir = dir;
  run.job_name = slurm::job_name_of(plan.run.name.empty() ? fs::path(a.recipe.path).stem().string() : plan.run.name);
  run.exe = base::exe_path();
  if (run.exe.empty()) throw base::failure("cannot find the vexp executable (/proc/self/exe)");
  std::error_code ec;
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

// scontrol's one-line answer as KEY=VALUE pairs (values without spaces are enough here).
std::map<std::string, std::string> scontrol_fields(const std::string& out) {
  std::map<std::string, std::string> f;
  std::istringstream in(out);
  std::string w;
  while (in >> w) {
    const size_t eq = w.find('=');
    if (eq != std::string::npos && eq > 0) f.emplace(w.substr(0, eq), w.substr(eq + 1));
  }
  return f;
}

void run_status(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw base::failure("'" + printable(dir) + "' is not a directory");
  slurm::JobRecord rec;
  rec = slurm::read_jobs(dir);
  const bool done = fs::exists(rundir::RunDir(dir).summary(), ec);
  std::cout << printable(dir) << ": " << (done ? "the run is complete (summary.json)" : "the run is not complete")
            << "\n";
  if (rec.jobs.empty()) {
    std::cout << "no Slurm job recorded (" << printable(slurm::jobs_file(dir)) << " is missing or empty)\n";
    return;
  }
  if (rec.bad_lines > 0)
    std::cerr << "vexp: warning: " << printable(slurm::jobs_file(dir)) << ": " << rec.bad_lines
              << " line(s) that are not job events were skipped\n";
  for (const auto& j : rec.jobs) {
    std::cout << "job " << printable(j.job, 40) << ": " << j.starts << " start(s), " << j.requeues << " requeue(s)";
    if (j.max_requeues >= 0) std::cout << " of at most " << j.max_requeues;
    if (!j.nodes.empty()) std::cout << ", nodes " << printable(j.nodes, 80);
    if (!j.submitted.empty()) std::cout << ", submitted " << printable(j.submitted, 40);
    std::cout << "\n  last: " << slurm::state_text(j);
    if (!j.last_time.empty()) std::cout << " (" << printable(j.last_time, 40) << ")";
    std::cout << "\n";
  }
  // Slurm's own word on the newest job: one call.
  const std::string& last = rec.jobs.back().job;
  if (last.find_first_not_of("0123456789") != std::string::npos) return;
  if (!base::find_program("scontrol")) {
    std::cout << "Slurm: not reachable from here (scontrol is not on PATH); the states above are the job's own record\n";
    return;
  }
  base::Captured r;
  try {
    r = base::run_capture({"scontrol", "--oneliner", "show", "job", last}, true, 1 << 16);
  } catch (const base::Error& e) {
    std::cout << "Slurm: not reachable from here (" << e.what() << ")\n";
    return;
  }
  if (!r.status.ok()) {
    if (r.out.find("Invalid job id") != std::string::npos)
      std::cout << "Slurm: job " << last << " is no longer known (it ended more than MinJobAge ago)\n";
    else
      std::cout << "Slurm: not reachable from here (scontrol: " << printable(r.out.substr(0, r.out.find('\n')), 200)
                << ")\n";
    return;
  }
  auto f = scontrol_fields(r.out);
  std::cout << "Slurm: job " << last << " " << printable(f["JobState"], 40);
  if (!f["Reason"].empty() && f["Reason"] != "None") std::cout << " (" << printable(f["Reason"], 60) << ")";
  std::cout << ", restarts " << printable(f["Restarts"], 20) << ", run time " << printable(f["RunTime"], 20)
            << " of " << printable(f["TimeLimit"], 20);
  if (!f["NodeList"].empty() && f["NodeList"] != "(null)") std::cout << ", nodes " << printable(f["NodeList"], 80);
  std::cout << "\n";
}

}  // namespace

void add_submit(CLI::App& app) {
  auto* cmd = app.add_subcommand("submit", "Submit a recipe's run as a Slurm job that survives time limits");
  auto a = std::make_shared<SubmitArgs>();
  a->recipe.add_to(cmd);
  cmd->add_option("--cluster", a->cluster, "Cluster file with a [scheduler] table (docs/clusters.md)")->required();
  cmd->add_option("--nodes", a->nodes, "Nodes to ask for (fewer than the world needs: emulated exactly)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--time", a->time, "Time limit (Slurm syntax; default: the cluster file's)");
  cmd->add_option("--partition", a->partition, "Partition (default: the cluster file's)");
  cmd->add_option("--account", a->account, "Account (default: the cluster file's)");
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

  auto* st = app.add_subcommand("status", "A run's Slurm jobs: ids, states, requeues (and Slurm's live state)");
  auto dir = std::make_shared<std::string>();
  st->add_option("run_dir", *dir, "The run directory")->required();
  st->callback([dir] { run_status(*dir); });
}

}  // namespace vexp::cli
