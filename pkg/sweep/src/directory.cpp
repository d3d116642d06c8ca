#include "vexp/sweep/directory.hpp"

#include "vexp/base/attempt.hpp"
#include "vexp/base/files.hpp"
#include "vexp/base/text.hpp"
#include "vexp/rundir/files.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iostream>
#include <regex>
#include <sstream>

#include "vexp/dsl/recipe.hpp"
#include "vexp/runtime/checkpoint.hpp"
#include "vexp/sweep/error.hpp"

namespace vexp::sweep {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// "==== vexp sweep: trial 003, attempt 2, 2026-01-31 12:00:00, resuming" opens an
// attempt; "==== vexp sweep: end of trial 003 failed, exit code 1, 12.345 s: message"
// closes it.
constexpr const char* kStartTag = "==== vexp sweep: trial ";
constexpr const char* kEndTag = "==== vexp sweep: end of trial ";

// `threads = N` of the [run] table of a resolved recipe ("" when absent).
std::string run_threads_in(const fs::path& resolved) {
  std::istringstream in(rundir::read_text(resolved));
  std::string line;
  bool in_run = false;
  static const std::regex threads(R"(^threads\s*=\s*(\d+)\s*$)");
  while (std::getline(in, line)) {
    if (!line.empty() && line[0] == '[') in_run = line == "[run]";
    std::smatch m;
    if (in_run && std::regex_match(line, m, threads)) return m[1];
  }
  return "";
}

// A number of a record; `absent` when missing or null (NaN is written as null).
double number(const json& j, const char* key, double absent) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : absent;
}

// A trial's log.txt is appended to without following a link (vexp::base::append_file):
// a folder from someone else may hold log.txt as a link to ~/.bashrc.
void append_log(const fs::path& log, const std::string& text) { base::append_file(log.string(), text); }

double mtime_s(const fs::path& p) {
  std::error_code ec;
  auto t = fs::last_write_time(p, ec);
  if (ec) return 0;
  auto sys = std::chrono::time_point_cast<std::chrono::system_clock::duration>(
      t - fs::file_time_type::clock::now() + std::chrono::system_clock::now());
  return std::chrono::duration<double>(sys.time_since_epoch()).count();
}

// Fills a new store from DIR/trials/NNN: a trial whose resolved.toml is this
// trial's recipe is done when it left a summary.json, failed / diverged / pruned
// when its log.txt ends so, and otherwise still to run (from its last checkpoint).
// Directories of another recipe stay pending: running them moves them aside.
void rebuild_from_trials(Store& store, Session& s, const Definition& def, const fs::path& dir) {
  std::map<std::string, int> counts;
  int found = 0;
  for (Row r : store.rows()) {
    const fs::path tdir = dir / "trials" / trial_name(r.id);
    if (!fs::is_directory(tdir)) continue;
    const rundir::RunDir run(tdir);
    ++found;
    r.run_dir = fs::absolute(tdir).lexically_normal().string();
    const std::string threads = run_threads_in(run.resolved());
    std::vector<dsl::Override> ov = overrides_of(r);
    if (!threads.empty()) ov.push_back({"run.threads", threads});
    // The recipe this trial runs, as launched alone or by a multi-rank sweep (MPI backend).
    const std::string found_hash = hash_in_resolved(run.resolved());
    bool ours = false;
    for (int variant = 0; variant < 2 && !ours && !found_hash.empty(); ++variant) {
      if (variant == 1) ov.push_back({"dist.backend", "\"mpi\""});
      ours = open_trial_recipe(s, def.base, ov, false) && s.plan && dsl::recipe_hash(s.plan->resolved) == found_hash;
    }
    // Attempts and the recorded outcome, from the log.
    std::string end_line;
    {
      const std::string start = kStartTag + trial_name(r.id) + ", attempt ";
      rundir::for_each_line(run.trial_log(), [&](const std::string& line, int64_t) {
        if (line.rfind(start, 0) == 0) {
          ++r.attempts;
          end_line.clear();
        } else if (line.rfind(kEndTag, 0) == 0) {
          end_line = line.substr(std::strlen(kEndTag));
        }
      });
    }
    r.started_at = mtime_s(run.resolved());
    json summary;
    bool has_summary = false;
    if (ours) {
      auto read = base::attempt([&] { return rundir::read_summary(run.summary()); });
      if (read) {
        summary = std::move(read).value();
        has_summary = summary.is_object();
      } else {
        std::cerr << "vexp: warning: " << read.message() << "; trial " << trial_name(r.id) << " runs again\n";
      }
    }
    static const std::regex end_re(R"(^(\d+) (done|failed|diverged|pruned|cancelled), exit code (-?\d+), ([0-9.]+) s(: (.*))?$)");
    std::smatch m;
    const bool ended = std::regex_match(end_line, m, end_re) && m[1] == trial_name(r.id);
    if (ours && has_summary) {
      r.status = "done";
      r.exit_code = 0;
      r.metrics = summary;
      if (summary.contains(def.metric) && summary[def.metric].is_number()) r.metric = summary[def.metric].get<double>();
      r.attempt_s = ended ? std::stod(m[4]) : number(summary, "wall_s", 0.0);
      r.finished_at = mtime_s(run.summary());
    } else if (ours && ended && m[2] != "done") {
      r.status = m[2];
      r.exit_code = std::stoi(m[3]);
      r.attempt_s = std::stod(m[4]);
      r.message = m[6];
      r.finished_at = mtime_s(run.trial_log());
      json evals = json::object();
      for (auto& [e, v] : read_curves(tdir, def.metric).eval) evals[std::to_string(e)] = v;
      r.metrics = json{{"evals", evals}};
    } else {
      r.status = "pending";  // interrupted, or another recipe's directory
      r.started_at = 0;
    }
    ++counts[r.status];
    store.restore(r);
  }
  std::cout << "rebuilt sweep.db from " << found << " trial director" << (found == 1 ? "y" : "ies") << ":";
  const char* sep = " ";
  for (const auto& [st, n] : counts) {
    std::cout << sep << n << " " << st;
    sep = ", ";
  }
  std::cout << "\n";
}

// How the trial folders of DIR/trials ran, for a new store over folders that exist (a
// lost or damaged sweep.db): a folder with a jobs.jsonl was a Slurm job, one with a
// log.txt a local trial; nullopt when none says.
std::optional<RunsOn> runs_on_of_trial_folders(const fs::path& dir) {
  std::optional<RunsOn> found;
  std::error_code ec;
  for (fs::directory_iterator it(dir / "trials", ec), end; !ec && it != end; it.increment(ec)) {
    const rundir::RunDir run(it->path());
    std::error_code e2;
    if (fs::exists(run.jobs(), e2)) return RunsOn{true, ""};
    if (fs::exists(run.trial_log(), e2)) found = RunsOn{};
  }
  return found;
}

// The command that follows DIR the way it runs.
std::string follow_command(const Definition& def, const fs::path& dir, const RunsOn& how) {
  std::string c = "vexp sweep " + base::shell_quote(def.file) + " --out " + base::shell_quote(dir.string());
  if (how.cluster) c += " --cluster " + (how.cluster_file.empty() ? std::string("CLUSTER.toml")
                                                                  : base::shell_quote(how.cluster_file));
  return base::printable(c, 600);
}

// Refuses `how` on a sweep folder that runs the other way (`was`).
void check_runs_on(const Store* store, const fs::path& dir, const Definition& def, const RunsOn& was,
                   const RunsOn& how) {
  int64_t running = 0, started = 0, total = 0;
  if (store)
    for (const Row& r : store->rows()) {
      ++total;
      running += r.status == "running" ? 1 : 0;
      started += r.attempts > 0 || r.status != "pending" ? 1 : 0;
    }
  const std::string d = base::printable(dir.string(), 200);
  if (was.cluster && !how.cluster) {
    const std::string jobs = running > 0 ? " (" + std::to_string(running) + " queued or running, their job ids in sweep.db)" : "";
    throw Error("'" + d + "' is a cluster sweep: its trials are Slurm jobs submitted with --cluster" +
                (was.cluster_file.empty() ? std::string("") : " '" + base::printable(was.cluster_file, 200) + "'") +
                jobs + "; a plain vexp sweep would run them again on this machine and forget their jobs: follow it with " +
                follow_command(def, dir, was));
  }
  if (!was.cluster && how.cluster) {
    const std::string n = store ? " (" + std::to_string(started) + " of " + std::to_string(total) + " trials started)" : "";
    throw Error("'" + d + "' is a local sweep: its trials run on this machine" + n +
                "; --cluster would submit them again as Slurm jobs and mix two machines' figures in one study: "
                "follow it with " + follow_command(def, dir, was) + " (without --cluster), or give --cluster a new --out");
  }
  if (was.cluster && !was.cluster_file.empty() && !base::same_file(was.cluster_file, how.cluster_file))
    std::cerr << "vexp: warning: '" << d << "' was submitted with --cluster '" << base::printable(was.cluster_file, 200)
              << "'; the trials submitted from now on are shaped by '" << base::printable(how.cluster_file, 200)
              << "'\n";
}

std::map<std::string, std::string> runs_on_meta(const RunsOn& how) {
  return {{"runs_on", how.cluster ? "cluster" : "local"}, {"cluster_file", how.cluster ? how.cluster_file : ""}};
}

}  // namespace

bool trial_ended(const std::string& status) {
  return status == "done" || status == "failed" || status == "diverged" || status == "pruned" ||
         status == "cancelled";
}

void record_to_target(Store& store, const Definition& def, int64_t id, const fs::path& run_dir, int64_t global_batch) {
  if (!def.target) return;
  auto t = base::attempt([&] { return to_target(run_dir, *def.target, global_batch); });
  if (!t)  // a metrics.jsonl that cannot be read: nothing reached, said once
    std::cerr << "vexp: warning: trial " << trial_name(id) << ": " << t.message() << "; its figures to the target "
              << def.target->text() << " are left empty\n";
  store.set_to_target(id, def.target->text(), std::move(t).value_or(ToTarget{}));
}

size_t refresh_to_target(Store& store, const Definition& def) {
  const std::string want = def.target ? def.target->text() : "";
  size_t n = 0;
  for (const Row& r : store.rows()) {
    if (r.target == want || (!trial_ended(r.status) && r.target.empty())) continue;
    if (def.target && trial_ended(r.status)) {
      record_to_target(store, def, r.id, r.run_dir, r.global_batch);
      ++n;
    } else {
      store.set_to_target(r.id, "", {});
    }
  }
  return n;
}

std::optional<RunsOn> recorded_runs_on(const Store& store) {
  const std::string kind = store.meta("runs_on");
  if (kind == "cluster") return RunsOn{true, store.meta("cluster_file")};
  if (kind == "local") return RunsOn{};
  if (!kind.empty())
    throw Error("sweep.db: runs_on '" + base::printable(kind, 40) + "' is neither 'local' nor 'cluster'");
  // A store of an earlier vexp: its rows say.
  bool started = false;
  for (const Row& r : store.rows()) {
    if (!r.job.empty() || !r.job_state.empty()) return RunsOn{true, ""};
    started = started || r.attempts > 0 || r.status != "pending";
  }
  if (started) return RunsOn{};
  return std::nullopt;
}

Curves read_curves(const fs::path& run_dir, const std::string& metric) {
  Curves c;
  std::map<int64_t, int64_t> steps_in_epoch;
  std::vector<json> steps;
  double cps = 0;
  int n = 0;
  // Lines that are not records of the right types are skipped (vexp report names them).
  rundir::for_each_line(rundir::RunDir(run_dir).metrics(), [&](const std::string& line, int64_t) {
    try {
      json j = json::parse(line);
      if (!rundir::metrics_record_problem(j).empty()) return;
      const std::string type = j.value("type", "");
      if (type == "step") {
        auto& m = steps_in_epoch[static_cast<int64_t>(number(j, "epoch", 0))];
        m = std::max(m, static_cast<int64_t>(number(j, "step", 0)));
        cps += number(j, "clips_per_s", 0.0);
        ++n;
        steps.push_back(std::move(j));
      } else if (type == "eval" && j.contains(metric) && j[metric].is_number()) {
        c.eval[static_cast<int64_t>(number(j, "epoch", 0))] = j[metric].get<double>();
      }
    } catch (const std::exception&) {
    }
  });
  const int64_t per_epoch = steps_in_epoch.empty() ? 1 : std::max<int64_t>(1, steps_in_epoch.begin()->second);
  for (const auto& j : steps) {
    // Epochs' worth of clips trained (epochs differ by a step when N/G is not whole);
    // runs of an earlier vexp lack it.
    double x = j.contains("epochs_trained") && j["epochs_trained"].is_number()
                   ? j["epochs_trained"].get<double>()
                   : number(j, "epoch", 1) - 1 + number(j, "step", 0) / static_cast<double>(per_epoch);
    const double loss = number(j, "loss", 0.0);
    if (std::isfinite(loss) && loss > 0) c.loss.emplace_back(x, loss);
  }
  c.mean_clips_per_s = n > 0 ? cps / n : 0;
  return c;
}

std::string hash_in_resolved(const fs::path& resolved) { return rundir::resolved_hash(resolved); }

bool has_checkpoint(const fs::path& run_dir) {
  return !rundir::latest_checkpoint(rundir::RunDir(run_dir).checkpoints().string()).empty();
}

void move_attempt_aside(const fs::path& trial_dir) {
  int k = 1;
  while (fs::exists(trial_dir.string() + ".attempt-" + std::to_string(k))) ++k;
  fs::rename(trial_dir, trial_dir.string() + ".attempt-" + std::to_string(k));
}

void log_attempt(const fs::path& log, int64_t id, int64_t attempt, bool resume, const std::vector<std::string>& argv) {
  std::time_t t = std::time(nullptr);
  char when[64];
  std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", std::localtime(&t));
  std::string l = kStartTag + trial_name(id) + ", attempt " + std::to_string(attempt) + ", " + when +
                  (resume ? ", resuming" : "") + "\n$";
  for (const auto& x : argv) l += " " + x;
  append_log(log, l + "\n");
}

void log_outcome(const fs::path& log, int64_t id, const std::string& status, int exit_code, double wall_s,
                 const std::string& message) {
  char buf[96];
  std::snprintf(buf, sizeof buf, ", exit code %d, %.3f s", exit_code, wall_s);
  append_log(log, kEndTag + trial_name(id) + " " + status + buf + (message.empty() ? "" : ": " + message) + "\n");
}

std::string prune_reason(const Definition& def, const std::map<int64_t, double>& curve,
                         const std::map<int64_t, std::map<int64_t, double>>& finished_curves, int64_t& checked_epoch) {
  // Every evaluation not judged yet, in order: a poll that finds two new epochs (a fast
  // trial between two polls) judges the first before the second, as one poll per epoch would.
  for (auto it = curve.upper_bound(std::max(checked_epoch, def.prune_after - 1)); it != curve.end(); ++it) {
    const auto& [epoch, value] = *it;
    checked_epoch = epoch;
    std::vector<double> others;
    for (const auto& [id, c] : finished_curves)
      if (auto f = c.find(epoch); f != c.end()) others.push_back(f->second);
    if (static_cast<int64_t>(others.size()) < def.prune_min_trials) continue;
    std::sort(others.begin(), others.end());
    const size_t m = others.size();
    const double median = m % 2 ? others[m / 2] : 0.5 * (others[m / 2 - 1] + others[m / 2]);
    if (def.direction == "max" ? value >= median : value <= median) continue;
    char buf[200];
    std::snprintf(buf, sizeof buf,
                  "pruned after epoch %lld: %s %.4g is worse than the median %.4g of %zu finished trials",
                  static_cast<long long>(epoch), def.metric.c_str(), value, median, m);
    return buf;
  }
  return "";
}

std::string last_error(const fs::path& log) {
  // vexp's own words first: a launcher's line after them (mpirun's, srun's "task 0:
  // Exited with exit code 1") says less.
  std::string found, own;
  rundir::for_each_line(log, [&](const std::string& line, int64_t) {
    if (line.find("error") != std::string::npos || line.find("diverged") != std::string::npos) found = line;
    if (line.rfind("vexp: error:", 0) == 0 || line.find("diverged") != std::string::npos) own = line;
  });
  if (!own.empty()) found = own;
  if (found.size() > 400) found = found.substr(0, 400);
  return found;
}

void open_sweep_store(Store& store, const fs::path& dir, const Definition& def, const std::vector<Trial>& trials,
                      const RunsOn& how, Session& s) {
  const std::string hash = sweep_hash(def, trials);
  // A damaged sweep.db is moved aside (kept) and rebuilt below: the trial
  // directories are the source of truth.
  const std::string db_path = (dir / rundir::kSweepDb).string();
  if (auto opened = base::attempt<CorruptDatabase>([&] {
        store.open(db_path, true);
        store.has_meta();
      });
      !opened) {
    store.close();
    const std::string aside = move_aside(db_path);
    std::cerr << "vexp: warning: '" << db_path << "' is damaged (" << opened.message() << "); kept it as '" << aside
              << "' and rebuilding it from the trial directories in '" << (dir / "trials").string() << "'\n";
    store.open(db_path, true);
  }
  if (store.has_meta()) {
    if (store.meta("sweep_hash") != hash)
      throw Error("'" + dir.string() + "' holds another sweep (definition hash " +
                                        store.meta("sweep_hash") + ", now " + hash + ", from '" +
                                        store.meta("sweep_file") +
                                        "'): the sweep file or its base recipe changed; use --out for a new directory");
    const std::optional<RunsOn> was = recorded_runs_on(store);
    if (was) check_runs_on(&store, dir, def, *was, how);
    // A store of an earlier vexp (or whose trials never started) records it now.
    if (store.meta("runs_on").empty()) store.set_meta(runs_on_meta(was ? *was : how));
    std::cout << "resuming sweep in '" << dir.string() << "'\n";
    // The target is no part of the definition's hash: another one (or one added to a
    // sweep that had none) is measured on the trials that ended, from their folders.
    const std::string target = def.target ? def.target->text() : "";
    const std::string before = store.meta("target");
    if (before != target) {
      // The file that names the target now is the definition (the same trials).
      store.set_meta({{"target", target}, {"definition", rundir::read_text(def.file)},
                      {"sweep_file", fs::absolute(def.file).string()}});
      std::cout << "target " << (before.empty() ? std::string("(none)") : before) << " is now "
                << (target.empty() ? std::string("(none)") : target) << "\n";
    }
    if (const size_t n = refresh_to_target(store, def); n > 0)
      std::cout << "steps, clips and time to the target " << target << " measured for " << n << " ended trial"
                << (n == 1 ? "" : "s") << "\n";
    return;
  }
  // Trial folders of a lost store say how they ran.
  if (const std::optional<RunsOn> was = runs_on_of_trial_folders(dir)) check_runs_on(nullptr, dir, def, *was, how);
  store.insert_trials(trials, fs::absolute(dir / "trials").lexically_normal().string());
  const std::string text = rundir::read_text(def.file);
  std::map<std::string, std::string> meta{{"sweep_hash", hash}, {"sweep_file", fs::absolute(def.file).string()},
                                          {"name", def.name}, {"metric", def.metric}, {"direction", def.direction},
                                          {"base", fs::absolute(def.base).lexically_normal().string()},
                                          {"definition", text}, {"created_at", std::to_string(now_s())},
                                          {"target", def.target ? def.target->text() : ""}};
  meta.merge(runs_on_meta(how));
  store.set_meta(meta);
  // A new store over trial directories that exist (the old one damaged or deleted):
  // their results are taken from them.
  if (!fs::is_empty(dir / "trials")) {
    rebuild_from_trials(store, s, def, dir);
    refresh_to_target(store, def);
  }
}

}  // namespace vexp::sweep
