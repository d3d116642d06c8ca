// Video and JPEG decoding for the kinetics dataset and the `vexp data` tools.
// Torch-free: FFmpeg (libavformat/libavcodec/libswscale) and libjpeg-turbo only;
// built with -DVEXP_VIDEO=OFF, JPEG only (libswscale and libjpeg-turbo).
//
// Frames are numbered 0, 1, ... in presentation order (sorted timestamps), which
// is what `ffmpeg -vf select='eq(n,K)'` calls frame K, for constant and variable
// frame rate alike. Reading a set of frames seeks to the keyframe before the
// first one, decodes forward, skips decoding non-reference frames that are not
// wanted, seeks ahead again when the next wanted frame lies past another
// keyframe, drains the decoder as soon as the last wanted frame's packet is in
// (rather than decoding the packets of its reordering delay), and converts only
// the wanted frames, cropping and scaling in one swscale call straight to the
// output size. What remains is the decoding of the frames the wanted ones depend
// on: see docs/data.md, "Benchmark".
#pragma once

#include "vexp/base/error.hpp"
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace vexp::media {

// Errors name the file.
struct MediaError : base::Error {
  using base::Error::Error;
};

struct Rect {
  int x = 0, y = 0, w = 0, h = 0;
};

// A frame rate num / den frames per second (29.97 is 30000 / 1001).
struct Rational {
  int num = 0, den = 1;
};

// What a scan of the container's packets tells (no decoding).
struct VideoIndex {
  std::vector<int64_t> pts;      // presentation timestamps, sorted: frame k has pts[k]
  std::vector<int64_t> key_pts;  // keyframes' timestamps, sorted
  int width = 0, height = 0;
  double seconds_per_tick = 0;   // stream time base
  Rational frame_rate;           // the stream's average frame rate (25/1 when the container tells none)
  int64_t frames() const { return static_cast<int64_t>(pts.size()); }
};

class VideoReader {
 public:
  // Opens `path`; scans its packets unless `cached` (a previous scan) is given.
  explicit VideoReader(const std::string& path, std::shared_ptr<const VideoIndex> cached = nullptr);
  ~VideoReader();
  VideoReader(const VideoReader&) = delete;
  VideoReader& operator=(const VideoReader&) = delete;

  const std::shared_ptr<const VideoIndex>& index() const { return index_; }
  int64_t frames() const { return index_->frames(); }
  int width() const { return index_->width; }
  int height() const { return index_->height; }

  // Decodes frames `indices` (any order, repeats allowed) and writes frame
  // indices[k], cropped to `crop` and scaled to out_w x out_h, as packed 8-bit
  // pixels (channels 1: gray, 3: RGB) at out + k * out_w * out_h * channels.
  void read(const std::vector<int64_t>& indices, Rect crop, int out_w, int out_h, int channels, uint8_t* out);

  // Frames the decoder produced in the last read, wanted or not (skipped
  // non-reference frames are not decoded and not counted; for tests and benchmarks).
  int64_t decoded_frames() const { return decoded_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::shared_ptr<const VideoIndex> index_;
  std::string path_;
  int64_t decoded_ = 0;
};

// JPEG: header only.
void jpeg_size(const std::string& path, int* width, int* height);
// Decodes `path`, crops and scales as VideoReader::read does (one image).
void read_jpeg(const std::string& path, Rect crop, int out_w, int out_h, int channels, uint8_t* out);
// Writes packed 8-bit pixels as a JPEG. chroma: 444 or 420 (colour sampled at full
// or half resolution, as FFmpeg's yuvj444p / yuvj420p); 0: 4:4:4 when quality >= 90,
// else 4:2:0. Gray images have no chroma.
void write_jpeg(const std::string& path, const uint8_t* pixels, int width, int height, int channels, int quality,
                int chroma = 0);

// H.264 (libx264) writer for generated datasets: frames are packed gray or RGB.
class VideoWriter {
 public:
  // crf: libx264 quality (0 lossless); gop: keyframe interval.
  VideoWriter(const std::string& path, int width, int height, int channels, int fps, int crf, int gop);
  // The same at a fractional frame rate (a re-encoded video keeps its source's rate).
  VideoWriter(const std::string& path, int width, int height, int channels, Rational fps, int crf, int gop);
  ~VideoWriter();
  VideoWriter(const VideoWriter&) = delete;
  VideoWriter& operator=(const VideoWriter&) = delete;
  void write(const uint8_t* pixels);
  void close();  // flushes and finishes the file (also done by the destructor, errors ignored there)

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string path_;
};

// What vexp calls a good video, in `vexp data prepare` (every mode) and `vexp data
// check`: it opens, has frames, and every frame its packet index lists decodes.
// Returns the frame count; throws MediaError naming the file (and the first frame
// that could not be decoded). Costs a full decode (docs/data.md, "What a good video is").
int64_t verify_video(const std::string& path);

// ---------------------------------------------------------------- one clip
// TSN's test sampling of `count` frames from a video of `frames`: the centre of
// each of `count` equal segments, int(seg / 2 + seg * i) with seg = frames / count.
std::vector<int64_t> segment_centres(int64_t frames, int64_t count);

struct CentreClip {
  int frames = 8;          // segment centres sampled
  int width = 224, height = 224;  // the centre crop
  int short_side = 256;    // the frame is first resized so that its shorter side is this
  int channels = 3;        // 1: gray, 3: RGB
};

// The segment centres of `path`, each resized (aspect kept, at least width x height)
// and centre-cropped: frames x height x width x channels packed 8-bit pixels.
// Throws MediaError naming the file.
std::vector<uint8_t> read_centre_clip(const std::string& path, const CentreClip& clip);

// Quiets FFmpeg's own logging (its errors are reported through MediaError).
void quiet_ffmpeg_logs();

// False when vexp was built with -DVEXP_VIDEO=OFF (no libavformat/libavcodec, as
// from the GPU bundle): JPEG frame folders decode, and every VideoReader /
// VideoWriter fails with MediaError("'path': " + kNoVideoMessage).
bool video_supported();
inline constexpr const char* kNoVideoMessage =
    "video decoding was not built into this vexp (cmake -DVEXP_VIDEO=OFF, no FFmpeg): only JPEG frame folders "
    "can be read (docs/gpu.md)";

}  // namespace vexp::media
