// Temporal shift (TSM, Lin et al.): a slice of the channels of every frame is
// replaced by the same slice of the next or previous frame of its clip.
//
// The shift is pure data movement, so forward and backward are one pass over
// memory each: every output plane (NCHW) or pixel's channel run (NHWC) is a copy
// of one source run or zeros (NHWC with long runs: a cache-sized block copied
// whole, then its moved runs overwritten while in cache; see shift_nhwc).
// Autograd through slice assignments (the official Python code) costs several
// passes plus zero fills.
#include <algorithm>
#include <cstring>
#ifdef _OPENMP
#include <omp.h>
#endif
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include "vexp/layer.hpp"
#include "vexp/registrar.hpp"
#include "temporal_shift_decl.hpp"

#ifdef VEXP_TEMPORAL_SHIFT_CUDA
#include <ATen/cuda/CUDAContext.h>

#include "temporal_shift_cuda.hpp"
#endif

namespace {

enum class ShiftMode : int64_t { Bidirectional = 0, Left = 1, Right = 2 };

ShiftMode parse_mode(const std::string& s) {
  if (s == "bidirectional") return ShiftMode::Bidirectional;
  if (s == "left") return ShiftMode::Left;
  if (s == "right") return ShiftMode::Right;
  throw std::invalid_argument("temporal_shift: mode '" + s + "' is not one of bidirectional, left, right");
}

// Channels [0, first_end) read frame t + first_offset, [first_end, second_end)
// read frame t + second_offset, the rest read frame t. Ranges are clipped to C,
// as Python slicing clips them in the official code.
struct ShiftPlan {
  int64_t frames = 1;
  int64_t channels = 0;
  int64_t first_end = 0;
  int64_t second_end = 0;
  int64_t first_offset = 0;
  int64_t second_offset = 0;

  static ShiftPlan make(int64_t channels, int64_t frames, int64_t fold_div, ShiftMode mode, bool backward) {
    const int64_t fold = channels / fold_div;
    ShiftPlan p;
    p.frames = frames;
    p.channels = channels;
    p.first_end = std::min(fold, channels);
    switch (mode) {
      case ShiftMode::Bidirectional:
        p.second_end = std::min(2 * fold, channels);
        p.first_offset = +1;
        p.second_offset = -1;
        break;
      case ShiftMode::Left:
        p.second_end = p.first_end;
        p.first_offset = +1;
        break;
      case ShiftMode::Right:
        p.second_end = p.first_end;
        p.first_offset = -1;
        break;
    }
    if (backward) {  // gradient flows back the way the data came
      p.first_offset = -p.first_offset;
      p.second_offset = -p.second_offset;
    }
    return p;
  }

  // The channel run containing `c`: its end and the frame offset it reads.
  void run_of(int64_t c, int64_t& run_end, int64_t& offset) const {
    if (c < first_end) {
      run_end = first_end;
      offset = first_offset;
    } else if (c < second_end) {
      run_end = second_end;
      offset = second_offset;
    } else {
      run_end = channels;
      offset = 0;
    }
  }
};

constexpr int64_t kMinBytesPerTask = int64_t{1} << 16;

// f(begin, end) over [0, n) split evenly across ATen's intra-op threads. Not
// at::parallel_for: that is header-inline and runs serially in code compiled
// without OpenMP (its INTRA_OP_PARALLEL needs _OPENMP in the caller), which this
// plugin was until the shift measured 0.71 of a 2-thread copy. The plugin is now
// built with OpenMP (CMakeLists.txt) and asks for at::get_num_threads() threads
// explicitly, so the team follows at::set_num_threads() / run.threads even where
// its OpenMP runtime is not the one libtorch uses (LibTorch zips bundle their own
// libgomp). `f` must not throw.
template <class F>
void parallel_over(int64_t n, int64_t grain, const F& f) {
#ifdef _OPENMP
  const int64_t tasks = (n + grain - 1) / grain;
  const int64_t threads = std::min<int64_t>(at::get_num_threads(), tasks);
  if (threads > 1 && !at::in_parallel_region() && !omp_in_parallel()) {
#pragma omp parallel num_threads(static_cast<int>(threads))
    {
      const int64_t team = omp_get_num_threads(), tid = omp_get_thread_num();
      const int64_t chunk = (n + team - 1) / team;
      const int64_t begin = std::min(n, tid * chunk), end = std::min(n, begin + chunk);
      if (begin < end) f(begin, end);
    }
    return;
  }
#endif
  f(int64_t{0}, n);
}

// Contiguous [M, C, H, W]: runs of whole channel planes.
void shift_nchw(const char* src, char* dst, int64_t rows, int64_t plane_bytes, const ShiftPlan& p) {
  const int64_t C = p.channels;
  const int64_t grain = std::max<int64_t>(1, kMinBytesPerTask / std::max<int64_t>(plane_bytes, 1));
  parallel_over(rows * C, grain, [&](int64_t begin, int64_t end) {
    int64_t i = begin;
    while (i < end) {
      const int64_t row = i / C;  // (n, t)
      const int64_t c = i % C;
      int64_t run_end = 0, offset = 0;
      p.run_of(c, run_end, offset);
      const int64_t c_end = std::min(run_end, c + (end - i));
      const int64_t bytes = (c_end - c) * plane_bytes;
      char* out = dst + (row * C + c) * plane_bytes;
      const int64_t t = row % p.frames + offset;
      if (t < 0 || t >= p.frames) {
        std::memset(out, 0, static_cast<size_t>(bytes));
      } else {
        std::memcpy(out, src + ((row + offset) * C + c) * plane_bytes, static_cast<size_t>(bytes));
      }
      i += c_end - c;
    }
  });
}

// Channels-last [M, H, W, C]: each pixel holds C contiguous values. Its first
// channels (the moved runs, [0, second_end)) come from the same pixel of frame
// t+1 or t-1, or are zero; the rest (the tail) from frame t. Which frame a run
// reads is fixed per row (n, t). The moved runs are short (C/8 values: 32 bytes
// of fp32 at C = 64), and a libc call per run and pixel costs more than the bytes
// it moves, so (measured single-threaded against one memcpy of the tensor, warm
// buffers; the per-pixel memcpy version reached 0.41-0.59 of it at C = 64-256):
//  * runs of 16, 32 or 64 bytes: one pass over pixels with the run size a
//    compile-time constant (inlined vector moves), the tail by memcpy: 0.70 at C = 64;
//  * other runs: each block of ~32 KiB of pixels is copied whole from frame t
//    (one long memcpy), then its moved runs are overwritten while the block is
//    still in cache: 0.71 at C = 256, 0.80 at C = 1024. Runs of 1-8 bytes (tiny
//    models: C = 8 or 16 fp32) take this path with the size a compile-time
//    constant; through the fused pass their per-pixel tail memcpy dominated
//    (`vexp bench op --channels-last`, 2 threads: [256,16,8,8] 0.62 of copy
//    fused against 0.79 here; [16,64,28,28] 1.50 fused against 0.93 here).
struct MovedRun {
  int64_t begin = 0, bytes = 0, offset = 0;
};

template <int64_t Bytes>
void shift_nhwc_small_runs(const char* src, char* dst, int64_t begin, int64_t end, int64_t pixels_per_row,
                           int64_t pixel_bytes, const std::vector<MovedRun>& moved, int64_t frames) {
  const int64_t row_bytes = pixels_per_row * pixel_bytes;
  const int64_t tail_begin = moved.back().begin + Bytes;
  const int64_t tail_bytes = pixel_bytes - tail_begin;
  const char* from[2] = {nullptr, nullptr};  // nullptr: zeros
  int64_t px = begin;
  while (px < end) {
    const int64_t row = px / pixels_per_row;
    const int64_t stop = std::min(end, (row + 1) * pixels_per_row);
    const int64_t t = row % frames;
    for (size_t k = 0; k < moved.size(); ++k) {
      const int64_t ts = t + moved[k].offset;
      from[k] = ts < 0 || ts >= frames ? nullptr : src + moved[k].offset * row_bytes + moved[k].begin;
    }
    for (; px < stop; ++px) {
      const int64_t at = px * pixel_bytes;
      char* out = dst + at;
      for (size_t k = 0; k < moved.size(); ++k) {
        if (from[k]) {
          std::memcpy(out + moved[k].begin, from[k] + at, Bytes);
        } else {
          std::memset(out + moved[k].begin, 0, Bytes);
        }
      }
      if (tail_bytes > 0) std::memcpy(out + tail_begin, src + at + tail_begin, static_cast<size_t>(tail_bytes));
    }
  }
}

// Bytes > 0: every moved run is that long (a compile-time constant: inlined
// moves); 0: runs of any length.
template <int64_t Bytes>
void shift_nhwc_blocks(const char* src, char* dst, int64_t begin, int64_t end, int64_t pixels_per_row,
                       int64_t pixel_bytes, const std::vector<MovedRun>& moved, int64_t frames) {
  const int64_t row_bytes = pixels_per_row * pixel_bytes;
  const int64_t block = std::max<int64_t>(1, (int64_t{1} << 15) / pixel_bytes);
  int64_t px = begin;
  while (px < end) {
    const int64_t row = px / pixels_per_row;
    const int64_t t = row % frames;
    const int64_t stop = std::min({end, (row + 1) * pixels_per_row, px + block});
    std::memcpy(dst + px * pixel_bytes, src + px * pixel_bytes, static_cast<size_t>((stop - px) * pixel_bytes));
    for (const MovedRun& r : moved) {
      const int64_t ts = t + r.offset;
      const size_t bytes = static_cast<size_t>(Bytes > 0 ? Bytes : r.bytes);
      char* out = dst + r.begin;
      if (ts < 0 || ts >= frames) {
        for (int64_t q = px; q < stop; ++q) std::memset(out + q * pixel_bytes, 0, bytes);
      } else {
        const char* in = src + r.offset * row_bytes + r.begin;
        for (int64_t q = px; q < stop; ++q) std::memcpy(out + q * pixel_bytes, in + q * pixel_bytes, bytes);
      }
    }
    px = stop;
  }
}

void shift_nhwc(const char* src, char* dst, int64_t rows, int64_t pixels_per_row, int64_t element_bytes,
                const ShiftPlan& p) {
  const int64_t pixel_bytes = p.channels * element_bytes;
  std::vector<MovedRun> moved;  // at most two, at the start of the pixel
  for (int64_t c = 0; c < p.channels;) {
    int64_t run_end = 0, offset = 0;
    p.run_of(c, run_end, offset);
    if (offset != 0) moved.push_back({c * element_bytes, (run_end - c) * element_bytes, offset});
    c = run_end;
  }
  bool same = !moved.empty();
  for (const MovedRun& r : moved) same = same && r.bytes == moved[0].bytes;
  const int64_t run = same ? moved[0].bytes : 0;
  const int64_t grain = std::max<int64_t>(1, kMinBytesPerTask / std::max<int64_t>(pixel_bytes, 1));
  parallel_over(rows * pixels_per_row, grain, [&](int64_t begin, int64_t end) {
    const int64_t f = p.frames;
    switch (run) {
      case 1: return shift_nhwc_blocks<1>(src, dst, begin, end, pixels_per_row, pixel_bytes, moved, f);
      case 2: return shift_nhwc_blocks<2>(src, dst, begin, end, pixels_per_row, pixel_bytes, moved, f);
      case 4: return shift_nhwc_blocks<4>(src, dst, begin, end, pixels_per_row, pixel_bytes, moved, f);
      case 8: return shift_nhwc_blocks<8>(src, dst, begin, end, pixels_per_row, pixel_bytes, moved, f);
      case 16: return shift_nhwc_small_runs<16>(src, dst, begin, end, pixels_per_row, pixel_bytes, moved, f);
      case 32: return shift_nhwc_small_runs<32>(src, dst, begin, end, pixels_per_row, pixel_bytes, moved, f);
      case 64: return shift_nhwc_small_runs<64>(src, dst, begin, end, pixels_per_row, pixel_bytes, moved, f);
      default: return shift_nhwc_blocks<0>(src, dst, begin, end, pixels_per_row, pixel_bytes, moved, f);
    }
  });
}

#ifdef VEXP_TEMPORAL_SHIFT_CUDA
// CUDA tensors: the same one-pass shift as a kernel (temporal_shift_cuda.cu) on
// the current stream.
at::Tensor shift_cuda(const at::Tensor& input, const ShiftPlan& plan) {
  at::Tensor x = input;
  const bool channels_last = !x.is_contiguous() && x.is_contiguous(at::MemoryFormat::ChannelsLast);
  if (!channels_last) x = x.contiguous();
  at::Tensor out = at::empty_like(x, channels_last ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous);
  if (x.numel() == 0) return out;
  vexp_temporal_shift::cuda::ShiftGeometry g;
  g.rows = x.size(0);
  g.frames = plan.frames;
  g.channels = plan.channels;
  g.pixels = x.size(2) * x.size(3);
  g.element_bytes = static_cast<int64_t>(x.element_size());
  g.channels_last = channels_last;
  g.first_end = plan.first_end;
  g.second_end = plan.second_end;
  g.first_offset = static_cast<int>(plan.first_offset);
  g.second_offset = static_cast<int>(plan.second_offset);
  const char* error = nullptr;
  if (vexp_temporal_shift::cuda::temporal_shift(x.data_ptr(), out.data_ptr(), g, at::cuda::getCurrentCUDAStream().stream(), &error))
    throw std::runtime_error(std::string("temporal_shift: CUDA kernel launch failed: ") + (error ? error : "?"));
  return out;
}
#endif

// One pass: output allocated uninitialised, every byte written exactly once.
at::Tensor shift(const at::Tensor& input, const ShiftPlan& plan) {
#ifdef VEXP_TEMPORAL_SHIFT_CUDA
  if (input.is_cuda()) return shift_cuda(input, plan);
#endif
  if (!input.device().is_cpu())
    throw std::runtime_error("temporal_shift: tensors on " + input.device().str() +
                             " need a CUDA build of vexp (-DVEXP_CUDA=ON); this build shifts CPU tensors only");
  at::Tensor x = input;
  bool channels_last = false;
  if (!x.is_contiguous()) {
    if (x.is_contiguous(at::MemoryFormat::ChannelsLast)) {
      channels_last = true;
    } else {
      x = x.contiguous();
    }
  }
  at::Tensor out = at::empty(x.sizes(), x.options().memory_format(channels_last ? at::MemoryFormat::ChannelsLast
                                                                               : at::MemoryFormat::Contiguous));
  if (x.numel() == 0) return out;
  const auto* src = static_cast<const char*>(x.data_ptr());
  auto* dst = static_cast<char*>(out.data_ptr());
  const int64_t element_bytes = static_cast<int64_t>(x.element_size());
  const int64_t rows = x.size(0);
  const int64_t pixels = x.size(2) * x.size(3);
  if (channels_last) {
    shift_nhwc(src, dst, rows, pixels, element_bytes, plan);
  } else {
    shift_nchw(src, dst, rows, pixels * element_bytes, plan);
  }
  return out;
}

// Backward is the opposite shift of the gradient, itself a ShiftFunction, so
// higher-order gradients work too.
struct ShiftFunction : torch::autograd::Function<ShiftFunction> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, int64_t frames,
                            int64_t fold_div, int64_t mode, bool backward) {
    ctx->saved_data["frames"] = frames;
    ctx->saved_data["fold_div"] = fold_div;
    ctx->saved_data["mode"] = mode;
    ctx->saved_data["backward"] = backward;
    return shift(x, ShiftPlan::make(x.size(1), frames, fold_div, static_cast<ShiftMode>(mode), backward));
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    at::Tensor g;
    if (grads[0].defined()) {
      g = ShiftFunction::apply(grads[0], ctx->saved_data["frames"].toInt(), ctx->saved_data["fold_div"].toInt(),
                               ctx->saved_data["mode"].toInt(), !ctx->saved_data["backward"].toBool());
    }
    return {g, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

std::string shape_text(at::IntArrayRef s) {
  std::ostringstream o;
  o << '[';
  for (size_t i = 0; i < s.size(); ++i) o << (i ? ", " : "") << s[i];
  o << ']';
  return o.str();
}

class TemporalShift : public vexp::Layer {
 public:
  explicit TemporalShift(const vexp::Params& p)
      : segments_(p.i64("segments")), fold_div_(p.i64("fold_div")), mode_(parse_mode(p.str("mode"))) {
    if (segments_ < 0) throw std::invalid_argument("temporal_shift: segments must be >= 0");
    if (fold_div_ < 1) throw std::invalid_argument("temporal_shift: fold_div must be >= 1");
  }

  at::Tensor forward(const std::vector<at::Tensor>& inputs, const vexp::ForwardContext& ctx) override {
    if (inputs.size() != 1)
      throw std::runtime_error("temporal_shift: expects one input, got " + std::to_string(inputs.size()));
    const at::Tensor& x = inputs[0];
    if (x.dim() != 4)
      throw std::runtime_error("temporal_shift: expects a 4-D input [N*T, C, H, W], got " + shape_text(x.sizes()) +
                               " (" + std::to_string(x.dim()) + "-D)");
    const int64_t channels = x.size(1);
    if (channels < fold_div_)
      throw std::runtime_error("temporal_shift: " + std::to_string(channels) + " channels < fold_div " +
                               std::to_string(fold_div_) + ": no channel would move");
    const int64_t frames = segments_ > 0 ? segments_ : ctx.frames;
    if (frames <= 0)
      throw std::runtime_error(
          "temporal_shift: segments = 0 takes the clip's frame count, but the forward context has frames = " +
          std::to_string(ctx.frames) + "; set segments");
    if (x.size(0) % frames != 0)
      throw std::runtime_error("temporal_shift: the batch dimension N*T = " + std::to_string(x.size(0)) +
                               " is not a multiple of " + std::to_string(frames) + " frames per clip");
    return ShiftFunction::apply(x, frames, fold_div_, static_cast<int64_t>(mode_), false);
  }

 private:
  int64_t segments_;
  int64_t fold_div_;
  ShiftMode mode_;
};

}  // namespace

VEXP_PLUGIN("temporal_shift", "0.1.0") {
  registrar.add_op(vexp_temporal_shift::declaration(),
                   [](const vexp::Params& p) { return std::make_shared<TemporalShift>(p); });
}
