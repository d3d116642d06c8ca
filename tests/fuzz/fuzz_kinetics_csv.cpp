// One input of the Kinetics format readers (libs/kinetics: the annotation CSV, and
// the same bytes as a label map and as a video list): a clean "FILE:LINE: ..." error
// or results that keep the module's promises (every name a safe path component, no
// control character in a list path or a class name). Used by libFuzzer (cmake
// -DVEXP_FUZZ=ON with clang) and by the bounded mutation test (mutate_kinetics_csv.cpp,
// ctest fuzz.kinetics_csv).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "vexp/base/files.hpp"
#include "vexp/base/text.hpp"
#include "vexp/kinetics/annotations.hpp"
#include "vexp/kinetics/error.hpp"
#include "vexp/kinetics/label_map.hpp"
#include "vexp/kinetics/names.hpp"
#include "vexp/kinetics/video_list.hpp"

namespace {

namespace k = vexp::kinetics;

[[noreturn]] void broken(const std::string& what) {
  std::fprintf(stderr, "kinetics format reader broke its promise: %s\n", vexp::base::printable(what).c_str());
  std::abort();
}

// Every refusal is located: "fuzz.csv:LINE: ..." (or "fuzz.csv: ..." for the whole file).
void located(const k::Error& e, const std::string& file, bool whole_file_ok) {
  const std::string m = e.what();
  if (m.rfind(file + ":", 0) != 0 && !(whole_file_ok && m.find("'" + file + "'") != std::string::npos))
    broken("unlocated error: " + m);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    for (const auto& c : k::parse_annotations(text, "fuzz.csv")) {
      if (!k::label_problem(c.label).empty()) broken("accepted label '" + c.label + "'");
      if (!k::split_problem(c.split).empty()) broken("accepted split '" + c.split + "'");
      const std::string clip = k::clip_name(c);
      if (!vexp::base::path_component_problem(clip).empty()) broken("accepted clip name '" + clip + "'");
      if (!vexp::base::path_component_problem(k::mmaction_name(c.label)).empty())
        broken("accepted a label whose mmaction2 folder is unsafe: '" + c.label + "'");
      if (c.end < c.start || c.line < 2) broken("row out of order");
    }
  } catch (const k::Error& e) {
    located(e, "fuzz.csv", false);
  }
  try {
    const k::LabelMap m = k::parse_label_map(text, "fuzz.txt");
    for (size_t i = 0; i < m.names().size(); ++i) {
      const std::string& n = m.names()[i];
      if (n.empty() || vexp::base::has_control(n)) broken("accepted class name '" + n + "'");
      if (m.find(n) != static_cast<int64_t>(i)) broken("class name '" + n + "' is not found at its line");
    }
  } catch (const k::Error& e) {
    located(e, "fuzz.txt", true);
  }
  try {
    for (const auto& e : k::parse_video_list(text, "fuzz.lst", k::ListFormat::Auto, true)) {
      if (e.path.empty() || vexp::base::has_control(e.path)) broken("accepted list path '" + e.path + "'");
      if (e.line < 1 || e.label < -1 || e.frames < -1) broken("list entry out of range");
    }
  } catch (const k::Error& e) {
    located(e, "fuzz.lst", false);
  }
  return 0;
}
