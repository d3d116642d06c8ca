// A sweep directory: DIR/sweep.db and one folder per trial, DIR/trials/NNN, which
// holds what `vexp run` writes (resolved.toml, metrics.jsonl, summary.json,
// checkpoints/) and log.txt, where each attempt's start and end are recorded so
// that the trial folders alone can rebuild a lost or damaged sweep.db.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "vexp/sweep/definition.hpp"
#include "vexp/sweep/expansion.hpp"
#include "vexp/sweep/store.hpp"
#include "vexp/runtime/session.hpp"

namespace vexp::sweep {

// What a run's metrics.jsonl says, for pruning and plots.
struct Curves {
  std::vector<std::pair<double, double>> loss;  // (epoch position, training loss)
  std::map<int64_t, double> eval;               // epoch -> evaluated `metric`
  double mean_clips_per_s = 0;                  // over the logged steps
};
Curves read_curves(const std::filesystem::path& run_dir, const std::string& metric);

// The median rule of [sweep] prune_after / prune_min_trials: a running trial with an
// evaluation (`curve`, epoch -> metric) worse than the median of the finished trials'
// values at that epoch is pruned. Epochs not judged yet are judged in order and the
// first worse one prunes, so the outcome does not depend on how often the driver polls.
// Returns the reason ("pruned after epoch 3: top1 0.2 is worse than the median 0.3 of
// 4 finished trials"), or "" to keep it; `checked_epoch` (the last epoch judged) is
// advanced so that an epoch is judged once.
std::string prune_reason(const Definition& def, const std::map<int64_t, double>& curve,
                         const std::map<int64_t, std::map<int64_t, double>>& finished_curves, int64_t& checked_epoch);

// The hash in the first line of a run's resolved.toml ("" when absent).
std::string hash_in_resolved(const std::filesystem::path& resolved);
// Whether the run folder holds a checkpoint to resume.
bool has_checkpoint(const std::filesystem::path& run_dir);
// Keeps a trial folder from another attempt (one that cannot be resumed) aside as
// FOLDER.attempt-K, the first K free, so the trial starts afresh beside it.
void move_attempt_aside(const std::filesystem::path& trial_dir);

// log.txt: the line that starts attempt `attempt` of trial `id`, with its command.
void log_attempt(const std::filesystem::path& log, int64_t id, int64_t attempt, bool resume,
                 const std::vector<std::string>& argv);
// log.txt: the line recording how the attempt ended.
void log_outcome(const std::filesystem::path& log, int64_t id, const std::string& status, int exit_code,
                 double wall_s, const std::string& message);
// The last error line a trial printed to its log (for the store's message column).
std::string last_error(const std::filesystem::path& log);

// Whether a trial of this status has ended (done, failed, diverged, pruned, cancelled): its run
// folder holds all it will, so its figures to the target can be computed.
bool trial_ended(const std::string& status);
// Computes trial `id`'s steps, clips and time to def.target from its run folder and
// stores them (nothing when the sweep has no target).
void record_to_target(Store& store, const Definition& def, int64_t id, const std::filesystem::path& run_dir,
                      int64_t global_batch);
// Every ended trial whose figures were computed against another target than
// def.target's (or not at all: a store of an earlier vexp, or a target added since)
// gets them now; without a target they are cleared. Returns the trials computed.
size_t refresh_to_target(Store& store, const Definition& def);

// How a sweep folder runs its trials, recorded in sweep.db's meta when it is created
// (`runs_on` = "local" or "cluster", `cluster_file`): on this machine (`vexp sweep`)
// or as Slurm jobs (`vexp sweep --cluster FILE`). A folder runs one way: the other is
// refused (a plain sweep would run a cluster sweep's queued trials again here and
// forget their jobs; --cluster would resubmit a local sweep's trials and mix two
// machines' figures in one study).
struct RunsOn {
  bool cluster = false;
  std::string cluster_file;  // absolute, when `cluster`
};
// What DIR's store records; for a store of an earlier vexp (no `runs_on`), what its rows
// say: a trial with a Slurm job (or being submitted) makes a cluster sweep, a trial
// started without one a local sweep; nullopt when no trial was ever started.
std::optional<RunsOn> recorded_runs_on(const Store& store);

// Opens DIR/sweep.db for `def`: a new store (filled from trial folders already in
// DIR/trials), or the same sweep resumed; a damaged file is moved aside and rebuilt.
// Throws Error when DIR holds another sweep, runs the other way than `how`, or cannot
// be opened.
void open_sweep_store(Store& store, const std::filesystem::path& dir, const Definition& def,
                      const std::vector<Trial>& trials, const RunsOn& how, Session& session);

}  // namespace vexp::sweep
