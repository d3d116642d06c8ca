// vexp status RUN_OR_SWEEP: a submitted run's Slurm jobs (DIR/jobs.jsonl) with Slurm's
//   word on the newest, or a cluster sweep's trials and their jobs (sweep.db and each
//   trial's jobs.jsonl) with Slurm's word on those queued or running (one squeue call).
// vexp cancel RUN_OR_SWEEP: scancel of a run's recorded job, or of every queued or running
//   trial job of a cluster sweep (its trials not submitted yet cancelled too), recorded so
//   that vexp status and the sweep's driver say "cancelled" (docs/clusters.md).
// Slurm is asked through its commands with argv (vexp::slurm), never a shell string.
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>

#include "commands/common.hpp"
#include "vexp/base/attempt.hpp"
#include "vexp/base/process.hpp"
#include "vexp/base/text.hpp"
#include "vexp/rundir/files.hpp"
#include "vexp/slurm/job.hpp"
#include "vexp/slurm/scheduler.hpp"
#include "vexp/sweep/cluster_jobs.hpp"
#include "vexp/sweep/expansion.hpp"

namespace vexp::cli {

namespace {

namespace fs = std::filesystem;
using base::printable;

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

void status_of_run(const std::string& dir) {
  std::error_code ec;
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
  auto ran = base::attempt([&] { return base::run_capture({"scontrol", "--oneliner", "show", "job", last}, true, 1 << 16); });
  if (!ran) {
    std::cout << "Slurm: not reachable from here (" << ran.message() << ")\n";
    return;
  }
  const base::Captured r = std::move(ran).value();
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


// The command that follows a cluster sweep (its driver), for the messages.
std::string follow_sweep(const sweep::SweepJobs& sj, const std::string& dir, const std::string& extra = "") {
  return "vexp sweep SWEEP.toml --out " + shell_quote(dir) + " --cluster " +
         (sj.cluster_file.empty() ? std::string("CLUSTER.toml") : shell_quote(sj.cluster_file)) + extra;
}

void status_of_sweep(const std::string& dir) {
  const sweep::SweepJobs sj = sweep::read_sweep_jobs(dir);
  const std::string name = sj.name.empty() ? std::string() : " '" + printable(sj.name, 80) + "'";
  if (!sj.cluster) {
    std::cout << printable(dir) << ": local sweep" << name << " (" << sj.trials.size()
              << " trials): its trials run on this machine, not as Slurm jobs; vexp results " << shell_quote(dir)
              << " shows them\n";
    return;
  }
  std::cout << printable(dir) << ": cluster sweep" << name << " (" << sj.trials.size() << " trials"
            << (sj.cluster_file.empty() ? std::string() : ", --cluster " + printable(sj.cluster_file, 200)) << ")\n";
  // Slurm's word on the trials a driver last saw queued or running: one squeue call.
  std::vector<std::string> jobs;
  for (const auto& t : sj.trials)
    if (t.status == "running" && !t.job.empty() && t.job.find_first_not_of("0123456789") == std::string::npos)
      jobs.push_back(t.job);
  std::map<std::string, slurm::QueueEntry> live;
  std::string slurm_note;
  if (!jobs.empty()) {
    if (!base::find_program("squeue")) {
      slurm_note = "Slurm: not reachable from here (squeue is not on PATH); the states are sweep.db's";
    } else {
      auto q = base::attempt([&] { return slurm::query(jobs); });
      if (q) live = std::move(q).value();
      else slurm_note = "Slurm: not reachable from here (" + printable(q.message(), 300) + "); the states are sweep.db's";
    }
  }
  std::map<std::string, int> counts;
  int queued = 0;
  std::printf("%-5s  %-10s  %-44s  %s\n", "trial", "job", "state", "run folder");
  for (const auto& t : sj.trials) {
    std::string state = t.status;
    if (t.status == "running") {
      if (t.job.empty()) {
        state = "being submitted";
      } else if (auto it = live.find(t.job); it != live.end()) {
        const slurm::QueueEntry& e = it->second;
        if (slurm::is_final(e.state)) {
          state = "ended (Slurm: " + e.state + "), not recorded yet";
        } else {
          state = e.state + (e.nodes.empty() ? std::string() : " on " + e.nodes) +
                  (e.reason.empty() || e.reason == "None" ? std::string() : " (" + e.reason + ")");
          ++queued;
        }
      } else if (slurm_note.empty()) {
        state = "ended (gone from Slurm's queue), not recorded yet";
      } else {
        state = "queued or running (a driver saw " + (t.job_state.empty() ? std::string("PENDING") : t.job_state) + ")";
        ++queued;
      }
      if (t.record && t.record->requeues > 0) state += ", " + std::to_string(t.record->requeues) + " requeue(s)";
    } else if (t.status == "pending") {
      state = "pending (not submitted yet)";
    } else if (t.status == "cancelled") {
      state = t.job.empty() ? "cancelled before it was submitted" : "cancelled (vexp cancel)";
    } else if (t.status == "failed" && t.record) {
      state = "failed (" + slurm::state_text(*t.record) + ")";
    }
    ++counts[t.status];
    std::printf("%-5s  %-10s  %-44s  %s\n", sweep::trial_name(t.id).c_str(),
                t.job.empty() ? "-" : printable(t.job, 10).c_str(), printable(state, 120).c_str(),
                printable(t.run_dir).c_str());
  }
  std::cout << sj.trials.size() << " trials:";
  const char* sep = " ";
  for (const char* st : {"done", "diverged", "pruned", "cancelled", "failed", "running", "pending"})
    if (counts[st] > 0) {
      std::cout << sep << counts[st] << " " << st;
      sep = ", ";
    }
  std::cout << "; " << queued << " job(s) queued or running\n";
  if (!slurm_note.empty()) std::cout << slurm_note << "\n";
}

void run_status(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw base::failure("'" + printable(dir) + "' is not a directory");
  if (rundir::RunDir(dir).is_sweep_dir()) status_of_sweep(dir);
  else status_of_run(dir);
}

void run_cancel(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw base::failure("'" + printable(dir) + "' is not a directory");
  const std::string d = printable(dir);
  if (rundir::RunDir(dir).is_sweep_dir()) {
    const sweep::SweepCancel c = sweep::cancel_sweep(dir);
    for (const auto& p : c.problems) std::cerr << "vexp: warning: " << printable(p, 400) << "\n";
    std::string list;
    for (const auto& x : c.cancelled)
      list += (list.empty() ? "" : ", ") + ("trial " + sweep::trial_name(x.id) + " (job " + x.job + ", " +
                                            printable(x.state, 40) + ")");
    if (!c.cancelled.empty())
      std::cout << "cancelled " << c.cancelled.size() << " Slurm job(s) of the sweep " << d << ": " << list << "\n";
    if (!c.unsubmitted.empty()) {
      std::string ids;
      for (int64_t id : c.unsubmitted) ids += (ids.empty() ? "" : ", ") + sweep::trial_name(id);
      std::cout << c.unsubmitted.size() << " trial(s) not submitted yet are cancelled too: " << ids << "\n";
    }
    for (int64_t id : c.submitting)
      std::cout << "trial " << sweep::trial_name(id)
                << " is being submitted by the sweep's driver and has no job yet: run vexp cancel again in a moment\n";
    if (c.cancelled.empty() && c.unsubmitted.empty()) {
      std::cout << "nothing to cancel in " << d << ": no trial of it is queued, running or waiting to be submitted";
      if (!c.ended.empty()) std::cout << " (" << c.ended.size() << " job(s) ended; its driver records them)";
      std::cout << "\n";
      return;
    }
    const sweep::SweepJobs sj = sweep::read_sweep_jobs(dir);
    std::cout << "recorded in sweep.db and the trials' jobs.jsonl (vexp status " << shell_quote(dir)
              << " shows them); a driver of the sweep still running submits no cancelled trial and ends once the "
                 "jobs have left the queue; "
              << follow_sweep(sj, dir, " --retry-cancelled") << " submits them again\n";
    return;
  }
  // (a slurm::Refused is not a slurm::Error: it passes as it is)
  const slurm::RunCancel c =
      base::attempt<slurm::Error>([&] { return slurm::cancel_run(dir); }).value_or_throw("", "; nothing cancelled");
  if (!c.record_problem.empty())
    std::cerr << "vexp: warning: " << printable(c.record_problem, 400)
              << "; the job is cancelled all the same (vexp status shows its last recorded state)\n";
  if (c.cancelled.empty()) {
    std::cout << "nothing to cancel in " << d << ":";
    const char* sep = " ";
    for (const auto& [job, why] : c.ended) {
      std::cout << sep << "job " << printable(job, 40) << " ended (" << why << ")";
      sep = "; ";
    }
    std::cout << "\n";
    return;
  }
  for (const auto& [job, state] : c.cancelled)
    std::cout << "cancelled Slurm job " << job << " (" << printable(state, 40) << ") of " << d
              << ": recorded in its jobs.jsonl; a running job stops after its current step with a checkpoint\n";
  std::cout << "vexp status " << shell_quote(dir) << " follows it; continue the run with: sbatch "
            << shell_quote((fs::path(dir) / "job.sbatch").string()) << " (or the same vexp submit)\n";
}

}  // namespace

void add_jobs(CLI::App& app) {
  auto* st = app.add_subcommand("status", "A run's Slurm jobs (ids, states, requeues, Slurm's live state), or a "
                                          "cluster sweep's trials and their jobs");
  auto dir = std::make_shared<std::string>();
  st->add_option("dir", *dir, "The run directory or sweep directory")->required();
  st->callback([dir] { run_status(*dir); });

  auto* ca = app.add_subcommand("cancel", "Cancel a submitted run's Slurm job, or every queued or running trial job "
                                          "of a cluster sweep (recorded: vexp status shows them cancelled)");
  auto cdir = std::make_shared<std::string>();
  ca->add_option("dir", *cdir, "The run directory or sweep directory")->required();
  ca->callback([cdir] { run_cancel(*cdir); });
}

}  // namespace vexp::cli
