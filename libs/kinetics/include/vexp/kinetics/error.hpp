// The error of vexp::kinetics: one sentence that starts with where the input is bad,
// "FILE:LINE: what" (or "FILE: what" for the file as a whole), ready to print.
#pragma once

#include <stdexcept>
#include <string>

namespace vexp::kinetics {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace vexp::kinetics
