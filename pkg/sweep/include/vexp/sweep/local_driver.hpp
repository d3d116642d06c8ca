// Runs a sweep's pending trials: each a child `vexp run` (or `mpirun -np R vexp
// run`) in its own process group, bound to one slot of the machine's cores and
// GPUs, reaped with waitpid, pruned by the median rule, stopped on SIGINT/SIGTERM.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "vexp/sweep/definition.hpp"
#include "vexp/sweep/store.hpp"
#include "vexp/runtime/session.hpp"

namespace vexp::sweep {

// The machine split into `jobs` slots of whole cores (and GPUs), one trial each.
struct Slots {
  int jobs = 1, ranks = 1;  // trials at once; ranks per trial
  std::vector<int> cpus;    // this process's cores
  int per_slot = 0;         // cores per slot; 0: more jobs than cores, trials share them
  int threads = 1;          // intra-op threads per rank
  int gpus = 0;             // GPUs split between slots (ranks GPUs per slot)
};

// `gpus` < 0: count /dev/nvidiaN. Throws InvalidUse when the slots would
// share a GPU; warns when they share cores.
Slots plan_slots(int jobs, int ranks, int gpus);

struct Launch {
  std::string exe;                        // this vexp executable
  std::string mpirun;                     // for ranks > 1
  std::vector<std::string> plugin_dirs;   // --plugin-path, passed on to every trial
  bool retry_failed = false;              // failed trials run again
  int diverged_exit_code = 3;             // how `exe run` says a run diverged
};

// Runs every trial of `store` that is pending (or was running when the sweep was
// killed, or failed when `launch.retry_failed`), `slots.jobs` at a time, and records
// each outcome in the store and in the trial's log.txt. Returns when all have
// ended; throws Interrupted on SIGINT / SIGTERM, the running trials reset to pending.
void run_trials(Store& store, Session& session, const Definition& def, const std::filesystem::path& dir,
                const Slots& slots, const Launch& launch);

}  // namespace vexp::sweep
