// CUDA temporal shift kernel (see temporal_shift_cuda.hpp). Each thread moves
// one vector of W bytes (W = 16 where the layout allows): every output byte is
// written once, from its source frame or as zero, so forward and backward are a
// single pass at copy bandwidth.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "temporal_shift_cuda.hpp"

namespace vexp_temporal_shift::cuda {
namespace {

template <class V>
__global__ void shift_kernel(const V* __restrict__ src, V* __restrict__ dst, int64_t units, int64_t unit_bytes,
                             int64_t row_bytes, int64_t block_bytes, int64_t block_channels, int64_t element_bytes,
                             int64_t frames, int64_t first_end, int64_t second_end, int first_offset,
                             int second_offset, bool channels_last) {
  const int64_t stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t u = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; u < units; u += stride) {
    const int64_t b = u * unit_bytes;
    const int64_t row = b / row_bytes;
    int64_t c;
    if (channels_last) {
      c = (b % block_bytes) / element_bytes;  // block = one pixel's C values
    } else {
      c = (b / block_bytes) % block_channels;  // block = one channel plane
    }
    const int offset = c < first_end ? first_offset : c < second_end ? second_offset : 0;
    const int64_t t = row % frames + offset;
    if (t < 0 || t >= frames) {
      V z;
      memset(&z, 0, sizeof z);
      dst[u] = z;
    } else {
      dst[u] = src[u + offset * (row_bytes / unit_bytes)];
    }
  }
}

}  // namespace

ShiftGeometry make_shift_geometry(int64_t rows, int64_t frames, int64_t channels, int64_t pixels,
                                  int64_t element_bytes, bool channels_last, int64_t fold_div, int mode,
                                  bool backward) {
  ShiftGeometry g;
  g.rows = rows;
  g.frames = frames;
  g.channels = channels;
  g.pixels = pixels;
  g.element_bytes = element_bytes;
  g.channels_last = channels_last;
  const int64_t fold = fold_div > 0 ? channels / fold_div : 0;
  g.first_end = std::min(fold, channels);
  if (mode == 0) {
    g.second_end = std::min(2 * fold, channels);
    g.first_offset = +1;
    g.second_offset = -1;
  } else {
    g.second_end = g.first_end;
    g.first_offset = mode == 1 ? +1 : -1;
  }
  if (backward) {
    g.first_offset = -g.first_offset;
    g.second_offset = -g.second_offset;
  }
  return g;
}

int temporal_shift_vector_bytes(const void* src, const void* dst, const ShiftGeometry& g) {
  // Runs that move together: a channel plane (NCHW), or each channel segment of
  // a pixel (NHWC). The vector width must divide all of them and the pointers.
  auto fits = [&](int64_t w) {
    if (reinterpret_cast<uintptr_t>(src) % w || reinterpret_cast<uintptr_t>(dst) % w) return false;
    if (!g.channels_last) return (g.pixels * g.element_bytes) % w == 0;
    for (int64_t edge : {g.first_end, g.second_end, g.channels})
      if ((edge * g.element_bytes) % w) return false;
    return true;
  };
  for (int w : {16, 8, 4, 2})
    if (w >= 2 && fits(w)) return w;
  return 1;
}

int temporal_shift(const void* src, void* dst, const ShiftGeometry& g, void* stream, const char** error) {
  const int64_t total = g.rows * g.channels * g.pixels * g.element_bytes;
  if (error) *error = nullptr;
  if (total == 0) return 0;
  const int w = temporal_shift_vector_bytes(src, dst, g);
  const int64_t units = total / w;
  const int64_t row_bytes = g.channels * g.pixels * g.element_bytes;
  const int64_t block_bytes = g.channels_last ? g.channels * g.element_bytes : g.pixels * g.element_bytes;
  const int threads = 256;
  const int64_t blocks = std::min<int64_t>((units + threads - 1) / threads, int64_t{1} << 20);
  auto s = static_cast<cudaStream_t>(stream);
  auto launch = [&](auto* typed_src, auto* typed_dst) {
    shift_kernel<<<static_cast<unsigned>(blocks), threads, 0, s>>>(
        typed_src, typed_dst, units, w, row_bytes, block_bytes, g.channels, g.element_bytes, g.frames, g.first_end,
        g.second_end, g.first_offset, g.second_offset, g.channels_last);
  };
  switch (w) {
    case 16: launch(static_cast<const uint4*>(src), static_cast<uint4*>(dst)); break;
    case 8: launch(static_cast<const uint2*>(src), static_cast<uint2*>(dst)); break;
    case 4: launch(static_cast<const uint32_t*>(src), static_cast<uint32_t*>(dst)); break;
    case 2: launch(static_cast<const uint16_t*>(src), static_cast<uint16_t*>(dst)); break;
    default: launch(static_cast<const uint8_t*>(src), static_cast<uint8_t*>(dst)); break;
  }
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess && error) *error = cudaGetErrorString(e);
  return static_cast<int>(e);
}

}  // namespace vexp_temporal_shift::cuda
