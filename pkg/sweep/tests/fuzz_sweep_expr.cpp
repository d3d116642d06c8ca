// libFuzzer entry for [sweep.derived] expressions (pkg/sweep/src/expression.cpp).
// Build: cmake -DVEXP_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++ ..; run:
//   ./vexp_fuzz_sweep_expr -max_total_time=60 corpus/ pkg/sweep/tests/expr_corpus/
#include <cstddef>
#include <cstdint>
#include <string>

#include "expr_driver.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::string problem;
  if (!vexp::sweep::testing::run_one_expression(text, &problem)) __builtin_trap();
  return 0;
}
