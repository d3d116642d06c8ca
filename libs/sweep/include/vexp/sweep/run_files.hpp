// How the sweep engine reads the files of a trial's run directory (resolved.toml,
// metrics.jsonl, summary.json, log.txt). The run-directory format is not the
// sweep's: the program that uses the engine binds its reader once, before the
// first sweep call (the `vexp` CLI binds tools/vexp/report/run_files, so a sweep
// reads a run directory exactly as `vexp report` does). Every reader reports a
// file it refuses with sweep::Error (one sentence naming the file).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

namespace vexp::sweep {

using LineFn = std::function<void(const std::string& line, std::int64_t number)>;

struct RunFileReader {
  // The text of a file ("" when it does not exist), bounded.
  std::function<std::string(const std::filesystem::path&)> text;
  // Each line of a log (metrics.jsonl, log.txt), streamed; nothing when it does not exist.
  std::function<void(const std::filesystem::path&, const LineFn&)> lines;
  // summary.json: null when there is none, else an object whose known keys have their types.
  std::function<nlohmann::json(const std::filesystem::path&)> summary;
  // Why a record of metrics.jsonl cannot be used ("" when it can).
  std::function<std::string(const nlohmann::json&)> record_problem;
};

// Binds the reader (all four functions must be set; std::invalid_argument otherwise).
void bind_run_files(RunFileReader reader);
// The bound reader; std::logic_error when none was bound.
const RunFileReader& run_files();

}  // namespace vexp::sweep
