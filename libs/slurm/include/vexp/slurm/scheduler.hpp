// Talking to Slurm: how many nodes and tasks a recipe's world needs, sbatch, one
// squeue call for any number of jobs, scancel. Every command is started by argv
// (vexp::base::run_capture), never through a shell. Used by `vexp submit` and by the
// Slurm driver of `vexp sweep --cluster` (docs/clusters.md).
#pragma once

#include "vexp/base/error.hpp"
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace vexp::slurm {

// A job that cannot be asked for as given (the message says why and what to change).
// Kind refused (exit 2).
struct Refused : base::Error {
  explicit Refused(const std::string& what) : base::Error(what, base::ErrorKind::refused) {}
};
// A Slurm command that failed or answered what it should not.
struct Error : base::Error {
  using base::Error::Error;
};

// What the job is asked to hold.
struct ShapeRequest {
  int64_t world = 1;          // the recipe's dist.world_size
  std::string comm;           // the recipe's dist.backend
  int64_t cluster_nodes = 1;  // [cluster] nodes
  int64_t gpus_per_node = 1;  // [cluster] gpus_per_node (ranks per node)
  std::string backend;        // [scheduler] backend for a recipe whose is "local" ("": refuse)
  int64_t nodes = 0;          // --nodes (0: as many as the world needs)
  std::string cluster_file, recipe_path;  // for the messages
};
struct Shape {
  int64_t nodes = 1, tasks_per_node = 1, ranks = 1, world = 1;
  std::string backend_set;  // "dist.backend=mpi" when the cluster file's backend replaces "local", else ""
  std::string text;         // "2 node(s) x 1 task(s) = 2 rank(s) for dist.world_size = 2"
  std::string emulation;    // "; fewer ranks than ...: each rank emulates ..." or ""
};
// One task per GPU of the world, gpus_per_node to a node; fewer nodes (--nodes)
// emulate the world exactly, so the ranks must divide it. Throws Refused.
Shape job_shape(const ShapeRequest& r);

// A Slurm job name from a run or trial name: [A-Za-z0-9_.-], at most 64 bytes.
std::string job_name_of(const std::string& name);

// `sbatch --parsable SCRIPT`: the job id. Throws Error ("sbatch refused the job (exit
// code 1): sbatch: error: invalid partition ...; nothing submitted") when sbatch fails
// or answers no id.
std::string sbatch(const std::string& script_path);

// The first line of sbatch's answer that says what is wrong.
std::string sbatch_error(const std::string& out);

// One job as squeue sees it.
struct QueueEntry {
  std::string job;     // id
  std::string state;   // PENDING, RUNNING, COMPLETING, COMPLETED, FAILED, TIMEOUT, NODE_FAIL, OUT_OF_MEMORY, CANCELLED, ...
  std::string reason;  // squeue's %r (None, Priority, BeginTime, ...)
  std::string nodes;   // node list ("" while pending)
};
// squeue's answer to QUERY_FORMAT ("ID|STATE|REASON|NODES" per line); lines that are
// not four fields with a numeric id are skipped.
extern const char* const kQueryFormat;
std::map<std::string, QueueEntry> parse_queue(const std::string& out);
// One `squeue` call for all of `jobs` (the user's jobs in every state Slurm still
// remembers, filtered): a poll costs one call whatever the number of trials. Jobs
// Slurm has forgotten (ended more than MinJobAge ago) are absent. Throws Error.
std::map<std::string, QueueEntry> query(const std::vector<std::string>& jobs);

// The same for jobs found by name (a submit whose id was not recorded): name -> entries.
std::map<std::string, std::vector<QueueEntry>> query_names(const std::vector<std::string>& names);

// One `scancel` call for all of `jobs`. Throws Error.
void cancel(const std::vector<std::string>& jobs);

// A state after which the job never runs again (COMPLETED, FAILED, TIMEOUT, ...).
bool is_final(const std::string& state);
// A state in which the job holds nodes (RUNNING, COMPLETING, CONFIGURING, ...).
bool is_running(const std::string& state);

// Appends one line (a JSON object) to RUN_DIR/jobs.jsonl. Throws Error.
void append_event(const std::string& run_dir, const std::string& json_line);

}  // namespace vexp::slurm
