// conv3d: shapes, parameter names, a forward against ATen's conv3d, the clip
// layout, groups and the refusals.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

#include "plugin_testing.hpp"
#include "vexp/layer.hpp"

namespace {

using Given = std::map<std::string, vexp::schema::Value>;
using vexp::testing::contains;
using vexp::testing::error_of;

vexp::schema::Value ints(std::vector<int64_t> v) {
  vexp::schema::Value::Array a;
  for (int64_t x : v) a.emplace_back(x);
  return vexp::schema::Value::array(std::move(a));
}

std::shared_ptr<vexp::Layer> conv(Given given) { return vexp::testing::make<vexp::Layer>("op", "conv3d", std::move(given)); }

vexp::Shape shape_of(const at::Tensor& t) { return vexp::Shape(t.sizes().begin(), t.sizes().end()); }

const vexp::PluginDecl& decl() { return *vexp::testing::host().find("op", "conv3d"); }

TEST(Conv3dOp, ParametersAreNamedAndShapedLikeTorchConv3d) {
  auto c = conv({{"out_channels", 8}, {"kernel", ints({3, 1, 1})}});
  c->build({{2, 4, 6, 10, 10}}, {});
  auto p = c->named_parameters();
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(shape_of(p["weight"]), (vexp::Shape{8, 4, 3, 1, 1}));
  EXPECT_EQ(shape_of(p["bias"]), (vexp::Shape{8}));

  auto no_bias = conv({{"out_channels", 8}, {"bias", false}, {"groups", 2}});
  no_bias->build({{2, 4, 6, 10, 10}}, {});
  auto q = no_bias->named_parameters();
  ASSERT_EQ(q.size(), 1u);
  EXPECT_EQ(shape_of(q["weight"]), (vexp::Shape{8, 2, 3, 3, 3}));  // in / groups
}

TEST(Conv3dOp, ForwardMatchesAtenConv3d) {
  torch::manual_seed(3);
  auto c = conv({{"out_channels", 6},
                 {"kernel", ints({3, 3, 3})},
                 {"stride", ints({1, 2, 2})},
                 {"padding", ints({1, 1, 1})},
                 {"dilation", ints({1})}});
  c->build({{2, 4, 5, 9, 9}}, {});
  at::Tensor x = torch::randn({2, 4, 5, 9, 9});
  at::Tensor y = c->forward({x}, {});
  auto p = c->named_parameters();
  at::Tensor ref = at::conv3d(x, p["weight"], p["bias"], {1, 2, 2}, {1, 1, 1}, {1, 1, 1}, 1);
  EXPECT_EQ(shape_of(y), (vexp::Shape{2, 6, 5, 5, 5}));
  EXPECT_TRUE(torch::allclose(y, ref, 1e-5, 1e-6));
  // The shape hook agrees with what forward produced.
  auto params = vexp::testing::params("op", "conv3d",
                                      {{"out_channels", 6}, {"stride", ints({1, 2, 2})}, {"padding", ints({1})}});
  EXPECT_EQ(decl().infer_shape(params, {{2, 4, 5, 9, 9}}, {}), shape_of(y));
}

TEST(Conv3dOp, ClipLayoutIsTransposedFirst) {
  torch::manual_seed(4);
  auto c = conv({{"out_channels", 3}, {"kernel", ints({1})}, {"layout", "ntchw"}});
  c->build({{2, 5, 4, 6, 6}}, {});  // [N, T, C, H, W]
  at::Tensor clip = torch::randn({2, 5, 4, 6, 6});
  auto p = c->named_parameters();
  at::Tensor ref = at::conv3d(clip.transpose(1, 2), p["weight"], p["bias"]);
  EXPECT_TRUE(torch::allclose(c->forward({clip}, {}), ref, 1e-5, 1e-6));
}

TEST(Conv3dOp, InferShapeAndRefusals) {
  const auto& d = decl();
  auto p = vexp::testing::params("op", "conv3d", {{"out_channels", 16}});
  EXPECT_EQ(d.infer_shape(p, {{2, 3, 8, 32, 32}}, {}), (vexp::Shape{2, 16, 6, 30, 30}));
  EXPECT_EQ(d.infer_shape(p, {{-1, 3, -1, 32, 32}}, {}), (vexp::Shape{-1, 16, -1, 30, 30}));
  EXPECT_TRUE(contains(error_of([&] { d.infer_shape(p, {{2, 3, 32, 32}}, {}); }), "expects [N, C, T, H, W]"));
  EXPECT_TRUE(contains(error_of([&] { d.infer_shape(p, {{2, 3, 2, 32, 32}}, {}); }), "smaller than the (dilated) kernel"));
  auto g = vexp::testing::params("op", "conv3d", {{"out_channels", 16}, {"groups", 4}});
  EXPECT_TRUE(contains(error_of([&] { d.infer_shape(g, {{2, 6, 8, 32, 32}}, {}); }), "not a multiple of groups"));
  EXPECT_TRUE(contains(error_of([&] { conv({{"out_channels", 6}, {"groups", 4}}); }), "multiple of groups"));
  EXPECT_TRUE(contains(error_of([&] { conv({{"kernel", ints({3, 3})}}); }), "kernel needs 1 or 3 values"));
  auto c = conv({{"out_channels", 4}});
  EXPECT_TRUE(contains(error_of([&] { c->forward({torch::randn({1, 3, 4, 8, 8})}, {}); }), "forward before build()"));
  c->build({{1, 3, 4, 8, 8}}, {});
  EXPECT_TRUE(contains(error_of([&] { c->forward({torch::randn({1, 5, 4, 8, 8})}, {}); }), "expects [N, 3, T, H, W]"));
  EXPECT_TRUE(contains(error_of([&] { c->build({{1, 3, 4, 8, 8}}, {}); }), "build() was called twice"));
}

}  // namespace
