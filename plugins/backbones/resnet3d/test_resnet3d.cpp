// resnet3d, conv3d, classifier3d: shape hooks agree with real forward shapes,
// insertion points, parameter counts and bad parameters.
#include <gtest/gtest.h>
#include <c10/core/GradMode.h>
#include <torch/torch.h>

#include <map>
#include <string>

#include "plugin_testing.hpp"
#include "vexp/flops.hpp"
#include "vexp/layer.hpp"

namespace {

using Given = std::map<std::string, vexp::schema::Value>;

vexp::Shape shape_of(const at::Tensor& t) { return vexp::Shape(t.sizes().begin(), t.sizes().end()); }

const vexp::PluginDecl& decl(const char* kind, const char* name) {
  const vexp::PluginDecl* d = vexp::testing::host().find(kind, name);
  if (!d) throw std::runtime_error(std::string("no plugin ") + name);
  return *d;
}

TEST(Resnet3d, ShapesAndPointsMatchForward) {
  Given g{{"depth", 50}, {"inflate", "111,1010,101010,010"}};
  auto params = vexp::testing::params("backbone", "resnet3d", g);
  auto net = vexp::testing::make<vexp::Layer>("backbone", "resnet3d", g);
  const auto& d = decl("backbone", "resnet3d");
  const vexp::Shape in{1, 8, 3, 64, 64};
  net->eval();
  c10::NoGradGuard no_grad;
  at::Tensor y = net->forward({at::randn({1, 8, 3, 64, 64})}, {});
  EXPECT_EQ(shape_of(y), d.infer_shape(params, {in}, {}));
  EXPECT_EQ(shape_of(y), (vexp::Shape{1, 2048, 1, 2, 2}));  // T: 8 -> 4 (stem) -> 2 (pool1) -> 1 (pool2)
  const auto points = d.insertion_points(params);
  EXPECT_EQ(points.size(), 16u * 3);
  EXPECT_EQ(d.point_shape(params, "layer1/block0/residual_in", in), (vexp::Shape{1, 64, 2, 16, 16}));
  EXPECT_EQ(d.point_shape(params, "layer2/block0/block_in", in), (vexp::Shape{1, 256, 1, 16, 16}));
  EXPECT_EQ(d.point_shape(params, "layer4/block2/block_out", in), (vexp::Shape{1, 2048, 1, 2, 2}));
  EXPECT_THROW(d.point_shape(params, "layer5/block0/block_in", in), vexp::ShapeError);
  int64_t n = 0;
  for (const auto& p : net->parameters()) n += p.numel();
  EXPECT_EQ(n, 28043472 - (2048 * 400 + 400));  // mmaction2's I3D-R50 without its head
}

TEST(Resnet3d, WidthScalesEveryStageAndTheStem) {
  // width 0.125: stem and stages 8, 16, 32, 64 channels (BasicBlocks at depth 18), the
  // small I3D of recipes/quickstart/i3d_motion.toml; the shape hook agrees with forward.
  Given g{{"depth", 18}, {"width", 0.125}, {"in_channels", 1}, {"conv1_stride_t", 1}, {"pool1_stride_t", 1},
          {"with_pool2", false}};
  auto params = vexp::testing::params("backbone", "resnet3d", g);
  auto net = vexp::testing::make<vexp::Layer>("backbone", "resnet3d", g);
  const auto& d = decl("backbone", "resnet3d");
  const vexp::Shape in{2, 8, 1, 32, 32};
  net->eval();
  c10::NoGradGuard no_grad;
  at::Tensor y = net->forward({at::randn({2, 8, 1, 32, 32})}, {});
  EXPECT_EQ(shape_of(y), (vexp::Shape{2, 64, 8, 1, 1}));
  EXPECT_EQ(shape_of(y), d.infer_shape(params, {in}, {}));
  EXPECT_EQ(d.point_shape(params, "layer1/block0/block_in", in), (vexp::Shape{2, 8, 8, 8, 8}));
  EXPECT_EQ(d.point_shape(params, "layer3/block1/residual_in", in), (vexp::Shape{2, 32, 8, 2, 2}));
  EXPECT_EQ(net->named_parameters()["conv1.weight"].sizes(), (std::vector<int64_t>{8, 1, 5, 7, 7}));
  // Every 3x3 conv of a BasicBlock is inflated (inflate = all): 3x3x3 kernels, c_in x c_out x 27.
  int64_t n = 0;
  for (const auto& p : net->parameters()) n += p.numel();
  int64_t convs = 8 * 1 * 5 * 7 * 7;                                     // stem
  const int64_t w[4] = {8, 16, 32, 64};
  for (int s = 0; s < 4; ++s) {
    const int64_t in_c = s == 0 ? 8 : w[s - 1];
    convs += (in_c * w[s] + w[s] * w[s]) * 27 + 2 * w[s] * w[s] * 27;  // block 0 and block 1
    if (s > 0) convs += in_c * w[s];                                     // downsample 1x1x1
  }
  const int64_t bns = 2 * (8 + 2 * 2 * (8 + 16 + 32 + 64) + 16 + 32 + 64);  // weight + bias per channel
  EXPECT_EQ(n, convs + bns);
  for (double bad : {0.0, 5.0})
    EXPECT_THROW(vexp::testing::make<vexp::Layer>("backbone", "resnet3d", {{"width", bad}}), std::exception) << bad;
}

TEST(Resnet3d, InsertedLayerSeesPointTensor) {
  struct Probe : vexp::Layer {
    at::Tensor forward(const std::vector<at::Tensor>& in, const vexp::ForwardContext&) override {
      seen = in[0].sizes().vec();
      return in[0];
    }
    std::vector<int64_t> seen;
  };
  auto net = vexp::testing::make<vexp::Layer>("backbone", "resnet3d", {{"depth", 18}});
  auto probe = std::make_shared<Probe>();
  net->insert("layer3/block1/residual_in", probe);
  c10::NoGradGuard no_grad;
  net->forward({at::randn({2, 8, 3, 32, 32})}, {});
  EXPECT_EQ(probe->seen, (std::vector<int64_t>{2, 256, 1, 2, 2}));
  EXPECT_THROW(net->insert("layer9/block0/block_in", probe), std::invalid_argument);
}

TEST(Resnet3d, BadParametersAreRefused) {
  for (const char* bad : {"11,10,1", "1x1,1,1,1", "111,,1,1"}) {
    EXPECT_THROW(vexp::testing::make<vexp::Layer>("backbone", "resnet3d", {{"inflate", bad}}), std::exception) << bad;
  }
  auto params = vexp::testing::params("backbone", "resnet3d", {});
  EXPECT_THROW(decl("backbone", "resnet3d").infer_shape(params, {{1, 8, 1, 64, 64}}, {}), vexp::ShapeError);
  EXPECT_THROW(decl("backbone", "resnet3d").infer_shape(params, {{1, 3, 64, 64}}, {}), vexp::ShapeError);
  // 4 frames vanish after the stem, pool1 and pool2: caught by the shape hook, not at run time.
  EXPECT_THROW(decl("backbone", "resnet3d").infer_shape(params, {{1, 4, 3, 64, 64}}, {}), vexp::ShapeError);
}

TEST(Conv3d, MatchesAtenAndCountsMacs) {
  Given g{{"out_channels", 6}, {"kernel", vexp::schema::Value::array({3, 1, 3})}, {"groups", 2}};
  auto params = vexp::testing::params("op", "conv3d", g);
  auto conv = vexp::testing::make<vexp::Layer>("op", "conv3d", g);
  vexp::schema::GraphContext ctx;
  conv->build({{1, 4, 5, 7, 7}}, ctx);
  at::Tensor x = at::randn({1, 4, 5, 7, 7});
  at::Tensor w = conv->named_parameters()["weight"], b = conv->named_parameters()["bias"];
  EXPECT_EQ(w.sizes(), (std::vector<int64_t>{6, 2, 3, 1, 3}));
  vexp::FlopCounter counter;
  at::Tensor y = conv->forward({x}, {});
  EXPECT_TRUE(at::allclose(y, at::conv3d(x, w, b, at::IntArrayRef{1}, at::IntArrayRef{0}, at::IntArrayRef{1}, 2)));
  EXPECT_EQ(shape_of(y), decl("op", "conv3d").infer_shape(params, {{1, 4, 5, 7, 7}}, ctx));
  EXPECT_EQ(counter.macs(), static_cast<double>(y.numel()) * (2 * 3 * 3 + 1));
  EXPECT_THROW(decl("op", "conv3d").infer_shape(params, {{1, 3, 5, 7, 7}}, ctx), vexp::ShapeError);  // groups
}

TEST(Classifier3d, PoolsOverTimeAndSpace) {
  auto head = vexp::testing::make<vexp::Layer>("op", "classifier3d", {{"classes", 5}, {"dropout", 0.0}});
  vexp::schema::GraphContext ctx;
  head->build({{2, 8, 3, 4, 4}}, ctx);
  at::Tensor x = at::randn({2, 8, 3, 4, 4});
  auto p = head->named_parameters();
  at::Tensor y = head->forward({x}, {});
  EXPECT_TRUE(at::allclose(y, at::linear(x.mean({2, 3, 4}), p["fc.weight"], p["fc.bias"])));
  EXPECT_THROW(head->forward({at::randn({2, 8, 4, 4})}, {}), std::runtime_error);
}

}  // namespace
