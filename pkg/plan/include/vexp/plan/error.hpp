// The one error type of vexp::plan: a complete sentence, ready to print. The CLI
// maps it to its exit code (2, invalid input: a cluster file that cannot be read,
// a recipe that cannot be planned on the cluster).
#pragma once

#include "vexp/base/error.hpp"
#include <stdexcept>

namespace vexp::plan {

// A problem with the inputs (no profile for the model, a layout without a decode
// rate, more GPUs than the cluster has, an unreadable cluster file): one sentence.
struct PlanError : base::Error {
  explicit PlanError(const std::string& what) : base::Error(what, base::ErrorKind::invalid) {}
};

}  // namespace vexp::plan
