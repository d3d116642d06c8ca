// The distributed side of `vexp run`: --dry-run (the plan) and --nproc N (local ranks).
#pragma once

#include <string>
#include <vector>

#include "commands/common.hpp"

namespace vexp::cli {

// Prints the plan of the run; throws base::Error on an invalid recipe.
void print_dry_run(const RecipeArgs& args, int nproc);

// Throws base::Error (invalid, exit 2: one line naming dist.backend, the launcher and its task count)
// when a launcher started more than one task and `backend` is "local", which
// cannot span processes: each task would otherwise train alone in the same run
// directory. Tasks after the first exit 2 silently.
// `work` says what each would do alone ("train", "evaluate").
void refuse_backend_of_one(const std::string& recipe_path, const std::string& backend, const std::string& work = "train");

// Runs `mpirun -np N ... vexp COMMAND ...` (`vexp run`, or `vexp eval`) with the same
// arguments minus --nproc (adding --set dist.backend=mpi when the recipe's backend is
// "local") and waits for it. Returns false at once when already running under a
// launcher (this process is a rank), true when the ranks succeeded; otherwise throws
// base::Error with mpirun's exit code, or 130 when interrupted: the first SIGINT /
// SIGTERM is forwarded to every rank as SIGUSR1 (`vexp run`: each stops after the same
// step and rank 0 writes a checkpoint; `vexp eval`: each ends), a second one ends the
// job at once.
bool launch_local_ranks(int nproc, const RecipeArgs& args, const std::vector<std::string>& passthrough,
                        const std::string& command = "run");

// The command line that continues this invocation's run: its own arguments
// without --resume [auto] / --resume-from / --stop-after, plus --resume (shell-quoted;
// prefixed with mpirun -np N, or srun -n N, when this process is a rank of such a job).
std::string resume_command();

}  // namespace vexp::cli
