// Weight exchange: key mapping of torchvision / official TSM / mmaction2 names,
// inflation, torch.save files written and read back, pretrained nodes.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <ATen/ATen.h>
#include <torch/nn/modules/linear.h>

#include "vexp/runtime/torch_save.hpp"
#include "vexp/runtime/weights.hpp"

namespace {

const vexp::ModelLayout kLayout{"features", "head"};
const std::vector<std::string> kNodes{"frames", "features", "head", "logits"};

TEST(Weights, MapsTorchvisionTsmAndMmactionNames) {
  using vexp::map_key;
  EXPECT_EQ(map_key("layer1.0.conv1.weight", kLayout, kNodes), "features.layer1.0.conv1.weight");
  EXPECT_EQ(map_key("fc.weight", kLayout, kNodes), "head.fc.weight");
  EXPECT_EQ(map_key("module.base_model.layer1.0.conv1.net.weight", kLayout, kNodes), "features.layer1.0.conv1.weight");
  EXPECT_EQ(map_key("module.new_fc.bias", kLayout, kNodes), "head.fc.bias");
  EXPECT_EQ(map_key("backbone.layer2.0.conv2.bn.running_var", kLayout, kNodes), "features.layer2.0.bn2.running_var");
  EXPECT_EQ(map_key("backbone.conv1.conv.weight", kLayout, kNodes), "features.conv1.weight");
  EXPECT_EQ(map_key("backbone.layer1.0.conv1.net.conv.weight", kLayout, kNodes), "features.layer1.0.conv1.weight");
  EXPECT_EQ(map_key("backbone.layer1.0.downsample.bn.weight", kLayout, kNodes), "features.layer1.0.downsample.1.weight");
  EXPECT_EQ(map_key("cls_head.fc_cls.weight", kLayout, kNodes), "head.fc.weight");
  EXPECT_EQ(map_key("features.bn1.weight", kLayout, kNodes), "features.bn1.weight");  // vexp's own names
}

TEST(Weights, InflatesMeanAndCenter) {
  at::Tensor w = at::randn({4, 3, 3, 3});
  at::Tensor mean = vexp::inflate_kernel(w, 3, "mean");
  ASSERT_EQ(mean.sizes(), (std::vector<int64_t>{4, 3, 3, 3, 3}));
  EXPECT_TRUE(at::allclose(mean.sum(2), w));
  at::Tensor center = vexp::inflate_kernel(w, 3, "center");
  EXPECT_TRUE(at::equal(center.select(2, 1), w));
  EXPECT_EQ(center.select(2, 0).abs().sum().item<float>(), 0.0f);
  EXPECT_THROW(vexp::inflate_kernel(w, 3, "tile"), std::invalid_argument);
}

TEST(Weights, SavedDictsReadBackExactly) {
  const auto dir = std::filesystem::temp_directory_path() / "vexp_test_weights";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "sd.pth").string();
  at::Tensor a = at::randn({3, 5});
  at::Tensor b = at::arange(7, at::kLong);
  vexp::save_tensor_dict(path, {{"a", a}, {"b.c", b}});
  auto sd = vexp::find_state_dict(vexp::load_torch_file(path), path);
  ASSERT_EQ(sd.size(), 2u);
  EXPECT_EQ(sd[0].first, "a");
  EXPECT_TRUE(at::equal(sd[0].second, a));
  EXPECT_EQ(sd[1].first, "b.c");
  EXPECT_TRUE(at::equal(sd[1].second, b));
  const std::string tpath = (dir / "t.pt").string();
  vexp::save_tensor(tpath, a.t());
  EXPECT_TRUE(at::equal(vexp::find_tensor(vexp::load_torch_file(tpath), tpath), a.t()));
  std::filesystem::remove_all(dir);
}

TEST(Weights, CorruptFilesAreOneSentence) {
  const auto dir = std::filesystem::temp_directory_path() / "vexp_test_weights_bad";
  std::filesystem::create_directories(dir);
  const std::string good = (dir / "good.pth").string();
  vexp::save_tensor_dict(good, {{"w", at::randn({64, 64})}});
  std::ifstream in(good, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (size_t cut : {size_t{1}, size_t{40}, bytes.size() / 2, bytes.size() - 3}) {
    const std::string bad = (dir / "bad.pth").string();
    std::ofstream(bad, std::ios::binary) << bytes.substr(0, cut);
    try {
      vexp::load_torch_file(bad);
      ADD_FAILURE() << "a file cut at " << cut << " bytes was read";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("bad.pth"), std::string::npos) << e.what();
    }
  }
  std::ofstream(dir / "text.pth") << "hello";
  EXPECT_THROW(vexp::load_torch_file((dir / "text.pth").string()), std::runtime_error);
  EXPECT_THROW(vexp::load_torch_file((dir / "missing.pth").string()), std::runtime_error);
  std::filesystem::remove_all(dir);
}

TEST(Weights, ShapeMismatchNamesKeyAndShapes) {
  struct M : torch::nn::Module {
    M() { register_module("features", torch::nn::Linear(4, 3)); }
  } m;
  vexp::StateDict sd{{"weight", at::randn({5, 4})}};
  try {
    vexp::load_weights(m, {"features", ""}, {"features"}, sd, {}, "x.pth");
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("'weight' has shape [5, 4]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[3, 4]"), std::string::npos) << msg;
  }
}

}  // namespace
