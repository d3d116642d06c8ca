// The run directory: every file `vexp run` writes there, named once, and the one
// way to write and read each (torch-free; docs/recipes.md, "The run directory").
//
//   resolved.toml      the recipe as trained (every default filled in, overrides
//                      applied), first line "# resolved recipe, hash H"
//   metrics.jsonl      one JSON record per line: "step" records (the logged window
//                      of steps) and "eval" records (after an evaluation)
//   summary.json       the result of a finished run (absent until it finishes)
//   provenance.jsonl   one record per invocation: where the run came from
//                      (provenance.hpp)
//   checkpoints/       epoch_NNNN.pt, epoch_NNNN_step_SSSSSS.pt (an interrupted epoch);
//                      NAME.corrupt: a checkpoint that did not load, kept aside;
//                      epoch_NNNN[_step_SSSSSS].TAG.pt: a hook's weights beside its
//                      checkpoint (the ema hook's averaged weights: TAG "ema")
//   failures/          rank_R.txt: the error of rank R (multi-rank runs);
//                      failures/previous/: those of earlier invocations
//   events.out.tfevents.T.HOST   TensorBoard scalars (the metrics records' figures)
//   log.txt            a sweep trial's output, with its attempts' start and end lines
//   jobs.jsonl         `vexp submit`'s Slurm job events
//   report.html        `vexp report RUN`'s default output
//   .vexp.lock         the directory lock (vexp::base::DirLock)
//
// Run directories come from outside (a copy, a download): every read is bounded
// (vexp::base::read_file_bounded limits), never blocks on a FIFO, and a value of the
// wrong type is an Error naming the file, the line and the key. Every whole-file
// write goes through vexp::base::write_file_atomic.
#pragma once

#include "vexp/base/error.hpp"
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "vexp/base/files.hpp"

namespace vexp::rundir {

namespace fs = std::filesystem;

// One line naming the file (and line and key) at fault.
struct Error : base::Error {
  using base::Error::Error;
};

// ---- names ------------------------------------------------------------------

inline constexpr const char* kResolved = "resolved.toml";
inline constexpr const char* kMetrics = "metrics.jsonl";
inline constexpr const char* kSummary = "summary.json";
inline constexpr const char* kProvenance = "provenance.jsonl";
inline constexpr const char* kCheckpoints = "checkpoints";
inline constexpr const char* kFailures = "failures";
inline constexpr const char* kFailuresPrevious = "previous";  // under failures/
inline constexpr const char* kTrialLog = "log.txt";
inline constexpr const char* kJobs = "jobs.jsonl";
inline constexpr const char* kReport = "report.html";
inline constexpr const char* kSweepDb = "sweep.db";            // marks a sweep directory, not a run directory
inline constexpr const char* kTensorBoardPrefix = "events.out.tfevents.";

// The first line of resolved.toml, followed by the recipe hash.
inline constexpr const char* kResolvedHashTag = "# resolved recipe, hash ";

// The paths of one run directory.
struct RunDir {
  fs::path dir;
  explicit RunDir(fs::path d) : dir(std::move(d)) {}
  fs::path resolved() const { return dir / kResolved; }
  fs::path metrics() const { return dir / kMetrics; }
  fs::path summary() const { return dir / kSummary; }
  fs::path provenance() const { return dir / kProvenance; }
  fs::path checkpoints() const { return dir / kCheckpoints; }
  fs::path failures() const { return dir / kFailures; }
  fs::path failure_of_rank(int rank) const { return failures() / ("rank_" + std::to_string(rank) + ".txt"); }
  fs::path trial_log() const { return dir / kTrialLog; }
  fs::path jobs() const { return dir / kJobs; }
  fs::path report() const { return dir / kReport; }

  // Whether it holds a run of its own (what refuses a plain start and what --resume
  // auto continues): a summary, a metrics.jsonl that is not empty, or a checkpoint.
  bool holds_run() const;
  // Whether it looks like a run directory to report: metrics.jsonl or summary.json
  // (or, with `resolved_counts`, resolved.toml: a run that stopped before its first step).
  bool is_run_dir(bool resolved_counts = false) const;
  // Whether it is a sweep directory (holds sweep.db).
  bool is_sweep_dir() const;
};

// ---- files vexp manages -------------------------------------------------------

// Why `path` is a file vexp manages inside a run or sweep folder, which no command's
// output may replace (docs/security.md), or "" when it is not: in a run folder
// (one holding resolved.toml, metrics.jsonl, summary.json, jobs.jsonl or .vexp.lock)
// every file named above, job.sbatch, slurm-JOB.out, TensorBoard events and
// everything under checkpoints/ and failures/; in a sweep folder (holding sweep.db)
// sweep.db and its side files, .vexp.lock and everything under trials/. For example
// "is summary.json of the run folder 'runs/a', which vexp manages". Links in the
// existing part of the path are resolved first.
std::string managed_file_problem(const fs::path& path);

// The one rule for a command's outputs (docs/security.md, "An output never replaces
// an input"): base::Error (invalid) with one line when `out`, given as `option`, is
//  - one of `inputs` ({path, what}, what the command reads or will read; "" skipped):
//    "OPTION 'OUT' is WHAT 'INPUT' that this command reads; write it elsewhere";
//  - any file this process has read so far, by device and inode (recipes and their
//    `extends` bases, cluster files and profiles, checkpoints, lists, ...):
//    "OPTION 'OUT' is 'NAME', which this command reads; write it elsewhere";
//  - a file vexp manages inside a run or sweep folder (rundir::managed_file_problem).
// Hard and symbolic links are seen through. Call it after the inputs were read.
void refuse_output(const std::string& out, const std::string& option,
                   const std::vector<std::pair<std::string, std::string>>& inputs = {});

// ---- checkpoints ------------------------------------------------------------

// The file name of the checkpoint after `epoch` epochs and `epoch_step` steps of
// the next one: epoch_NNNN.pt, or epoch_NNNN_step_SSSSSS.pt (an interrupted run).
std::string checkpoint_file_name(int64_t epoch, int64_t epoch_step = 0);
// The file beside checkpoint `checkpoint` (a path or a name) holding a hook's
// weights, tag `tag`: epoch_0003.pt -> epoch_0003.TAG.pt, in the same folder.
std::string checkpoint_side_file(const std::string& checkpoint, const std::string& tag);
// The checkpoint files (named as above) in `dir`, newest (most epochs, then steps)
// first; other files, NAME.corrupt and side files among them, are not checkpoints.
std::vector<std::string> checkpoints_newest_first(const std::string& dir);
// The newest of them ("" when there is none).
std::string latest_checkpoint(const std::string& dir);
// Deletes the checkpoints of `dir` older than its newest `keep` (keep >= 1) and
// returns their paths; `written` (the one just saved, which a resume starts from)
// is never deleted. A deleted checkpoint's side files (checkpoint_side_file) go
// with it; other files that are not checkpoints are left alone.
std::vector<std::string> prune_checkpoints(const std::string& dir, int64_t keep, const std::string& written);

// ---- reading ----------------------------------------------------------------

// The text of `path` ("" when it does not exist). Error when it is not a regular
// file of at most `max_bytes`, or cannot be read.
std::string read_text(const fs::path& path, std::uint64_t max_bytes = base::kMaxTextFileBytes);

// The longest line for_each_line hands over. vexp's own records are a few KB; a longer
// line (a 1 GiB file without a newline) is passed over, never held in memory.
inline constexpr std::uint64_t kMaxLogLineBytes = 16ull << 20;

// Calls `fn(line, number)` for each line of the log `path` (numbers from 1),
// streamed in one pass (time linear in the file's size, however long its lines):
// nothing when it does not exist, Error when it is not a regular file of at most
// kMaxLogFileBytes. Never blocks on a FIFO; a log growing while read is read up to
// the limit. A line longer than kMaxLogLineBytes goes to `on_long(number, bytes)`
// (when given) instead of `fn`.
void for_each_line(const fs::path& path, const std::function<void(const std::string& line, std::int64_t number)>& fn,
                   const std::function<void(std::int64_t number, std::uint64_t bytes)>& on_long = {});
// What a SkippedLines entry says of such a line: "a line of N bytes, more than the M a record may have".
std::string long_line_problem(std::uint64_t bytes);

// summary.json: null when there is none; Error naming the file (and the key) when
// it is not a JSON object whose known keys have their types (summary_string_keys:
// strings; summary_number_keys: numbers, or null for a value that was not finite).
nlohmann::json read_summary(const fs::path& file);
const std::vector<const char*>& summary_string_keys();
const std::vector<const char*>& summary_number_keys();

// Why the record `j` of metrics.jsonl cannot be used ("" when it can): not an
// object, `type` not a string, or a known key that is not a number (or null).
std::string metrics_record_problem(const nlohmann::json& j);

// A "step" record: the logged window of steps ending at `global_step`.
struct StepRecord {
  int64_t global_step = 0, epoch = 0, step = 0, ranks = 1;
  double loss = 0;  // NaN when written as null (not finite)
  double lr = 0, clips_per_s = 0, step_s = 0, data_s = 0, compute_s = 0, comm_s = 0;
  double epochs_trained = -1;  // epochs' worth of clips trained after it; -1: not logged (older runs)
};
// An "eval" record: the evaluation after `epoch` epochs.
struct EvalRecord {
  int64_t epoch = 0, global_step = 0;
  std::optional<double> top1, top5, val_loss;  // null in metrics.jsonl: not finite
  // Where the run stood (absent in the records of an earlier vexp): the training clips
  // seen (global_step x global batch), the seconds in training steps and the run's
  // wall-clock seconds, both over every invocation (summary.json's train_s and wall_s
  // at that point).
  std::optional<int64_t> clips_trained;
  std::optional<double> train_s, wall_s;
  // The [[hooks]]' metrics in the record (the ema hook's ema_top1, ema_top5,
  // ema_loss): every other key whose value is a number.
  std::map<std::string, double> hooks;
  // top1, top5, val_loss or a hook's metric by name (nullopt for any other name or a null value).
  std::optional<double> value(const std::string& key) const;
};
// Counts skipped lines and remembers where, for one warning: "skipped 2 lines of
// 'DIR/metrics.jsonl' (DIR/metrics.jsonl:3: key 'global_step' is a string, ...)".
struct SkippedLines {
  std::int64_t count = 0;
  std::string where;  // the first few "file:line: why", separated by "; "
  void add(const fs::path& file, std::int64_t line, const std::string& why);
  std::string text(const fs::path& file) const;
};
// for_each_line for a file of JSON records: `fn` gets each line that is not empty,
// and a line too long to read is counted in `skipped` (long_line_problem).
void for_each_record(const fs::path& file, SkippedLines& skipped,
                     const std::function<void(const std::string& line, std::int64_t number)>& fn);
struct Metrics {
  std::vector<StepRecord> steps;
  std::vector<EvalRecord> evals;
  SkippedLines skipped;  // lines that are not JSON or not records of the right types
};
// metrics.jsonl of the run directory `dir` (empty when there is none).
Metrics read_metrics(const fs::path& dir);

// The recipe hash in the first line of resolved.toml ("" when absent).
std::string resolved_hash(const fs::path& resolved_toml);

// The last non-empty line of the first failure record of `dir` (failures/rank_R.txt),
// as "rank_R.txt: LINE"; "" when there is none.
std::string recorded_failure(const fs::path& dir);

// ---- writing (the trainer's rank 0) -----------------------------------------

// resolved.toml: the hash line, then the resolved recipe's TOML.
void write_resolved(const fs::path& dir, const std::string& recipe_hash, const std::string& toml);
// summary.json (pretty-printed JSON object).
void write_summary(const fs::path& dir, const nlohmann::json& summary);
// Keeps the metrics lines up to (and including) `global_step` / `epochs_done`, so
// that a resumed run's log reads as if it had never stopped; torn or mistyped lines
// are dropped.
void truncate_metrics(const fs::path& dir, int64_t global_step, int64_t epochs_done);

}  // namespace vexp::rundir
