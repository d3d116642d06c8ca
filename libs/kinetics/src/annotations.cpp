#include "vexp/kinetics/annotations.hpp"

#include <algorithm>
#include <set>

#include "vexp/base/files.hpp"
#include "vexp/base/text.hpp"
#include "vexp/kinetics/csv.hpp"
#include "vexp/kinetics/error.hpp"
#include "vexp/kinetics/names.hpp"

namespace vexp::kinetics {

namespace {

const std::vector<std::string> kHeader = {"label", "youtube_id", "time_start", "time_end", "split"};

[[noreturn]] void bad(const std::string& path, int64_t line, const std::string& what) {
  throw Error(path + ":" + std::to_string(line) + ": " + what);
}

std::string header_text(const std::vector<std::string>& h) {
  std::string s;
  for (size_t i = 0; i < h.size(); ++i) s += (i ? "," : "") + h[i];
  return s;
}

}  // namespace

bool parse_seconds(std::string_view s, int64_t* seconds) {
  size_t i = 0;
  int64_t v = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
    if (i >= 10) return false;  // more than 10 digits: no clip is that long
    v = v * 10 + (s[i++] - '0');
  }
  if (i == 0) return false;
  if (i < s.size()) {
    if (s[i++] != '.' || i == s.size()) return false;
    while (i < s.size() && s[i] == '0') ++i;  // "59.0", "59.000": the same whole second
    if (i < s.size()) return false;
  }
  *seconds = v;
  return true;
}

std::vector<Clip> parse_annotations(std::string_view text, const std::string& path) {
  const std::vector<CsvRecord> records = parse_csv(text, path);
  if (records.empty()) throw Error(path + ": the file is empty");
  const std::vector<std::string>& h = records[0].fields;
  const bool ok = (h.size() == 5 || (h.size() == 6 && h[5] == "is_cc")) &&
                  std::equal(kHeader.begin(), kHeader.end(), h.begin());
  if (!ok)
    bad(path, records[0].line,
        "expected the header 'label,youtube_id,time_start,time_end,split[,is_cc]' of the official Kinetics "
        "train/val CSVs, got '" + base::printable(header_text(h)) + "'");
  const size_t columns = h.size();
  std::vector<Clip> clips;
  clips.reserve(records.size() - 1);
  for (size_t k = 1; k < records.size(); ++k) {
    const CsvRecord& r = records[k];
    const auto& f = r.fields;
    if (f.size() != columns)
      bad(path, r.line, "expected " + std::to_string(columns) + " fields, got " + std::to_string(f.size()));
    Clip c;
    c.label = f[0];
    c.youtube_id = f[1];
    c.split = f[4];
    c.line = r.line;
    if (const std::string why = label_problem(c.label); !why.empty())
      bad(path, r.line, "label '" + base::printable(c.label) + "' cannot be a folder name: " + why);
    if (const std::string why = youtube_id_problem(c.youtube_id); !why.empty())
      bad(path, r.line, "youtube_id '" + base::printable(c.youtube_id) + "' cannot be part of a path: " + why);
    if (const std::string why = split_problem(c.split); !why.empty())
      bad(path, r.line, "split '" + base::printable(c.split) + "' cannot be part of a path: " + why);
    const char* kWhole = " (whole seconds: the official CSVs write 59; 59.0 is read as 59)";
    if (!parse_seconds(f[2], &c.start))
      bad(path, r.line, "time_start '" + base::printable(f[2]) + "' is not a number of seconds" + kWhole);
    if (!parse_seconds(f[3], &c.end))
      bad(path, r.line, "time_end '" + base::printable(f[3]) + "' is not a number of seconds" + kWhole);
    if (c.end < c.start) bad(path, r.line, "time_end " + f[3] + " is before time_start " + f[2]);
    clips.push_back(std::move(c));
  }
  return clips;
}

std::vector<Clip> read_annotations(const std::string& path) {
  return parse_annotations(base::read_file_bounded(path, base::kMaxTextFileBytes), path);
}

std::string clip_name(const Clip& clip) { return clip_name(clip.youtube_id, clip.start, clip.end); }

std::string expand_clip_path(std::string_view pattern, const Clip& clip) {
  const std::string start = clip_time(clip.start), end = clip_time(clip.end);
  const std::pair<const char*, std::string_view> keys[] = {
      {"{label}", clip.label}, {"{id}", clip.youtube_id}, {"{start}", start}, {"{end}", end}, {"{split}", clip.split}};
  std::string out;
  for (size_t i = 0; i < pattern.size();) {
    bool replaced = false;
    for (const auto& [key, value] : keys) {
      const std::string_view k(key);
      if (pattern.substr(i, k.size()) == k) {
        out += value;
        i += k.size();
        replaced = true;
        break;
      }
    }
    if (!replaced) out += pattern[i++];
  }
  return out;
}

std::string annotation_header(bool is_cc) {
  std::string s;
  for (const auto& h : kHeader) s += (s.empty() ? "" : ",") + h;
  return s + (is_cc ? ",is_cc\n" : "\n");
}

std::string annotation_row(const Clip& clip, bool is_cc) {
  return csv_field(clip.label, true) + "," + csv_field(clip.youtube_id) + "," + std::to_string(clip.start) + "," +
         std::to_string(clip.end) + "," + csv_field(clip.split) + (is_cc ? ",0\n" : "\n");
}

std::vector<std::string> sorted_class_names(const std::vector<Clip>& clips) {
  std::set<std::string> names;
  for (const auto& c : clips) names.insert(c.label);
  return {names.begin(), names.end()};
}

}  // namespace vexp::kinetics
