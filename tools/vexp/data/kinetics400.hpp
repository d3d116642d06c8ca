// `vexp data prepare kinetics400`: from the official Kinetics-400 CSVs and a
// folder of downloaded videos to the lists the recipes read (docs/data.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/video_ops.hpp"

namespace vexp::data {

// "{id}_{start:06d}_{end:06d}": the clip's file name without extension, as every
// Kinetics downloader names it.
std::string clip_name(const std::string& youtube_id, int64_t start, int64_t end);
// A label as mmaction2 writes it in folder names and lists: quotes removed,
// spaces as underscores ("passing_American_football_(in_game)").
std::string mmaction_name(const std::string& label);
// A label as the official TSM gen_label_kinetics.py writes it: spaces as
// underscores, quotes, parentheses and apostrophes removed.
std::string tsm_name(const std::string& label);

// Why `label` cannot name a class folder ("" when it can): it must be one path
// component as written and as mmaction_name writes it (no '/', '\\', NUL, TAB or
// other control character, not "." or "..").
std::string label_name_problem(const std::string& label);

// One row of an official annotation CSV.
struct KineticsRow {
  std::string label, youtube_id;
  int64_t start = 0, end = 0;
  int64_t line = 0;  // 1-based line in the file
};
// Reads an official CSV (header label,youtube_id,time_start,time_end,split[,is_cc]).
// Throws std::runtime_error "FILE:LINE: what" for a bad header or row.
// Labels and youtube_ids that cannot be one path component are refused the same way.
std::vector<KineticsRow> read_kinetics_csv(const std::string& path);
// The same for the CSV's text (`path` only names it in errors).
std::vector<KineticsRow> parse_kinetics_csv(const std::string& text, const std::string& path);

// Class names numbered as the official TSM code (tools/kinetics_label_map.txt,
// the 400 names in alphabetical order) and mmaction2 (parse_kinetics_splits:
// the train CSV's names sorted) number them: the names sorted by their bytes.
std::vector<std::string> sorted_class_names(const std::vector<KineticsRow>& train);

enum class PrepareMode { Link, Reencode, Frames };

struct PrepareOptions {
  std::string annotations;          // folder holding the CSVs (or:)
  std::string train_csv, val_csv;   // the CSVs themselves
  std::string videos;               // downloaded videos, per-class or flat
  std::string out;
  std::string label_map;            // optional: line i = class of label i
  PrepareMode mode = PrepareMode::Link;
  int short_side = -1;              // -1: the mode's default (256 re-encoded, 331 frames)
  JpegOptions jpeg;                 // --frames: JPEG quality and chroma
  int crf = 23, gop = 16;           // --reencode
  int workers = 1;
};

// Runs the preparation; returns the process exit code (0, or 130 when interrupted).
// Throws std::runtime_error naming the file for bad input.
int prepare_kinetics400(const PrepareOptions& o);

}  // namespace vexp::data
