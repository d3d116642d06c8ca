#include "vexp/kinetics/video_list.hpp"

#include "lines.hpp"

#include <stdexcept>

#include "vexp/base/error.hpp"
#include "vexp/base/files.hpp"
#include "vexp/base/text.hpp"
#include "vexp/kinetics/error.hpp"

namespace vexp::kinetics {

namespace {

bool all_digits(std::string_view s) { return !s.empty() && s.find_first_not_of("0123456789") == std::string_view::npos; }

// The whitespace-separated columns of `s` as [begin, end) offsets.
std::vector<std::pair<size_t, size_t>> columns(std::string_view s) {
  std::vector<std::pair<size_t, size_t>> out;
  for (size_t i = 0; i < s.size();) {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
    if (i == s.size()) break;
    const size_t a = i;
    while (i < s.size() && s[i] != ' ' && s[i] != '\t') ++i;
    out.emplace_back(a, i);
  }
  return out;
}

}  // namespace

ListFormat list_format(std::string_view name) {
  if (name == "auto") return ListFormat::Auto;
  if (name == "tsm") return ListFormat::Tsm;
  if (name == "mmaction") return ListFormat::Mmaction;
  throw std::invalid_argument("unknown list format '" + std::string(name) + "' (tsm, mmaction or auto)");
}

std::vector<ListEntry> parse_video_list(std::string_view text, const std::string& path, ListFormat format,
                                        bool labels_optional) {
  std::vector<ListEntry> out;
  detail::for_each_trimmed_line(text, [&](std::string_view s, int64_t line) {
    if (s[0] == '#') return;
    const std::string where = path + ":" + std::to_string(line) + ": ";
    auto bad = [&](const std::string& what) { throw Error(where + what); };
    auto number = [&](std::string_view t, const char* what) -> int64_t {
      if (!all_digits(t) || t.size() > 18)
        bad(std::string("expected a non-negative integer ") + what + ", got '" + base::printable(t) + "'");
      return std::stoll(std::string(t));
    };
    const auto cols = columns(s);
    auto col = [&](size_t k) { return s.substr(cols[k].first, cols[k].second - cols[k].first); };
    ListEntry e;
    e.line = line;
    size_t numbers = 0;  // trailing columns that are numbers
    if (cols.size() == 1 && labels_optional) {
      numbers = 0;
    } else {
      const bool tsm = format == ListFormat::Tsm ||
                       (format == ListFormat::Auto && cols.size() >= 3 && all_digits(col(cols.size() - 2)));
      numbers = tsm ? 2 : 1;
      if (cols.size() < numbers + 1) bad(tsm ? "expected 'path num_frames label'" : "expected 'path label'");
      e.label = number(col(cols.size() - 1), "label");
      if (tsm) e.frames = number(col(cols.size() - 2), "frame count");
    }
    // The path: everything before the numbers (it may hold spaces).
    std::string_view p = s.substr(0, numbers ? cols[cols.size() - numbers].first : s.size());
    p = p.substr(0, p.find_last_not_of(" \t") + 1);
    if (base::has_control(p))
      bad("the path '" + base::printable(p) + "' holds a control character (TAB, NUL, ...)");
    e.path = std::string(p);
    out.push_back(std::move(e));
  });
  return out;
}

std::vector<ListEntry> read_video_list(const std::string& path, ListFormat format, bool labels_optional) {
  return parse_video_list(base::read_file_bounded(path, base::kMaxTextFileBytes, "the video list"), path, format,
                          labels_optional);
}

std::string tsm_line(std::string_view path, int64_t frames, int64_t label) {
  return std::string(path) + " " + std::to_string(frames) + " " + std::to_string(label) + "\n";
}

std::string mmaction_line(std::string_view path, int64_t label) {
  return std::string(path) + " " + std::to_string(label) + "\n";
}

}  // namespace vexp::kinetics
