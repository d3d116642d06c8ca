// libs/media's internals shared by the JPEG (media.cpp) and video (video.cpp) code.
#pragma once

#include <string>

extern "C" {
#include <libavutil/pixfmt.h>
}

#include "vexp/media/media.hpp"

struct SwsContext;

namespace vexp::media::detail {

// Throws MediaError("'path': what").
[[noreturn]] void fail(const std::string& path, const std::string& what);

// AV_PIX_FMT_GRAY8 for 1 channel, else AV_PIX_FMT_RGB24.
AVPixelFormat out_format(int channels);

// Crops (by moving the plane pointers) and scales one image into packed pixels.
// The crop origin is rounded down to the chroma grid of subsampled formats.
void convert(SwsContext** sws, const uint8_t* const src_data[4], const int src_linesize[4], AVPixelFormat fmt,
             int src_w, int src_h, Rect crop, int out_w, int out_h, int channels, uint8_t* out,
             const std::string& path, bool src_full_range = true);

}  // namespace vexp::media::detail
