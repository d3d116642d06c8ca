// The official Kinetics annotation CSVs: label,youtube_id,time_start,time_end,split[,is_cc]
// (DeepMind's release and the CVDF mirror; Kinetics-400/600/700 write the same header).
//
// Rules (docs/data.md, "The Kinetics format"):
// - the CSV rules of csv.hpp; the header is required and is exactly the five names,
//   or six with is_cc; every row has the header's field count;
// - times are whole seconds: digits ("59"), or digits with a fractional part of zeros
//   ("59.0", as a re-export through a float column writes them). Both name the same
//   clip file, `_000059`. "59.5", signs, exponents, spaces and more than 10 digits are
//   refused: no clip file of a downloader has such a name. time_end >= time_start;
// - the label, the youtube_id and the split must be able to be part of a path
//   (names.hpp): refused at their line otherwise.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace vexp::kinetics {

// One row of an annotation CSV.
struct Clip {
  std::string label, youtube_id, split;
  int64_t start = 0, end = 0;
  int64_t line = 0;  // 1-based line in the file
};

// Whole seconds as the rules above read them; false when `text` is not such a time.
bool parse_seconds(std::string_view text, int64_t* seconds);

// Reads an annotation CSV's text (`path` only names it in errors). Throws
// kinetics::Error "PATH:LINE: what" for a bad header or row, "PATH: the file is empty".
std::vector<Clip> parse_annotations(std::string_view text, const std::string& path);
// The same for a file, read with vexp::base::read_file_bounded (kMaxTextFileBytes);
// a file that cannot be read throws vexp::base::Error.
std::vector<Clip> read_annotations(const std::string& path);

// The clip's file name without extension: clip_name(youtube_id, start, end).
std::string clip_name(const Clip& clip);

// `pattern` with {label}, {id}, {start}, {end} (6 digits) and {split} replaced by the
// clip's (the kinetics dataset's csv_path, "{label}/{id}_{start}_{end}.mp4").
std::string expand_clip_path(std::string_view pattern, const Clip& clip);

// The header line and a row as the official CSVs write them (with the newline): times
// as integers, a multi-word label in quotes, with `is_cc` an is_cc column of 0.
std::string annotation_header(bool is_cc);
std::string annotation_row(const Clip& clip, bool is_cc);

// Class names as the official TSM code (tools/kinetics_label_map.txt) and mmaction2
// (parse_kinetics_splits) number them: the clips' labels sorted by their bytes.
std::vector<std::string> sorted_class_names(const std::vector<Clip>& clips);

}  // namespace vexp::kinetics
