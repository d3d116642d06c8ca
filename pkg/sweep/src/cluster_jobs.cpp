#include "vexp/sweep/cluster_jobs.hpp"

#include <map>

#include "vexp/base/attempt.hpp"
#include "vexp/base/text.hpp"
#include "vexp/rundir/files.hpp"
#include "vexp/slurm/scheduler.hpp"
#include "vexp/sweep/directory.hpp"
#include "vexp/sweep/error.hpp"
#include "vexp/sweep/store.hpp"

namespace vexp::sweep {
namespace fs = std::filesystem;

namespace {

bool job_id(const std::string& j) { return !j.empty() && j.find_first_not_of("0123456789") == std::string::npos; }

void open_store(Store& store, const fs::path& dir) {
  const fs::path db = dir / rundir::kSweepDb;
  std::error_code ec;
  if (!fs::is_regular_file(db, ec))
    throw Error("'" + base::printable(dir.string()) + "' holds no " + rundir::kSweepDb + ": it is not a sweep folder");
  store.open(db.string(), false);
}

SweepJobs jobs_of(const Store& store) {
  SweepJobs s;
  s.name = store.meta("name");
  if (const std::optional<RunsOn> how = recorded_runs_on(store)) {
    s.cluster = how->cluster;
    s.cluster_file = how->cluster_file;
  }
  for (const Row& r : store.rows()) {
    SweepTrialJob t{r.id, r.status, r.job, r.job_state, r.run_dir, r.message, std::nullopt};  // the store's word
    try {
      const slurm::JobRecord rec = slurm::read_jobs(r.run_dir);
      for (const auto& j : rec.jobs)
        if (j.job == t.job || (t.job.empty() && r.status == "running")) t.record = j;  // a job being submitted: its newest
    } catch (const std::exception&) {
      // A record that cannot be read: the store's word only.
    }
    if (t.job.empty() && t.record) t.job = t.record->job;
    s.trials.push_back(std::move(t));
  }
  return s;
}

}  // namespace

SweepJobs read_sweep_jobs(const fs::path& dir) {
  Store store;
  open_store(store, dir);
  return jobs_of(store);
}

SweepCancel cancel_sweep(const fs::path& dir) {
  Store store;
  open_store(store, dir);
  const SweepJobs sj = jobs_of(store);
  const std::string d = base::printable(dir.string(), 200);
  if (!sj.cluster)
    throw InvalidUse("'" + d + "' is a local sweep: its trials run on this machine, not as Slurm jobs; nothing to "
                     "cancel (stop its vexp sweep with Ctrl-C)");
  SweepCancel out;
  std::map<std::string, int64_t> maybe;  // job -> trial
  std::vector<int64_t> pending;
  bool any_job = false;
  for (const auto& t : sj.trials) {
    any_job = any_job || !t.job.empty();
    if (t.status == "pending") pending.push_back(t.id);
    if (t.status != "running") continue;
    if (job_id(t.job)) maybe[t.job] = t.id;
    else out.submitting.push_back(t.id);
  }
  if (!any_job && out.submitting.empty())
    throw InvalidUse("'" + d + "' has no recorded Slurm job (no trial of it was submitted): nothing to cancel");
  std::vector<std::string> live;
  if (!maybe.empty()) {
    std::vector<std::string> jobs;
    for (const auto& [job, id] : maybe) jobs.push_back(job);
    const auto q = base::attempt([&] { return slurm::query(jobs); })  // one squeue call
                       .value_or_throw("", "; nothing cancelled");
    for (const auto& [job, id] : maybe) {
      auto it = q.find(job);
      if (it == q.end() || slurm::is_final(it->second.state)) {
        out.ended.emplace_back(id, job);  // a driver judges it from its folder
      } else {
        live.push_back(job);
        out.cancelled.push_back({id, job, it->second.state});
      }
    }
    base::attempt([&] { slurm::cancel(live); }).value_or_throw("", "; nothing recorded");  // one scancel call
  }
  // The record: each job's own (its jobs.jsonl, which a driver reads when the job ends),
  // the store, the trial's log.
  for (const auto& c : out.cancelled) {
    const fs::path tdir = dir / "trials" / trial_name(c.id);
    const std::string msg = "cancelled by vexp cancel (job " + c.job + ", " + base::printable(c.state, 40) + ")";
    auto event = base::attempt([&] { slurm::append_event(tdir.string(), slurm::cancel_event_line(c.job)); });
    if (!event) out.problems.push_back(event.message());
    store.mark_cancelled(c.id, c.job, msg);
    auto logged = base::attempt([&] { log_outcome(rundir::RunDir(tdir).trial_log(), c.id, "cancelled", -1, 0, msg); });
    if (!logged) out.problems.push_back(logged.message());
  }
  for (int64_t id : pending)
    if (store.mark_cancelled(id, "", "cancelled by vexp cancel before it was submitted")) out.unsubmitted.push_back(id);
  return out;
}

}  // namespace vexp::sweep
