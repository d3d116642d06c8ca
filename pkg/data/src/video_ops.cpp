#include "vexp/data/video_ops.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <vector>

#include "vexp/base/error.hpp"
#include "vexp/base/files.hpp"
#include "vexp/base/text.hpp"
#include "vexp/media/media.hpp"

namespace vexp::data {
namespace fs = std::filesystem;

void short_side_size(int width, int height, int short_side, int multiple, int* out_w, int* out_h) {
  if (short_side <= 0) {
    *out_w = width;
    *out_h = height;
    return;
  }
  auto other = [&](int long_in, int short_in) {
    const double v = static_cast<double>(long_in) * short_side / (static_cast<double>(short_in) * multiple);
    return std::max(multiple, static_cast<int>(std::lround(v)) * multiple);
  };
  if (width >= height) {
    *out_h = short_side;
    *out_w = other(width, height);
  } else {
    *out_w = short_side;
    *out_h = other(height, width);
  }
}

std::string partial_name(const std::string& dst, bool is_video_file) {
  if (!is_video_file) return dst + ".partial";
  fs::path p(dst);
  return (p.parent_path() / (p.stem().string() + ".partial" + p.extension().string())).string();
}

namespace {
// Calls sink(frame index, pixels) for every frame of `r`, scaled to out_w x out_h RGB.
template <class Sink>
void for_each_frame(media::VideoReader& r, int out_w, int out_h, Sink sink) {
  const int64_t nf = r.frames(), chunk = 32;
  std::vector<uint8_t> buf(static_cast<size_t>(chunk) * out_w * out_h * 3);
  for (int64_t f0 = 0; f0 < nf; f0 += chunk) {
    std::vector<int64_t> idx;
    for (int64_t f = f0; f < std::min(nf, f0 + chunk); ++f) idx.push_back(f);
    r.read(idx, {0, 0, r.width(), r.height()}, out_w, out_h, 3, buf.data());
    for (size_t k = 0; k < idx.size(); ++k) sink(idx[k], buf.data() + k * out_w * out_h * 3);
  }
}
}  // namespace

int64_t extract_frames(const std::string& src, const std::string& dst, int short_side, const JpegOptions& jpeg,
                       const std::string& within, const std::function<void(int64_t)>& before_rename) {
  const fs::path partial = partial_name(dst, false);
  // The second line of defence behind the name checks: nothing outside the output
  // folder is ever removed.
  for (const fs::path& p : {fs::path(dst), partial})
    if (!base::is_within(within, p))
      throw base::failure("refusing to replace '" + base::printable(p.string()) + "': it is not inside '" +
                               base::printable(within) + "'");
  fs::remove_all(partial);
  try {
    fs::create_directories(partial);
    media::VideoReader r(src);
    int w = 0, h = 0;
    short_side_size(r.width(), r.height(), short_side, 1, &w, &h);
    for_each_frame(r, w, h, [&](int64_t f, const uint8_t* px) {
      char name[32];
      std::snprintf(name, sizeof name, "img_%05lld.jpg", static_cast<long long>(f + 1));
      media::write_jpeg((partial / name).string(), px, w, h, 3, jpeg.quality, jpeg.chroma);
    });
    fs::remove_all(dst);
    if (before_rename) before_rename(r.frames());
    fs::rename(partial, dst);  // the folder appears complete or not at all
    return r.frames();
  } catch (...) {
    std::error_code ec;
    fs::remove_all(partial, ec);
    throw;
  }
}

int64_t reencode_video(const std::string& src, const std::string& dst, int short_side, int crf, int gop) {
  const fs::path partial = partial_name(dst, true);
  try {
    fs::create_directories(fs::path(dst).parent_path());
    media::VideoReader r(src);
    int w = 0, h = 0;
    short_side_size(r.width(), r.height(), short_side, 2, &w, &h);
    {
      media::VideoWriter out(partial.string(), w, h, 3, r.index()->frame_rate, crf, gop);
      for_each_frame(r, w, h, [&](int64_t, const uint8_t* px) { out.write(px); });
      out.close();
    }
    fs::rename(partial, dst);
    return r.frames();
  } catch (...) {
    std::error_code ec;
    fs::remove(partial, ec);
    throw;
  }
}

}  // namespace vexp::data
