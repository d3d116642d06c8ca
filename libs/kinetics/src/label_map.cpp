#include "vexp/kinetics/label_map.hpp"

#include "lines.hpp"

#include "vexp/base/files.hpp"
#include "vexp/base/text.hpp"
#include "vexp/kinetics/error.hpp"
#include "vexp/kinetics/names.hpp"

namespace vexp::kinetics {

LabelMap::LabelMap(std::vector<std::string> names, const std::string& source) : names_(std::move(names)) {
  for (size_t i = 0; i < names_.size(); ++i) {
    if (!by_name_.emplace(names_[i], static_cast<int64_t>(i)).second)
      throw Error(source + ": '" + base::printable(names_[i]) + "' is listed twice");
    by_key_.emplace(tsm_name(names_[i]), static_cast<int64_t>(i));  // the first of a spelling wins
  }
}

int64_t LabelMap::find(std::string_view label) const {
  if (auto it = by_name_.find(label); it != by_name_.end()) return it->second;
  if (auto it = by_key_.find(tsm_name(label)); it != by_key_.end()) return it->second;
  return -1;
}

LabelMap parse_label_map(std::string_view text, const std::string& path) {
  std::vector<std::string> names;
  std::vector<int64_t> lines;
  detail::for_each_trimmed_line(text, [&](std::string_view s, int64_t line) {
    const std::string where = path + ":" + std::to_string(line) + ": ";
    if (base::has_control(s))
      throw Error(where + "the name '" + base::printable(s) + "' holds a control character");
    for (size_t k = 0; k < names.size(); ++k)
      if (names[k] == s)
        throw Error(where + "'" + base::printable(s) + "' is listed twice (first at line " + std::to_string(lines[k]) + ")");
    names.emplace_back(s);
    lines.push_back(line);
  });
  if (names.empty()) throw Error("the label map '" + path + "' has no names");
  return LabelMap(std::move(names), path);
}

LabelMap read_label_map(const std::string& path) {
  return parse_label_map(base::read_file_bounded(path, base::kMaxTextFileBytes, "the label map"), path);
}

std::string label_map_text(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += n + "\n";
  return out;
}

}  // namespace vexp::kinetics
