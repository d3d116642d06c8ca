#include "vexp/report/run_data.hpp"
#include "vexp/base/attempt.hpp"
#include "vexp/rundir/eval_file.hpp"

#include <cmath>
#include <iostream>
#include <sstream>

#include "vexp/rundir/files.hpp"
#include "vexp/sweep/directory.hpp"
#include "vexp/report/sweep_results.hpp"
#include "vexp/dsl/recipe.hpp"
#include "vexp/rundir/provenance.hpp"

namespace vexp::report {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

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
  const std::string failure = rundir::recorded_failure(dir);
  if (!failure.empty()) return failure;
  const rundir::RunDir d(dir);
  if (fs::exists(d.trial_log())) return sweep::last_error(d.trial_log());
  return "";
}

// The trial of a sweep whose run directory DIR is (DIR = SWEEP/trials/NNN).
void sweep_trial_overrides(RunData& r) {
  const fs::path sweep_dir = r.dir.parent_path().parent_path();
  if (r.dir.parent_path().filename() != "trials" || !rundir::RunDir(sweep_dir).is_sweep_dir()) return;
  // An unreadable store: the run is still reported, without its overrides.
  auto opened = base::attempt([&] { return report::open_results(sweep_dir.string()); });
  if (!opened) return;
  {
    const report::Opened o = std::move(opened).value();
    std::error_code ec;
    for (const auto& row : o.rows) {
      if (!fs::equivalent(row.run_dir, r.dir, ec)) continue;
      for (const auto& ov : sweep::overrides_of(row)) r.overrides.push_back(ov.path + "=" + ov.text);
      r.base = "the base recipe of sweep '" + o.name + "'";
    }
  }
}

}  // namespace

RunData read_run(const fs::path& dir_in) {
  std::error_code ec;
  if (!fs::is_directory(dir_in, ec))
    throw base::failure("'" + dir_in.string() + "' is not a directory");
  RunData r;
  r.dir = fs::absolute(dir_in, ec).lexically_normal();
  if (r.dir.filename().empty()) r.dir = r.dir.parent_path();
  const rundir::RunDir d(r.dir);
  if (!d.is_run_dir(/*resolved_counts=*/true))
    throw base::failure("'" + dir_in.string() +
                                           "' is not a run directory (it has no metrics.jsonl, summary.json or "
                                           "resolved.toml) nor a sweep directory (no sweep.db)");
  // metrics.jsonl: a line that is not a step or eval record of the right types
  // (a torn last line of a crashed run, or anything else) is skipped and counted.
  rundir::Metrics m = rundir::read_metrics(r.dir);
  r.steps = std::move(m.steps);
  r.evals = std::move(m.evals);
  for (const auto& s : r.steps) r.steps_per_epoch = std::max(r.steps_per_epoch, s.step);
  r.unreadable_lines = m.skipped.count;
  if (m.skipped.count > 0) std::cerr << "vexp: warning: " << m.skipped.text(d.metrics()) << "\n";
  r.summary = rundir::read_summary(d.summary());
  // resolved.toml, flattened
  r.resolved = rundir::read_text(d.resolved());
  if (auto keys = resolved_keys(r.resolved, d.resolved().string())) r.keys = std::move(*keys);
  // provenance.jsonl (runs of an earlier vexp have none)
  rundir::Provenance prov = rundir::read_provenance(r.dir);
  r.provenance = std::move(prov.records);
  if (prov.skipped.count > 0) std::cerr << "vexp: warning: " << prov.skipped.text(d.provenance()) << "\n";
  // vexp eval's folders inside the run
  for (const fs::path& e : rundir::eval_dirs_of(r.dir)) {
    RunData::EvalFolder f;
    f.dir = e;
    try {
      f.eval = rundir::read_eval(e);
    } catch (const std::exception& ex) {
      f.problem = ex.what();
    }
    r.eval_folders.push_back(std::move(f));
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

std::optional<rundir::FlatRows> resolved_keys(const std::string& text, const std::string& file) {
  if (text.empty()) return std::nullopt;
  dsl::Diagnostics diags;
  dsl::LoadOptions literal;  // resolved.toml is written out: no ${VAR} left to interpolate
  literal.env = [](const std::string& name) -> std::optional<std::string> { return "${" + name + "}"; };
  const auto rec = dsl::load_recipe_text(text, file, literal, diags);
  if (!rec || diags.error_count() > 0) return std::nullopt;
  rundir::FlatRows rows;
  flatten(rec->root, "", rows);
  return rows;
}

std::string key_value(const RunData& r, const std::string& key) {
  for (const auto& [k, v] : r.keys)
    if (k == key) return v;
  return "";
}

}  // namespace vexp::report
