// The distributed side of `vexp run`: --dry-run (the plan) and --nproc N (local ranks).
#pragma once

#include <string>
#include <vector>

#include "common.hpp"

namespace vexp::cli {

// Prints the plan of the run; throws Exit on an invalid recipe.
void print_dry_run(const RecipeArgs& args, int nproc);

// Replaces this process by `mpirun -np N ... vexp run ...` with the same
// arguments minus --nproc (adding --set dist.backend=mpi when the recipe's
// backend is "local"). Returns only when already running under a launcher.
void launch_local_ranks(int nproc, const RecipeArgs& args, const std::vector<std::string>& passthrough);

}  // namespace vexp::cli
