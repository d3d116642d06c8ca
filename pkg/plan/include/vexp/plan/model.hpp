// `vexp plan`'s performance model: one optimizer step of a data-parallel run on a
// described cluster (cluster.hpp), split into compute, exposed communication
// and exposed data loading. Torch-free: the model's numbers (MACs per parameter,
// the reducer's bucket layout, the dry-run plan's batch geometry) are inputs.
// docs/planning.md ("The model") has the equations.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "vexp/plan/cluster.hpp"
#include "vexp/plan/error.hpp"
#include "vexp/runtime/dist_plan.hpp"

namespace vexp::plan {

// One gradient bucket as the reducer sends it: its bytes on the wire and when its
// last gradient is ready, as a fraction (0..1] of the last micro-batch's backward.
struct Bucket {
  double bytes = 0;
  double ready = 0;
};

// The reducer's buckets (buckets.hpp layout, registration order `numels`) with
// ready times from each parameter's share of the backward: backward runs through
// the parameters in reverse registration order, spending on each a time
// proportional to its forward MACs (`macs`, the same order).
std::vector<Bucket> model_buckets(const std::vector<int64_t>& numels, const std::vector<double>& macs,
                                  int64_t wire_bytes_per_element, double bucket_mb);

// Compute of one rank per micro-step of `per_gpu` clips, plus the optimizer step.
struct Compute {
  double forward_ms = 0, backward_ms = 0, optimizer_ms = 0;
  double data_wait_ms = 0;  // per micro-batch: the profile's ClusterProfile::data_wait_ms
  double data_threads = 0;  // and its loader's decode threads (0: not known, the plan's)
  std::string profile;  // measured | derived
  std::string source;   // the profile's source or bench file, or [gpu.derive]'s source
  // Which profile was taken (measured): its threads (0: not given) and busy_ranks,
  // and whether both matched what was asked for.
  int64_t threads = 0, busy_ranks = 1;
  bool exact = true;
  // The profile's own per_bucket_ms and its source (negative: none; [reducer]'s applies).
  double per_bucket_ms = -1;
  std::string per_bucket_source;
  std::string selection;  // e.g. "threads 1, busy_ranks 2" or "closest: threads 2 (1 wanted), busy_ranks 1 (2 wanted)"
  // What the profile cannot know, as bounds on the true compute: every phase may be as
  // low as `low` x or as high as `high` x these times (1 and 1 for a profile measured
  // as asked on a machine without other load), with one phrase per reason in `unsure`:
  //  - another thread count: between no speed-up and a linear one (p.threads / wanted);
  //  - other ranks busy on the node: up to proportionally slower (or faster) with them;
  //  - measured under background load L on C cores with D threads of its own: idle, up
  //    to C / (D + L) of the time (its share of the cores), when D + L > C;
  //  - cores of different speeds ([cpu] core_speed_min = s below 0.9): from s x to
  //    1 / s x, as a profile and a run each hold whichever cores they ran on;
  //    (these two for a CPU profile, one with threads: a GPU's are not shared)
  //  - measured in rounds (ClusterProfile::round_low / round_high): from its fastest
  //    round to its slowest, the measuring machine's drift (said when over 10 % apart);
  //  - derived from MACs ([gpu.derive]): a factor of 2 either way.
  double low = 1, high = 1;
  std::vector<std::string> unsure;
};

// The tolerance `tools/plan/validate.py` holds the model to on a measured profile
// (docs/planning.md, "Validation"): every stated step range is at least this wide.
inline constexpr double kValidatedTolerance = 0.10;

// What the model key, clip and precision select: among the [[gpu.profile]]s of
// that model, frames, size and precision, the one measured with `busy_ranks`
// ranks computing at once on the node and w's compute threads per rank
// (compute_threads), else the closest (busy_ranks first, then threads; a profile
// without threads counts as half a thread off; ties: the first in the file),
// scaled linearly from its batch to `per_gpu`; else [gpu.derive] from the MACs;
// PlanError when neither applies.
struct Workload {
  std::string model;          // model key
  int64_t frames = 0, size = 0;
  std::string precision;      // run.precision
  double macs_per_clip = 0;   // forward
  int64_t params = 0;         // trainable parameters
  int64_t threads = 0;        // run.threads: compute threads per rank (0: all the node's cores)
};
Compute compute_for(const Cluster& c, const Workload& w, int64_t per_gpu, int64_t busy_ranks = 1);

// Compute threads per rank that w.threads means on `c`: itself when > 0, else the
// node's cores ([cpu] cores_per_node), as `vexp run` gives every rank all the
// cores it sees when run.threads = 0.
int64_t compute_threads(const Cluster& c, const Workload& w);

// Ranks computing at once on one node when `gpus` ranks run: min(gpus, gpus_per_node).
int64_t busy_ranks_for(const Cluster& c, int64_t gpus);

// Time (ms) of one allreduce of `bytes` per rank over `ranks` ranks placed on
// ceil(ranks / gpus_per_node) nodes; `algo` gets "ring" or "hierarchical".
// One node: ring, 2(p-1) alpha_intra + 2(p-1)/p B / bw_intra. Several nodes: the
// faster of a flat ring (bounded by the slower link) and the hierarchical
// reduce-scatter / inter-node ring / all-gather, as NCCL picks per message size.
double allreduce_ms(const Cluster& c, int64_t ranks, double bytes, std::string* algo = nullptr);

// More GPUs asked of a cluster than it has: `gpus` (from --gpus, else the recipe's
// dist.world_size), the recipe's world and global batch, whether --fixed-batch was given.
struct GpuAsk {
  int64_t gpus = 1;
  int64_t world = 1;
  int64_t global_batch = 1;
  bool fixed_batch = false;
  bool gpus_given = true;
};
// The sentence that refuses it and names the ways out, with counts that fit:
// "1536 GPUs (the recipe's dist.world_size; no --gpus given): cluster 'c' has 4 nodes x 2
// = 8; give --gpus N,... up to 8 (e.g. --gpus 1,2,4,8), or --fixed-batch --gpus 8 to
// emulate the recipe's world of 1536 GPUs (its global batch of 12288) on fewer"; with
// --fixed-batch, the counts up to the cluster's that divide the recipe's world.
std::string too_many_gpus(const Cluster& c, const GpuAsk& ask);

struct DataOptions {
  std::string layout = "frames";  // frames | videos
  double threads_per_gpu = 0;     // decode threads per rank (0: cores_per_node / gpus_per_node)
};

// Decode threads per rank that `o` means on `c`.
double threads_per_gpu(const Cluster& c, const DataOptions& o);
// Clips/s one rank's loader delivers on `nodes` nodes: threads x per-core rate,
// capped by its share of the storage bandwidth. PlanError when the layout has no rate.
double data_clips_per_s(const Cluster& c, const DataOptions& o, int64_t gpus);
// True when the storage cap, not the decode threads, limits data_clips_per_s.
bool storage_bound(const Cluster& c, const DataOptions& o, int64_t gpus);

struct Row {
  int64_t gpus = 0, nodes = 0, ranks = 0, global_batch = 0, micro_steps = 0;
  double data_ms = 0, compute_ms = 0, forward_ms = 0, backward_ms = 0, optimizer_ms = 0;
  double comm_ms = 0, exposed_comm_ms = 0, exposed_data_ms = 0, step_ms = 0;
  // Of exposed_data_ms: the loader's throughput (data_ms beyond compute + exposed comm),
  // and its handoff on cores the compute holds (micro x Compute::data_wait_ms, less what
  // the loader's throughput explains of the profile's wait); exposed = the larger.
  double throughput_data_ms = 0, handoff_data_ms = 0;
  double bucket_overhead_ms = 0;  // in backward_ms: buckets x per_bucket_ms (more than one rank)
  double per_bucket_ms = 0;       // the profile's per_bucket_ms, else [reducer]'s (0: none; one rank: 0)
  std::string per_bucket_source;  // where it comes from ("" when 0)
  double clips_per_s = 0, efficiency = 0, epoch_s = 0, total_s = 0, steps_per_epoch = 0;
  std::string bottleneck;  // compute | communication | data
  std::string algorithm;   // allreduce algorithm of the largest bucket ("" on one rank)
  std::string profile_source;  // the compute's Compute::source (its profile differs with the ranks busy per node)
  // The step's stated range: the step predicted with the compute at Compute::low and
  // ::high, widened by kValidatedTolerance; `unsure` says why it is wider than that.
  double step_low_ms = 0, step_high_ms = 0;
  std::vector<std::string> unsure;
};

// One step: compute = micro x (forward + backward) + optimizer, the last backward
// longer by buckets x per_bucket_ms on more than one rank (the profile's, else
// [reducer]'s); the buckets are
// sent in order during the last micro-batch's backward (the reducer communicates
// only then), bucket k starting at max(its ready time, the previous bucket's end);
// exposed comm = the last end - the backward's end; data (prefetched) is exposed
// where it takes longer than compute + exposed comm, or by the loader's handoff the
// profile measured (Row::handoff_data_ms), whichever is longer. efficiency is left 0 (it
// needs the 1-GPU row: set_efficiency). The step's geometry is the dry-run planner's
// (its GPUs are s.ranks, > 1 only with more than one rank; s.world > s.ranks: emulated),
// and an epoch is s.train_size / s.global_batch steps.
Row predict(const Cluster& c, const Compute& compute, const std::vector<Bucket>& buckets,
            const DataOptions& data, const DistPlan& s);

// efficiency = clips/s / (gpus x the 1-GPU clips/s).
void set_efficiency(Row& r, const Row& one_gpu);

// ceil(gpus / gpus_per_node).
int64_t nodes_for(const Cluster& c, int64_t gpus);

}  // namespace vexp::plan
