// Video lists: the official TSM format (`path num_frames label`, usually frame
// folders) and mmaction2's (`path label`; frame lists `path num_frames label`).
//
// Rules: a UTF-8 byte order mark is dropped; LF or CRLF; lines are trimmed; empty
// lines and lines starting with '#' are skipped. The numbers are the last
// whitespace-separated columns, so a path may hold spaces; they are non-negative
// integers. Auto: TSM when a line has at least three columns and the second last is
// digits, else mmaction2. A path holding a control character (TAB, NUL, ...) is
// refused: it would not name the file meant.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace vexp::kinetics {

enum class ListFormat { Auto, Tsm, Mmaction };

// "tsm", "mmaction", "auto"; throws std::invalid_argument for another name.
ListFormat list_format(std::string_view name);

struct ListEntry {
  std::string path;     // as written (relative to the list's root, or absolute)
  int64_t frames = -1;  // TSM: the listed frame count; -1: not listed
  int64_t label = -1;   // -1: no label (only with labels_optional)
  int64_t line = 0;     // 1-based line in the file
};

// The entries of a list's text (`path` only names it in errors). With
// `labels_optional`, a line of one column is a path without a label (`vexp data
// extract-frames` lists). Throws kinetics::Error "PATH:LINE: what".
std::vector<ListEntry> parse_video_list(std::string_view text, const std::string& path, ListFormat format,
                                        bool labels_optional = false);
// The same for a file, read with vexp::base::read_file_bounded (kMaxTextFileBytes).
std::vector<ListEntry> read_video_list(const std::string& path, ListFormat format, bool labels_optional = false);

// One line of a list as the formats write it (with the newline): TSM
// "path num_frames label", mmaction2 "path label".
std::string tsm_line(std::string_view path, int64_t frames, int64_t label);
std::string mmaction_line(std::string_view path, int64_t label);

}  // namespace vexp::kinetics
