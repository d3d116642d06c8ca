// `vexp data make-synthetic`: the quickstart's motion clips as H.264 files, in
// the quickstart layout or as a miniature Kinetics-400 download.
#pragma once

#include <cstdint>
#include <string>

namespace vexp::data {

struct SynthArgs {
  std::string out;
  std::string layout = "motion";  // motion | kinetics400
  std::string as = "video";       // motion: video (H.264 mp4) | frames (JPEG frame folders, no FFmpeg needed)
  int64_t classes = 8, frames = 16, size = 32, channels = 1, train_clips = 4000, val_clips = 800, seed = 0, fps = 25, crf = 12,
          gop = 250;
  double noise = 0.05;
};

// The quickstart layout: {train,val}/<class>/<id>_000000_<frames>.mp4 (as "frames":
// folders of img_00001.jpg ... named without .mp4) with lists in the TSM, mmaction2
// and CSV formats and classes.txt.
void make_synthetic_motion(const SynthArgs& a);

// A miniature Kinetics-400 download (docs/data.md, "A miniature Kinetics-400"):
// the official CSVs, the per-class and flat video layouts with broken and
// missing videos, and the outputs of the official TSM and mmaction2 scripts.
void make_kinetics400_fixture(const SynthArgs& a);

}  // namespace vexp::data
