// `vexp sweep SWEEP.toml --cluster clusters/NAME.toml`: every trial a Slurm job of
// its own recipe's shape, submitted, watched and pruned by a light driver that
// may be stopped and started again at any time (docs/clusters.md).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "vexp/plan/cluster.hpp"
#include "vexp/runtime/session.hpp"
#include "vexp/slurm/settings.hpp"
#include "vexp/sweep/definition.hpp"
#include "vexp/sweep/expansion.hpp"
#include "vexp/sweep/store.hpp"

namespace vexp::sweep {

struct SlurmLaunch {
  plan::Cluster cluster;                   // with its [scheduler]
  std::string cluster_file;               // as given (messages, the scripts' header)
  std::string exe;                        // this vexp executable (absolute)
  std::vector<std::string> plugin_dirs;   // --plugin-path, passed on to every trial
  int max_running = 0;                    // trials queued or running at once (0: all)
  double poll_s = 30;                     // seconds between two polls (one squeue call each)
  bool retry_failed = false;              // failed trials are submitted again
  bool retry_cancelled = false;           // trials cancelled by `vexp cancel` are submitted again
  // --time, --partition, --account, already put into cluster.scheduler.settings (and
  // checked) by the caller. run_trials_on_slurm records them in sweep.db and, started
  // again without some of them, takes those from the record.
  slurm::Choices choices;
  int diverged_exit_code = 3;             // what `vexp run` exits with when the loss diverges
};

// The batch script of every trial (for --dry-run): "# ---- trial NNN: SHAPE" then the
// script. Throws InvalidUse when a trial cannot be a job of the cluster.
std::string slurm_dry_run(const std::vector<Trial>& trials, Session& session, const Definition& def,
                            const std::filesystem::path& dir, const SlurmLaunch& launch);

// Submits the pending trials (at most max_running queued or running at once) with
// the --time, --partition and --account given now or recorded by an earlier driver
// of the sweep (sweep.db's meta `slurm_choices`; a value given now replaces the
// recorded one and is recorded),
// re-attaches to those a previous driver submitted, polls Slurm once per poll_s,
// records every outcome (with Slurm's state and the job's log) and prunes with
// scancel. Returns when every trial has ended; throws Interrupted on SIGINT/SIGTERM,
// leaving the jobs to the cluster (running the sweep again follows them).
void run_trials_on_slurm(Store& store, Session& session, const Definition& def, const std::filesystem::path& dir,
                           const SlurmLaunch& launch);

}  // namespace vexp::sweep
