#include "report/run_data.hpp"

#include <cmath>
#include <iostream>
#include <sstream>

#include "common.hpp"
#include "report/run_files.hpp"
#include "vexp/sweep/directory.hpp"
#include "report/sweep_results.hpp"
#include "vexp/dsl/recipe.hpp"

namespace vexp::report {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

std::string read_text(const fs::path& p) { return read_run_file(p); }

double num(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : 0.0;
}
std::optional<double> opt_num(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

// "model.node.features.depth" for a node with id "features"; arrays of tables
// without ids by index.
void flatten(const dsl::Value& v, const std::string& prefix, std::vector<std::pair<std::string, std::string>>& out) {
  auto join = [&](const std::string& k) { return prefix.empty() ? k : prefix + "." + k; };
  if (v.is_table()) {
    for (const auto& [k, c] : v.as_table()) flatten(c, join(k), out);
    return;
  }
  if (v.is_array() && !v.as_array().empty() && v.as_array()[0].is_table()) {
    const auto& a = v.as_array();
    for (size_t i = 0; i < a.size(); ++i) {
      const dsl::Value* id = a[i].is_table() ? a[i].find("id") : nullptr;
      flatten(a[i], join(id && id->is_string() ? id->as_string() : std::to_string(i)), out);
    }
    return;
  }
  out.emplace_back(prefix, v.to_toml_inline());
}

// Where a run's failure is recorded: failures/rank_R.txt (several ranks), the
// sweep's log.txt (a trial).
std::string recorded_failure(const fs::path& dir) {
  std::error_code ec;
  if (fs::is_directory(dir / "failures", ec)) {
    for (const auto& e : fs::directory_iterator(dir / "failures", ec)) {
      if (!e.is_regular_file()) continue;
      std::istringstream in(read_text(e.path()));
      std::string line, last;
      while (std::getline(in, line))
        if (!line.empty()) last = line;
      if (!last.empty()) return e.path().filename().string() + ": " + last;
    }
  }
  if (fs::exists(dir / "log.txt")) return sweep::last_error(dir / "log.txt");
  return "";
}

// The trial of a sweep whose run directory DIR is (DIR = SWEEP/trials/NNN).
void sweep_trial_overrides(RunData& r) {
  const fs::path sweep_dir = r.dir.parent_path().parent_path();
  if (r.dir.parent_path().filename() != "trials" || !fs::exists(sweep_dir / "sweep.db")) return;
  try {
    const sweep::Opened o = sweep::open_results(sweep_dir.string());
    std::error_code ec;
    for (const auto& row : o.rows) {
      if (!fs::equivalent(row.run_dir, r.dir, ec)) continue;
      for (const auto& ov : sweep::overrides_of(row)) r.overrides.push_back(ov.path + "=" + ov.text);
      r.base = "the base recipe of sweep '" + o.name + "'";
    }
  } catch (const cli::Exit&) {
    // an unreadable store: the run is still reported, without its overrides
  }
}

}  // namespace

bool is_run_dir(const fs::path& dir) {
  return fs::exists(dir / "metrics.jsonl") || fs::exists(dir / "summary.json");
}

RunData read_run(const fs::path& dir_in) {
  std::error_code ec;
  if (!fs::is_directory(dir_in, ec))
    throw cli::Exit{cli::kExitFailure, "'" + dir_in.string() + "' is not a directory"};
  RunData r;
  r.dir = fs::absolute(dir_in, ec).lexically_normal();
  if (r.dir.filename().empty()) r.dir = r.dir.parent_path();
  if (!is_run_dir(r.dir) && !fs::exists(r.dir / "resolved.toml"))
    throw cli::Exit{cli::kExitFailure, "'" + dir_in.string() +
                                           "' is not a run directory (it has no metrics.jsonl, summary.json or "
                                           "resolved.toml) nor a sweep directory (no sweep.db)"};
  // metrics.jsonl: a line that is not a step or eval record of the right types
  // (a torn last line of a crashed run, or anything else) is skipped and counted.
  {
    const fs::path file = r.dir / "metrics.jsonl";
    SkippedLines skipped;
    for_each_log_line(file, [&](const std::string& line, int64_t number) {
      if (line.empty()) return;
      json j;
      try {
        j = json::parse(line);
      } catch (const std::exception&) {
        skipped.add(file, number, "not JSON");
        return;
      }
      const std::string why = metrics_record_problem(j);
      if (!why.empty()) {
        skipped.add(file, number, why);
        return;
      }
      const std::string type = j.value("type", "");
      if (type == "step") {
        StepLine s;
        s.global_step = static_cast<int64_t>(num(j, "global_step"));
        s.epoch = static_cast<int64_t>(num(j, "epoch"));
        s.step = static_cast<int64_t>(num(j, "step"));
        s.ranks = j.contains("ranks") ? static_cast<int64_t>(num(j, "ranks")) : 1;
        s.loss = j.contains("loss") && j["loss"].is_number() ? j["loss"].get<double>() : std::nan("");
        s.lr = num(j, "lr");
        s.clips_per_s = num(j, "clips_per_s");
        s.step_s = num(j, "step_s");
        s.data_s = num(j, "data_s");
        s.compute_s = num(j, "compute_s");
        s.comm_s = num(j, "comm_s");
        if (j.contains("epochs_trained") && j["epochs_trained"].is_number()) s.epochs_trained = j["epochs_trained"].get<double>();
        r.steps_per_epoch = std::max(r.steps_per_epoch, s.step);
        r.steps.push_back(s);
      } else if (type == "eval") {
        EvalLine e;
        e.epoch = static_cast<int64_t>(num(j, "epoch"));
        e.global_step = static_cast<int64_t>(num(j, "global_step"));
        e.top1 = opt_num(j, "top1");
        e.top5 = opt_num(j, "top5");
        e.val_loss = opt_num(j, "val_loss");
        r.evals.push_back(e);
      }
    });
    r.unreadable_lines = skipped.count;
    if (skipped.count > 0) std::cerr << "vexp: warning: " << skipped.text(file) << "\n";
  }
  // summary.json
  r.summary = read_summary(r.dir / "summary.json");
  // resolved.toml, flattened
  r.resolved = read_text(r.dir / "resolved.toml");
  if (!r.resolved.empty()) {
    dsl::Diagnostics d;
    dsl::LoadOptions opts;
    opts.env = [](const std::string&) -> std::optional<std::string> { return std::nullopt; };
    auto rec = dsl::load_recipe_text(r.resolved, (r.dir / "resolved.toml").string(), opts, d);
    if (rec) flatten(rec->root, "", r.keys);
  }
  // name and status
  r.name = r.summary.is_object() ? r.summary.value("name", "") : "";
  if (r.name.empty()) r.name = key_value(r, "run.name");
  if (r.name.size() >= 2 && r.name.front() == '"') r.name = r.name.substr(1, r.name.size() - 2);
  if (r.name.empty()) r.name = r.dir.filename().string();
  const std::string failure = recorded_failure(r.dir);
  if (r.summary.is_object()) {
    r.status = "done";
  } else if (failure.find("diverged") != std::string::npos) {
    r.status = "diverged";
    r.message = failure;
  } else {
    for (const auto& e : r.evals)
      if (!e.top1 || !e.top5 || !e.val_loss) {
        r.status = "diverged";
        r.message = "a validation value after epoch " + std::to_string(e.epoch) + " is not finite";
      }
    for (const auto& s : r.steps)
      if (!std::isfinite(s.loss) && r.status.empty()) {
        r.status = "diverged";
        r.message = "the training loss at step " + std::to_string(s.global_step) + " is not finite";
      }
    if (r.status.empty()) {
      r.status = failure.empty() ? "unfinished" : "failed";
      r.message = failure.empty() ? "no summary.json: the run was interrupted, is still running, or stopped on an error"
                                  : failure;
    }
  }
  sweep_trial_overrides(r);
  return r;
}

std::string key_value(const RunData& r, const std::string& key) {
  for (const auto& [k, v] : r.keys)
    if (k == key) return v;
  return "";
}

}  // namespace vexp::report
