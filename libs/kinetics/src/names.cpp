#include "vexp/kinetics/names.hpp"

#include <cstdio>

#include "vexp/base/files.hpp"

namespace vexp::kinetics {

std::string clip_time(int64_t seconds) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%06lld", static_cast<long long>(seconds));
  return buf;
}

std::string clip_name(std::string_view youtube_id, int64_t start, int64_t end) {
  return std::string(youtube_id) + "_" + clip_time(start) + "_" + clip_time(end);
}

std::string mmaction_name(std::string_view label) {
  std::string out;
  for (char c : label)
    if (c != '"') out += c == ' ' ? '_' : c;
  return out;
}

std::string tsm_name(std::string_view label) {
  std::string out;
  for (char c : label)
    if (c != '"' && c != '(' && c != ')' && c != '\'') out += c == ' ' ? '_' : c;
  return out;
}

std::string label_problem(std::string_view label) {
  // The label is a folder (as written: csv_path's {label}; as mmaction2 writes it:
  // `vexp data prepare`) and a field of prepare's tab-separated resume journal.
  std::string why = base::path_component_problem(label);
  if (why.empty()) why = base::path_component_problem(mmaction_name(label));
  if (why.empty() && label.find('\\') != std::string_view::npos) why = "it holds a '\\'";
  return why;
}

std::string youtube_id_problem(std::string_view youtube_id) {
  std::string why = base::path_component_problem(youtube_id);
  if (!why.empty()) return why;
  if (youtube_id.find('\\') != std::string_view::npos) return "it holds a '\\'";
  if (youtube_id.find(' ') != std::string_view::npos) return "it holds a space";
  if (youtube_id.size() > 200) return "it is " + std::to_string(youtube_id.size()) + " bytes long (200 at most)";
  return "";
}

std::string split_problem(std::string_view split) {
  if (split.empty()) return "";
  std::string why = base::path_component_problem(split);
  if (why.empty() && split.find('\\') != std::string_view::npos) why = "it holds a '\\'";
  return why;
}

}  // namespace vexp::kinetics
