#include "vexp/runtime/launcher.hpp"

#include <cerrno>
#include <cstdlib>

namespace vexp {

namespace {
constexpr int64_t kMaxTasks = int64_t(1) << 24;

// -1 unless the variable is a plain decimal in [0, kMaxTasks].
int64_t count_of(const EnvLookup& env, const char* name) {
  const char* v = env(name);
  if (!v || !*v) return -1;
  for (const char* c = v; *c; ++c)
    if (*c < '0' || *c > '9') return -1;
  errno = 0;
  char* end = nullptr;
  const long long n = std::strtoll(v, &end, 10);
  if (errno != 0 || n > kMaxTasks) return -1;
  return n;
}

Launcher make(const char* name, const char* var, int64_t tasks, int64_t rank, bool mpi) {
  Launcher l;
  l.name = name;
  l.var = var;
  l.tasks = tasks > 0 ? tasks : 0;
  l.rank = rank;
  l.mpi = mpi;
  return l;
}
}  // namespace

Launcher detect_launcher(const EnvLookup& env) {
  if (env("OMPI_COMM_WORLD_SIZE"))
    return make("Open MPI (mpirun)", "OMPI_COMM_WORLD_SIZE", count_of(env, "OMPI_COMM_WORLD_SIZE"),
                count_of(env, "OMPI_COMM_WORLD_RANK"), true);
  // srun sets SLURM_STEP_ID and SLURM_STEP_NUM_TASKS in every task of a step.
  if (env("SLURM_STEP_NUM_TASKS") || env("SLURM_STEP_ID")) {
    const bool step_tasks = count_of(env, "SLURM_STEP_NUM_TASKS") > 0;
    const char* var = step_tasks ? "SLURM_STEP_NUM_TASKS" : "SLURM_NTASKS";
    return make("Slurm (srun)", var, count_of(env, var), count_of(env, "SLURM_PROCID"), true);
  }
  if (env("PMI_SIZE")) return make("PMI", "PMI_SIZE", count_of(env, "PMI_SIZE"), count_of(env, "PMI_RANK"), true);
  if (env("PMIX_RANK")) return make("PMIx", "PMIX_RANK", 0, count_of(env, "PMIX_RANK"), true);
  if (env("WORLD_SIZE")) return make("WORLD_SIZE", "WORLD_SIZE", count_of(env, "WORLD_SIZE"), count_of(env, "RANK"), false);
  return {};
}

Launcher detect_launcher() {
  return detect_launcher([](const char* name) -> const char* { return std::getenv(name); });
}

}  // namespace vexp
