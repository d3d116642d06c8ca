// The one error type of vexp::plan: a complete sentence, ready to print. The CLI
// maps it to its exit code (2, invalid input: a cluster file that cannot be read,
// a recipe that cannot be planned on the cluster).
#pragma once

#include <stdexcept>

namespace vexp::plan {

// A problem with the inputs (no profile for the model, a layout without a decode
// rate, more GPUs than the cluster has, an unreadable cluster file): one sentence.
struct PlanError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace vexp::plan
