// resnet: torchvision's topology, names and counts; insertion points; shape hooks
// against real forward shapes; FLOPs in mmaction2's (mmcv's) convention.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "plugin_testing.hpp"
#include "vexp/flops.hpp"
#include "vexp/layer.hpp"

namespace {

using Given = std::map<std::string, vexp::schema::Value>;

std::shared_ptr<vexp::Layer> make_resnet(Given given = {}) {
  return vexp::testing::make<vexp::Layer>("backbone", "resnet", std::move(given));
}

const vexp::PluginDecl& resnet_decl() {
  const vexp::PluginDecl* d = vexp::testing::host().find("backbone", "resnet");
  if (!d) throw std::runtime_error("no resnet backbone plugin");
  return *d;
}

at::Tensor run(vexp::Layer& layer, const at::Tensor& x) { return layer.forward({x}, vexp::ForwardContext{}); }

vexp::Shape shape_of(const at::Tensor& t) { return vexp::Shape(t.sizes().begin(), t.sizes().end()); }

int64_t count_parameters(torch::nn::Module& m) {
  int64_t n = 0;
  for (const auto& p : m.parameters()) n += p.numel();
  return n;
}

using vexp::testing::error_of;

using vexp::testing::contains;

// A layer for insertion tests: multiplies by a learnable scalar and records the
// shape and value it saw.
struct Probe : vexp::Layer {
  explicit Probe(double scale) { weight = register_parameter("weight", torch::full({}, scale)); }
  at::Tensor forward(const std::vector<at::Tensor>& in, const vexp::ForwardContext&) override {
    seen = in[0].detach().clone();
    return in[0] * weight;
  }
  at::Tensor weight, seen;
};

// PyTorch's state_dict order: per module (pre-order), its own parameters, then buffers.
std::vector<std::string> state_dict_keys(torch::nn::Module& m) {
  std::vector<std::string> keys;
  for (const auto& item : m.named_modules()) {
    const std::string prefix = item.key().empty() ? "" : item.key() + ".";
    for (const auto& p : item.value()->named_parameters(/*recurse=*/false)) keys.push_back(prefix + p.key());
    for (const auto& b : item.value()->named_buffers(/*recurse=*/false)) keys.push_back(prefix + b.key());
  }
  return keys;
}

std::vector<std::string> fixture_keys(const std::string& file) {
  const auto path = std::filesystem::path(VEXP_SOURCE_DIR) / "plugins/backbones/resnet" / file;
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read fixture " + path.string());
  std::vector<std::string> keys;
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line[0] != '#') keys.push_back(line);
  return keys;
}

TEST(ResNet, NamesMatchTorchvisionStateDict) {
  for (int64_t depth : {18, 50}) {
    auto net = make_resnet({{"depth", depth}});
    const auto expected = fixture_keys("torchvision_resnet" + std::to_string(depth) + "_keys.txt");
    ASSERT_GT(expected.size(), 100u);
    EXPECT_EQ(state_dict_keys(*net), expected) << "resnet" << depth;
  }
}

TEST(ResNet, ParameterCountsMatchTorchvision) {
  EXPECT_EQ(count_parameters(*make_resnet({{"depth", 18}})), 11176512);
  EXPECT_EQ(count_parameters(*make_resnet({{"depth", 34}})), 21284672);
  EXPECT_EQ(count_parameters(*make_resnet()), 23508032);  // depth 50 by default
  EXPECT_EQ(count_parameters(*make_resnet({{"depth", 101}})), 42500160);
}

// REFERENCE.md: TSM-R50 (400 classes) has 24,327,632 parameters.
TEST(ResNet, Resnet50WithClassifierHasTheModelZooParameterCount) {
  auto net = make_resnet();
  auto head = vexp::testing::make<vexp::Layer>("op", "classifier", {{"classes", 400}});
  head->build({{8, 2048, 7, 7}}, vexp::schema::GraphContext{});
  EXPECT_EQ(count_parameters(*net) + count_parameters(*head), 24327632);
}

// mmaction2's model zoo: TSM-R50 8x224^2 = 32,965,562,368 = 8 x 4,120,695,296.
TEST(ResNet, Resnet50WithClassifierCountsTheModelZooFlopsPerFrame) {
  auto net = make_resnet();
  auto head = vexp::testing::make<vexp::Layer>("op", "classifier", {{"classes", 400}});
  head->build({{1, 2048, 7, 7}}, vexp::schema::GraphContext{});
  net->eval();
  head->eval();
  torch::NoGradGuard no_grad;
  vexp::FlopCounter counter;
  at::Tensor features = run(*net, torch::randn({1, 3, 224, 224}));
  at::Tensor logits = head->forward({features}, vexp::ForwardContext{});
  EXPECT_EQ(shape_of(features), (vexp::Shape{1, 2048, 7, 7}));
  EXPECT_EQ(shape_of(logits), (vexp::Shape{1, 400}));
  EXPECT_EQ(static_cast<int64_t>(counter.macs()), int64_t{4120695296});
}

// Every term is per element: a batch of 3 counts exactly 3 times one frame.
TEST(ResNet, FlopsScaleWithTheBatch) {
  auto net = make_resnet({{"depth", 18}, {"width", 0.125}});
  net->eval();
  torch::NoGradGuard no_grad;
  double one = 0, three = 0;
  {
    vexp::FlopCounter counter;
    run(*net, torch::randn({1, 3, 48, 48}));
    one = counter.macs();
  }
  {
    vexp::FlopCounter counter;
    run(*net, torch::randn({3, 3, 48, 48}));
    three = counter.macs();
  }
  EXPECT_GT(one, 24.0 * 24 * 8 * 3 * 49);  // more than conv1 alone
  EXPECT_EQ(three, 3 * one);
}

TEST(ResNet, OutputShapesOfStems) {
  torch::NoGradGuard no_grad;
  auto r18 = make_resnet({{"depth", 18}});
  r18->eval();
  EXPECT_EQ(shape_of(run(*r18, torch::randn({2, 3, 224, 224}))), (vexp::Shape{2, 512, 7, 7}));
  auto cifar = make_resnet({{"depth", 18}, {"stem", "cifar"}, {"width", 0.125}, {"in_channels", 1}});
  EXPECT_EQ(shape_of(run(*cifar, torch::randn({4, 1, 32, 32}))), (vexp::Shape{4, 64, 4, 4}));
}

TEST(ResNet, WidthScalesEveryStage) {
  auto net = make_resnet({{"depth", 18}, {"width", 0.125}, {"stem", "cifar"}, {"in_channels", 1}});
  auto params = net->named_parameters();
  EXPECT_EQ(shape_of(params["conv1.weight"]), (vexp::Shape{8, 1, 3, 3}));
  EXPECT_EQ(shape_of(params["layer1.0.conv1.weight"]), (vexp::Shape{8, 8, 3, 3}));
  EXPECT_EQ(shape_of(params["layer2.0.conv1.weight"]), (vexp::Shape{16, 8, 3, 3}));
  EXPECT_EQ(shape_of(params["layer3.1.conv2.weight"]), (vexp::Shape{32, 32, 3, 3}));
  EXPECT_EQ(shape_of(params["layer4.0.downsample.0.weight"]), (vexp::Shape{64, 32, 1, 1}));
  // BASELINES.md quickstart: ~176 k parameters with an 8-class classifier.
  EXPECT_EQ(count_parameters(*net), 175608);
  auto r50 = make_resnet({{"width", 0.125}});
  EXPECT_EQ(shape_of(r50->named_parameters()["layer4.2.conv3.weight"]), (vexp::Shape{256, 64, 1, 1}));
}

TEST(ResNet, InitialisationFollowsTorchvision) {
  torch::manual_seed(0);
  auto net = make_resnet();
  auto params = net->named_parameters();
  // kaiming_normal, fan_out, relu: std = sqrt(2 / (out_channels * k * k)).
  const double expected_std = std::sqrt(2.0 / (256 * 9));
  EXPECT_NEAR(params["layer3.0.conv2.weight"].std().item<double>(), expected_std, 0.02 * expected_std);
  EXPECT_NEAR(params["layer3.0.conv2.weight"].mean().item<double>(), 0.0, 0.02 * expected_std);
  EXPECT_TRUE(torch::equal(params["layer1.0.bn3.weight"], torch::ones({256})));
  EXPECT_TRUE(torch::equal(params["layer1.0.bn3.bias"], torch::zeros({256})));

  auto zero50 = make_resnet({{"zero_init_residual", true}})->named_parameters();
  EXPECT_TRUE(torch::equal(zero50["layer2.1.bn3.weight"], torch::zeros({512})));
  EXPECT_TRUE(torch::equal(zero50["layer2.1.bn2.weight"], torch::ones({128})));
  auto zero18 = make_resnet({{"depth", 18}, {"zero_init_residual", true}})->named_parameters();
  EXPECT_TRUE(torch::equal(zero18["layer2.1.bn2.weight"], torch::zeros({128})));
  EXPECT_TRUE(torch::equal(zero18["layer2.1.bn1.weight"], torch::ones({128})));
}

TEST(ResNet, InsertionPointsOfEveryBlock) {
  const auto& decl = resnet_decl();
  ASSERT_TRUE(decl.insertion_points);
  auto points = decl.insertion_points(vexp::testing::params("backbone", "resnet"));
  ASSERT_EQ(points.size(), 16u * 3);
  EXPECT_EQ(points[0], "layer1/block0/block_in");
  EXPECT_EQ(points[1], "layer1/block0/residual_in");
  EXPECT_EQ(points[2], "layer1/block0/block_out");
  EXPECT_EQ(points[3], "layer1/block1/block_in");
  EXPECT_EQ(points.back(), "layer4/block2/block_out");
  EXPECT_EQ(decl.insertion_points(vexp::testing::params("backbone", "resnet", {{"depth", 101}})).size(), 33u * 3);
  EXPECT_EQ(decl.insertion_points(vexp::testing::params("backbone", "resnet", {{"depth", 18}})).size(), 8u * 3);
}

// residual_in feeds only the residual branch: zeroing it (eval-mode BN with fresh
// statistics maps 0 to 0) turns an identity-shortcut block into relu(x) = x.
TEST(ResNet, ResidualInLeavesTheIdentityPathAlone) {
  torch::NoGradGuard no_grad;
  auto net = make_resnet({{"depth", 18}, {"width", 0.25}});
  net->eval();
  at::Tensor x = torch::randn({1, 3, 64, 64});
  const at::Tensor plain = run(*net, x);

  auto seen_in = std::make_shared<Probe>(1.0);
  auto seen_out = std::make_shared<Probe>(1.0);
  net->insert("layer1/block0/block_in", seen_in);
  net->insert("layer1/block0/block_out", seen_out);
  EXPECT_TRUE(torch::equal(run(*net, x), plain));  // scale-1 probes change nothing
  EXPECT_FALSE(torch::equal(seen_out->seen, seen_in->seen));

  net->insert("layer1/block0/residual_in", std::make_shared<Probe>(0.0));
  const at::Tensor changed = run(*net, x);
  EXPECT_FALSE(torch::equal(changed, plain));
  EXPECT_TRUE(torch::equal(seen_out->seen, seen_in->seen));  // block output == its (post-ReLU) input
}

TEST(ResNet, BlockInAndBlockOutPointsApply) {
  torch::NoGradGuard no_grad;
  auto net = make_resnet({{"depth", 18}, {"width", 0.25}});
  net->eval();
  at::Tensor x = torch::randn({1, 3, 64, 64});
  const at::Tensor plain = run(*net, x);

  auto triple = std::make_shared<Probe>(3.0);
  auto after = std::make_shared<Probe>(1.0);
  auto next_in = std::make_shared<Probe>(1.0);
  net->insert("layer2/block0/block_out", triple);
  net->insert("layer2/block0/block_out", after);  // runs after `triple`
  net->insert("layer2/block1/block_in", next_in);
  const at::Tensor scaled = run(*net, x);
  EXPECT_FALSE(torch::equal(scaled, plain));
  EXPECT_TRUE(torch::equal(after->seen, triple->seen * 3));
  EXPECT_TRUE(torch::equal(next_in->seen, after->seen));

  net->insert("layer1/block0/block_in", std::make_shared<Probe>(0.0));  // zero block input -> zero everywhere
  EXPECT_EQ(run(*net, x).abs().sum().item<double>(), 0.0);
  net->insert("layer4/block1/block_out", std::make_shared<Probe>(0.0));
  EXPECT_EQ(run(*net, x).abs().sum().item<double>(), 0.0);
}

TEST(ResNet, InsertedLayersAreNamedSubmodules) {
  auto net = make_resnet({{"depth", 18}, {"width", 0.125}});
  net->insert("layer1/block0/residual_in", std::make_shared<Probe>(1.0));
  net->insert("layer1/block0/residual_in", std::make_shared<Probe>(1.0));
  net->insert("layer3/block1/block_out", std::make_shared<Probe>(1.0));
  auto params = net->named_parameters();
  EXPECT_TRUE(params.contains("layer1.0.residual_in.weight"));
  EXPECT_TRUE(params.contains("layer1.0.residual_in_1.weight"));
  EXPECT_TRUE(params.contains("layer3.1.block_out.weight"));
  // gradients reach them
  at::Tensor y = run(*net, torch::randn({2, 3, 32, 32}));
  y.sum().backward();
  EXPECT_TRUE(params["layer1.0.residual_in.weight"].grad().defined());
}

TEST(ResNet, UnknownInsertionPointIsNamed) {
  auto net = make_resnet();
  const std::string msg = error_of([&] { net->insert("layer5/block0/residual_in", std::make_shared<Probe>(1.0)); });
  EXPECT_TRUE(contains(msg, "'layer5/block0/residual_in'")) << msg;
  EXPECT_TRUE(contains(msg, "layer1/block0/block_in")) << msg;
  EXPECT_TRUE(contains(error_of([&] { net->insert("layer1/block3/block_in", nullptr); }), "layer1/block3/block_in"));
  EXPECT_TRUE(contains(error_of([&] { net->insert("layer1/block0/residual", nullptr); }), "layer1/block0/residual'"));
}

// point_shape and infer_shape agree with what flows through a real forward, for
// odd sizes, both stems and both block types.
TEST(ResNet, ShapeHooksAgreeWithForward) {
  const auto& decl = resnet_decl();
  const std::vector<std::pair<Given, vexp::Shape>> cases{
      {{{"depth", 18}}, {2, 3, 45, 61}},
      {{{"depth", 50}, {"width", 0.25}}, {1, 3, 50, 33}},
      {{{"depth", 34}, {"stem", "cifar"}, {"width", 0.125}, {"in_channels", 2}}, {3, 2, 31, 17}},
  };
  torch::NoGradGuard no_grad;
  for (const auto& [given, input] : cases) {
    auto params = vexp::testing::params("backbone", "resnet", given);
    auto net = make_resnet(given);
    net->eval();
    std::map<std::string, std::shared_ptr<Probe>> probes;
    for (const std::string& point : decl.insertion_points(params)) {
      probes[point] = std::make_shared<Probe>(1.0);
      net->insert(point, probes[point]);
    }
    at::Tensor out = run(*net, torch::randn(input));
    EXPECT_EQ(decl.infer_shape(params, {input}, vexp::schema::GraphContext{}), shape_of(out));
    for (const auto& [point, probe] : probes)
      EXPECT_EQ(decl.point_shape(params, point, input), shape_of(probe->seen)) << point;
  }
  auto params = vexp::testing::params("backbone", "resnet");
  EXPECT_EQ(decl.infer_shape(params, {{-1, 3, 224, 224}}, {}), (vexp::Shape{-1, 2048, 7, 7}));
  EXPECT_EQ(decl.infer_shape(params, {{16, 3, -1, 224}}, {}), (vexp::Shape{16, 2048, -1, 7}));
  EXPECT_EQ(decl.point_shape(params, "layer2/block0/residual_in", {16, 3, 224, 224}), (vexp::Shape{16, 256, 56, 56}));
  EXPECT_EQ(decl.point_shape(params, "layer2/block0/block_out", {16, 3, 224, 224}), (vexp::Shape{16, 512, 28, 28}));
}

TEST(ResNet, ShapeErrorsNameWhatWasExpected) {
  const auto& decl = resnet_decl();
  auto params = vexp::testing::params("backbone", "resnet");
  auto shape_error = [&](const std::function<void()>& f) {
    try {
      f();
    } catch (const vexp::ShapeError& e) {
      return std::string(e.what());
    }
    return std::string("(no ShapeError)");
  };
  const std::string channels = shape_error([&] { decl.infer_shape(params, {{8, 4, 224, 224}}, {}); });
  EXPECT_TRUE(contains(channels, "4 channels") && contains(channels, "in_channels = 3")) << channels;
  EXPECT_TRUE(contains(shape_error([&] { decl.infer_shape(params, {{8, 3, 224}}, {}); }), "4-D"));
  EXPECT_TRUE(contains(shape_error([&] { decl.point_shape(params, "layer9/block0/block_in", {8, 3, 224, 224}); }),
                       "layer9/block0/block_in"));
  EXPECT_TRUE(contains(shape_error([&] { decl.infer_shape(params, {{8, 3, 0, 224}}, {}); }), "too small"));

  auto net = make_resnet();
  const std::string fwd = error_of([&] { run(*net, torch::randn({1, 1, 32, 32})); });
  EXPECT_TRUE(contains(fwd, "1 channels") && contains(fwd, "in_channels = 3")) << fwd;
}

}  // namespace
