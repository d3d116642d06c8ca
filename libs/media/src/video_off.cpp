// Built instead of video.cpp when VEXP_VIDEO is OFF (no libavformat/libavcodec, as
// with the GPU bundle: docs/gpu.md): every video call fails with one line naming
// the file and saying that this vexp reads JPEG frame folders only.
#include <string>

#include "vexp/media/media.hpp"

namespace vexp::media {

namespace {

[[noreturn]] void no_video(const std::string& path) {
  throw MediaError("'" + path + "': " + kNoVideoMessage);
}

}  // namespace

bool video_supported() { return false; }

void quiet_ffmpeg_logs() {}  // no FFmpeg, nothing to quiet

struct VideoReader::Impl {};

VideoReader::VideoReader(const std::string& path, std::shared_ptr<const VideoIndex> /*cached*/) : path_(path) {
  no_video(path);
}
VideoReader::~VideoReader() = default;
void VideoReader::read(const std::vector<int64_t>& /*indices*/, Rect /*crop*/, int /*out_w*/, int /*out_h*/,
                       int /*channels*/, uint8_t* /*out*/) {
  no_video(path_);
}

struct VideoWriter::Impl {};

VideoWriter::VideoWriter(const std::string& path, int width, int height, int channels, int fps, int crf, int gop)
    : VideoWriter(path, width, height, channels, Rational{fps, 1}, crf, gop) {}
VideoWriter::VideoWriter(const std::string& path, int /*width*/, int /*height*/, int /*channels*/, Rational /*fps*/,
                         int /*crf*/, int /*gop*/)
    : path_(path) {
  no_video(path);
}
void VideoWriter::write(const uint8_t* /*pixels*/) { no_video(path_); }
void VideoWriter::close() { no_video(path_); }
VideoWriter::~VideoWriter() = default;

}  // namespace vexp::media
