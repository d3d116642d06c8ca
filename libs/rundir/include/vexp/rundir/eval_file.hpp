// An eval folder: what `vexp eval` writes (torch-free; docs/recipes.md, "Eval folders").
//
//   eval.json          the protocol, every figure, per-class accuracy, the confusion
//                      matrix, the failed videos, the weights and their SHA-256
//   logits.pt          with --logits: every video's averaged logits (torch.load)
//   provenance.jsonl   one record per invocation (provenance.hpp), as a run's
//
// By default the folder is RUN_DIR/eval-PROTOCOL (weights given as a run folder) or
// eval/RECIPE-PROTOCOL; `vexp report` shows an eval folder, and a run folder's evals.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "vexp/rundir/files.hpp"

namespace vexp::rundir {

inline constexpr const char* kEvalFile = "eval.json";
inline constexpr const char* kEvalLogits = "logits.pt";
inline constexpr const char* kEvalDirPrefix = "eval-";
// eval.json's "format"; a reader refuses a file without it (fields are only ever added).
inline constexpr const char* kEvalFormat = "vexp-eval-1";

// Whether `dir` holds an eval.json.
bool is_eval_dir(const fs::path& dir);
// The folders directly under a run folder that hold an eval.json, by name.
std::vector<fs::path> eval_dirs_of(const fs::path& run_dir);

// DIR/eval.json: Error naming the file (and the key) when it is missing, not JSON, not
// an object of format kEvalFormat, or a known key has another type (the figures:
// numbers or null; protocol: an object; per_class, failures, confusion: arrays).
nlohmann::json read_eval(const fs::path& dir);

// eval.json's text: one line per top-level key, one per element of the long arrays
// (per_class, failures) and one per row of the confusion matrix.
std::string eval_json_text(const nlohmann::ordered_json& eval);
// Writes DIR/eval.json atomically.
void write_eval(const fs::path& dir, const nlohmann::ordered_json& eval);

}  // namespace vexp::rundir
