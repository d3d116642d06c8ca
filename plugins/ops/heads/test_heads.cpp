// fold_time, classifier and segment_consensus: shapes, values, initialisation,
// dropout and FLOPs.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "plugin_testing.hpp"
#include "vexp/flops.hpp"
#include "vexp/layer.hpp"

namespace {

using Given = std::map<std::string, vexp::schema::Value>;

std::shared_ptr<vexp::Layer> make_op(const std::string& name, Given given = {}) {
  return vexp::testing::make<vexp::Layer>("op", name, std::move(given));
}

// By string_view: see tests/dsl/test_load.cpp's at() (-Wdangling-reference in g++ 13+).
const vexp::PluginDecl& op_decl(std::string_view name) {
  const vexp::PluginDecl* d = vexp::testing::host().find("op", std::string(name));
  if (!d) throw std::runtime_error("no op plugin named " + std::string(name));
  return *d;
}

vexp::Shape shape_of(const at::Tensor& t) { return vexp::Shape(t.sizes().begin(), t.sizes().end()); }

vexp::ForwardContext frames_ctx(int64_t frames) {
  vexp::ForwardContext ctx;
  ctx.frames = frames;
  return ctx;
}

vexp::schema::GraphContext graph_ctx(int64_t frames, int64_t classes) {
  vexp::schema::GraphContext ctx;
  ctx.frames = frames;
  ctx.classes = classes;
  return ctx;
}

using vexp::testing::error_of;

using vexp::testing::contains;

// ---- fold_time ----

TEST(FoldTime, MergesClipsAndFramesAsAView) {
  auto fold = make_op("fold_time");
  at::Tensor clip = torch::randn({2, 3, 4, 5, 6});
  at::Tensor frames = fold->forward({clip}, {});
  EXPECT_EQ(shape_of(frames), (vexp::Shape{6, 4, 5, 6}));
  EXPECT_EQ(frames.data_ptr(), clip.data_ptr());  // no copy
  EXPECT_TRUE(torch::equal(frames[4], clip[1][1]));  // frame t of clip n is row n*T + t

  at::Tensor strided = clip.transpose(0, 1);  // [3, 2, ...]: cannot be merged in place
  at::Tensor copied = fold->forward({strided}, {});
  EXPECT_TRUE(torch::equal(copied[1], clip[1][0]));
  EXPECT_TRUE(contains(error_of([&] { fold->forward({torch::randn({6, 4})}, {}); }), "[6, 4]"));
  EXPECT_TRUE(fold->parameters().empty());
}

TEST(FoldTime, InferShape) {
  const auto& decl = op_decl("fold_time");
  auto params = vexp::testing::params("op", "fold_time");
  EXPECT_EQ(decl.infer_shape(params, {{2, 8, 3, 224, 224}}, {}), (vexp::Shape{16, 3, 224, 224}));
  EXPECT_EQ(decl.infer_shape(params, {{-1, 8, 3, 224, 224}}, {}), (vexp::Shape{-1, 3, 224, 224}));
  EXPECT_THROW(decl.infer_shape(params, {{16, 3}}, {}), vexp::ShapeError);
}

// ---- classifier ----

TEST(Classifier, PoolsDropsAndProjects) {
  torch::manual_seed(0);
  auto head = make_op("classifier", {{"classes", 10}});
  head->build({{4, 64, 7, 7}}, {});
  head->eval();
  auto params = head->named_parameters();
  ASSERT_EQ(params.size(), 2u);
  ASSERT_TRUE(params.contains("fc.weight") && params.contains("fc.bias"));
  EXPECT_EQ(shape_of(params["fc.weight"]), (vexp::Shape{10, 64}));

  at::Tensor x = torch::randn({4, 64, 7, 7});
  at::Tensor y = head->forward({x}, {});
  EXPECT_EQ(shape_of(y), (vexp::Shape{4, 10}));
  at::Tensor manual = torch::addmm(params["fc.bias"], x.mean({2, 3}), params["fc.weight"].t());
  EXPECT_TRUE(torch::allclose(y, manual, 1e-5, 1e-7));
  // A 2-D input [M, C] is used as is.
  EXPECT_TRUE(torch::allclose(head->forward({x.mean({2, 3})}, {}), manual, 1e-5, 1e-7));
}

TEST(Classifier, InitialisedAsTheTsnHead) {
  torch::manual_seed(1);
  auto head = make_op("classifier", {{"classes", 400}});
  head->build({{8, 2048, 7, 7}}, {});
  auto params = head->named_parameters();
  const at::Tensor w = params["fc.weight"];
  EXPECT_NEAR(w.std().item<double>(), 0.001, 0.00002);  // 819,200 samples: ~0.08% noise
  EXPECT_NEAR(w.mean().item<double>(), 0.0, 0.00001);
  EXPECT_TRUE(torch::equal(params["fc.bias"], torch::zeros({400})));

  auto wide = make_op("classifier", {{"classes", 400}, {"init_std", 0.01}});
  wide->build({{8, 2048}}, {});
  EXPECT_NEAR(wide->named_parameters()["fc.weight"].std().item<double>(), 0.01, 0.0002);
}

TEST(Classifier, DropoutOnlyWhileTraining) {
  torch::manual_seed(2);
  auto head = make_op("classifier", {{"classes", 5}, {"dropout", 0.5}, {"init_std", 0.1}});
  head->build({{16, 32, 3, 3}}, {});
  at::Tensor x = torch::rand({16, 32, 3, 3}) + 0.5;
  head->eval();
  const at::Tensor a = head->forward({x}, {});
  EXPECT_TRUE(torch::equal(a, head->forward({x}, {})));  // deterministic in eval
  head->train();
  const at::Tensor t1 = head->forward({x}, {});
  const at::Tensor t2 = head->forward({x}, {});
  EXPECT_FALSE(torch::allclose(t1, a));
  EXPECT_FALSE(torch::allclose(t1, t2));  // a fresh mask per call

  auto no_dropout = make_op("classifier", {{"classes", 5}, {"dropout", 0.0}});
  no_dropout->build({{16, 32, 3, 3}}, {});
  no_dropout->train();
  const at::Tensor b = no_dropout->forward({x}, {});
  no_dropout->eval();
  EXPECT_TRUE(torch::equal(b, no_dropout->forward({x}, {})));
}

TEST(Classifier, ClassesComeFromTheDatasetWhenZero) {
  auto head = make_op("classifier");
  head->build({{4, 64, 7, 7}}, graph_ctx(8, 7));
  EXPECT_EQ(shape_of(head->forward({torch::randn({4, 64, 7, 7})}, {})), (vexp::Shape{4, 7}));

  auto unknown = make_op("classifier");
  EXPECT_TRUE(contains(error_of([&] { unknown->build({{4, 64, 7, 7}}, {}); }), "set classes"));
  auto unbuilt = make_op("classifier", {{"classes", 3}});
  EXPECT_TRUE(contains(error_of([&] { unbuilt->forward({torch::randn({4, 64})}, {}); }), "build"));
  EXPECT_TRUE(contains(error_of([&] { unbuilt->build({{4, -1, 7, 7}}, {}); }), "known C"));
  EXPECT_THROW(make_op("classifier", {{"dropout", 1.0}}), std::exception);
}

TEST(Classifier, InferShape) {
  const auto& decl = op_decl("classifier");
  auto fixed = vexp::testing::params("op", "classifier", {{"classes", 400}});
  EXPECT_EQ(decl.infer_shape(fixed, {{16, 2048, 7, 7}}, {}), (vexp::Shape{16, 400}));
  EXPECT_EQ(decl.infer_shape(fixed, {{16, 2048}}, {}), (vexp::Shape{16, 400}));
  auto from_data = vexp::testing::params("op", "classifier");
  EXPECT_EQ(decl.infer_shape(from_data, {{16, 2048, 7, 7}}, graph_ctx(8, 174)), (vexp::Shape{16, 174}));
  EXPECT_THROW(decl.infer_shape(fixed, {{16, 2048, 7}}, {}), vexp::ShapeError);
}

// mmcv's convention: the pool counts its input elements, the linear in * out per row.
TEST(Classifier, CountsPoolAndLinearMacs) {
  auto head = make_op("classifier", {{"classes", 400}});
  head->build({{2, 2048, 7, 7}}, {});
  head->eval();
  torch::NoGradGuard no_grad;
  vexp::FlopCounter pooled;
  head->forward({torch::randn({2, 2048, 7, 7})}, {});
  EXPECT_EQ(pooled.macs(), 2.0 * (2048 * 49 + 2048 * 400));
  vexp::FlopCounter flat;
  head->forward({torch::randn({2, 2048})}, {});
  EXPECT_EQ(flat.macs(), 2.0 * 2048 * 400);
}

// ---- segment_consensus ----

TEST(SegmentConsensus, AveragesEachClipsFrames) {
  auto avg = make_op("segment_consensus", {{"segments", 3}});
  at::Tensor scores = torch::randn({6, 5});
  at::Tensor y = avg->forward({scores}, {});
  EXPECT_EQ(shape_of(y), (vexp::Shape{2, 5}));
  EXPECT_TRUE(torch::allclose(y[0], (scores[0] + scores[1] + scores[2]) / 3));
  EXPECT_TRUE(torch::allclose(y[1], (scores[3] + scores[4] + scores[5]) / 3));

  auto mx = make_op("segment_consensus", {{"segments", 3}, {"mode", "max"}});
  at::Tensor m = mx->forward({scores}, {});
  EXPECT_TRUE(torch::equal(m[1], torch::max(torch::max(scores[3], scores[4]), scores[5])));
}

TEST(SegmentConsensus, SegmentsZeroTakesTheClipFrames) {
  auto avg = make_op("segment_consensus");
  at::Tensor scores = torch::randn({8, 4});
  EXPECT_TRUE(torch::allclose(avg->forward({scores}, frames_ctx(4)), scores.view({2, 4, 4}).mean(1)));
  EXPECT_TRUE(torch::allclose(avg->forward({scores}, frames_ctx(8)), scores.mean(0, /*keepdim=*/true)));
  EXPECT_TRUE(contains(error_of([&] { avg->forward({scores}, frames_ctx(3)); }), "multiple of 3"));
  EXPECT_TRUE(contains(error_of([&] { avg->forward({scores}, {}); }), "set segments"));
}

TEST(SegmentConsensus, GradientSpreadsEvenlyOverFrames) {
  auto avg = make_op("segment_consensus", {{"segments", 4}});
  at::Tensor scores = torch::randn({8, 3}, torch::requires_grad());
  avg->forward({scores}, {}).sum().backward();
  EXPECT_TRUE(torch::allclose(scores.grad(), torch::full({8, 3}, 0.25)));
}

TEST(SegmentConsensus, InferShape) {
  const auto& decl = op_decl("segment_consensus");
  auto params = vexp::testing::params("op", "segment_consensus");
  EXPECT_EQ(decl.infer_shape(params, {{16, 400}}, graph_ctx(8, 400)), (vexp::Shape{2, 400}));
  EXPECT_EQ(decl.infer_shape(params, {{16, 400}}, {}), (vexp::Shape{-1, 400}));
  try {
    decl.infer_shape(params, {{12, 400}}, graph_ctx(8, 400));
    ADD_FAILURE() << "no ShapeError for 12 rows of 8-frame clips";
  } catch (const vexp::ShapeError& e) {
    EXPECT_TRUE(contains(e.what(), "12 rows")) << e.what();
  }
  auto four = vexp::testing::params("op", "segment_consensus", {{"segments", 4}});
  EXPECT_EQ(decl.infer_shape(four, {{12, 400}}, graph_ctx(8, 400)), (vexp::Shape{3, 400}));
}

}  // namespace
