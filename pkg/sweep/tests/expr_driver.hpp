// The sweep expression parser's fuzz body, shared by the libFuzzer target
// (fuzz_sweep_expr.cpp) and the deterministic mutation test that ctest runs
// (test_expression.cpp): any text must end in a finite number or one std::runtime_error
// with a bounded message, never a crash, a hang or another exception.
#pragma once

#include <cmath>
#include <cstdlib>
#include <map>
#include <stdexcept>
#include <string>

#include "vexp/sweep/expression.hpp"

namespace vexp::sweep::testing {

inline const std::map<std::string, double>& fuzz_vars() {
  static const std::map<std::string, double> vars{{"base_lr", 0.1},     {"global_batch", 256}, {"world_size", 8},
                                                  {"batch_per_gpu", 32}, {"accum_steps", 1},    {"lr", 0.1}};
  return vars;
}

// False when the outcome breaks the contract (the caller traps or fails).
inline bool run_one_expression(const std::string& text, std::string* problem) {
  try {
    const double v = eval_expr(text, fuzz_vars());
    if (!std::isfinite(v)) {
      *problem = "a non-finite value came back";
      return false;
    }
  } catch (const std::runtime_error& e) {
    const std::string m = e.what();
    // The expression is quoted cut to 80 bytes and a name to 64, each byte escaped
    // to at most 4 characters: a message never grows with the input.
    if (m.empty() || m.size() > 1000) {
      *problem = "message of " + std::to_string(m.size()) + " bytes";
      return false;
    }
  }
  return true;
}

}  // namespace vexp::sweep::testing
