// Label maps / class-name files: one class name per line, line k (empty lines not
// counted) is label k. TSM's tools/kinetics_label_map.txt, `vexp data`'s classes.txt,
// the kinetics dataset's label_map, `vexp predict --labels`.
//
// Rules: a UTF-8 byte order mark is dropped; LF or CRLF; spaces and tabs around a name
// are trimmed (they are never part of a Kinetics name) and empty lines skipped; a
// name is the whole line (quotes and commas are data: this is not a CSV); a name
// holding a control character, a name listed twice and a map without names are
// refused at their line. A label is found by its name, else by its TSM spelling
// (tsm_name), so a map may write names as mmaction2's or TSM's folders do.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace vexp::kinetics {

class LabelMap {
 public:
  LabelMap() = default;
  // Throws kinetics::Error "SOURCE: 'NAME' is listed twice" for a repeated name.
  LabelMap(std::vector<std::string> names, const std::string& source);

  const std::vector<std::string>& names() const { return names_; }
  int64_t size() const { return static_cast<int64_t>(names_.size()); }
  bool empty() const { return names_.empty(); }
  // The number of `label` (as written, else by its TSM spelling); -1 when it is not in the map.
  int64_t find(std::string_view label) const;

 private:
  std::vector<std::string> names_;
  std::map<std::string, int64_t, std::less<>> by_name_, by_key_;
};

// Reads a label map's text (`path` only names it in errors); throws kinetics::Error
// "PATH:LINE: what", or "the label map 'PATH' has no names".
LabelMap parse_label_map(std::string_view text, const std::string& path);
// The same for a file, read with vexp::base::read_file_bounded (kMaxTextFileBytes); a
// file that cannot be read throws vexp::base::Error.
LabelMap read_label_map(const std::string& path);

// The text of a label map (one name a line), as parse_label_map reads it back.
std::string label_map_text(const std::vector<std::string>& names);

}  // namespace vexp::kinetics
