// The official Kinetics annotation CSVs: parsing and the names derived from a row.
// Torch- and FFmpeg-free so that the fuzz target (tests/fuzz) links it alone.
#include <fstream>
#include <set>
#include <stdexcept>

#include "data/csv.hpp"
#include "data/kinetics400.hpp"
#include "vexp/base/files.hpp"
#include "vexp/base/text.hpp"

namespace vexp::data {

std::string clip_name(const std::string& youtube_id, int64_t start, int64_t end) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "_%06lld_%06lld", static_cast<long long>(start), static_cast<long long>(end));
  return youtube_id + buf;
}

std::string mmaction_name(const std::string& label) {
  std::string out;
  for (char c : label)
    if (c != '"') out += c == ' ' ? '_' : c;
  return out;
}

std::string tsm_name(const std::string& label) {
  std::string out;
  for (char c : label)
    if (c != '"' && c != '(' && c != ')' && c != '\'') out += c == ' ' ? '_' : c;
  return out;
}

std::string label_name_problem(const std::string& label) {
  // The label is a folder (as mmaction2 writes it) and a field of the tab-separated
  // resume journal: it must be one path component, in both spellings.
  std::string why = base::path_component_problem(label);
  if (why.empty()) why = base::path_component_problem(mmaction_name(label));
  if (why.empty() && label.find('\\') != std::string::npos) why = "it holds a '\\'";
  return why;
}

namespace {

[[noreturn]] void bad_input(const std::string& where, const std::string& what) {
  throw std::runtime_error(where + ": " + what);
}

// Seconds as the CSVs write them ("59", and "59.0" in some releases: the whole part, as mmaction2's int(float(x))).
bool parse_seconds(const std::string& s, int64_t* out) {
  size_t i = 0;
  int64_t v = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
    if (v > 1'000'000'000) return false;
    v = v * 10 + (s[i++] - '0');
  }
  if (i == 0) return false;
  if (i < s.size()) {
    if (s[i++] != '.') return false;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
    if (i < s.size()) return false;
  }
  *out = v;
  return true;
}

}  // namespace

std::vector<KineticsRow> parse_kinetics_csv(const std::string& text, const std::string& path) {
  std::vector<KineticsRow> rows;
  std::string line, error;
  std::vector<std::string> f;
  size_t columns = 0;
  size_t pos = 0;
  for (int64_t lineno = 1; pos < text.size(); ++lineno) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    line.assign(text, pos, nl - pos);
    pos = nl + 1;
    const std::string where = path + ":" + std::to_string(lineno);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (lineno == 1) {
      base::strip_utf8_bom(line);  // spreadsheet programs write one
      std::vector<std::string> h;
      if (!split_csv(line, h, error)) bad_input(where, error);
      static const std::vector<std::string> kHeader = {"label", "youtube_id", "time_start", "time_end", "split"};
      const bool ok = (h.size() == 5 || (h.size() == 6 && h[5] == "is_cc")) &&
                      std::equal(kHeader.begin(), kHeader.end(), h.begin());
      if (!ok)
        bad_input(where, "expected the header 'label,youtube_id,time_start,time_end,split[,is_cc]' of the official "
                         "Kinetics train/val CSVs, got '" + base::printable(line) + "'");
      columns = h.size();
      continue;
    }
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    if (!split_csv(line, f, error)) bad_input(where, error);
    if (f.size() != columns)
      bad_input(where, "expected " + std::to_string(columns) + " fields, got " + std::to_string(f.size()));
    KineticsRow r;
    r.label = f[0];
    r.youtube_id = f[1];
    r.line = lineno;
    if (r.label.empty()) bad_input(where, "the label is empty");
    if (const std::string why = label_name_problem(r.label); !why.empty())
      bad_input(where, "label '" + base::printable(r.label) + "' cannot be a folder name: " + why);
    if (r.youtube_id.empty() || r.youtube_id.find_first_of("/\\ \t") != std::string::npos ||
        !base::path_component_problem(r.youtube_id).empty() || r.youtube_id.size() > 200)
      bad_input(where, "bad youtube_id '" + base::printable(r.youtube_id) + "'");
    if (!parse_seconds(f[2], &r.start))
      bad_input(where, "time_start '" + base::printable(f[2]) + "' is not a number of seconds");
    if (!parse_seconds(f[3], &r.end))
      bad_input(where, "time_end '" + base::printable(f[3]) + "' is not a number of seconds");
    if (r.end < r.start) bad_input(where, "time_end " + f[3] + " is before time_start " + f[2]);
    rows.push_back(std::move(r));
  }
  if (columns == 0) throw std::runtime_error(path + ": the file is empty");
  return rows;
}

std::vector<KineticsRow> read_kinetics_csv(const std::string& path) {
  return parse_kinetics_csv(base::read_file_bounded(path, base::kMaxTextFileBytes), path);
}

std::vector<std::string> sorted_class_names(const std::vector<KineticsRow>& train) {
  std::set<std::string> names;
  for (const auto& r : train) names.insert(r.label);
  return {names.begin(), names.end()};
}

}  // namespace vexp::data
