// Video reading and writing (FFmpeg's libavformat and libavcodec): built when
// VEXP_VIDEO is ON (the default); video_off.cpp stands in for it otherwise.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <map>
#include <mutex>
#include <set>

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/imgutils.h>
#include <libavutil/opt.h>
#include <libavutil/pixdesc.h>
#include <libswscale/swscale.h>
}

#include "convert.hpp"
#include "vexp/base/files.hpp"
#include "vexp/media/media.hpp"

namespace vexp::media {

using detail::convert;
using detail::fail;
using detail::out_format;

namespace {

std::string av_error(int code) {
  char buf[AV_ERROR_MAX_STRING_SIZE] = {0};
  av_strerror(code, buf, sizeof buf);
  return buf;
}

// The file's descriptor as FFmpeg's input (read and seek on it): FFmpeg never opens the
// path itself, so what it reads is the regular file checked at open, not a FIFO or a
// device put in its place (which its own open would wait on, or read without end).
int fd_read(void* opaque, uint8_t* buf, int size) {
  const int fd = *static_cast<int*>(opaque);
  for (;;) {
    const ssize_t r = ::read(fd, buf, static_cast<size_t>(size));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return AVERROR(errno);
    return r == 0 ? AVERROR_EOF : static_cast<int>(r);
  }
}

int64_t fd_seek(void* opaque, int64_t offset, int whence) {
  const int fd = *static_cast<int*>(opaque);
  if (whence == AVSEEK_SIZE) {
    struct stat st {};
    return ::fstat(fd, &st) == 0 ? static_cast<int64_t>(st.st_size) : AVERROR(errno);
  }
  const off_t r = ::lseek(fd, static_cast<off_t>(offset), whence & ~AVSEEK_FORCE);
  return r < 0 ? AVERROR(errno) : static_cast<int64_t>(r);
}

}  // namespace

bool video_supported() { return true; }

void quiet_ffmpeg_logs() { av_log_set_level(AV_LOG_FATAL); }

// ---------------------------------------------------------------- reading video

struct VideoReader::Impl {
  int fd = -1;
  AVIOContext* io = nullptr;
  AVFormatContext* fmt = nullptr;
  AVCodecContext* codec = nullptr;
  AVPacket* pkt = nullptr;
  AVFrame* frame = nullptr;
  SwsContext* sws = nullptr;
  int stream = -1;
  ~Impl() {
    sws_freeContext(sws);
    av_frame_free(&frame);
    av_packet_free(&pkt);
    avcodec_free_context(&codec);
    avformat_close_input(&fmt);  // leaves the custom `io` to its owner
    if (io) av_freep(&io->buffer);
    avio_context_free(&io);
    if (fd >= 0) ::close(fd);
  }
};

VideoReader::VideoReader(const std::string& path, std::shared_ptr<const VideoIndex> cached)
    : impl_(std::make_unique<Impl>()), path_(path) {
  Impl& m = *impl_;
  // Opened without waiting (a FIFO has no writer) and read only when it is a regular file.
  m.fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (m.fd < 0) fail(path, std::string("cannot open: ") + std::strerror(errno));
  struct stat info {};
  if (::fstat(m.fd, &info) != 0) fail(path, std::string("cannot open: ") + std::strerror(errno));
  if (!S_ISREG(info.st_mode))
    throw MediaError("'" + path + "' is " + base::file_kind(info.st_mode) + ", not a regular file");
  constexpr int kIoBuffer = 1 << 16;
  auto* buffer = static_cast<unsigned char*>(av_malloc(kIoBuffer));
  if (buffer) m.io = avio_alloc_context(buffer, kIoBuffer, 0, &m.fd, fd_read, nullptr, fd_seek);
  if (!m.io) {
    av_free(buffer);
    fail(path, "cannot open: out of memory");
  }
  m.fmt = avformat_alloc_context();
  if (!m.fmt) fail(path, "cannot open: out of memory");
  m.fmt->pb = m.io;
  int rc = avformat_open_input(&m.fmt, path.c_str(), nullptr, nullptr);  // frees m.fmt on failure
  if (rc < 0) fail(path, "cannot open: " + av_error(rc));
  // Containers with headers (mp4, mkv) describe the stream without probing
  // frames; the others (avi, raw streams) need avformat_find_stream_info.
  m.stream = av_find_best_stream(m.fmt, AVMEDIA_TYPE_VIDEO, -1, -1, nullptr, 0);
  if (m.stream < 0 || m.fmt->streams[m.stream]->codecpar->width <= 0 ||
      m.fmt->streams[m.stream]->codecpar->format < 0) {
    rc = avformat_find_stream_info(m.fmt, nullptr);
    if (rc < 0) fail(path, "cannot read stream info: " + av_error(rc));
    m.stream = av_find_best_stream(m.fmt, AVMEDIA_TYPE_VIDEO, -1, -1, nullptr, 0);
  }
  if (m.stream < 0) fail(path, "no video stream");
  AVStream* st = m.fmt->streams[m.stream];
  const AVCodec* dec = avcodec_find_decoder(st->codecpar->codec_id);
  if (!dec) fail(path, "no decoder for its codec");
  m.codec = avcodec_alloc_context3(dec);
  avcodec_parameters_to_context(m.codec, st->codecpar);
  m.codec->thread_count = 1;  // clips are decoded in parallel, one per loader thread
  rc = avcodec_open2(m.codec, dec, nullptr);
  if (rc < 0) fail(path, "cannot open decoder: " + av_error(rc));
  m.pkt = av_packet_alloc();
  m.frame = av_frame_alloc();
  for (unsigned i = 0; i < m.fmt->nb_streams; ++i)
    if (static_cast<int>(i) != m.stream) m.fmt->streams[i]->discard = AVDISCARD_ALL;

  if (cached) {
    index_ = std::move(cached);
    return;
  }
  auto idx = std::make_shared<VideoIndex>();
  idx->width = st->codecpar->width;
  idx->height = st->codecpar->height;
  idx->seconds_per_tick = av_q2d(st->time_base);
  AVRational rate = st->avg_frame_rate.num > 0 && st->avg_frame_rate.den > 0 ? st->avg_frame_rate : st->r_frame_rate;
  if (rate.num <= 0 || rate.den <= 0) rate = AVRational{25, 1};
  idx->frame_rate = Rational{rate.num, rate.den};
  int64_t last = AV_NOPTS_VALUE;
  while ((rc = av_read_frame(m.fmt, m.pkt)) >= 0) {
    // Packets the container marks discarded (edit lists) are never presented.
    if (m.pkt->stream_index == m.stream && !(m.pkt->flags & AV_PKT_FLAG_DISCARD)) {
      int64_t t = m.pkt->pts != AV_NOPTS_VALUE ? m.pkt->pts : m.pkt->dts;
      if (t == AV_NOPTS_VALUE) t = last == AV_NOPTS_VALUE ? 0 : last + 1;  // no timestamps at all
      last = t;
      idx->pts.push_back(t);
      if (m.pkt->flags & AV_PKT_FLAG_KEY) idx->key_pts.push_back(t);
    }
    av_packet_unref(m.pkt);
  }
  if (rc != AVERROR_EOF) fail(path, "cannot read: " + av_error(rc));
  std::sort(idx->pts.begin(), idx->pts.end());
  idx->pts.erase(std::unique(idx->pts.begin(), idx->pts.end()), idx->pts.end());
  std::sort(idx->key_pts.begin(), idx->key_pts.end());
  if (idx->pts.empty()) fail(path, "has no video frames");
  if (idx->key_pts.empty()) idx->key_pts.push_back(idx->pts.front());
  if (idx->width <= 0 || idx->height <= 0) fail(path, "has no frame size");
  index_ = std::move(idx);
}

VideoReader::~VideoReader() = default;

void VideoReader::read(const std::vector<int64_t>& indices, Rect crop, int out_w, int out_h, int channels,
                       uint8_t* out) {
  Impl& m = *impl_;
  const VideoIndex& idx = *index_;
  decoded_ = 0;
  if (indices.empty()) return;
  // Wanted pts -> output slots.
  std::map<int64_t, std::vector<size_t>> wanted;
  for (size_t k = 0; k < indices.size(); ++k) {
    const int64_t i = indices[k];
    if (i < 0 || i >= idx.frames())
      fail(path_, "frame " + std::to_string(i) + " requested, the video has " + std::to_string(idx.frames()));
    wanted[idx.pts[static_cast<size_t>(i)]].push_back(k);
  }
  const size_t frame_bytes = static_cast<size_t>(out_w) * out_h * channels;
  auto key_before = [&](int64_t t) {
    auto it = std::upper_bound(idx.key_pts.begin(), idx.key_pts.end(), t);
    return it == idx.key_pts.begin() ? idx.key_pts.front() : *(it - 1);
  };
  auto seek = [&](int64_t key) {
    int rc = av_seek_frame(m.fmt, m.stream, key, AVSEEK_FLAG_BACKWARD);
    if (rc < 0) rc = av_seek_frame(m.fmt, m.stream, key, AVSEEK_FLAG_BACKWARD | AVSEEK_FLAG_ANY);
    if (rc < 0) fail(path_, "cannot seek: " + av_error(rc));
    avcodec_flush_buffers(m.codec);
  };
  int64_t last_frame_pts = INT64_MIN;
  seek(key_before(wanted.begin()->first));

  auto take_frames = [&]() {
    for (;;) {
      int rc = avcodec_receive_frame(m.codec, m.frame);
      if (rc == AVERROR(EAGAIN) || rc == AVERROR_EOF) return;
      if (rc < 0) fail(path_, "cannot decode: " + av_error(rc));
      ++decoded_;
      int64_t t = m.frame->best_effort_timestamp;
      if (t == AV_NOPTS_VALUE) t = m.frame->pts;
      last_frame_pts = t;
      auto it = wanted.find(t);
      if (it != wanted.end()) {
        if (m.frame->width != idx.width || m.frame->height != idx.height)
          fail(path_, "changes frame size mid-stream");
        convert(&m.sws, m.frame->data, m.frame->linesize, static_cast<AVPixelFormat>(m.frame->format), idx.width,
                idx.height, crop, out_w, out_h, channels, out + it->second[0] * frame_bytes, path_,
                m.frame->color_range == AVCOL_RANGE_JPEG || m.frame->format == AV_PIX_FMT_YUVJ420P ||
                    m.frame->format == AV_PIX_FMT_YUVJ444P || m.frame->format == AV_PIX_FMT_YUVJ422P);
        for (size_t j = 1; j < it->second.size(); ++j)
          std::memcpy(out + it->second[j] * frame_bytes, out + it->second[0] * frame_bytes, frame_bytes);
        wanted.erase(it);
      }
      av_frame_unref(m.frame);
    }
  };

  // Wanted frames whose packet was not sent yet. Once every one was sent, the
  // decoder holds all they need (references precede in decoding order): drain
  // it instead of decoding the packets its reordering delay would take first.
  std::set<int64_t> unsent;
  auto reset_unsent = [&] {
    unsent.clear();
    for (const auto& w : wanted) unsent.insert(w.first);
  };
  reset_unsent();
  bool flushed = false;
  while (!wanted.empty()) {
    // Jump ahead when the next wanted frame lies behind a keyframe we have not reached.
    const int64_t next_key = key_before(wanted.begin()->first);
    if (last_frame_pts != INT64_MIN && next_key > last_frame_pts && !flushed) {
      seek(next_key);
      last_frame_pts = INT64_MIN;
      reset_unsent();
    }
    int rc = av_read_frame(m.fmt, m.pkt);
    if (rc == AVERROR_EOF) {
      if (flushed) break;
      flushed = true;
      avcodec_send_packet(m.codec, nullptr);
      take_frames();
      break;
    }
    if (rc < 0) fail(path_, "cannot read: " + av_error(rc));
    if (m.pkt->stream_index != m.stream) {
      av_packet_unref(m.pkt);
      continue;
    }
    const int64_t t = m.pkt->pts;
    // The next timed packet after the last wanted one: drain (a packet without a
    // timestamp may be the second field of the last frame and is sent first).
    if (unsent.empty() && t != AV_NOPTS_VALUE) {
      av_packet_unref(m.pkt);
      flushed = true;
      avcodec_send_packet(m.codec, nullptr);
      take_frames();
      break;
    }
    const bool needed = t == AV_NOPTS_VALUE || wanted.count(t) || (m.pkt->flags & AV_PKT_FLAG_KEY);
    m.codec->skip_frame = needed ? AVDISCARD_DEFAULT : AVDISCARD_NONREF;
    rc = avcodec_send_packet(m.codec, m.pkt);
    av_packet_unref(m.pkt);
    if (rc < 0 && rc != AVERROR(EAGAIN) && rc != AVERROR_INVALIDDATA)
      fail(path_, "cannot decode: " + av_error(rc));
    if (t != AV_NOPTS_VALUE) unsent.erase(t);
    take_frames();
  }
  m.codec->skip_frame = AVDISCARD_DEFAULT;
  if (!wanted.empty()) {
    int64_t missing = 0;
    const int64_t t = wanted.begin()->first;
    missing = std::lower_bound(idx.pts.begin(), idx.pts.end(), t) - idx.pts.begin();
    fail(path_, "frame " + std::to_string(missing) + " of " + std::to_string(idx.frames()) +
                    " could not be decoded (truncated or corrupt file)");
  }
}

// ---------------------------------------------------------------- writing video

struct VideoWriter::Impl {
  AVFormatContext* fmt = nullptr;
  AVCodecContext* codec = nullptr;
  AVStream* st = nullptr;
  AVFrame* frame = nullptr;
  AVPacket* pkt = nullptr;
  SwsContext* sws = nullptr;
  int width = 0, height = 0, channels = 1;
  int64_t next_pts = 0;
  bool open = false;
  ~Impl() {
    sws_freeContext(sws);
    av_frame_free(&frame);
    av_packet_free(&pkt);
    avcodec_free_context(&codec);
    if (fmt) {
      if (fmt->pb) avio_closep(&fmt->pb);
      avformat_free_context(fmt);
    }
  }
};

namespace {
void drain(VideoWriter* /*unused*/, AVFormatContext* fmt, AVCodecContext* codec, AVStream* st, AVPacket* pkt,
           const std::string& path) {
  for (;;) {
    int rc = avcodec_receive_packet(codec, pkt);
    if (rc == AVERROR(EAGAIN) || rc == AVERROR_EOF) return;
    if (rc < 0) fail(path, "cannot encode: " + av_error(rc));
    if (pkt->duration <= 0) pkt->duration = 1;  // one frame: the muxer's edit list keeps the last frame
    av_packet_rescale_ts(pkt, codec->time_base, st->time_base);
    pkt->stream_index = st->index;
    rc = av_interleaved_write_frame(fmt, pkt);
    if (rc < 0) fail(path, "cannot write: " + av_error(rc));
  }
}
}  // namespace

VideoWriter::VideoWriter(const std::string& path, int width, int height, int channels, int fps, int crf, int gop)
    : VideoWriter(path, width, height, channels, Rational{fps, 1}, crf, gop) {}

VideoWriter::VideoWriter(const std::string& path, int width, int height, int channels, Rational fps, int crf,
                         int gop)
    : impl_(std::make_unique<Impl>()), path_(path) {
  if (fps.num <= 0 || fps.den <= 0) fail(path, "frame rate must be positive");
  Impl& m = *impl_;
  m.width = width;
  m.height = height;
  m.channels = channels;
  int rc = avformat_alloc_output_context2(&m.fmt, nullptr, nullptr, path.c_str());
  if (rc < 0 || !m.fmt) fail(path, "cannot create: " + av_error(rc));
  const AVCodec* enc = avcodec_find_encoder_by_name("libx264");
  if (!enc) enc = avcodec_find_encoder(AV_CODEC_ID_H264);
  if (!enc) fail(path, "no H.264 encoder in this FFmpeg");
  m.st = avformat_new_stream(m.fmt, nullptr);
  m.codec = avcodec_alloc_context3(enc);
  m.codec->width = width;
  m.codec->height = height;
  m.codec->pix_fmt = AV_PIX_FMT_YUV420P;
  m.codec->time_base = AVRational{fps.den, fps.num};
  m.codec->framerate = AVRational{fps.num, fps.den};
  m.codec->gop_size = gop;
  m.codec->thread_count = 1;
  if (m.fmt->oformat->flags & AVFMT_GLOBALHEADER) m.codec->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
  av_opt_set(m.codec->priv_data, "preset", "veryfast", 0);
  av_opt_set(m.codec->priv_data, "crf", std::to_string(crf).c_str(), 0);
  // Exactly `gop` frames between keyframes, no scene-cut keyframes.
  av_opt_set(m.codec->priv_data, "x264-params", ("keyint_min=" + std::to_string(gop) + ":scenecut=0").c_str(), 0);
  rc = avcodec_open2(m.codec, enc, nullptr);
  if (rc < 0) fail(path, "cannot open the H.264 encoder: " + av_error(rc));
  avcodec_parameters_from_context(m.st->codecpar, m.codec);
  m.st->time_base = m.codec->time_base;
  rc = avio_open(&m.fmt->pb, path.c_str(), AVIO_FLAG_WRITE);
  if (rc < 0) fail(path, "cannot create: " + av_error(rc));
  rc = avformat_write_header(m.fmt, nullptr);
  if (rc < 0) fail(path, "cannot write: " + av_error(rc));
  m.frame = av_frame_alloc();
  m.frame->format = m.codec->pix_fmt;
  m.frame->width = width;
  m.frame->height = height;
  av_frame_get_buffer(m.frame, 0);
  m.pkt = av_packet_alloc();
  m.sws = sws_getContext(width, height, out_format(channels), width, height, AV_PIX_FMT_YUV420P, SWS_BILINEAR,
                         nullptr, nullptr, nullptr);
  m.open = true;
}

void VideoWriter::write(const uint8_t* pixels) {
  Impl& m = *impl_;
  av_frame_make_writable(m.frame);
  const uint8_t* src[4] = {pixels, nullptr, nullptr, nullptr};
  int ls[4] = {m.width * m.channels, 0, 0, 0};
  sws_scale(m.sws, src, ls, 0, m.height, m.frame->data, m.frame->linesize);
  m.frame->pts = m.next_pts++;
  int rc = avcodec_send_frame(m.codec, m.frame);
  if (rc < 0) fail(path_, "cannot encode: " + av_error(rc));
  drain(this, m.fmt, m.codec, m.st, m.pkt, path_);
}

void VideoWriter::close() {
  Impl& m = *impl_;
  if (!m.open) return;
  m.open = false;
  avcodec_send_frame(m.codec, nullptr);
  drain(this, m.fmt, m.codec, m.st, m.pkt, path_);
  int rc = av_write_trailer(m.fmt);
  if (rc < 0) fail(path_, "cannot finish: " + av_error(rc));
}

VideoWriter::~VideoWriter() {
  try {
    close();
  } catch (...) {
  }
}

}  // namespace vexp::media
