// The files of run and sweep directories, read as data from outside: a directory
// may be a copy, a download or a trap (a FIFO, a link to /dev/zero or /dev/urandom,
// a 10 GB log), and a file in it may hold JSON of the wrong shape. Each file is read
// only when it is a regular file of bounded size, otherwise one line (cli::Exit,
// failure) names it; a JSON value of the wrong type names the file, the line and
// the key.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "vexp/base/files.hpp"

namespace vexp::report {

// The text of `path` ("" when it does not exist). Exit when it is not a regular file
// of at most `max_bytes`, or cannot be read.
std::string read_run_file(const std::filesystem::path& path, std::uint64_t max_bytes = base::kMaxTextFileBytes);

// Calls `fn(line, number)` for each line of the log `path` (metrics.jsonl, log.txt;
// numbers from 1), streamed: nothing when it does not exist, Exit when it is not a
// regular file of at most kMaxLogFileBytes. Never blocks on a FIFO.
void for_each_log_line(const std::filesystem::path& path,
                       const std::function<void(const std::string& line, std::int64_t number)>& fn);

// summary.json of a run directory: null when there is none; Exit naming the file
// (and the key) when it is not a JSON object whose known keys have their types
// (name, status, device, ...: strings; top1, epochs, ...: numbers or null).
nlohmann::json read_summary(const std::filesystem::path& file);

// Why the record `j` of metrics.jsonl cannot be used ("" when it can): not an
// object, `type` not a string, or a known key of a step / eval record (global_step,
// epoch, loss, top1, ...) that is not a number (or null, written for NaN).
std::string metrics_record_problem(const nlohmann::json& j);

// Counts the lines of a metrics.jsonl that were skipped and remembers where, for
// one warning: "skipped 2 lines of DIR/metrics.jsonl (DIR/metrics.jsonl:3: key
// 'global_step' is a string, expected a number; ...:7: not JSON)".
struct SkippedLines {
  std::int64_t count = 0;
  std::string where;  // the first few "file:line: why", separated by "; "
  void add(const std::filesystem::path& file, std::int64_t line, const std::string& why);
  std::string text(const std::filesystem::path& file) const;
};

}  // namespace vexp::report
