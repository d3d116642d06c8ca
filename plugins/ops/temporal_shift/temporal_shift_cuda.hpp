// The CUDA temporal shift: forward and backward in one pass over memory, for any
// element size (fp32, fp64, fp16, bf16: the shift moves bits, it does no
// arithmetic). A plain C++ interface over raw device pointers and a stream, so
// that it compiles and links without libtorch; the libtorch glue calls it in
// CUDA builds (VEXP_CUDA=ON).
#pragma once

#include <cstdint>

namespace vexp_temporal_shift::cuda {

// Which channels move, as the CPU plugin's ShiftPlan: channels [0, first_end)
// read frame t + first_offset, [first_end, second_end) read t + second_offset,
// the rest read frame t; a frame outside the clip reads zeros.
struct ShiftGeometry {
  int64_t rows = 0;          // N * T
  int64_t frames = 1;        // T
  int64_t channels = 0;      // C
  int64_t pixels = 0;        // H * W
  int64_t element_bytes = 4; // 2 (fp16, bf16), 4 (fp32), 8 (fp64)
  bool channels_last = false;  // [N*T, H, W, C] instead of [N*T, C, H, W], both contiguous
  int64_t first_end = 0, second_end = 0;
  int first_offset = 0, second_offset = 0;
};

// The geometry of TSM's shift (fold = C / fold_div; mode 0 bidirectional,
// 1 left, 2 right); `backward` reverses the offsets (the gradient goes back the
// way the data came).
ShiftGeometry make_shift_geometry(int64_t rows, int64_t frames, int64_t channels, int64_t pixels,
                                  int64_t element_bytes, bool channels_last, int64_t fold_div, int mode,
                                  bool backward);

// dst = shift(src), enqueued on `stream` (a cudaStream_t; nullptr: the default
// stream). src and dst are device pointers that must not overlap. Returns 0 on
// success, else the cudaError_t of the launch; `error` (optional) receives its text.
int temporal_shift(const void* src, void* dst, const ShiftGeometry& g, void* stream, const char** error = nullptr);

// The vector width in bytes (16, 8, 4 or 2) the kernel will use: every run of
// channels that moves together must be a multiple of it, and so must the pointers.
int temporal_shift_vector_bytes(const void* src, const void* dst, const ShiftGeometry& g);

}  // namespace vexp_temporal_shift::cuda
