// Cluster description files (`vexp plan --cluster FILE`, `vexp submit --cluster
// FILE`, `vexp check FILE`): a TOML file recognised by its top-level [cluster]
// table, checked like a recipe with the recipe language's reader and diagnostics
// (every problem one line `FILE:LINE:COL: error: ...`). docs/planning.md has the
// format; the numbers feed the performance model (model.hpp). Torch-free.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "vexp/dsl/diagnostics.hpp"
#include "vexp/plan/error.hpp"
#include "vexp/slurm/settings.hpp"

namespace vexp::plan {

// Measured compute of one model on one rank ([[gpu.profile]]): typed in with its
// `source`, or filled from a `vexp bench train --json` output (`from`).
struct ClusterProfile {
  std::string model;          // the recipe's model key (vexp plan prints it)
  int64_t frames = 0;         // frames per clip
  int64_t size = 0;           // crop size
  std::string precision;      // fp32 | bf16 | fp16
  double batch = 0;           // clips per rank per micro-step the times were measured at
  int64_t threads = 0;        // compute threads per rank (0: not given)
  int64_t busy_ranks = 1;     // ranks computing at once on the node when measured (CPU nodes share cores)
  double background_load = 0; // other programs' runnable threads on the node when measured (1-min load average)
  double forward_ms = 0;      // per micro-step of `batch` clips
  double backward_ms = 0;
  double optimizer_ms = 0;    // per optimizer step
  // The step's wait for a loader that keeps up, per micro-step of `batch` clips: where
  // the compute threads hold every core (2 threads, or 2 busy ranks, on a 2-core node)
  // the loader's decode threads must first take one from them (0: none measured).
  double data_wait_ms = 0;
  double data_threads = 0;  // the loader's decode threads then (a bench JSON's data_workers; 0: not known)
  // The backward time each gradient bucket adds to this model's step on more than
  // one rank (per_bucket_ms; negative: not given, [reducer]'s applies), and where it
  // comes from (per_bucket_source). The cost is the model's: --measure-local measures
  // it for every recipe it profiles (a reducer's hook waits on the peers as long as
  // the ranks drift apart within the model's backward).
  double per_bucket_ms = -1;
  std::string per_bucket_source;
  // From a `from` file measured in rounds (`vexp plan --measure-local --measure-rounds`):
  // the slowest and fastest round's step median over the pooled one (<= 1 <= high).
  // Rounds apart by more than noise mean the measuring machine's speed moved while it
  // measured, and the plan's range widens by as much (model.hpp, Compute::low / high).
  double round_low = 1, round_high = 1;
  double round_low_ms = 0, round_high_ms = 0;  // those rounds' step medians (0: one round)
  std::string source;         // where typed-in numbers come from
  std::string from;           // the bench JSON (resolved against the cluster file's folder), "" when typed in
  dsl::Loc loc;                    // where the [[gpu.profile]] table was written
};

// The fastest and slowest round of a `vexp bench train` JSON measured in rounds
// (`round_step_medians_ms`, written by `vexp plan --measure-local`): their step
// medians in ms; nullopt unless it has two or more, each a positive finite number.
// What `--measure-local` writes in a profile's source and what the plan widens by.
struct RoundRange {
  double low_ms = 0, high_ms = 0;
};
std::optional<RoundRange> round_range(const nlohmann::json& bench);

// [gpu.derive]: compute of a model with no profile, from its MACs.
struct ClusterDerive {
  bool given = false;
  double train_macs_per_s = 0;         // multiply-adds per second of forward + backward (3 x forward MACs)
  double optimizer_ms_per_mparam = 0;  // optimizer time per million parameters
  std::string source;
};

// [links.intra] / [links.inter].
struct ClusterLink {
  bool given = false;
  double bandwidth_GBps = 0;  // per rank (intra) or per rail (inter), one direction
  double latency_us = 0;
  int64_t rails = 1;          // inter only: rails (NICs) per node used together
  std::string source;
};

// [reducer] (optional): what each gradient bucket costs the backward pass itself on
// more than one rank (the reducer's hook, its copy into the bucket, the allreduce's
// launch and progress on the rank's own cores), beyond the wire time of [links]; for
// models whose [[gpu.profile]] gives no per_bucket_ms of its own.
struct ClusterReducer {
  bool given = false;
  double per_bucket_ms = 0;
  std::string source;
};

// [cpu]: decode rates are clips/s per core (0: that layout is unknown).
struct ClusterCpu {
  double cores_per_node = 0;
  // The slowest core's speed over the fastest's (1: alike), as measured: a CPU
  // profile measured on cores of different speeds holds whichever its threads
  // landed on, and so does a run (model.hpp, Compute::low / high).
  double core_speed_min = 1;
  std::string core_speed_source;
  double frames_clips_per_s_per_core = 0;
  double videos_clips_per_s_per_core = 0;
  std::string source;
};

// [storage] (optional: without it, reading is not a limit).
struct ClusterStorage {
  bool given = false;
  double read_GBps = 0;          // aggregate, shared by all nodes
  double node_read_GBps = 0;     // per-node cap (0: none)
  double frames_clip_bytes = 0;  // bytes per training clip (0: unknown)
  double videos_clip_bytes = 0;
  std::string source;
};

// [scheduler] (`vexp submit`, `vexp sweep --cluster`; optional: `vexp plan` does not
// read it). Its values are the cluster's Slurm settings, every one checked here with
// slurm::settings_problems (names, time limits, lines a batch script can hold, a time
// limit longer than signal_lead_s) and reported at its value. docs/clusters.md has
// the format. Its gpus_per_node (the GPUs each node asks Slurm for) must equal
// [cluster] gpus_per_node (the ranks vexp starts on a node, one per GPU) when it is
// not 0: the error where they differ says what each means.
struct ClusterScheduler {
  bool given = false;
  std::string kind;          // "slurm"
  slurm::Settings settings;
  dsl::Loc loc;
};

struct Cluster {
  std::string path;           // the file as given
  std::string name;
  int64_t nodes = 0;
  int64_t gpus_per_node = 0;
  std::string source;
  std::string gpu_name;
  std::vector<ClusterProfile> profiles;
  ClusterDerive derive;
  ClusterLink intra, inter;
  ClusterCpu cpu;
  ClusterStorage storage;
  ClusterReducer reducer;
  ClusterScheduler scheduler;
  // Read for jobs (ClusterUse::jobs): the tables `vexp plan` needs that the file lacks
  // ("[gpu]", "[cpu]", "[links.inter]", "[links.intra]"), in that order; empty when it
  // has them all (and always when read for planning, where they are errors).
  std::vector<std::string> plan_missing;
};

// What a cluster file is read for. `vexp plan` needs the machine's figures ([gpu],
// [cpu], [links.intra] with several GPUs per node, [links.inter] with several nodes);
// `vexp submit` and `vexp sweep --cluster` read [cluster] and [scheduler] only, so a
// file with just those two is enough for them (the others, when present, are checked
// all the same).
enum class ClusterUse { plan, jobs };

// True when `path` is a TOML file with a top-level [cluster] table (how `vexp
// check` tells a cluster file from a recipe). False for anything unreadable or
// not TOML: the caller then treats it as a recipe, whose errors say why.
bool is_cluster_file(const std::string& path);

// Loads and validates; every problem goes to `diags` at the value (unknown key,
// wrong type, missing required key or section, a number that must be positive,
// a typed-in figure without `source`, a `from` file that is missing or not the
// bench JSON it should be). std::nullopt when there is any error. Throws
// PlanError when the file itself cannot be read.
std::optional<Cluster> load_cluster(const std::string& path, dsl::Diagnostics& diags,
                                    ClusterUse use = ClusterUse::plan);
// The same from text (tests); `from` paths resolve against `virtual_path`'s folder.
std::optional<Cluster> load_cluster_text(const std::string& text, const std::string& virtual_path, dsl::Diagnostics& diags,
                                         ClusterUse use = ClusterUse::plan);

// "Summit (OLCF): 4608 nodes x 6 GPUs (NVIDIA V100), 3 profile(s), derive: yes, inter-node 2 x 12.5 GB/s",
// for a terminal: the file's names with their control characters escaped (base::printable).
std::string cluster_summary(const Cluster& c);

}  // namespace vexp::plan
