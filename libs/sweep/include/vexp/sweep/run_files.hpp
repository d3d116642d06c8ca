// How the sweep engine reads the files of a trial's run directory (resolved.toml,
// metrics.jsonl, summary.json, log.txt): through libs/rundir, the one module that
// names, writes and reads a run directory, so a sweep reads a run exactly as
// `vexp report` does. Every reader reports a file it refuses with sweep::Error (one
// sentence naming the file).
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

// The readers (libs/rundir's, their errors as sweep::Error).
const RunFileReader& run_files();

}  // namespace vexp::sweep
