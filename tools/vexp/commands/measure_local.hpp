// `vexp plan --measure-local [RECIPE...] [--out FILE]`: measures this machine and
// writes a cluster file (docs/planning.md) for `vexp plan --cluster FILE`:
//   - one node of `--ranks` ranks ("GPUs");
//   - a compute profile per recipe and thread count: `vexp bench train --synthetic --json`;
//   - decode rates per core: `vexp bench data --json` (1 loader thread) on a synthetic
//     video dataset (`vexp data make-synthetic`) and on its frames (`vexp data extract-frames`);
//   - the intra-node link: latency and bandwidth fitted to `vexp bench allreduce
//     --backend mpi` over the ranks (mpirun) at several sizes;
//   - storage: the read bandwidth of a file of the output's file system with its pages
//     dropped from the page cache, and the bytes a clip reads in either layout.
// Each measurement runs as a child process of this executable (its own threads, no
// state shared with the next); their JSON outputs are written next to FILE, in the
// folder named after FILE's stem (clusters/local.toml -> clusters/local/), and the
// cluster file names them with `from`. Every file is written atomically; a FILE (or
// JSON) path that exists and is not a regular file is refused.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace vexp::cli {

struct MeasureLocalArgs {
  bool enabled = false;               // --measure-local
  std::vector<std::string> recipes;   // empty: vexp's quickstart tsm_motion.toml and tsn_motion.toml
  std::string out = "clusters/local.toml";
  int ranks = 0;                      // 0: this machine's cores (at least 2)
  std::vector<int> threads;           // compute threads per rank of the profiles; empty: cores / ranks
  int steps = 10;                     // bench train: timed steps (median)
  int warmup = 2;                     // bench train: untimed steps first
  int rounds = 3;                     // --measure-rounds: each compute profile measured this often, interleaved
  bool append = false;                // --measure-append: pool with the measurements already in --out's folder
  double settle = 0;                  // --measure-settle: measure a round again when its step median is slower than
                                      // the profile's fastest earlier round by more than this fraction (0: never)
  int settle_tries = 3;               // --measure-settle-tries: measurements of a round at most
  bool synthetic = false;             // --synthetic-input: random clips instead of the recipe's loader
  std::vector<double> allreduce_mb{0.0625, 1, 8, 32};
  int reps = 10;                      // bench allreduce repetitions per size
  double storage_mb = 256;            // size of the file read for the storage bandwidth
  std::vector<std::string> plugin_paths;
};

// Adds --measure-local and its options (--out, --ranks, --measure-threads,
// --measure-steps, --measure-warmup, --measure-rounds, --measure-append, --allreduce-mb, --storage-mb) to `cmd`, the
// `vexp plan` command; its positional recipes are `a.recipes`.
void add_measure_local_options(CLI::App* cmd, MeasureLocalArgs& a);

// Measures and writes the cluster file; throws base::Error on bad arguments or a failed
// measurement (nothing written then, except measurement JSONs already complete).
void run_measure_local(const MeasureLocalArgs& a);

}  // namespace vexp::cli
