// The Slurm jobs of a cluster sweep's trials (`vexp sweep --cluster`), for the commands
// that follow a sweep without being its driver: `vexp status DIR` lists them and
// `vexp cancel DIR` cancels them (docs/clusters.md). Read from DIR/sweep.db and each
// trial's own record, DIR/trials/NNN/jobs.jsonl (the job's batch script writes it).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "vexp/slurm/job.hpp"

namespace vexp::sweep {

// One trial and its job.
struct SweepTrialJob {
  int64_t id = 0;
  std::string status;     // the store's: pending, running, done, failed, diverged, pruned, cancelled
  std::string job;        // its Slurm job: the store's, else (being submitted) its folder's record; "" before any
  std::string job_state;  // Slurm's state as a driver last saw it ("submitting", PENDING, RUNNING, ...)
  std::string run_dir;    // DIR/trials/NNN
  std::string message;    // the store's (why it failed, was pruned or cancelled)
  std::optional<slurm::JobHistory> record;  // the job's own record in the trial's folder, when there is one
};

struct SweepJobs {
  std::string name;          // the sweep's name
  bool cluster = false;      // its trials are Slurm jobs (sweep.db's runs_on), else they run locally
  std::string cluster_file;  // the --cluster file recorded ("" when unknown)
  std::vector<SweepTrialJob> trials;
};

// Reads DIR/sweep.db and the trials' records. Throws Error when DIR holds no sweep.db
// or it cannot be read.
SweepJobs read_sweep_jobs(const std::filesystem::path& dir);

// `vexp cancel DIR` of a cluster sweep: the trials' jobs that may still be queued or
// running are asked of Slurm in one squeue call, those it holds in a state that is not
// final are cancelled with one scancel call; each such trial is recorded cancelled (a
// `cancel` record in its jobs.jsonl, status 'cancelled' in sweep.db with the job and
// its state, an end line in its log.txt), and so is every trial not submitted yet (a
// driver still running submits none of them, and a driver started again submits them
// only with --retry-cancelled). Throws InvalidUse when DIR is a local sweep or no trial
// has a job ("... nothing to cancel"), Error when Slurm cannot be asked (nothing is
// cancelled then).
struct SweepCancel {
  struct Cancelled {
    int64_t id = 0;
    std::string job, state;  // Slurm's state before (PENDING, RUNNING, ...)
  };
  std::vector<Cancelled> cancelled;
  std::vector<int64_t> unsubmitted;                    // pending trials marked cancelled
  std::vector<int64_t> submitting;                     // being submitted, no job known yet: not cancelled
  std::vector<std::pair<int64_t, std::string>> ended;  // trials whose job had ended: id, job
  std::vector<std::string> problems;                   // records that could not be written
};
SweepCancel cancel_sweep(const std::filesystem::path& dir);

}  // namespace vexp::sweep
