// The one error type of vexp::base: a complete sentence, ready to print.
#pragma once

#include <stdexcept>
#include <string>

namespace vexp::base {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace vexp::base
