// temporal_shift against the official TSM code's slicing (zeros + three slice
// copies), forward and backward, over modes, odd sizes, dtypes and layouts.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <functional>
#include <string>
#include <vector>

#include "plugin_testing.hpp"
#include "vexp/layer.hpp"

namespace {

using torch::indexing::None;
using torch::indexing::Slice;

std::shared_ptr<vexp::Layer> make_shift(int64_t segments, int64_t fold_div = 8, const std::string& mode = "bidirectional") {
  return vexp::testing::make<vexp::Layer>("op", "temporal_shift",
                                          {{"segments", segments}, {"fold_div", fold_div}, {"mode", mode}});
}

// The official implementation (mit-han-lab/temporal-shift-module, ops/temporal_shift.py),
// with `left`/`right` using only the first slice. Python slicing clips at C.
at::Tensor reference_shift(const at::Tensor& x, int64_t T, int64_t fold_div, const std::string& mode) {
  const int64_t NT = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  at::Tensor v = x.reshape({NT / T, T, C, H, W});
  const int64_t fold = C / fold_div;
  at::Tensor out = torch::zeros_like(v);
  if (mode == "bidirectional") {
    out.index_put_({Slice(), Slice(None, -1), Slice(None, fold)}, v.index({Slice(), Slice(1, None), Slice(None, fold)}));
    out.index_put_({Slice(), Slice(1, None), Slice(fold, 2 * fold)},
                   v.index({Slice(), Slice(None, -1), Slice(fold, 2 * fold)}));
    out.index_put_({Slice(), Slice(), Slice(2 * fold, None)}, v.index({Slice(), Slice(), Slice(2 * fold, None)}));
  } else if (mode == "left") {
    out.index_put_({Slice(), Slice(None, -1), Slice(None, fold)}, v.index({Slice(), Slice(1, None), Slice(None, fold)}));
    out.index_put_({Slice(), Slice(), Slice(fold, None)}, v.index({Slice(), Slice(), Slice(fold, None)}));
  } else {  // right
    out.index_put_({Slice(), Slice(1, None), Slice(None, fold)}, v.index({Slice(), Slice(None, -1), Slice(None, fold)}));
    out.index_put_({Slice(), Slice(), Slice(fold, None)}, v.index({Slice(), Slice(), Slice(fold, None)}));
  }
  return out.reshape({NT, C, H, W});
}

at::Tensor run(vexp::Layer& layer, const at::Tensor& x, int64_t frames = 0) {
  vexp::ForwardContext ctx;
  ctx.frames = frames;
  ctx.batch = frames > 0 ? x.size(0) / frames : 0;
  return layer.forward({x}, ctx);
}

using vexp::testing::error_of;

const std::vector<std::string> kModes{"bidirectional", "left", "right"};

// Forward and backward equal the reference exactly (a shift is a copy) for every mode,
// odd channel counts and spatial sizes, T in {1, 3, 8}, N in {1, 2} and fold_div edge
// cases: fold = 1 (fold_div = C), fold_div = 1 and 2 (ranges reach C and are clipped).
TEST(TemporalShift, MatchesOfficialSlicingForwardAndBackward) {
  torch::manual_seed(0);
  int cases = 0;
  for (int64_t C : {7, 9, 15}) {
    std::vector<int64_t> fold_divs{1, 2, 3, C};
    if (C >= 8) fold_divs.push_back(8);
    for (int64_t fold_div : fold_divs)
      for (const std::string& mode : kModes)
        for (int64_t T : {1, 3, 8})
          for (int64_t N : {1, 2}) {
            auto layer = make_shift(T, fold_div, mode);
            at::Tensor x = torch::randn({N * T, C, 3, 5}, torch::requires_grad());
            at::Tensor y = run(*layer, x);
            at::Tensor x_ref = x.detach().clone().requires_grad_();
            at::Tensor y_ref = reference_shift(x_ref, T, fold_div, mode);
            ASSERT_TRUE(torch::equal(y, y_ref)) << "C=" << C << " fold_div=" << fold_div << " mode=" << mode
                                                << " T=" << T << " N=" << N;
            at::Tensor g = torch::randn_like(y);
            y.backward(g);
            y_ref.backward(g);
            ASSERT_TRUE(torch::equal(x.grad(), x_ref.grad())) << "backward: C=" << C << " fold_div=" << fold_div
                                                              << " mode=" << mode << " T=" << T << " N=" << N;
            ++cases;
          }
  }
  EXPECT_EQ(cases, 3 * 5 * 3 * 3 * 2 - 3 * 3 * 2);  // C = 7 has no fold_div 8
}

// Inputs large enough to be split across threads (the CPU shift hands planes /
// pixels to ATen's intra-op threads in chunks of >= 64 KiB), with 2 and 3 threads
// (uneven chunks that end inside a channel run), NCHW and channels-last.
TEST(TemporalShift, InputsSplitAcrossThreadsMatchTheReference) {
  const int saved = at::get_num_threads();
  torch::manual_seed(1);
  for (int threads : {2, 3}) {
    at::set_num_threads(threads);
    for (bool channels_last : {false, true})
    for (int64_t C : {61, 64}) {  // channels-last: the block path and the fixed 32-byte path
      auto layer = make_shift(4, 8, "bidirectional");
      at::Tensor x = torch::randn({5 * 4, C, 23, 19});  // 8740 pixels (1220 planes at C = 61): not multiples of 2 or 3
      if (channels_last) x = x.contiguous(at::MemoryFormat::ChannelsLast);
      x.requires_grad_(true);
      at::Tensor y = run(*layer, x);
      at::Tensor x_ref = x.detach().contiguous().requires_grad_();
      at::Tensor y_ref = reference_shift(x_ref, 4, 8, "bidirectional");
      ASSERT_TRUE(torch::equal(y, y_ref)) << threads << " threads, channels_last " << channels_last;
      at::Tensor g = torch::randn_like(y_ref);
      y.backward(g);
      y_ref.backward(g);
      ASSERT_TRUE(torch::equal(x.grad(), x_ref.grad())) << threads << " threads, channels_last " << channels_last;
    }
  }
  at::set_num_threads(saved);
}

// Documented clipping: fold_div = 1 moves every channel to t+1 (bidirectional, left)
// or t-1 (right); fold_div = 2 with odd C leaves only the last channel in place.
TEST(TemporalShift, FoldDivOneAndTwoClipToTheChannels) {
  at::Tensor x = torch::arange(1, 13, torch::kFloat).reshape({2, 3, 2, 1});
  // x: 2 frames of 3 channels x 2 pixels; clip of T = 2.
  at::Tensor y = run(*make_shift(2, 1, "bidirectional"), x);
  EXPECT_TRUE(torch::equal(y[0], x[1]));                      // frame 0 takes frame 1 in every channel
  EXPECT_TRUE(torch::equal(y[1], torch::zeros_like(x[1])));  // the last frame gets zeros
  at::Tensor r = run(*make_shift(2, 1, "right"), x);
  EXPECT_TRUE(torch::equal(r[0], torch::zeros_like(x[0])));
  EXPECT_TRUE(torch::equal(r[1], x[0]));

  at::Tensor z = run(*make_shift(2, 2, "bidirectional"), x);  // fold = 1 of 3 channels
  EXPECT_TRUE(torch::equal(z[0][0], x[1][0]));
  EXPECT_TRUE(torch::equal(z[1][1], x[0][1]));
  EXPECT_TRUE(torch::equal(z[1][0], torch::zeros_like(x[1][0])));
  EXPECT_TRUE(torch::equal(z[0][1], torch::zeros_like(x[0][1])));
  EXPECT_TRUE(torch::equal(z.index({Slice(), 2}), x.index({Slice(), 2})));  // channel 2 stays

  // The same clipping in channels-last (no channel left in place at fold_div = 1).
  at::Tensor xl = torch::randn({6, 8, 3, 2});
  for (int64_t fold_div : {1, 2})
    for (const std::string& mode : kModes)
      EXPECT_TRUE(torch::equal(run(*make_shift(3, fold_div, mode), xl.contiguous(at::MemoryFormat::ChannelsLast)),
                               reference_shift(xl, 3, fold_div, mode)))
          << "fold_div " << fold_div << " " << mode;
}

TEST(TemporalShift, EveryDtypeIsCopiedExactly) {
  torch::manual_seed(1);
  const int64_t T = 4;
  for (auto dtype : {torch::kFloat, torch::kDouble, torch::kHalf, torch::kBFloat16, torch::kLong, torch::kByte,
                     torch::kBool}) {
    at::Tensor x = (torch::randn({2 * T, 16, 5, 7}) * 50).to(dtype);
    for (const std::string& mode : kModes) {
      at::Tensor y = run(*make_shift(T, 8, mode), x);
      EXPECT_EQ(y.scalar_type(), dtype);
      EXPECT_TRUE(torch::equal(y, reference_shift(x, T, 8, mode))) << c10::toString(dtype) << " " << mode;
      // Channels-last: moved runs of 2 x element size bytes (2 to 16).
      at::Tensor cl = run(*make_shift(T, 8, mode), x.contiguous(at::MemoryFormat::ChannelsLast));
      EXPECT_TRUE(torch::equal(cl, reference_shift(x, T, 8, mode))) << c10::toString(dtype) << " " << mode << " NHWC";
    }
  }
}

// channels_last input: same values, output stays channels_last (no layout
// conversion), and gradients match too. Other strides are made contiguous.
// C = 16, 32, 64 give moved runs of 16, 32 and 64 bytes (the kernel's
// fixed-size per-pixel path); C = 9 and 72 runs of 8 and 72 bytes (its block
// path, with the run size fixed and not), uint8 runs of 1 byte.
TEST(TemporalShift, ChannelsLastAndStridedInputsGiveTheSameValues) {
  torch::manual_seed(2);
  const int64_t T = 3;
  for (const std::string& mode : kModes)
    for (int64_t C : {9, 16, 32, 64, 72}) {
      at::Tensor base = torch::randn({2 * T, C, 5, 3});
      at::Tensor expected = reference_shift(base, T, 4, mode);
      auto layer = make_shift(T, 4, mode);

      at::Tensor cl = base.contiguous(at::MemoryFormat::ChannelsLast).requires_grad_();
      ASSERT_FALSE(cl.is_contiguous());
      at::Tensor y = run(*layer, cl);
      EXPECT_TRUE(y.is_contiguous(at::MemoryFormat::ChannelsLast));
      EXPECT_TRUE(torch::equal(y, expected)) << mode << " C=" << C;

      at::Tensor g = torch::randn_like(base);
      y.backward(g.contiguous(at::MemoryFormat::ChannelsLast));
      at::Tensor ref_x = base.clone().requires_grad_();
      reference_shift(ref_x, T, 4, mode).backward(g);
      EXPECT_TRUE(torch::equal(cl.grad(), ref_x.grad())) << mode << " C=" << C;

      // Runs of 1 byte (uint8, C / fold_div = 1 channel): the smallest fixed-size path.
      at::Tensor bytes = (base * 40).to(torch::kByte).narrow(1, 0, 4);
      EXPECT_TRUE(torch::equal(run(*layer, bytes.contiguous(at::MemoryFormat::ChannelsLast)),
                               reference_shift(bytes, T, 4, mode)))
          << mode << " uint8 C=4";

      at::Tensor strided = base.transpose(2, 3).contiguous().transpose(2, 3);  // W-major, neither layout
      ASSERT_FALSE(strided.is_contiguous());
      ASSERT_FALSE(strided.is_contiguous(at::MemoryFormat::ChannelsLast));
      EXPECT_TRUE(torch::equal(run(*layer, strided), expected)) << mode << " C=" << C;
    }
}

// Finite differences against the analytic Jacobian in double precision (what
// torch.autograd.gradcheck does; libtorch has no C++ gradcheck).
TEST(TemporalShift, GradcheckByFiniteDifferences) {
  torch::manual_seed(3);
  const int64_t T = 3;
  for (const std::string& mode : kModes) {
    auto layer = make_shift(T, 3, mode);
    at::Tensor x = torch::randn({2 * T, 7, 2, 3}, torch::kDouble).requires_grad_();
    at::Tensor y = run(*layer, x);
    const int64_t n_in = x.numel(), n_out = y.numel();
    at::Tensor analytic = torch::zeros({n_out, n_in}, torch::kDouble);
    for (int64_t o = 0; o < n_out; ++o) {
      at::Tensor go = torch::zeros({n_out}, torch::kDouble);
      go[o] = 1.0;
      analytic[o] = torch::autograd::grad({y}, {x}, {go.view_as(y)}, /*retain_graph=*/true)[0].reshape({-1});
    }
    at::Tensor numeric = torch::zeros({n_out, n_in}, torch::kDouble);
    const double eps = 1e-6;
    torch::NoGradGuard no_grad;
    for (int64_t i = 0; i < n_in; ++i) {
      at::Tensor plus = x.detach().clone(), minus = x.detach().clone();
      plus.view({-1})[i] += eps;
      minus.view({-1})[i] -= eps;
      numeric.select(1, i).copy_(((run(*layer, plus) - run(*layer, minus)) / (2 * eps)).reshape({-1}));
    }
    EXPECT_TRUE(torch::allclose(analytic, numeric, 1e-5, 1e-7)) << mode;
    EXPECT_GT(analytic.sum().item<double>(), 0.0);  // the shift is not all zeros
  }
}

TEST(TemporalShift, BackwardIsDifferentiable) {
  torch::manual_seed(4);
  auto layer = make_shift(4);
  at::Tensor x = torch::randn({8, 16, 3, 3}, torch::requires_grad());
  at::Tensor go = torch::randn({8, 16, 3, 3}, torch::requires_grad());
  at::Tensor gx = torch::autograd::grad({run(*layer, x)}, {x}, {go}, /*retain_graph=*/true, /*create_graph=*/true)[0];
  // d<gx, v>/d go = shift(v): the backward's own gradient is the forward shift.
  at::Tensor v = torch::randn_like(x);
  at::Tensor ggo = torch::autograd::grad({(gx * v).sum()}, {go})[0];
  EXPECT_TRUE(torch::equal(ggo, reference_shift(v, 4, 8, "bidirectional")));
}

TEST(TemporalShift, SegmentsZeroTakesTheClipFrames) {
  at::Tensor x = torch::randn({12, 8, 2, 2});
  auto layer = make_shift(0);
  EXPECT_TRUE(torch::equal(run(*layer, x, 4), reference_shift(x, 4, 8, "bidirectional")));
  EXPECT_TRUE(torch::equal(run(*layer, x, 3), reference_shift(x, 3, 8, "bidirectional")));
  EXPECT_NE(error_of([&] { run(*layer, x, 0); }).find("set segments"), std::string::npos);
}

TEST(TemporalShift, HasNoParameters) {
  EXPECT_TRUE(make_shift(8)->parameters().empty());
  EXPECT_TRUE(make_shift(8)->buffers().empty());
}

TEST(TemporalShift, ForwardErrorsAreClearSentences) {
  auto layer = make_shift(8);
  EXPECT_EQ(error_of([&] { run(*layer, torch::randn({8, 4, 2, 2})); }),
            "temporal_shift: 4 channels < fold_div 8: no channel would move");
  std::string bad_batch = error_of([&] { run(*layer, torch::randn({12, 16, 2, 2})); });
  EXPECT_NE(bad_batch.find("N*T = 12 is not a multiple of 8 frames"), std::string::npos) << bad_batch;
  std::string not_4d = error_of([&] { run(*layer, torch::randn({8, 16, 4})); });
  EXPECT_NE(not_4d.find("4-D"), std::string::npos) << not_4d;
  EXPECT_NE(not_4d.find("[8, 16, 4]"), std::string::npos) << not_4d;
  EXPECT_THROW(vexp::testing::make<vexp::Layer>("op", "temporal_shift", {{"mode", "up"}}), std::exception);
}

TEST(TemporalShift, InferShapeChecksChannelsBatchAndFrames) {
  const vexp::PluginDecl* decl = vexp::testing::host().find("op", "temporal_shift");
  ASSERT_NE(decl, nullptr);
  ASSERT_TRUE(decl->infer_shape);
  auto params = vexp::testing::params("op", "temporal_shift", {{"segments", 8}});
  vexp::schema::GraphContext ctx;
  ctx.frames = 8;
  EXPECT_EQ(decl->infer_shape(params, {{16, 64, 56, 56}}, ctx), (vexp::Shape{16, 64, 56, 56}));
  EXPECT_EQ(decl->infer_shape(params, {{-1, 64, 56, 56}}, ctx), (vexp::Shape{-1, 64, 56, 56}));

  auto shape_error = [&](const vexp::Params& p, const vexp::Shape& s, const vexp::schema::GraphContext& c) {
    try {
      decl->infer_shape(p, {s}, c);
    } catch (const vexp::ShapeError& e) {
      return std::string(e.what());
    }
    return std::string("(no ShapeError)");
  };
  EXPECT_EQ(shape_error(params, {16, 4, 56, 56}, ctx), "4 channels < fold_div 8: no channel would move");
  EXPECT_NE(shape_error(params, {12, 64, 56, 56}, ctx).find("not a multiple of 8"), std::string::npos);
  EXPECT_NE(shape_error(params, {16, 64, 56}, ctx).find("4-D"), std::string::npos);
  vexp::schema::GraphContext eight_frames;
  eight_frames.frames = 8;
  auto four = vexp::testing::params("op", "temporal_shift", {{"segments", 4}});
  EXPECT_EQ(shape_error(four, {16, 64, 56, 56}, eight_frames), "segments = 4 but clips have 8 frames");
  // segments = 0 takes the clip's frames; unknown frames leave the batch unchecked.
  auto zero = vexp::testing::params("op", "temporal_shift");
  EXPECT_NE(shape_error(zero, {12, 64, 56, 56}, eight_frames).find("not a multiple of 8"), std::string::npos);
  EXPECT_EQ(decl->infer_shape(zero, {{12, 64, 56, 56}}, vexp::schema::GraphContext{}), (vexp::Shape{12, 64, 56, 56}));
}

}  // namespace
