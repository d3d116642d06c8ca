// `vexp data prepare kinetics400`: from the official Kinetics-400 CSVs and a
// folder of downloaded videos to the lists the recipes read (docs/data.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "vexp/data/video_ops.hpp"

namespace vexp::data {

// The Kinetics format itself (annotation CSVs, label maps, lists, clip and class
// names) is libs/kinetics (vexp::kinetics), shared with the kinetics dataset plugin.

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
