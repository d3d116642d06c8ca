// What a run directory holds, read for the reports through vexp::rundir:
// metrics.jsonl (step and eval records), summary.json (a finished run),
// resolved.toml (flattened to key = value), provenance.jsonl (one record per
// invocation), failures/rank_R.txt and, for a sweep trial, log.txt.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "vexp/rundir/files.hpp"
#include "vexp/rundir/provenance.hpp"

namespace vexp::report {

using StepLine = rundir::StepRecord;
using EvalLine = rundir::EvalRecord;

struct RunData {
  std::filesystem::path dir;
  std::string name;                  // summary.json's, else [run] name, else the folder
  std::string status;                // done | diverged | failed | unfinished
  std::string message;               // why it diverged or failed, where recorded
  std::vector<StepLine> steps;
  std::vector<EvalLine> evals;
  int64_t steps_per_epoch = 0;       // the largest `step` of a step line
  int64_t unreadable_lines = 0;      // metrics.jsonl lines skipped: not JSON, or not a record of the right types
  nlohmann::json summary;            // null when there is none
  std::string resolved;              // resolved.toml as written ("" when missing)
  std::vector<std::pair<std::string, std::string>> keys;  // resolved recipe flattened: "optim.lr" = "0.1"
  std::vector<std::string> overrides;                     // --set of a sweep trial ("optim.lr=0.1")
  std::string base;                                       // the recipe those overrides apply to
  std::vector<nlohmann::json> provenance;  // provenance.jsonl's records, oldest first (none: an older run)
  // `vexp eval`'s folders inside the run (DIR/*/eval.json), by name: the folder, its
  // eval.json (null when it cannot be read: `problem` says why).
  struct EvalFolder {
    std::filesystem::path dir;
    nlohmann::json eval;
    std::string problem;
  };
  std::vector<EvalFolder> eval_folders;
};

// Reads DIR; throws base::Error (failure) when DIR is not a run directory (no metrics.jsonl,
// summary.json nor resolved.toml).
RunData read_run(const std::filesystem::path& dir);

// Whether DIR looks like a run directory (holds metrics.jsonl or summary.json).
inline bool is_run_dir(const std::filesystem::path& dir) { return rundir::RunDir(dir).is_run_dir(); }

// The value of a flattened recipe key ("" when the run does not have it).
std::string key_value(const RunData& r, const std::string& key);

// resolved.toml's text (`file` names it in diagnostics) flattened to "key" = its TOML
// text: "optim.lr" = "0.1", "model.node.features.depth" = "50" (an array of tables by
// its entries' `id`, else their index); nullopt when the text is empty or does not load.
// RunData::keys, and the rows whose differences (rundir::differences_between) the
// comparison report and `vexp compare` list as the recipe keys that differ.
std::optional<rundir::FlatRows> resolved_keys(const std::string& text, const std::string& file);

}  // namespace vexp::report
