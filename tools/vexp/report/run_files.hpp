// The files of run and sweep directories for the CLI: vexp::rundir's readers
// (bounded, never blocking, a wrong type named with its file, line and key) with
// their rundir::Error turned into cli::Exit (failure), one line naming the file.
// New code reads run directories through vexp/rundir/files.hpp directly.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "vexp/base/files.hpp"
#include "vexp/rundir/files.hpp"

namespace vexp::report {

// rundir::read_text: the text of `path` ("" when it does not exist).
std::string read_run_file(const std::filesystem::path& path, std::uint64_t max_bytes = base::kMaxTextFileBytes);

// rundir::for_each_line: each line of the log `path` (metrics.jsonl, log.txt), streamed.
void for_each_log_line(const std::filesystem::path& path,
                       const std::function<void(const std::string& line, std::int64_t number)>& fn);

// rundir::read_summary: summary.json (null when there is none), its keys' types checked.
nlohmann::json read_summary(const std::filesystem::path& file);

// rundir::metrics_record_problem: why a metrics.jsonl record cannot be used ("" when it can).
using rundir::metrics_record_problem;
using rundir::SkippedLines;

// Runs `fn`, turning a rundir::Error into cli::Exit (failure).
template <class F>
auto cli_errors(F&& fn) -> decltype(fn());

}  // namespace vexp::report

#include "common.hpp"
#include "vexp/base/text.hpp"

namespace vexp::report {
template <class F>
auto cli_errors(F&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const rundir::Error& e) {
    throw cli::Exit{cli::kExitFailure, base::printable(e.what(), 1024)};
  }
}
}  // namespace vexp::report
