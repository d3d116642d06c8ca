// Frame sampling and spatial views of the kinetics dataset (REFERENCE.md, "Data
// conventions"): which frames of a video a clip takes (TSN segments, dense
// windows) and which rectangle of a frame each view crops. Header-only and
// torch-free, so the kinetics plugin, its tests and tools/bench's
// kinetics_decode_floor share one copy of the formulas. Frame indices are 0-based
// (frame folders name index i `img_{i+1:05d}.jpg`).
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "vexp/rng.hpp"

namespace vexp::kinetics {

// Deterministic randomness (vexp/rng.hpp, the SDK's: clip transform plugins draw
// from the same generator the sampling does).
using ::vexp::Rng;
using ::vexp::splitmix64;

// TSN train: avg = nf // T; index_i = i*avg + randint(avg); when avg == 0:
// sorted random indices if nf > T, else zeros (official TSM code; with nf <= T
// every segment takes frame 0... the official code returns zeros there).
inline std::vector<int64_t> tsn_train(int64_t nf, int64_t T, Rng& rng) {
  std::vector<int64_t> idx(static_cast<size_t>(T), 0);
  const int64_t avg = nf / T;
  if (avg > 0) {
    for (int64_t i = 0; i < T; ++i) idx[i] = i * avg + rng.below(avg);
  } else if (nf > T) {  // unreachable (nf > T implies avg >= 1), kept for the formula's shape
    for (auto& v : idx) v = rng.below(nf);
    std::sort(idx.begin(), idx.end());
  }
  return idx;
}

// TSN test, clip c of `clips`: tick = nf / T; index_i = int(tick * (c + 0.5) / clips + tick * i).
// clips = 1 gives the official test indices int(tick / 2.0 + tick * i) (segment centres),
// computed in the same floating-point steps (tick * 0.5 is tick / 2.0 exactly), so an
// index never differs from the official code's by a rounding.
inline std::vector<int64_t> tsn_test(int64_t nf, int64_t T, int64_t clip = 0, int64_t clips = 1) {
  std::vector<int64_t> idx(static_cast<size_t>(T));
  const double tick = static_cast<double>(nf) / static_cast<double>(T);
  const double off = tick * (static_cast<double>(clip) + 0.5) / static_cast<double>(clips);
  for (int64_t i = 0; i < T; ++i)
    idx[i] = std::min<int64_t>(nf - 1, static_cast<int64_t>(off + tick * static_cast<double>(i)));
  return idx;
}

// twice_sample (official TSM): the centres, then the segment starts int(tick * i).
inline std::vector<int64_t> tsn_twice_starts(int64_t nf, int64_t T) {
  std::vector<int64_t> idx(static_cast<size_t>(T));
  const double tick = static_cast<double>(nf) / static_cast<double>(T);
  for (int64_t i = 0; i < T; ++i) idx[i] = static_cast<int64_t>(tick * static_cast<double>(i));
  return idx;
}

// Dense (I3D-style): a window of clip_len * interval frames, T = clip_len frames
// `interval` apart; train: random start in [0, nf - window] (0 when the video is
// shorter); indices wrap modulo nf.
inline std::vector<int64_t> dense_from(int64_t start, int64_t nf, int64_t clip_len, int64_t interval) {
  std::vector<int64_t> idx(static_cast<size_t>(clip_len));
  for (int64_t i = 0; i < clip_len; ++i) idx[i] = (start + i * interval) % nf;
  return idx;
}
inline std::vector<int64_t> dense_train(int64_t nf, int64_t clip_len, int64_t interval, Rng& rng) {
  const int64_t window = clip_len * interval;
  const int64_t start = nf > window ? rng.below(nf - window + 1) : 0;
  return dense_from(start, nf, clip_len, interval);
}
// Test: `clips` starts spread over [0, span], span = max(0, nf - window), as the
// official TSM code's np.linspace(0, span, clips, dtype=int) (both ends included,
// rounded down; computed in numpy's steps: c * (span / (clips - 1)), the last start
// `span` itself). One clip (the official code always takes 10): the window in the
// middle, start span / 2.
inline int64_t dense_test_start(int64_t nf, int64_t window, int64_t clip, int64_t clips) {
  const int64_t span = std::max<int64_t>(0, nf - window);
  if (clips <= 1) return span / 2;
  if (clip == clips - 1) return span;
  const double step = static_cast<double>(span) / static_cast<double>(clips - 1);
  return static_cast<int64_t>(static_cast<double>(clip) * step);
}
inline std::vector<int64_t> dense_test(int64_t nf, int64_t clip_len, int64_t interval, int64_t clip, int64_t clips) {
  return dense_from(dense_test_start(nf, clip_len * interval, clip, clips), nf, clip_len, interval);
}

// ---- spatial views: a crop rectangle in source pixels, resized to out x out, maybe flipped ----
struct Crop {
  int x = 0, y = 0, w = 0, h = 0;
  bool flip = false;
};

// The 13 fixed offsets of the multi-scale crop, in quarters of the free space (x, y).
inline const std::array<std::array<int, 2>, 13>& fix_offsets() {
  static const std::array<std::array<int, 2>, 13> o{{{0, 0}, {4, 0}, {0, 4}, {4, 4}, {2, 2},  // corners, centre
                                                      {0, 2}, {4, 2}, {2, 4}, {2, 0},          // edge middles
                                                      {1, 1}, {3, 1}, {1, 3}, {3, 3}}};        // quarters
  return o;
}

// Offsets of the multi-scale crop: the 13 fixed ones (official TSM, more_fix_crop),
// the first 5 of them (fix_crop only: corners and centre), or anywhere (random).
enum class CropOffsets { Fixed13, Fixed5, Random };

// The multi-scale crop of a W x H frame for an out_w x out_h output (official TSM
// GroupMultiScaleCrop): crop sizes `scales` x the short side, truncated; sizes within
// 3 px of the output side snap to it; a (width, height) pair of scale indices at most
// `max_distort` apart, drawn uniformly, then an offset. The flip is not drawn here.
// Draws: the pair, then the offset (one draw from the fixed ones; x then y when random).
inline Crop multiscale_crop_rect(int W, int H, int out_w, int out_h, const std::vector<double>& scales,
                                 int max_distort, CropOffsets offsets, Rng& rng) {
  const int base = std::min(W, H);
  const size_t n = scales.size();
  std::vector<int> sizes_w(n), sizes_h(n);
  for (size_t i = 0; i < n; ++i) {
    const int s = static_cast<int>(base * scales[i]);
    sizes_w[i] = std::abs(s - out_w) < 3 ? out_w : s;
    sizes_h[i] = std::abs(s - out_h) < 3 ? out_h : s;
  }
  std::vector<std::array<size_t, 2>> pairs;  // (width index, height index)
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < n; ++j)
      if (std::abs(static_cast<int>(i) - static_cast<int>(j)) <= max_distort) pairs.push_back({i, j});
  const auto& p = pairs[static_cast<size_t>(rng.below(static_cast<int64_t>(pairs.size())))];
  Crop c;
  c.w = std::max(1, std::min(sizes_w[p[0]], W));
  c.h = std::max(1, std::min(sizes_h[p[1]], H));
  if (offsets == CropOffsets::Random) {
    c.x = static_cast<int>(rng.below(W - c.w + 1));
    c.y = static_cast<int>(rng.below(H - c.h + 1));
  } else {
    const int ws = (W - c.w) / 4, hs = (H - c.h) / 4;
    const auto& off = fix_offsets()[static_cast<size_t>(rng.below(offsets == CropOffsets::Fixed13 ? 13 : 5))];
    c.x = off[0] * ws;
    c.y = off[1] * hs;
  }
  return c;
}

// Train: multi-scale crop (scales 1, .875, .75, .66 of the short side; the width
// and height scale indices differ by at most 1; sizes within 3 px of `out` snap
// to `out`; one of the 13 offsets), horizontal flip with probability 0.5.
inline Crop multiscale_crop(int W, int H, int out, bool flip, Rng& rng) {
  static const std::vector<double> scales{1.0, 0.875, 0.75, 0.66};
  Crop c = multiscale_crop_rect(W, H, out, out, scales, 1, CropOffsets::Fixed13, rng);
  c.flip = flip && rng.uniform() < 0.5;
  return c;
}

// Python's round() of a value that is a whole number or a half (ties to even), as
// torchvision's CenterCrop places its crop: int(round((size - crop) / 2.0)).
inline int round_half_even(int twice) { return twice / 2 + ((twice % 2) != 0 && ((twice / 2) % 2) != 0 ? 1 : 0); }

// Test views, as the official TSM test (test_models.py): every frame's short side
// resized to `scale` (the long side to int(scale * long / short), torchvision's
// Resize), then `crops` squares of `crop` pixels cut from it (`crop` is the input
// size, or `scale` itself for the full-resolution test, --full_res), with the
// offsets of the official transforms in the resized frame, w = (width - crop) // 4
// and h = (height - crop) // 4:
//   1: the centre, at round((width - crop) / 2), round((height - crop) / 2) (GroupCenterCrop);
//   3: (0, 2h), (4w, 2h), (2w, 2h): left, right, centre (GroupFullResSample, no flip);
//      along the width only, as there (in a portrait frame the three crops move
//      sideways, and coincide when the crop is the frame's width);
//   10: (0, 0), (4w, 0), (0, 4h), (4w, 4h), (2w, 2h), each followed by its mirror
//      image (GroupOverSample).
// Rectangles are returned in source pixels (the resized frame's pixel x is source
// pixel x * min(W, H) / scale): vexp resizes each crop straight to crop x crop, which
// is the official resize-then-crop exactly when the frame's short side is `scale`.
inline std::vector<Crop> test_crops(int W, int H, int crop, int scale, int crops) {
  const int short_side = std::min(W, H), long_side = std::max(W, H);
  // The resized frame (torchvision: the long side int(size * long / short)).
  const int long_scaled = static_cast<int>(static_cast<double>(static_cast<int64_t>(scale) * long_side) / short_side);
  const int sw = W <= H ? scale : long_scaled, sh = W <= H ? long_scaled : scale;
  const int cw = std::min(crop, sw), ch = std::min(crop, sh);
  const double f = static_cast<double>(short_side) / scale;  // source pixels per resized pixel
  const int src_w = std::min(W, static_cast<int>(std::lround(cw * f)));
  const int src_h = std::min(H, static_cast<int>(std::lround(ch * f)));
  std::vector<Crop> v;
  auto at = [&](int x, int y, bool flip) {
    const int sx = std::min(W - src_w, static_cast<int>(std::lround(x * f)));
    const int sy = std::min(H - src_h, static_cast<int>(std::lround(y * f)));
    v.push_back({sx, sy, src_w, src_h, flip});
  };
  const int w = (sw - cw) / 4, h = (sh - ch) / 4;
  if (crops == 1) {
    at(round_half_even(sw - cw), round_half_even(sh - ch), false);
  } else if (crops == 3) {
    at(0, 2 * h, false), at(4 * w, 2 * h, false), at(2 * w, 2 * h, false);
  } else {  // 10
    for (const auto& [x, y] : {std::pair<int, int>{0, 0}, {4 * w, 0}, {0, 4 * h}, {4 * w, 4 * h}, {2 * w, 2 * h}}) {
      at(x, y, false), at(x, y, true);
    }
  }
  return v;
}

// Test view `i` of `crops` for an out x out clip: the kinetics dataset's rule (the
// short side resized to scale_size, then the official crops of `out`; out =
// scale_size is the full-resolution test), shared with the test_crops transform.
inline Crop test_view(int W, int H, int out, int scale_size, int crops, int i) {
  return test_crops(W, H, out, scale_size, crops)[static_cast<size_t>(i)];
}

}  // namespace vexp::kinetics
