// One Slurm job of a run, as `vexp submit` and the sweep's Slurm driver (`vexp sweep
// --cluster`) submit it (docs/clusters.md): the batch script's spec, built from the
// cluster's settings, the job's shape and the run; and the one way it is submitted:
// RUN_DIR/job.sbatch, sbatch, the submitted record in RUN_DIR/jobs.jsonl. The callers
// keep only their own choices (the run directory, the job name, --set values, what
// they print, what a refused job means to them).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "vexp/slurm/job.hpp"
#include "vexp/slurm/scheduler.hpp"
#include "vexp/slurm/settings.hpp"

namespace vexp::slurm {

// The run a job trains, and the words of its script that are the caller's.
struct RunToSubmit {
  std::string run_dir;                   // absolute (every start of the job continues it)
  std::string job_name;                  // a Slurm job name (job_name_of)
  std::string exe;                       // the vexp executable (absolute)
  std::string recipe;                    // absolute
  std::vector<std::string> sets;         // --set values (KEY=VALUE), before the shape's backend_set
  std::vector<std::string> plugin_dirs;  // --plugin-path, each passed on
  std::string cluster_file;              // as given (the script's comments)
  std::string submit_command;            // the script's header comment
};

// The job's spec: the shape's nodes and tasks per node, the settings' time limit,
// partition, account, signal lead, requeues, #SBATCH lines, setup and launcher, the
// node's cpus_per_node shared by its tasks, and `vexp run RECIPE [--set ...]
// [--set dist.backend=B] [--plugin-path DIR ...] --out RUN_DIR --resume auto`. Checked
// where it is written (job_spec_problem: batch_script, submit_run).
JobSpec run_job_spec(const Settings& s, const Shape& shape, const RunToSubmit& r);

// What the `submitted` record says that the spec does not.
struct SubmitNote {
  int64_t world_size = 1;   // the recipe's dist.world_size
  std::string cluster;      // the cluster's name ([cluster] name)
  int64_t sweep_trial = 0;  // the sweep trial the job runs (0: none)
};

struct Submitted {
  std::string job;             // the id sbatch answered
  std::string record_problem;  // why the submitted record could not be appended, or ""
};

// Submits the job of `j`: refuses a spec batch_script refuses (Refused; nothing
// written), makes RUN_DIR, and holds its lock (base::DirLock, as `holder`: "vexp
// submit") while it writes RUN_DIR/job.sbatch atomically, runs `before_sbatch` (the
// sweep marks its trial), calls sbatch and appends the submitted record to
// RUN_DIR/jobs.jsonl. What fails before sbatch accepts the job undoes what was done
// (the script; the lock file and the directory when this call made it) and is thrown
// as it came: Error from sbatch (the job refused: "...; nothing submitted"), a
// base::Error from the directory, the lock or the write, what before_sbatch threw.
// Once sbatch has accepted the job it is submitted: a record that cannot be appended
// is said in Submitted::record_problem, never thrown.
Submitted submit_run(const JobSpec& j, const SubmitNote& note, const std::string& holder,
                     const std::function<void()>& before_sbatch = {});

}  // namespace vexp::slurm
