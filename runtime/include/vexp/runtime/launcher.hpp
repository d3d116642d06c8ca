// Which launcher started this process, and how many tasks it started, from the
// environment each launcher sets. Rank and size of a run still come from the
// communicator (MPI); this is what `vexp run` knows before it creates one: whether
// N processes were started that would each train alone with a backend of one.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace vexp {

struct Launcher {
  std::string name;  // "Slurm (srun)", "Open MPI (mpirun)", "PMI", "PMIx", "WORLD_SIZE"; empty: none
  std::string var;   // the variable that gave the task count (or identified the launcher)
  int64_t tasks = 0; // tasks started; 0 when the environment does not say
  int64_t rank = -1; // this process's rank among them; -1 when the environment does not say
  // Started by an MPI-capable launcher (mpirun, srun, a PMI/PMIx starter), so that
  // `--nproc` must not start ranks of its own; WORLD_SIZE alone is not one.
  bool mpi = false;

  bool present() const { return !name.empty(); }
  // More than one process was started (or this one is not the first).
  bool several() const { return tasks > 1 || rank > 0; }
};

using EnvLookup = std::function<const char*(const char*)>;

// Reads OMPI_COMM_WORLD_SIZE/RANK, then a Slurm job step's SLURM_STEP_NUM_TASKS /
// SLURM_PROCID (a batch script's SLURM_NTASKS is the allocation, not processes
// started: its shell is one process), PMI_SIZE/RANK, PMIX_RANK (PMIx publishes no
// size in the environment), WORLD_SIZE/RANK; the first present wins. Values that
// are not whole numbers in [0, 2^24] count as absent.
Launcher detect_launcher(const EnvLookup& env);
Launcher detect_launcher();

}  // namespace vexp
