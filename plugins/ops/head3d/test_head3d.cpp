// classifier3d: shapes, parameter names, the declared head, a forward against
// ATen (mean over T, H, W, then the linear layer), initialisation and refusals.
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

std::shared_ptr<vexp::Layer> head(Given given) {
  return vexp::testing::make<vexp::Layer>("op", "classifier3d", std::move(given));
}

vexp::Shape shape_of(const at::Tensor& t) { return vexp::Shape(t.sizes().begin(), t.sizes().end()); }

vexp::schema::GraphContext classes_ctx(int64_t classes) {
  vexp::schema::GraphContext ctx;
  ctx.classes = classes;
  return ctx;
}

TEST(Classifier3dOp, ParametersAreTheHeadsFc) {
  auto h = head({{"classes", 7}});
  h->build({{2, 32, 4, 7, 7}}, {});
  auto p = h->named_parameters();
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(shape_of(p["fc.weight"]), (vexp::Shape{7, 32}));
  EXPECT_EQ(shape_of(p["fc.bias"]), (vexp::Shape{7}));
  EXPECT_EQ(p["fc.bias"].abs().sum().item<double>(), 0.0);
  // It declares those parameters as the model's classification head.
  const vexp::PluginDecl* d = vexp::testing::host().find("op", "classifier3d");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->head_parameters, std::vector<std::string>{"fc."});
}

TEST(Classifier3dOp, ForwardIsMeanPoolThenLinear) {
  torch::manual_seed(5);
  auto h = head({{"classes", 5}, {"dropout", 0.5}});
  h->build({{3, 16, 4, 6, 6}}, {});
  h->eval();  // dropout off
  at::Tensor x = torch::randn({3, 16, 4, 6, 6});
  auto p = h->named_parameters();
  at::Tensor ref = at::linear(x.mean({2, 3, 4}), p["fc.weight"], p["fc.bias"]);
  at::Tensor y = h->forward({x}, {});
  EXPECT_EQ(shape_of(y), (vexp::Shape{3, 5}));
  EXPECT_TRUE(torch::allclose(y, ref, 1e-5, 1e-6));
}

TEST(Classifier3dOp, ClassesComeFromTheDatasetWhenZero) {
  auto h = head({});
  h->build({{2, 8, 2, 3, 3}}, classes_ctx(11));
  EXPECT_EQ(shape_of(h->named_parameters()["fc.weight"]), (vexp::Shape{11, 8}));
  const auto& d = *vexp::testing::host().find("op", "classifier3d");
  auto params = vexp::testing::params("op", "classifier3d");
  EXPECT_EQ(d.infer_shape(params, {{2, 8, 2, 3, 3}}, classes_ctx(11)), (vexp::Shape{2, 11}));
  EXPECT_THROW(d.infer_shape(params, {{2, 8, 3, 3}}, classes_ctx(11)), vexp::ShapeError);
  EXPECT_TRUE(contains(error_of([&] { head({})->build({{2, 8, 2, 3, 3}}, {}); }), "set classes"));
}

TEST(Classifier3dOp, Refusals) {
  EXPECT_TRUE(contains(error_of([&] { head({{"init_std", 0.0}}); }), "init_std must be > 0"));
  auto h = head({{"classes", 3}});
  EXPECT_TRUE(contains(error_of([&] { h->forward({torch::randn({1, 4, 2, 2, 2})}, {}); }), "forward before build()"));
  h->build({{1, 4, 2, 2, 2}}, {});
  EXPECT_TRUE(contains(error_of([&] { h->forward({torch::randn({1, 5, 2, 2, 2})}, {}); }), "expects [N, 4, T, H, W]"));
}

}  // namespace
