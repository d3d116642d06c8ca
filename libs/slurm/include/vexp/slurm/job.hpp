// `vexp submit` / `vexp status`: the Slurm batch script vexp writes, and the job
// record (RUN_DIR/jobs.jsonl) that the submit and the script append to.
// docs/clusters.md has the behaviour.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>


namespace vexp::slurm {

// Everything the batch script says; every value already checked (no newline or
// control character, Slurm names and times valid).
struct JobSpec {
  std::string run_dir;      // absolute
  std::string job_name;
  int64_t nodes = 1;
  int64_t tasks_per_node = 1;
  int64_t cpus_per_task = 0;  // 0: not asked for
  int64_t gpus_per_node = 0;  // 0: not asked for
  std::string time, partition, account;
  int64_t signal_lead_s = 120;
  int64_t max_requeues = 3;
  std::vector<std::string> sbatch_extra;  // extra #SBATCH options
  std::vector<std::string> setup;         // shell lines before vexp
  std::vector<std::string> launcher;      // argv words before vexp
  std::vector<std::string> vexp_argv;     // vexp run ... --out RUN_DIR --resume auto
  std::string cluster_file;
  std::string submit_command;  // for the script's header comment
};

// Why `j` cannot be written into a batch script ("" when it can): a string with a
// newline or another control character (in a comment too), or no vexp command.
std::string job_spec_problem(const JobSpec& j);

// The batch script (bash). Throws Refused (scheduler.hpp) with job_spec_problem's reason.
std::string batch_script(const JobSpec& j);

// The record the batch script appends at each start and end of the job through
// `vexp job-record RUN_DIR EVENT STATE EXIT` (EVENT start or end; STATE one of
// running, completed, requeued, requeue_failed, requeue_limit, cancelled, failed):
// {"event","job","restart","state","exit","nodes","time"}, the job, restart count and
// nodes from Slurm's SLURM_JOB_ID, SLURM_RESTART_COUNT and SLURM_JOB_NODELIST, each
// reduced to the characters it may hold. Throws Refused for another EVENT or STATE.
std::string job_event_line(const std::string& event, const std::string& state, int64_t exit_code);

// Why `dir` cannot be a run directory named in an #SBATCH line (whitespace, quotes,
// '%', control characters), or "".
std::string run_dir_problem(const std::string& dir);

// The file a run directory's job record is kept in.
std::string jobs_file(const std::string& run_dir);

// One Slurm job of a run, from its record.
struct JobHistory {
  std::string job;
  std::string submitted;        // time of the submit ("" when not recorded)
  int64_t starts = 0;           // times the batch script started (first start + requeues)
  int64_t requeues = 0;         // ends with state "requeued"
  int64_t max_requeues = -1;    // the cluster's limit at submit time (-1: unknown)
  std::string state = "submitted";  // the last event's: submitted, running, requeued, completed, requeue_limit, cancelled, failed, interrupted
  int64_t exit_code = -1;       // of `vexp run` at the last end (-1: none)
  std::string nodes;            // node list of the last start
  std::string last_time;        // time of the last event
  std::string cancelled;        // when `vexp cancel` cancelled it ("" when it did not)
};

struct JobRecord {
  std::vector<JobHistory> jobs;  // in submit order
  int64_t bad_lines = 0;         // lines that are not a job event (skipped)
};

// Reads RUN_DIR/jobs.jsonl (bounded); no file: no jobs. Throws vexp::base::Error
// when it exists and cannot be read.
JobRecord read_jobs(const std::string& run_dir);

// What a state means, in a few words ("stopped at the time limit and requeued").
std::string state_text(const JobHistory& j);

// Whether the record says the job has ended: it will not start again (completed,
// requeue_limit, requeue_failed, cancelled, failed). A job "submitted", "running" or
// "requeued" (pending again) may still be queued or running: Slurm knows.
bool record_ended(const JobHistory& j);

// The record `vexp cancel` appends once scancel has cancelled `job`:
// {"event":"cancel","job","state":"cancelled","by":"vexp cancel","time"}. read_jobs makes
// the job's state "cancelled" (JobHistory::cancelled: the time) unless the job had
// already ended; the batch script's own end record, if it ran, follows it.
std::string cancel_event_line(const std::string& job);

// `vexp cancel RUN_DIR`: the run's recorded jobs that may still be queued or running
// (record_ended says no), asked of Slurm in one squeue call; those Slurm holds in a
// state that is not final are cancelled with one scancel call, and each cancellation
// is appended to RUN_DIR/jobs.jsonl. Throws Refused when no job is recorded ("'DIR'
// has no recorded Slurm job ...: nothing to cancel"), Error when Slurm cannot be asked.
struct RunCancel {
  std::vector<std::pair<std::string, std::string>> cancelled;  // job, Slurm's state before (PENDING, RUNNING, ...)
  std::vector<std::pair<std::string, std::string>> ended;      // jobs that had ended: job, why it is not cancelled
  std::string record_problem;  // why a cancellation could not be appended to jobs.jsonl, or ""
};
RunCancel cancel_run(const std::string& run_dir);


}  // namespace vexp::slurm
