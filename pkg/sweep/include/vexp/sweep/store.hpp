// DIR/sweep.db: the SQLite store of a sweep's trials (their parameters, status,
// attempts and results) and its meta table (the definition and its hash).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "vexp/sweep/error.hpp"
#include "vexp/sweep/expansion.hpp"
#include "vexp/sweep/to_target.hpp"

namespace vexp::sweep {

struct Row {
  int64_t id = 0;
  nlohmann::json params, overrides, metrics;
  // What the trial trains (TrainedFigures, from the runtime's planner): global_batch
  // and lr as columns, every figure in `figures` (an empty object in a store of an
  // earlier vexp).
  int64_t global_batch = 0;
  double lr = 0;
  nlohmann::json figures = nlohmann::json::object();
  // run_dir: the trial's folder, DIR/trials/NNN of the store's own folder DIR (the
  // stored column is written for earlier vexps but never read: a path in a received
  // store is a label, not a place).
  std::string recipe_hash, status, run_dir, message;
  // The folder the column names (where the trial ran or was submitted from): a label,
  // shown and compared (a copied cluster sweep), never opened.
  std::string stored_run_dir;
  int64_t attempts = 0, exit_code = -1;
  std::optional<double> metric;
  // attempt_s: the last attempt's wall-clock seconds as the sweep measured them
  // (child start to exit). Not wall_s, which is the run's own (summary.json's,
  // every attempt of the run together) and is read from `metrics`.
  double started_at = 0, finished_at = 0, attempt_s = 0;
  // A trial of `vexp sweep --cluster`: its Slurm job id ("" while it is being
  // submitted or when it ran locally) and Slurm's state as the driver last saw it
  // ("submitting" before sbatch answered; PENDING, RUNNING, ...).
  std::string job, job_state;
  // The steps, clips and time to the sweep's target (columns steps_to_target,
  // clips_to_target, time_to_target_s, train_s_to_target, epoch_to_target), and the
  // target they were computed against (column target, Target::text: "top1 >= 0.9";
  // "" while not computed: a trial not ended, a sweep without a target, or a store of
  // an earlier vexp). Computed and empty: the trial ended without reaching it.
  std::string target;
  ToTarget to_target;
};

// DIR/sweep.db is damaged (SQLite: "database disk image is malformed", "file is
// not a database"). The trial directories still hold every result: `vexp sweep`
// moves the file aside and rebuilds it from them.
struct CorruptDatabase : Error {
  using Error::Error;
};

class Store {
 public:
  Store() = default;
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;
  // Opens (creating when `create`) DIR/sweep.db and checks every page of it;
  // throws CorruptDatabase when it is damaged, Error otherwise.
  void open(const std::string& path, bool create);
  void close();
  bool has_meta() const;
  std::string meta(const std::string& key) const;
  void set_meta(const std::map<std::string, std::string>& kv);  // one transaction
  void insert_trials(const std::vector<Trial>& trials, const std::string& trials_dir);
  std::vector<Row> rows() const;
  void mark_running(int64_t id, const std::string& run_dir);
  void finish(int64_t id, const std::string& status, int exit_code, std::optional<double> metric,
              const nlohmann::json& metrics, double attempt_s, const std::string& message);
  void reset(int64_t id);  // back to pending (interrupted)
  // `vexp cancel`: trial `id` is cancelled (status 'cancelled', `message`): a pending
  // trial (job ""), or a queued or running one whose job `job` was cancelled. False
  // when the trial was neither (it ended meanwhile). finish() never replaces it with
  // another status.
  bool mark_cancelled(int64_t id, const std::string& job, const std::string& message);
  // The trial's status now ("" for no such trial): a driver asks before it submits.
  std::string status_of(int64_t id) const;
  // The Slurm driver's steps (status stays 'running' from the submit to the end):
  // before sbatch (a new attempt, no job id yet), the job id sbatch answered, and
  // Slurm's state (started: the job was first seen running, started_at = now).
  void mark_submitting(int64_t id, const std::string& run_dir);
  void mark_queued(int64_t id, const std::string& run_dir, const std::string& job);
  void set_job_state(int64_t id, const std::string& state, bool started = false);
  // Sets every column of trial r.id from `r` (rebuilding the store from trial directories).
  void restore(const Row& r);
  // The trial's figures against `target` (Target::text); "" clears them (a new
  // attempt, a sweep whose target was removed). One statement, its own transaction.
  void set_to_target(int64_t id, const std::string& target, const ToTarget& t);

 private:
  void exec(const std::string& sql) const;
  // Runs `body` inside BEGIN IMMEDIATE ... COMMIT; ROLLBACK and rethrow when it throws.
  void in_transaction(const std::function<void()>& body) const;
  void upgrade();  // a store of an earlier vexp: renamed and added columns
  void* db_ = nullptr;
  std::string trials_dir_;  // DIR/trials, absolute: where every row's run_dir is
  std::string attempt_col_ = "attempt_s", figures_col_ = "figures";  // what rows() reads (upgrade)
  std::string job_cols_ = "job, job_state";
  std::string target_cols_;  // the to-target columns, or NULLs in a store that could not be upgraded
};

nlohmann::json row_json(const Row& r);

// The --set overrides of a stored trial, in the order they were applied.
std::vector<dsl::Override> overrides_of(const Row& r);

// Renames a damaged DB_PATH (and its -wal / -shm files) to DB_PATH.corrupt-YYYYmmdd-HHMMSS;
// returns the new name.
std::string move_aside(const std::string& db_path);

// Seconds since the epoch (the store's timestamps).
double now_s();

}  // namespace vexp::sweep
