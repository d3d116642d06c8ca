#include "vexp/sweep/slurm_driver.hpp"

#include <signal.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <map>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "vexp/base/attempt.hpp"
#include "vexp/base/files.hpp"
#include "vexp/base/text.hpp"
#include "vexp/dsl/recipe.hpp"
#include "vexp/slurm/job.hpp"
#include "vexp/slurm/run_job.hpp"
#include "vexp/slurm/scheduler.hpp"
#include "vexp/sweep/directory.hpp"
#include "stop_signal.hpp"
#include "vexp/rundir/files.hpp"

namespace vexp::sweep {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

using detail::g_stop;

// FNV-1a of the sweep folder: job names of two sweeps never collide.
std::string dir_tag(const fs::path& dir) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : fs::absolute(dir).lexically_normal().string()) h = (h ^ c) * 1099511628211ull;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%06llx", static_cast<unsigned long long>(h & 0xffffff));
  return buf;
}

std::string job_name(const Definition& def, const fs::path& dir, int64_t id) {
  std::string base = slurm::job_name_of(def.name.empty() ? "sweep" : def.name);
  if (base.size() > 40) base.resize(40);
  return base + "-" + trial_name(id) + "-" + dir_tag(dir);
}

// The spec and shape of one trial's job.
struct TrialJob {
  slurm::JobSpec spec;
  slurm::Shape shape;
};

// The world and backend a trial's job is shaped from: those of the recipe `vexp run`
// will train (TrainedFigures), when known.
struct JobNeeds {
  int64_t world = 0;
  std::string backend;
};

JobNeeds needs_of(const TrainedFigures& f) { return {f.world_size, f.backend}; }

// A stored row's figures (TrainedFigures::to_json); a store written by a vexp that did
// not keep the backend gives nothing, and the recipe is opened again for them.
std::optional<JobNeeds> needs_of(const json& figures) {
  if (!figures.is_object() || !figures.value("backend", json()).is_string() ||
      !figures.value("world_size", json()).is_number_integer())
    return std::nullopt;
  return JobNeeds{figures["world_size"].get<int64_t>(), figures["backend"].get<std::string>()};
}

TrialJob trial_job(Session& s, const Definition& def, const fs::path& dir, int64_t id,
                   const std::vector<dsl::Override>& ov, std::optional<JobNeeds> needs, const SlurmLaunch& l) {
  const fs::path tdir = fs::absolute(dir / "trials" / trial_name(id)).lexically_normal();
  if (!needs) {
    if (!open_trial_recipe(s, def.base, ov, false) || !s.plan)
      throw InvalidUse("trial " + trial_name(id) + ": its recipe does not validate");
    needs = JobNeeds{s.plan->dist.world_size, s.plan->comm};
  }
  const int64_t world = needs->world;
  const std::string& backend = needs->backend;
  TrialJob t;
  auto shape = base::attempt<slurm::Refused>([&] {
    return slurm::job_shape({world, backend, l.cluster.nodes, l.cluster.gpus_per_node,
                             l.cluster.scheduler.settings.backend, 0, l.cluster_file, def.base});
  });
  if (!shape) throw InvalidUse("trial " + trial_name(id) + ": " + shape.message());
  t.shape = std::move(shape).value();
  if (auto why = slurm::run_dir_problem(tdir.string()); !why.empty())
    throw InvalidUse("trial folder '" + base::printable(tdir.string()) + "' " + why +
                     ", which an #SBATCH line cannot hold: choose another --out");
  slurm::RunToSubmit run;
  run.run_dir = tdir.string();
  run.job_name = job_name(def, dir, id);
  run.exe = l.exe;
  run.recipe = fs::absolute(def.base).lexically_normal().string();
  for (const auto& o : ov) run.sets.push_back(o.path + "=" + o.text);
  run.plugin_dirs = l.plugin_dirs;
  run.cluster_file = l.cluster_file;
  run.submit_command = "vexp sweep (trial " + trial_name(id) + " of " +
                       base::shell_quote(fs::absolute(dir).string()) + ", --cluster " +
                       base::shell_quote(l.cluster_file) +
                       (l.choices.empty() ? std::string() : " " + slurm::choices_words(l.choices)) + ")";
  t.spec = slurm::run_job_spec(l.cluster.scheduler.settings, t.shape, run);
  // Checked before anything is submitted (the job's own words say which trial).
  if (const std::string why = slurm::job_spec_problem(t.spec); !why.empty())
    throw InvalidUse("trial " + trial_name(id) + ": " + why + ", which a batch script cannot hold");
  return t;
}

// A trial a driver watches.
struct Active {
  Active() = default;
  Active(int64_t id_, std::string job_, std::string dir_, std::string state_ = {}, double started_ = 0)
      : id(id_), job(std::move(job_)), dir(std::move(dir_)), state(std::move(state_)), started(started_) {}
  int64_t id = 0;
  std::string job, dir, state;  // state: Slurm's, as last seen
  double started = 0;           // when it was first seen running (0: not yet)
  bool pruned = false;
  std::string prune_message;
  int64_t checked_epoch = 0;
  bool waited_for_record = false;  // a cancelled job whose record had no end yet: judged at the next poll
};

// Whether the job's own record (its folder's jobs.jsonl) says it ended: its batch
// script's end, or vexp cancel's record.
bool record_says_ended(const Active& a) {
  try {
    for (const auto& j : slurm::read_jobs(a.dir).jobs)
      if (j.job == a.job) return slurm::record_ended(j);
  } catch (const std::exception&) {
  }
  return false;
}

// How an ended job's trial came out: from its run folder (summary.json, the job's
// own jobs.jsonl) and what Slurm last said.
struct Outcome {
  std::string status, message;
  int exit_code = -1;
  json metrics = json::object();
  std::optional<double> metric;
};

Outcome outcome_of(const Active& a, const std::string& slurm_state, const Definition& def, int diverged_code) {
  Outcome o;
  const fs::path tdir(a.dir);
  const std::string log = (tdir / ("slurm-" + a.job + ".out")).string();
  slurm::JobHistory last;
  try {
    for (const auto& j : slurm::read_jobs(a.dir).jobs)
      if (j.job == a.job) last = j;
  } catch (const std::exception&) {
  }
  o.exit_code = static_cast<int>(last.exit_code);
  json summary;
  bool has_summary = false;
  try {
    summary = rundir::read_summary(rundir::RunDir(tdir).summary());
    has_summary = summary.is_object();
  } catch (const std::exception&) {
  }
  const std::string said = slurm_state.empty() ? std::string("gone from Slurm's queue") : "Slurm: " + slurm_state;
  if (a.pruned) {
    o.status = "pruned";
    o.message = a.prune_message;
  } else if (last.state == "cancelled" && !last.cancelled.empty()) {
    o.status = "cancelled";  // by vexp cancel (the job's record says when)
    o.message = "cancelled by vexp cancel (" + base::printable(last.cancelled, 40) + "); log: " + log;
  } else if (last.state == "completed" && has_summary) {
    o.status = "done";
    o.exit_code = 0;
    o.metrics = summary;
    if (summary.contains(def.metric) && summary[def.metric].is_number()) o.metric = summary[def.metric].get<double>();
  } else if (o.exit_code == diverged_code) {
    o.status = "diverged";
    o.message = last_error(log);
  } else {
    o.status = "failed";
    std::string why;
    if (last.state == "requeue_limit") why = slurm::state_text(last);
    else if (last.state == "cancelled") why = "cancelled";
    else if (last.state == "failed") why = last_error(log);
    else if (slurm_state.empty()) why = "the job left the queue without recording its end (killed by Slurm: TIMEOUT, NODE_FAIL or OUT_OF_MEMORY; Slurm no longer says which)";
    if (why.empty() && o.exit_code >= 0) why = "exit code " + std::to_string(o.exit_code);
    o.message = said + (why.empty() ? "" : ": " + why) + "; log: " + log;
  }
  if (o.status != "done") {
    json evals = json::object();
    try {
      for (auto& [e, v] : read_curves(tdir, def.metric).eval) evals[std::to_string(e)] = v;
    } catch (const std::exception&) {
    }
    o.metrics["evals"] = evals;
  }
  if (!slurm_state.empty()) o.metrics["slurm_state"] = slurm_state;
  o.metrics["job"] = a.job;
  return o;
}

// sweep.db's meta key of the --time, --partition and --account a driver was given.
constexpr const char* kChoicesMeta = "slurm_choices";

// The launch with the choices recorded by an earlier driver of the sweep for those not
// given now (said, and checked against the cluster file as given ones are), and the
// record brought up to date: a re-started driver submits the rest of the trials as the
// first one did, and a value given again replaces the recorded one.
SlurmLaunch with_recorded_choices(Store& store, const SlurmLaunch& given) {
  SlurmLaunch l = given;
  slurm::Choices recorded, taken;
  const json j = json::parse(store.meta(kChoicesMeta), nullptr, false);
  for (const auto& f : slurm::kChoiceFields) {
    if (j.is_object() && j.contains(f.key) && j[f.key].is_string()) recorded.*f.choice = j[f.key].get<std::string>();
    if ((l.choices.*f.choice).empty() && !(recorded.*f.choice).empty())
      l.choices.*f.choice = taken.*f.choice = recorded.*f.choice;
  }
  if (!taken.empty()) {
    if (const std::string why = slurm::apply_choices(l.cluster.scheduler.settings, taken, l.cluster_file);
        !why.empty())
      throw InvalidUse(why + " (recorded in sweep.db by an earlier driver of this sweep): give " +
                       why.substr(0, why.find(' ')) + " another value; nothing submitted");
    std::cout << "the trials are submitted with " << base::printable(slurm::choices_words(taken), 300)
              << ", recorded by an earlier driver of this sweep (give them again to change them)\n";
  }
  json now = json::object();
  for (const auto& f : slurm::kChoiceFields)
    if (!(l.choices.*f.choice).empty()) now[f.key] = l.choices.*f.choice;
  if (now != (j.is_object() ? j : json::object())) store.set_meta({{kChoicesMeta, now.dump()}});
  return l;
}

void sleep_s(double s) {
  timespec t{static_cast<time_t>(s), static_cast<long>((s - std::floor(s)) * 1e9)};
  while (!g_stop && ::nanosleep(&t, &t) != 0 && errno == EINTR) {
  }
}

}  // namespace

std::string slurm_dry_run(const std::vector<Trial>& trials, Session& s, const Definition& def, const fs::path& dir,
                            const SlurmLaunch& l) {
  std::string out;
  for (const auto& tr : trials) {
    const TrialJob t = trial_job(s, def, dir, tr.id, tr.overrides, needs_of(tr.figures), l);
    out += "# ---- trial " + trial_name(tr.id) + ": " + t.shape.text + t.shape.emulation + "\n" +
           slurm::batch_script(t.spec);
  }
  return out;
}

void run_trials_on_slurm(Store& store, Session& s, const Definition& def, const fs::path& dir,
                           const SlurmLaunch& launch) {
  const SlurmLaunch l = with_recorded_choices(store, launch);
  std::map<int64_t, Row> by_id;
  std::vector<int64_t> pending;
  std::map<int64_t, Active> active;  // by trial
  std::map<int64_t, std::map<int64_t, double>> finished_curves;
  std::vector<int64_t> unsure;  // "submitting" when a driver stopped: submitted or not?
  for (auto& r : store.rows()) {
    by_id[r.id] = r;
    if ((r.status == "failed" && l.retry_failed) || (r.status == "cancelled" && l.retry_cancelled)) {
      store.reset(r.id);
      r.status = "pending";
    }
    if (r.status == "running" && !r.job.empty()) {
      // A job id from the store goes to squeue and scancel: digits only. And a job
      // submitted from another folder (this one is a copy, or was moved) is that
      // folder's: following it here would cancel or record another sweep's trial.
      if (r.job.find_first_not_of("0123456789") != std::string::npos)
        throw Error("sweep.db: trial " + trial_name(r.id) + ": job '" + base::printable(r.job, 40) +
                    "' is not a Slurm job id; nothing submitted");
      if (!base::same_file(r.stored_run_dir, r.run_dir))
        throw Error("trial " + trial_name(r.id) + "'s job " + r.job + " was submitted for '" +
                    base::printable(r.stored_run_dir, 200) + "', not for '" + base::printable(r.run_dir, 200) +
                    "': this sweep folder is a copy of another (or was moved) whose jobs may still be queued or "
                    "running; follow them from the folder they were submitted from; nothing submitted");
      active[r.id] = Active(r.id, r.job, r.run_dir, r.job_state, r.started_at);
    } else if (r.status == "running" && r.job_state == "submitting") {
      unsure.push_back(r.id);
    } else if (r.status == "running") {  // a trial a local sweep was running when it stopped
      std::cout << "trial " << trial_name(r.id) << " was interrupted: submitting it\n";
      store.reset(r.id);
      pending.push_back(r.id);
    } else if (r.status == "pending") {
      pending.push_back(r.id);
    }
    if (r.status == "done" && def.prune) finished_curves[r.id] = read_curves(r.run_dir, def.metric).eval;
  }
  // A driver stopped between sbatch and recording the job id: the job's name, or
  // the job's own record in its folder, says whether it was submitted.
  if (!unsure.empty()) {
    std::vector<std::string> names;
    for (int64_t id : unsure) names.push_back(job_name(def, dir, id));
    const auto found = base::attempt([&] { return slurm::query_names(names); }).value_or_throw("", "; nothing submitted");
    for (int64_t id : unsure) {
      const fs::path tdir = dir / "trials" / trial_name(id);
      std::string job;
      if (auto it = found.find(job_name(def, dir, id)); it != found.end() && !it->second.empty())
        job = it->second.back().job;
      if (job.empty()) {
        try {
          const auto rec = slurm::read_jobs(tdir.string());
          if (!rec.jobs.empty()) job = rec.jobs.back().job;
        } catch (const std::exception&) {
        }
      }
      if (job.empty()) {
        store.reset(id);
        pending.push_back(id);
        continue;
      }
      std::cout << "trial " << trial_name(id) << ": found its job " << job << " (submitted before the driver stopped)\n";
      store.mark_queued(id, fs::absolute(tdir).string(), job);
      active[id] = Active(id, job, fs::absolute(tdir).string());
    }
  }
  std::sort(pending.begin(), pending.end());
  const size_t limit = l.max_running > 0 ? static_cast<size_t>(l.max_running) : pending.size() + active.size();
  std::cout << pending.size() << " trial(s) to submit to " << l.cluster_file << ", " << active.size()
            << " already queued or running; at most " << limit << " at once; a poll every " << l.poll_s << " s\n";
  std::cout.flush();

  detail::catch_stop_signals(true);

  auto submit = [&](int64_t id) {
    // `vexp cancel` may have cancelled it since this driver read the store.
    if (const std::string now = store.status_of(id); now != "pending") {
      std::cout << "trial " << trial_name(id) << " is " << base::printable(now, 40) << " (vexp cancel): not submitted\n";
      return;
    }
    const Row& row = by_id.at(id);
    const TrialJob t = trial_job(s, def, dir, id, overrides_of(row), needs_of(row.figures), l);
    const fs::path tdir(t.spec.run_dir);
    std::error_code ec;
    if (fs::exists(tdir, ec) && !fs::is_empty(tdir, ec) && !fs::exists(rundir::RunDir(tdir).jobs(), ec)) {
      move_attempt_aside(tdir);  // a local run's folder, or a failed trial run again
    }
    auto submitted = base::attempt<slurm::Error>([&] {
      return slurm::submit_run(t.spec, {t.shape.world, l.cluster.name, id}, "vexp sweep", [&] {
        log_attempt(rundir::RunDir(tdir).trial_log(), id, row.attempts + 1, false, t.spec.vexp_argv);
        store.mark_submitting(id, tdir.string());  // before sbatch: a driver killed now finds the job by name
      });
    });
    if (!submitted) {
      // Refused by Slurm (bad partition, limits): the trial fails, the others go on.
      const std::string& why = submitted.message();
      store.finish(id, "failed", -1, std::nullopt, json{{"evals", json::object()}}, 0, why);
      record_to_target(store, def, id, tdir, row.global_batch);
      log_outcome(rundir::RunDir(tdir).trial_log(), id, "failed", -1, 0, why);
      std::cout << "trial " << trial_name(id) << " failed: " << why << "\n";
      return;
    }
    const slurm::Submitted sub = std::move(submitted).value();
    const std::string& job = sub.job;
    store.mark_queued(id, tdir.string(), job);  // the job is queued whatever its folder's record says
    if (!sub.record_problem.empty())
      std::cerr << "vexp: warning: trial " << trial_name(id) << ": " << sub.record_problem << "; its job " << job
                << " is submitted all the same\n";
    active[id] = Active(id, job, tdir.string(), "PENDING");
    std::cout << "trial " << trial_name(id) << " submitted: job " << job << " (" << t.shape.text << t.shape.emulation
              << "; " << row.params.dump() << ")\n";
  };

  auto finish = [&](Active& a, const std::string& slurm_state) {
    const Outcome o = outcome_of(a, slurm_state, def, l.diverged_exit_code);
    const double wall = a.started > 0 ? now_s() - a.started : 0;
    store.finish(a.id, o.status, o.exit_code, o.metric, o.metrics, wall, o.message);
    record_to_target(store, def, a.id, a.dir, by_id.at(a.id).global_batch);
    log_outcome(rundir::RunDir(fs::path(a.dir)).trial_log(), a.id, o.status, o.exit_code, wall, o.message);
    if (o.status == "done" && def.prune) finished_curves[a.id] = read_curves(a.dir, def.metric).eval;
    std::cout << "trial " << trial_name(a.id) << " " << o.status << " (job " << a.job << ")";
    if (o.metric) std::cout << ": " << def.metric << " " << *o.metric;
    if (!o.message.empty()) std::cout << " (" << o.message << ")";
    std::cout << "\n";
  };

  auto prune = [&]() {
    if (!def.prune) return;
    std::vector<std::string> cancel;
    for (auto& [id, a] : active) {
      if (a.pruned || a.started == 0) continue;
      const std::string why = prune_reason(def, read_curves(a.dir, def.metric).eval, finished_curves, a.checked_epoch);
      if (!why.empty()) {
        a.pruned = true;
        a.prune_message = why;
        cancel.push_back(a.job);
      }
    }
    if (!cancel.empty()) {
      if (auto done = base::attempt([&] { slurm::cancel(cancel); }); !done)
        std::cerr << "vexp: warning: " << done.message() << "\n";
    }
  };

  size_t next = 0;
  int failed_polls = 0;
  while (!g_stop) {
    while (!g_stop && next < pending.size() && active.size() < limit) submit(pending[next++]);
    std::cout.flush();
    if (active.empty() && next >= pending.size()) break;
    sleep_s(l.poll_s);
    if (g_stop) break;
    std::vector<std::string> jobs;
    for (const auto& [id, a] : active) jobs.push_back(a.job);
    auto polled = base::attempt([&] { return slurm::query(jobs); });  // one squeue call for all of them
    if (!polled) {
      // A busy controller: try again at the next poll, give up after ten in a row.
      std::cerr << "vexp: warning: " << polled.message() << "\n";
      if (++failed_polls >= 10)
        polled.rethrow_with("", " (10 polls in a row); the jobs keep running: run the sweep again to follow them");
      continue;
    }
    failed_polls = 0;
    const std::map<std::string, slurm::QueueEntry> q = std::move(polled).value();
    std::vector<int64_t> ended;
    for (auto& [id, a] : active) {
      auto it = q.find(a.job);
      if (it == q.end()) {  // forgotten by Slurm: ended (its folder says how)
        finish(a, "");
        ended.push_back(id);
        continue;
      }
      const slurm::QueueEntry& e = it->second;
      if (slurm::is_final(e.state)) {
        // Slurm says CANCELLED the moment scancel returns, before the batch script (its
        // SIGTERM end) or vexp cancel has written why: such a job is judged one poll later.
        if (e.state == "CANCELLED" && !a.waited_for_record && !record_says_ended(a)) {
          a.waited_for_record = true;
          continue;
        }
        finish(a, e.state);
        ended.push_back(id);
        continue;
      }
      if (slurm::is_running(e.state) && a.started == 0) {
        a.started = now_s();
        store.set_job_state(id, e.state, true);
        std::cout << "trial " << trial_name(id) << " running: job " << a.job << " on " << e.nodes << "\n";
      } else if (e.state == "PENDING" && a.started > 0) {
        std::cout << "trial " << trial_name(id) << ": job " << a.job << " pending again (" << e.reason
                  << "): requeued, it resumes where it stopped\n";
        a.started = 0;
      }
      else if (e.state != a.state) store.set_job_state(id, e.state);
      a.state = e.state;
    }
    for (int64_t id : ended) active.erase(id);
    prune();
  }
  if (g_stop) {
    std::string ids;
    for (const auto& [id, a] : active) ids += " " + a.job;
    throw Interrupted("stopped; " + std::to_string(active.size()) + " job(s) stay queued or running on the cluster (" +
                      (ids.empty() ? std::string("none") : ids.substr(1)) +
                      "): run the same vexp sweep again to follow them, or scancel them");
  }
}

}  // namespace vexp::sweep
