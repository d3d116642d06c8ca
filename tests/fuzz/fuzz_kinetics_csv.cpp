// One input of the Kinetics CSV reader (tools/vexp/data/kinetics_csv.cpp): a clean
// "FILE:LINE: ..." error or rows whose every name is a safe path component. Used by
// libFuzzer (cmake -DVEXP_FUZZ=ON with clang) and by the bounded mutation test
// (mutate_kinetics_csv.cpp, ctest fuzz.kinetics_csv).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "data/kinetics400.hpp"
#include "vexp/base/files.hpp"

namespace {
[[noreturn]] void broken(const std::string& what) {
  std::fprintf(stderr, "kinetics CSV reader broke its promise: %s\n", what.c_str());
  std::abort();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<vexp::data::KineticsRow> rows;
  try {
    rows = vexp::data::parse_kinetics_csv(text, "fuzz.csv");
  } catch (const std::runtime_error& e) {
    // Every refusal is located.
    if (std::string(e.what()).rfind("fuzz.csv:", 0) != 0) broken(std::string("unlocated error: ") + e.what());
    return 0;
  }
  for (const auto& r : rows) {
    if (!vexp::data::label_name_problem(r.label).empty()) broken("accepted label '" + r.label + "'");
    const std::string clip = vexp::data::clip_name(r.youtube_id, r.start, r.end);
    if (!vexp::base::path_component_problem(clip).empty()) broken("accepted clip name '" + clip + "'");
    if (r.end < r.start || r.line < 2) broken("row out of order");
  }
  return 0;
}
