// A video file as a model input: decoded with libavformat/libavcodec, sampled as
// TSN/TSM test pipelines do and normalised. (Minimal by design: the Kinetics
// dataset plugin's decoder should replace this once it exists.)
#pragma once

#include <string>

#include <ATen/core/Tensor.h>

namespace vexp::cli {

struct ClipSampling {
  int64_t frames = 8;        // T: one frame at the centre of each of T equal segments
  int64_t height = 224;      // centre crop
  int64_t width = 224;
  int64_t short_side = 256;  // resize so the shorter side is this long (aspect kept)
};

// [T, 3, H, W] float32, RGB, (x - mean) / std with ImageNet's mean
// (123.675, 116.28, 103.53) and std (58.395, 57.12, 57.375) on 0..255.
// Throws std::runtime_error naming the file when it cannot be decoded.
at::Tensor decode_clip(const std::string& path, const ClipSampling& s);

// Frame indices of TSN's test sampling: int(seg/2 + seg*i), seg = n / T.
std::vector<int64_t> segment_centres(int64_t n, int64_t frames);

}  // namespace vexp::cli
