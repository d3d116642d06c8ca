#include "video_input.hpp"

#include <cmath>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <vector>

#include <ATen/ATen.h>

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/imgutils.h>
#include <libswscale/swscale.h>
}

namespace vexp::cli {
namespace {

std::string av_error(int code) {
  char buf[AV_ERROR_MAX_STRING_SIZE] = {0};
  av_strerror(code, buf, sizeof buf);
  return buf;
}

struct Decoder {
  AVFormatContext* fmt = nullptr;
  AVCodecContext* codec = nullptr;
  SwsContext* sws = nullptr;
  AVPacket* packet = nullptr;
  AVFrame* frame = nullptr;
  ~Decoder() {
    if (sws) sws_freeContext(sws);
    if (frame) av_frame_free(&frame);
    if (packet) av_packet_free(&packet);
    if (codec) avcodec_free_context(&codec);
    if (fmt) avformat_close_input(&fmt);
  }
};

}  // namespace

std::vector<int64_t> segment_centres(int64_t n, int64_t frames) {
  std::vector<int64_t> idx;
  const double seg = static_cast<double>(n) / static_cast<double>(frames);
  for (int64_t i = 0; i < frames; ++i) {
    int64_t k = static_cast<int64_t>(seg / 2.0 + seg * static_cast<double>(i));
    idx.push_back(std::min<int64_t>(std::max<int64_t>(k, 0), n - 1));
  }
  return idx;
}

at::Tensor decode_clip(const std::string& path, const ClipSampling& s) {
  auto fail = [&](const std::string& why) { return std::runtime_error("cannot decode video '" + path + "': " + why); };
  Decoder d;
  int rc = avformat_open_input(&d.fmt, path.c_str(), nullptr, nullptr);
  if (rc < 0) throw fail(av_error(rc));
  if ((rc = avformat_find_stream_info(d.fmt, nullptr)) < 0) throw fail(av_error(rc));
  const AVCodec* dec = nullptr;
  const int stream = av_find_best_stream(d.fmt, AVMEDIA_TYPE_VIDEO, -1, -1, &dec, 0);
  if (stream < 0 || !dec) throw fail("no decodable video stream");
  d.codec = avcodec_alloc_context3(dec);
  if (!d.codec) throw fail("out of memory");
  if ((rc = avcodec_parameters_to_context(d.codec, d.fmt->streams[stream]->codecpar)) < 0) throw fail(av_error(rc));
  d.codec->thread_count = 1;
  if ((rc = avcodec_open2(d.codec, dec, nullptr)) < 0) throw fail(av_error(rc));
  d.packet = av_packet_alloc();
  d.frame = av_frame_alloc();
  if (!d.packet || !d.frame) throw fail("out of memory");

  // Every frame, resized (short side) to RGB24; sampled once the count is known.
  std::vector<std::vector<uint8_t>> frames;
  int out_w = 0, out_h = 0;
  auto take = [&]() {
    const int w = d.frame->width, h = d.frame->height;
    if (w <= 0 || h <= 0) return;
    if (!d.sws) {
      const double scale = static_cast<double>(s.short_side) / std::min(w, h);
      out_w = std::max<int>(static_cast<int>(s.width), static_cast<int>(std::lround(w * scale)));
      out_h = std::max<int>(static_cast<int>(s.height), static_cast<int>(std::lround(h * scale)));
      d.sws = sws_getContext(w, h, static_cast<AVPixelFormat>(d.frame->format), out_w, out_h, AV_PIX_FMT_RGB24,
                             SWS_BILINEAR, nullptr, nullptr, nullptr);
      if (!d.sws) throw fail("unsupported pixel format");
    }
    std::vector<uint8_t> rgb(static_cast<size_t>(out_w) * out_h * 3);
    uint8_t* dst[4] = {rgb.data(), nullptr, nullptr, nullptr};
    int stride[4] = {out_w * 3, 0, 0, 0};
    sws_scale(d.sws, d.frame->data, d.frame->linesize, 0, h, dst, stride);
    frames.push_back(std::move(rgb));
  };
  auto drain = [&]() {
    for (;;) {
      int r = avcodec_receive_frame(d.codec, d.frame);
      if (r == AVERROR(EAGAIN) || r == AVERROR_EOF) return;
      if (r < 0) throw fail(av_error(r));
      take();
      av_frame_unref(d.frame);
    }
  };
  while ((rc = av_read_frame(d.fmt, d.packet)) >= 0) {
    if (d.packet->stream_index == stream) {
      int r = avcodec_send_packet(d.codec, d.packet);
      if (r < 0 && r != AVERROR(EAGAIN)) {
        av_packet_unref(d.packet);
        throw fail(av_error(r));
      }
      drain();
    }
    av_packet_unref(d.packet);
  }
  if (rc != AVERROR_EOF) throw fail(av_error(rc));
  avcodec_send_packet(d.codec, nullptr);
  drain();
  if (frames.empty()) throw fail("no frames");

  const std::vector<int64_t> idx = segment_centres(static_cast<int64_t>(frames.size()), s.frames);
  const int64_t y0 = (out_h - s.height) / 2, x0 = (out_w - s.width) / 2;
  at::Tensor clip = at::empty({s.frames, 3, s.height, s.width});
  const float mean[3] = {123.675f, 116.28f, 103.53f};
  const float stdv[3] = {58.395f, 57.12f, 57.375f};
  float* out = clip.data_ptr<float>();
  for (int64_t t = 0; t < s.frames; ++t) {
    const uint8_t* src = frames[static_cast<size_t>(idx[static_cast<size_t>(t)])].data();
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t y = 0; y < s.height; ++y)
        for (int64_t x = 0; x < s.width; ++x) {
          const uint8_t v = src[((y0 + y) * out_w + (x0 + x)) * 3 + c];
          out[((t * 3 + c) * s.height + y) * s.width + x] = (static_cast<float>(v) - mean[c]) / stdv[c];
        }
  }
  return clip;
}

}  // namespace vexp::cli
