#include "vexp/rundir/eval_file.hpp"

#include <algorithm>

#include "vexp/base/files.hpp"
#include "vexp/base/text.hpp"

namespace vexp::rundir {

using json = nlohmann::json;

bool is_eval_dir(const fs::path& dir) {
  std::error_code ec;
  return fs::is_regular_file(dir / kEvalFile, ec);
}

std::vector<fs::path> eval_dirs_of(const fs::path& run_dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (fs::directory_iterator it(run_dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::error_code e2;
    if (it->is_directory(e2) && !it->is_symlink(e2) && is_eval_dir(it->path())) out.push_back(it->path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

json read_eval(const fs::path& dir) {
  const fs::path file = dir / kEvalFile;
  const std::string name = "'" + base::printable(file.string()) + "'";
  std::error_code ec;
  if (!fs::exists(file, ec)) throw Error(name + " does not exist: not an eval folder (vexp eval writes one)");
  const std::string text = read_text(file);
  json j;
  try {
    j = json::parse(text);
  } catch (const std::exception& e) {
    throw Error(name + " is not valid JSON: " + e.what());
  }
  if (!j.is_object()) throw Error(name + " is not a JSON object");
  const auto format = j.find("format");
  if (format == j.end() || !format->is_string() || format->get<std::string>() != kEvalFormat)
    throw Error(name + ": key 'format' is not \"" + std::string(kEvalFormat) + "\" (not an eval.json of vexp eval)");
  for (const char* k : {"top1", "top5", "mean_class_accuracy", "top1_all", "top5_all", "mean_class_accuracy_all",
                        "videos", "evaluated", "failed", "classes", "ranks", "wall_s"}) {
    const auto it = j.find(k);
    if (it != j.end() && !it->is_number() && !it->is_null()) throw Error(name + ": key '" + k + "' is not a number");
  }
  for (const char* k : {"protocol", "weights"}) {
    const auto it = j.find(k);
    if (it != j.end() && !it->is_object()) throw Error(name + ": key '" + k + "' is not an object");
  }
  for (const char* k : {"per_class", "failures", "confusion", "class_names"}) {
    const auto it = j.find(k);
    if (it != j.end() && !it->is_array() && !it->is_null()) throw Error(name + ": key '" + k + "' is not an array");
  }
  for (const char* k : {"summary", "recipe", "denominator"}) {
    const auto it = j.find(k);
    if (it != j.end() && !it->is_string()) throw Error(name + ": key '" + k + "' is not a string");
  }
  return j;
}

std::string eval_json_text(const nlohmann::ordered_json& eval) {
  std::string out = "{\n";
  bool first = true;
  for (auto it = eval.begin(); it != eval.end(); ++it) {
    out += first ? "" : ",\n";
    first = false;
    out += "  " + json(it.key()).dump() + ": ";
    const nlohmann::ordered_json& v = it.value();
    const bool rows = v.is_array() && !v.empty() && (v[0].is_object() || v[0].is_array());
    if (!rows) {
      out += v.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
      continue;
    }
    out += "[\n";
    for (size_t i = 0; i < v.size(); ++i)
      out += "    " + v[i].dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) +
             (i + 1 < v.size() ? ",\n" : "\n");
    out += "  ]";
  }
  return out + "\n}\n";
}

void write_eval(const fs::path& dir, const nlohmann::ordered_json& eval) {
  base::write_file_atomic((dir / kEvalFile).string(), eval_json_text(eval));
}

}  // namespace vexp::rundir
