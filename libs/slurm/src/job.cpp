#include "vexp/slurm/job.hpp"

#include <cstdlib>
#include <ctime>
#include <set>
#include <filesystem>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "vexp/base/attempt.hpp"
#include "vexp/base/files.hpp"
#include "vexp/base/text.hpp"
#include "vexp/rundir/files.hpp"
#include "vexp/slurm/scheduler.hpp"

namespace vexp::slurm {

namespace fs = std::filesystem;

std::string run_dir_problem(const std::string& dir) {
  if (base::has_control(dir)) return "holds a control character";
  for (char ch : dir) {
    if (ch == ' ' || ch == '\t') return "holds a space";
    // '%' is a pattern in sbatch --output (%j: the job id); quotes and '\' are read by
    // the #SBATCH parser.
    if (ch == '%' || ch == '"' || ch == '\'' || ch == '\\')
      return std::string("holds '") + ch + "'";
  }
  return "";
}

std::string jobs_file(const std::string& run_dir) { return rundir::RunDir(run_dir).jobs().string(); }


std::string job_spec_problem(const JobSpec& j) {
  std::vector<std::pair<std::string, const std::string*>> fields{
      {"the run directory", &j.run_dir}, {"the job name", &j.job_name},   {"the time limit", &j.time},
      {"the partition", &j.partition},   {"the account", &j.account},     {"the cluster file's name", &j.cluster_file},
      {"the submit command", &j.submit_command}};
  for (const auto* list : {&j.sbatch_extra, &j.setup, &j.launcher, &j.vexp_argv})
    for (const auto& w : *list) fields.emplace_back("a word of the job", &w);
  for (const auto& [what, v] : fields)
    if (base::has_control(*v))
      return what + " '" + base::printable(*v, 80) + "' holds a newline or another control character";
  if (j.vexp_argv.empty()) return "the job has no vexp command";
  return "";
}

std::string batch_script(const JobSpec& j) {
  // Every string is checked here, where the script is written (comments too: a
  // newline in a comment starts a shell line).
  if (const std::string why = job_spec_problem(j); !why.empty())
    throw Refused(why + ", which a batch script cannot hold; nothing written");
  std::ostringstream o;
  const std::string q_dir = base::shell_quote(j.run_dir);
  o << "#!/bin/bash\n";
  o << "#SBATCH --job-name=" << j.job_name << "\n";
  o << "#SBATCH --nodes=" << j.nodes << "\n";
  o << "#SBATCH --ntasks-per-node=" << j.tasks_per_node << "\n";
  if (j.cpus_per_task > 0) o << "#SBATCH --cpus-per-task=" << j.cpus_per_task << "\n";
  if (j.gpus_per_node > 0) o << "#SBATCH --gpus-per-node=" << j.gpus_per_node << "\n";
  if (!j.time.empty()) o << "#SBATCH --time=" << j.time << "\n";
  if (!j.partition.empty()) o << "#SBATCH --partition=" << j.partition << "\n";
  if (!j.account.empty()) o << "#SBATCH --account=" << j.account << "\n";
  // B: the batch shell gets the signal (it forwards it to the step, below), so it
  // knows that the stop came from the time limit and requeues.
  o << "#SBATCH --signal=B:USR1@" << j.signal_lead_s << "\n";
  o << "#SBATCH --requeue\n";
  o << "#SBATCH --open-mode=append\n";
  o << "#SBATCH --output=" << j.run_dir << "/slurm-%j.out\n";
  for (const auto& x : j.sbatch_extra) o << "#SBATCH " << x << "\n";
  o << "#\n# Written by vexp submit (docs/clusters.md):\n#   " << base::printable(j.submit_command) << "\n";
  o << "# Every start (the first and each requeue) continues the run in its directory\n"
       "# (vexp run --resume auto). SIGUSR1, "
    << j.signal_lead_s
    << " s before the time limit, makes every rank stop\n"
       "# after the same step and rank 0 write a checkpoint; the job then requeues\n"
       "# itself, at most "
    << j.max_requeues
    << " time(s). Each start and end is appended to jobs.jsonl in the run\n"
       "# directory (vexp status DIR shows them).\n\n";
  o << "run_dir=" << q_dir << "\n";
  o << "max_requeues=" << j.max_requeues << "\n";
  o << "job=$(printf %s \"${SLURM_JOB_ID:-}\" | tr -cd 0-9)\n";
  o << "restart=$(printf %s \"${SLURM_RESTART_COUNT:-0}\" | tr -cd 0-9)\n";
  o << "restart=${restart:-0}\n\n";
  // The job's record is appended by vexp itself (`vexp job-record`): a JSON line
  // built and escaped by vexp, written through the append that refuses a symbolic or
  // hard link planted as jobs.jsonl (a shell's >> would follow it). A record that
  // cannot be written is said in the log and the job goes on.
  o << "vexp=" << base::shell_quote(j.vexp_argv[0]) << "\n";
  o << "vexp_record() {  # EVENT STATE [EXIT]\n"
       "  \"$vexp\" job-record \"$run_dir\" \"$1\" \"$2\" \"${3:--1}\" ||\n"
       "    say \"could not record the $1 ($2) event in jobs.jsonl (the line above says why); the job goes on\"\n"
       "}\n"
       "say() { echo \"vexp job $job [$(date -u +%H:%M:%S)]: $*\"; }\n\n";
  const bool srun = !j.launcher.empty() && fs::path(j.launcher[0]).filename() == "srun";
  // Every rank ends a clean stop with exit code 130, which the launcher reports as a
  // task's failure ("srun: error: n1: task 0: Exited with exit code 130"): the log
  // says first that those lines are expected.
  o << "# USR1: the time limit is near. TERM: scancel, or the limit itself (Slurm signals\n"
       "# the step's tasks too). The first one counts.\n"
       "signalled=\n"
       "step=\n"
       "stop_note() { say \"every rank stops after the same step with a checkpoint and exit code 130 (the job "
       "then requeues, at most $max_requeues times): "
    << (srun ? "srun's 'task N: Exited with exit code 130' lines" : "the launcher's lines about exit code 130")
    << " below are expected, not failures\"; }\n"
       "trap 'signalled=${signalled:-USR1}; say \"SIGUSR1: the time limit is near; asking every rank to stop\"; "
       "[ -z \"$step\" ] || kill -USR1 \"$step\" 2>/dev/null; stop_note' USR1\n"
       "trap 'signalled=${signalled:-TERM}; say \"SIGTERM\"' TERM\n\n";
  if (!j.setup.empty()) {
    o << "# [scheduler] setup of " << base::printable(j.cluster_file) << "\n";
    for (const auto& l : j.setup) o << l << "\n";
    o << "\n";
  }
  o << "say \"start $((restart + 1)) on ${SLURM_JOB_NODELIST:-?} (requeues so far: $restart of $max_requeues)\"\n";
  o << "vexp_record start running\n";
  std::string cmd;
  for (const auto& w : j.launcher) cmd += base::shell_quote(w) + " ";
  // srun takes its task count from the allocation the job was first given; a requeued
  // job may be granted fewer (or more) nodes: ask for one task per GPU of the nodes
  // it has now. vexp run then trains the recipe's world on those ranks, emulating
  // the missing GPUs exactly, or refuses in one line when they do not divide it.
  if (srun) {
    o << "tasks_per_node=" << j.tasks_per_node << "\n"
      << "nodes_now=$(printf %s \"${SLURM_JOB_NUM_NODES:-" << j.nodes << "}\" | tr -cd 0-9)\n"
      << "nodes_now=${nodes_now:-" << j.nodes << "}\n"
      << "[ \"$nodes_now\" -eq " << j.nodes << " ] || say \"granted $nodes_now node(s) of the " << j.nodes
      << " asked for: $((nodes_now * tasks_per_node)) rank(s)\"\n";
    cmd += "--ntasks=$((nodes_now * tasks_per_node)) --ntasks-per-node=$tasks_per_node ";
  }
  for (size_t i = 0; i < j.vexp_argv.size(); ++i) {
    if (i > 0 && j.vexp_argv[i].rfind("--", 0) == 0) cmd += "\\\n  ";
    cmd += (j.vexp_argv[i] == j.run_dir ? "\"$run_dir\"" : base::shell_quote(j.vexp_argv[i])) + " ";
  }
  // SIGUSR1 before the step starts (during the setup lines or the start record): the
  // step is not started, and the job requeues as after a clean stop. A rank the
  // signal reaches before vexp catches it (still loading, on a slow filesystem) is
  // killed by it (the launcher exits 128 + 10): nothing new existed to save either.
  o << "if [ \"$signalled\" = USR1 ]; then\n"
       "  say \"SIGUSR1 came before the step started: the step is not started (nothing new to save)\"\n"
       "  rc=130\n"
       "else\n";
  o << cmd << "&\n";
  o << "step=$!\n"
       "[ \"$signalled\" != USR1 ] || kill -USR1 \"$step\" 2>/dev/null\n"
       "# wait returns early for each trapped signal: wait again until the step ends.\n"
       "while :; do\n"
       "  wait \"$step\"; rc=$?\n"
       "  kill -0 \"$step\" 2>/dev/null || break\n"
       "done\n"
       "if [ \"$rc\" -gt 128 ]; then wait \"$step\" 2>/dev/null; r=$?; [ \"$r\" -eq 127 ] || rc=$r; fi\n"
       "if [ \"$signalled\" = USR1 ] && [ \"$rc\" -eq $((128 + $(kill -l USR1))) ]; then\n"
       "  say \"a rank was still starting when SIGUSR1 came (killed by it before vexp could catch it): nothing new to "
       "save\"\n"
       "  rc=130\n"
       "fi\n"
       "fi\n\n";
  // srun can exit 0 for a step that never launched (seen when a requeued start came
  // before the previous start's step had left the nodes): only the run's summary
  // says it is complete.
  o << "if [ \"$rc\" -eq 0 ] && [ ! -f \"$run_dir/summary.json\" ]; then\n"
       "  say \"the step exited 0 but the run wrote no summary.json: counted as failed\"\n"
       "  rc=1\n"
       "fi\n";
  o << "if [ \"$rc\" -eq 0 ]; then\n"
       "  vexp_record end completed 0\n"
       "  say \"the run is complete\"\n"
       "  exit 0\n"
       "fi\n"
       "if [ \"$signalled\" = USR1 ] && [ \"$rc\" -eq 130 ]; then\n"
       "  if [ \"$restart\" -lt \"$max_requeues\" ]; then\n"
       "    vexp_record end requeued \"$rc\"\n"
       "    say \"stopped with a checkpoint before the time limit; requeueing ($((restart + 1)) of $max_requeues)\"\n"
       "    scontrol requeue \"$job\" && exit 0\n"
       "    vexp_record end requeue_failed \"$rc\"\n"
       "    say \"scontrol requeue failed; continue with: sbatch $run_dir/job.sbatch\"\n"
       "    exit \"$rc\"\n"
       "  fi\n"
       "  vexp_record end requeue_limit \"$rc\"\n"
       "  say \"stopped with a checkpoint before the time limit, not requeued: $restart requeue(s), the cluster's "
       "max_requeues; continue with: sbatch $run_dir/job.sbatch\"\n"
       "  exit \"$rc\"\n"
       "fi\n"
       "if [ \"$signalled\" = TERM ]; then\n"
       "  vexp_record end cancelled \"$rc\"\n"
       "  say \"cancelled (vexp run exit $rc)\"\n"
       "  exit \"$rc\"\n"
       "fi\n"
       "vexp_record end failed \"$rc\"\n"
       "say \"vexp run failed (exit $rc)\"\n"
       "exit \"$rc\"\n";
  return o.str();
}

std::string job_event_line(const std::string& event, const std::string& state, int64_t exit_code) {
  static const std::set<std::string> states{"running",   "completed", "requeued", "requeue_failed",
                                            "requeue_limit", "cancelled", "failed"};
  if (event != "start" && event != "end")
    throw Refused("job event '" + base::printable(event, 40) + "' is not start or end");
  if (!states.count(state)) throw Refused("job state '" + base::printable(state, 40) + "' is not one vexp records");
  auto env = [](const char* name, const std::string& allowed) {
    const char* v = std::getenv(name);
    std::string out;
    for (const char* c = v ? v : ""; *c && out.size() < 4096; ++c)
      if (allowed.find(*c) != std::string::npos) out += *c;
    return out;
  };
  const std::string digits = "0123456789";
  const std::string restart = env("SLURM_RESTART_COUNT", digits);
  // The field order of the records the script wrote before (and of docs/clusters.md).
  nlohmann::ordered_json j{{"event", event},
                   {"job", env("SLURM_JOB_ID", digits)},
                   {"restart", restart.empty() || restart.size() > 9 ? 0 : std::stoll(restart)},
                   {"state", state},
                   {"exit", exit_code},
                   {"nodes", env("SLURM_JOB_NODELIST",
                                 "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789,._[]-")},
                   {"time", base::utc_now()}};
  return j.dump();
}

JobRecord read_jobs(const std::string& run_dir) {
  JobRecord r;
  const std::string file = jobs_file(run_dir);
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(file, ec))) return r;
  const std::string text = base::read_file_bounded(file, base::kMaxLogFileBytes);
  std::map<std::string, size_t> index;
  auto job_of = [&](const std::string& id) -> JobHistory& {
    auto it = index.find(id);
    if (it != index.end()) return r.jobs[it->second];
    index[id] = r.jobs.size();
    r.jobs.push_back(JobHistory{});
    r.jobs.back().job = id;
    return r.jobs.back();
  };
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const auto e = nlohmann::json::parse(line, nullptr, false);
    if (e.is_discarded() || !e.is_object() || !e.contains("event") || !e["event"].is_string() || !e.contains("job") ||
        !e["job"].is_string() || e["job"].get<std::string>().empty()) {
      ++r.bad_lines;
      continue;
    }
    const std::string ev = e["event"].get<std::string>();
    auto str = [&](const char* k) { return e.contains(k) && e[k].is_string() ? e[k].get<std::string>() : std::string(); };
    auto num = [&](const char* k, int64_t def) {
      return e.contains(k) && e[k].is_number_integer() ? e[k].get<int64_t>() : def;
    };
    if (ev != "submitted" && ev != "start" && ev != "end" && ev != "cancel") {
      ++r.bad_lines;
      continue;
    }
    JobHistory& j = job_of(e["job"].get<std::string>());
    j.last_time = str("time");
    if (ev == "submitted") {
      j.submitted = str("time");
      j.max_requeues = num("max_requeues", -1);
      j.state = "submitted";
    } else if (ev == "start") {
      ++j.starts;
      j.nodes = str("nodes");
      j.state = "running";
    } else if (ev == "cancel") {
      // vexp cancel: the job had not ended when scancel was asked (a job that ended
      // just before keeps its end).
      if (!record_ended(j)) {
        j.state = "cancelled";
        j.cancelled = str("time").empty() ? "?" : str("time");
      }
    } else {
      j.state = str("state").empty() ? "ended" : str("state");
      j.exit_code = num("exit", -1);
      if (j.state == "requeued") ++j.requeues;
    }
  }
  return r;
}

std::string state_text(const JobHistory& j) {
  const std::string& s = j.state;
  if (s == "submitted") return "submitted, not started yet";
  if (s == "running") return "running (or ended without a word: killed)";
  if (s == "requeued") return "stopped at the time limit with a checkpoint and requeued";
  if (s == "completed") return "the run is complete";
  if (s == "requeue_limit")
    return "stopped at the time limit with a checkpoint, not requeued: the cluster's limit of " +
           (j.max_requeues >= 0 ? std::to_string(j.max_requeues) : std::string("?")) + " requeue(s) was reached";
  if (s == "requeue_failed") return "stopped at the time limit with a checkpoint; scontrol requeue failed";
  if (s == "cancelled" && !j.cancelled.empty())
    return "cancelled by vexp cancel (" + base::printable(j.cancelled, 40) +
           "); continue with vexp run --resume auto or sbatch";
  if (s == "cancelled") return "cancelled (scancel or the time limit); continue with vexp run --resume auto or sbatch";
  if (s == "failed") return "vexp run failed (exit " + std::to_string(j.exit_code) + ")";
  return base::printable(s, 40);
}

bool record_ended(const JobHistory& j) {
  const std::string& s = j.state;
  return !(s == "submitted" || s == "running" || s == "requeued");
}

std::string cancel_event_line(const std::string& job) {
  nlohmann::ordered_json j{{"event", "cancel"}, {"job", job},           {"state", "cancelled"},
                           {"by", "vexp cancel"}, {"time", base::utc_now()}};
  return j.dump();
}

RunCancel cancel_run(const std::string& run_dir) {
  const JobRecord rec = read_jobs(run_dir);
  if (rec.jobs.empty())
    throw Refused("'" + base::printable(run_dir) + "' has no recorded Slurm job (" +
                  base::printable(jobs_file(run_dir)) + " is missing or empty): nothing to cancel");
  RunCancel out;
  std::vector<std::string> maybe;
  for (const auto& j : rec.jobs) {
    if (j.job.empty() || j.job.find_first_not_of("0123456789") != std::string::npos) continue;  // never sent to scancel
    if (record_ended(j)) out.ended.emplace_back(j.job, "its record says: " + state_text(j));
    else maybe.push_back(j.job);
  }
  if (!maybe.empty()) {
    const std::map<std::string, QueueEntry> q = query(maybe);  // one squeue call
    std::vector<std::string> live;
    for (const auto& job : maybe) {
      auto it = q.find(job);
      if (it == q.end()) out.ended.emplace_back(job, "Slurm no longer knows it (it ended)");
      else if (is_final(it->second.state)) out.ended.emplace_back(job, "Slurm: " + base::printable(it->second.state, 40));
      else {
        live.push_back(job);
        out.cancelled.emplace_back(job, it->second.state);
      }
    }
    cancel(live);  // one scancel call
    for (const auto& job : live) {
      if (auto wrote = base::attempt([&] { append_event(run_dir, cancel_event_line(job)); }); !wrote)
        out.record_problem = wrote.message();
    }
  }
  return out;
}

}  // namespace vexp::slurm
