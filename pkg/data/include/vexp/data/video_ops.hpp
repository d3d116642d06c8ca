// Per-video work of `vexp data extract-frames` and `vexp data prepare`: probe,
// frame extraction and re-encoding. Outputs appear complete or not at all: they
// are written under a `.partial` name and renamed when finished.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace vexp::data {

// The size of a width x height frame scaled so that its shorter side is
// `short_side` (0: unchanged), aspect kept; the other side rounded to the nearest
// multiple of `multiple`, as FFmpeg's scale=-N does (2 for H.264's 4:2:0 chroma).
void short_side_size(int width, int height, int short_side, int multiple, int* out_w, int* out_h);

// JPEG settings of extracted frames (defaults chosen in docs/data.md, "Frame folders").
struct JpegOptions {
  int quality = 95;
  int chroma = 420;  // 444 or 420
};

// Decodes every frame of `src` into `dst`/img_00001.jpg ... scaled to short side
// `short_side` (0: the video's size). Written as `dst`.partial and renamed (an old
// `dst` is replaced). Both must lie inside folder `within`, checked before anything
// is removed. `before_rename(frames)`, when given, runs once the folder is complete and
// the old `dst` removed, before the rename (extract-frames journals the folder there,
// so that a folder never appears without its record). Returns the frame count; throws
// naming the file.
int64_t extract_frames(const std::string& src, const std::string& dst, int short_side, const JpegOptions& jpeg,
                       const std::string& within, const std::function<void(int64_t)>& before_rename = {});

// Re-encodes `src` as H.264 `dst` (.mp4, no audio) at short side `short_side`
// (other side even), libx264 `crf`, a keyframe every `gop` frames, the source's
// frame rate. Written as <dst stem>.partial.mp4 and renamed. Returns the frame count.
int64_t reencode_video(const std::string& src, const std::string& dst, int short_side, int crf, int gop);

// The name a partial output of `dst` has while it is written.
std::string partial_name(const std::string& dst, bool is_video_file);

}  // namespace vexp::data
