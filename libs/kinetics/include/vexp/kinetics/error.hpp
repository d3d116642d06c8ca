// The error of vexp::kinetics: one sentence that starts with where the input is bad,
// "FILE:LINE: what" (or "FILE: what" for the file as a whole), ready to print.
#pragma once

#include "vexp/base/error.hpp"
#include <stdexcept>
#include <string>

namespace vexp::kinetics {

struct Error : base::Error {
  using base::Error::Error;
};

}  // namespace vexp::kinetics
