#include "vexp/media/media.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>

extern "C" {
#include <libavutil/pixdesc.h>
#include <libswscale/swscale.h>
}
#include <turbojpeg.h>

#include "convert.hpp"
#include "vexp/base/files.hpp"

namespace vexp::media {

namespace detail {

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw MediaError("'" + path + "': " + what);
}

AVPixelFormat out_format(int channels) { return channels == 1 ? AV_PIX_FMT_GRAY8 : AV_PIX_FMT_RGB24; }

void convert(SwsContext** sws, const uint8_t* const src_data[4], const int src_linesize[4], AVPixelFormat fmt,
             int src_w, int src_h, Rect crop, int out_w, int out_h, int channels, uint8_t* out,
             const std::string& path, bool src_full_range) {
  if (crop.w <= 0 || crop.h <= 0) crop = {0, 0, src_w, src_h};
  const AVPixFmtDescriptor* desc = av_pix_fmt_desc_get(fmt);
  if (!desc) fail(path, "unknown pixel format");
  const bool full = crop.x == 0 && crop.y == 0 && crop.w == src_w && crop.h == src_h;
  if (!full && (desc->flags & (AV_PIX_FMT_FLAG_BITSTREAM | AV_PIX_FMT_FLAG_HWACCEL)))
    fail(path, std::string("cannot crop pixel format ") + desc->name);
  crop.x = std::clamp(crop.x, 0, src_w - 1);
  crop.y = std::clamp(crop.y, 0, src_h - 1);
  crop.x &= ~((1 << desc->log2_chroma_w) - 1);
  crop.y &= ~((1 << desc->log2_chroma_h) - 1);
  crop.w = std::min(crop.w, src_w - crop.x);
  crop.h = std::min(crop.h, src_h - crop.y);
  const uint8_t* planes[4] = {src_data[0], src_data[1], src_data[2], src_data[3]};
  if (!full) {
    const bool rgb = desc->flags & AV_PIX_FMT_FLAG_RGB;
    bool done[4] = {false, false, false, false};
    for (int c = 0; c < desc->nb_components; ++c) {
      const AVComponentDescriptor& comp = desc->comp[c];
      if (done[comp.plane] || !planes[comp.plane]) continue;
      done[comp.plane] = true;
      const bool chroma = !rgb && (c == 1 || c == 2);
      const int sx = chroma ? desc->log2_chroma_w : 0, sy = chroma ? desc->log2_chroma_h : 0;
      planes[comp.plane] += static_cast<ptrdiff_t>(crop.y >> sy) * src_linesize[comp.plane] +
                            static_cast<ptrdiff_t>(crop.x >> sx) * comp.step;
    }
  }
  *sws = sws_getCachedContext(*sws, crop.w, crop.h, fmt, out_w, out_h, out_format(channels), SWS_BILINEAR,
                              nullptr, nullptr, nullptr);
  if (!*sws) fail(path, "cannot convert this pixel format");
  // Video luma is limited range (16-235) unless flagged full; gray and RGB output
  // are full range, as JPEG decoding gives them.
  if (!(desc->flags & AV_PIX_FMT_FLAG_RGB) && desc->nb_components >= 1) {
    int* inv = nullptr;
    int* tab = nullptr;
    int src_range = 0, dst_range = 0, brightness = 0, contrast = 0, saturation = 0;
    if (sws_getColorspaceDetails(*sws, &inv, &src_range, &tab, &dst_range, &brightness, &contrast, &saturation) >= 0) {
      const bool yuv_src = fmt != AV_PIX_FMT_GRAY8 || !src_full_range;
      sws_setColorspaceDetails(*sws, inv, yuv_src ? (src_full_range ? 1 : 0) : 1, tab, 1, brightness, contrast,
                               saturation);
    }
  }
  uint8_t* dst[4] = {out, nullptr, nullptr, nullptr};
  int dst_linesize[4] = {out_w * channels, 0, 0, 0};
  sws_scale(*sws, planes, src_linesize, 0, crop.h, dst, dst_linesize);
}

}  // namespace detail

using detail::convert;
using detail::fail;
using detail::out_format;

// ---------------------------------------------------------------- one clip

int64_t verify_video(const std::string& path) {
  VideoReader r(path);
  const int64_t n = r.frames();
  if (n <= 0) throw MediaError("'" + path + "': the video has no frames");
  // Every frame in one read (one pass of the decoder), each converted to 2 x 2 gray
  // pixels: the decoding is the check, the conversion only proves the frame came out.
  constexpr int kSide = 2;
  std::vector<int64_t> idx(static_cast<size_t>(n));
  for (int64_t f = 0; f < n; ++f) idx[static_cast<size_t>(f)] = f;
  std::vector<uint8_t> buf(static_cast<size_t>(n) * kSide * kSide);
  r.read(idx, Rect{0, 0, r.width(), r.height()}, kSide, kSide, 1, buf.data());
  return n;
}

std::vector<int64_t> segment_centres(int64_t frames, int64_t count) {
  std::vector<int64_t> idx;
  const double seg = static_cast<double>(frames) / static_cast<double>(count);
  for (int64_t i = 0; i < count; ++i) {
    const auto k = static_cast<int64_t>(seg / 2.0 + seg * static_cast<double>(i));
    idx.push_back(std::clamp<int64_t>(k, 0, frames - 1));
  }
  return idx;
}

std::vector<uint8_t> read_centre_clip(const std::string& path, const CentreClip& c) {
  VideoReader r(path);
  // The whole frame scaled to (sw, sh), then the centre cut out of it: resize, then
  // crop, as the TSN / TSM test pipelines do.
  const double scale = static_cast<double>(c.short_side) / std::min(r.width(), r.height());
  const int sw = std::max(c.width, static_cast<int>(std::lround(r.width() * scale)));
  const int sh = std::max(c.height, static_cast<int>(std::lround(r.height() * scale)));
  const size_t px = static_cast<size_t>(c.channels);
  std::vector<uint8_t> scaled(static_cast<size_t>(c.frames) * sw * sh * px);
  r.read(segment_centres(r.frames(), c.frames), Rect{}, sw, sh, c.channels, scaled.data());
  const int x0 = (sw - c.width) / 2, y0 = (sh - c.height) / 2;
  std::vector<uint8_t> out(static_cast<size_t>(c.frames) * c.width * c.height * px);
  uint8_t* dst = out.data();
  for (int t = 0; t < c.frames; ++t) {
    const uint8_t* frame = scaled.data() + static_cast<size_t>(t) * sw * sh * px;
    for (int y = 0; y < c.height; ++y, dst += c.width * px)
      std::memcpy(dst, frame + ((static_cast<size_t>(y0 + y) * sw) + x0) * px, c.width * px);
  }
  return out;
}

// ---------------------------------------------------------------- JPEG

namespace {

struct Tj {
  tjhandle h;
  explicit Tj(bool compress) : h(compress ? tjInitCompress() : tjInitDecompress()) {}
  ~Tj() {
    if (h) tjDestroy(h);
  }
};

// A frame file: a regular file of at most 64 MiB, opened without waiting (a FIFO
// or a device in a frame folder is one error naming it, never a hang).
std::vector<unsigned char> read_bytes(const std::string& path) {
  std::vector<unsigned char> bytes;
  base::read_file_chunks(
      path, base::kMaxTextFileBytes,
      [&](std::string_view piece) { bytes.insert(bytes.end(), piece.begin(), piece.end()); },
      [&](std::uint64_t size) { bytes.reserve(static_cast<size_t>(size)); });
  return bytes;
}

tjhandle decompressor() {
  thread_local Tj tj(false);
  return tj.h;
}

}  // namespace

void jpeg_size(const std::string& path, int* width, int* height) {
  std::vector<unsigned char> bytes = read_bytes(path);
  int sub = 0, cs = 0;
  if (tjDecompressHeader3(decompressor(), bytes.data(), bytes.size(), width, height, &sub, &cs) != 0)
    fail(path, std::string("not a JPEG: ") + tjGetErrorStr2(decompressor()));
}

void read_jpeg(const std::string& path, Rect crop, int out_w, int out_h, int channels, uint8_t* out) {
  std::vector<unsigned char> bytes = read_bytes(path);
  tjhandle h = decompressor();
  int w = 0, h_px = 0, sub = 0, cs = 0;
  if (tjDecompressHeader3(h, bytes.data(), bytes.size(), &w, &h_px, &sub, &cs) != 0)
    fail(path, std::string("not a JPEG: ") + tjGetErrorStr2(h));
  std::vector<uint8_t> full(static_cast<size_t>(w) * h_px * channels);
  if (tjDecompress2(h, bytes.data(), bytes.size(), full.data(), w, 0, h_px, channels == 1 ? TJPF_GRAY : TJPF_RGB,
                    TJFLAG_ACCURATEDCT) != 0)
    fail(path, std::string("cannot decode JPEG: ") + tjGetErrorStr2(h));
  thread_local struct SwsHolder {
    SwsContext* s = nullptr;
    ~SwsHolder() { sws_freeContext(s); }
  } sws;
  const uint8_t* data[4] = {full.data(), nullptr, nullptr, nullptr};
  int linesize[4] = {w * channels, 0, 0, 0};
  convert(&sws.s, data, linesize, out_format(channels), w, h_px, crop, out_w, out_h, channels, out, path);
}

void write_jpeg(const std::string& path, const uint8_t* pixels, int width, int height, int channels, int quality,
                int chroma) {
  if (chroma != 0 && chroma != 444 && chroma != 420) fail(path, "JPEG chroma must be 444 or 420");
  thread_local Tj tj(true);
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  const bool full = chroma == 0 ? quality >= 90 : chroma == 444;
  const int sub = channels == 1 ? TJSAMP_GRAY : full ? TJSAMP_444 : TJSAMP_420;
  if (tjCompress2(tj.h, pixels, width, 0, height, channels == 1 ? TJPF_GRAY : TJPF_RGB, &buf, &size, sub, quality,
                  TJFLAG_ACCURATEDCT) != 0)
    fail(path, std::string("cannot encode JPEG: ") + tjGetErrorStr2(tj.h));
  std::ofstream o(path, std::ios::binary);
  o.write(reinterpret_cast<const char*>(buf), static_cast<std::streamsize>(size));
  tjFree(buf);
  if (!o) fail(path, "cannot write");
}

}  // namespace vexp::media
