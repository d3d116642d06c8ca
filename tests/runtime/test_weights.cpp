// Weight exchange: key mapping of torchvision / official TSM / mmaction2 names,
// inflation, torch.save files written and read back, pretrained nodes.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include <ATen/ATen.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
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
  // mmaction2's ResNetTSM: the shift wraps the ConvModule's conv; the norm stays conv1.bn.
  EXPECT_EQ(map_key("backbone.layer1.0.conv1.conv.net.weight", kLayout, kNodes), "features.layer1.0.conv1.weight");
  EXPECT_EQ(map_key("backbone.layer1.0.conv1.bn.running_mean", kLayout, kNodes), "features.layer1.0.bn1.running_mean");
  // ... and the names earlier vexp mmaction exports wrote.
  EXPECT_EQ(map_key("backbone.layer1.0.conv1.net.conv.weight", kLayout, kNodes), "features.layer1.0.conv1.weight");
  EXPECT_EQ(map_key("backbone.layer1.0.conv1.net.bn.weight", kLayout, kNodes), "features.layer1.0.bn1.weight");
  EXPECT_EQ(map_key("backbone.layer1.0.downsample.bn.weight", kLayout, kNodes), "features.layer1.0.downsample.1.weight");
  EXPECT_EQ(map_key("cls_head.fc_cls.weight", kLayout, kNodes), "head.fc.weight");
  EXPECT_EQ(map_key("features.bn1.weight", kLayout, kNodes), "features.bn1.weight");  // vexp's own names
}

// A model shaped as vexp's TSM: features (stem, layer1.0 with a residual_in shift
// and a downsample), head.fc.
std::shared_ptr<torch::nn::Module> tiny_tsm() {
  auto model = std::make_shared<torch::nn::Module>();
  auto features = std::make_shared<torch::nn::Module>();
  features->register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(3, 4, 3).bias(false)));
  features->register_module("bn1", torch::nn::BatchNorm2d(4));
  auto layer1 = std::make_shared<torch::nn::Module>();
  auto block = std::make_shared<torch::nn::Module>();
  block->register_module("residual_in", std::make_shared<torch::nn::Module>());
  block->register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(4, 4, 1).bias(false)));
  block->register_module("bn1", torch::nn::BatchNorm2d(4));
  block->register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(4, 8, 3).bias(false)));
  block->register_module("bn2", torch::nn::BatchNorm2d(8));
  block->register_module("downsample", torch::nn::Sequential(torch::nn::Conv2d(torch::nn::Conv2dOptions(4, 8, 1).bias(false)),
                                                             torch::nn::BatchNorm2d(8)));
  layer1->register_module("0", block);
  features->register_module("layer1", layer1);
  model->register_module("features", features);
  auto head = std::make_shared<torch::nn::Module>();
  head->register_module("fc", torch::nn::Linear(8, 5));
  model->register_module("head", head);
  return model;
}

TEST(Weights, ExportsEachProjectsNamesAndMapsThemBack) {
  auto model = tiny_tsm();
  std::map<std::string, std::string> mm, tsm;
  for (const auto& [k, v] : vexp::export_weights(*model, kLayout, "mmaction")) mm[k] = "";
  for (const auto& [k, v] : vexp::export_weights(*model, kLayout, "tsm")) tsm[k] = "";
  for (const char* k : {"backbone.conv1.conv.weight", "backbone.conv1.bn.running_var",
                        "backbone.layer1.0.conv1.conv.net.weight", "backbone.layer1.0.conv1.bn.weight",
                        "backbone.layer1.0.conv2.conv.weight", "backbone.layer1.0.conv2.bn.num_batches_tracked",
                        "backbone.layer1.0.downsample.conv.weight", "backbone.layer1.0.downsample.bn.bias",
                        "cls_head.fc_cls.weight", "cls_head.fc_cls.bias"})
    EXPECT_TRUE(mm.count(k)) << k;
  for (const char* k : {"module.base_model.conv1.weight", "module.base_model.layer1.0.conv1.net.weight",
                        "module.base_model.layer1.0.bn1.weight", "module.base_model.layer1.0.conv2.weight",
                        "module.base_model.layer1.0.downsample.0.weight", "module.new_fc.weight"})
    EXPECT_TRUE(tsm.count(k)) << k;
  for (const auto& [k, v] : mm) EXPECT_EQ(k.find(".net.conv."), std::string::npos) << k;
  // Every exported name maps back onto the tensor it came from.
  for (const char* naming : {"mmaction", "tsm", "torchvision"}) {
    auto names = vexp::export_weights(*model, kLayout, "vexp");
    auto out = vexp::export_weights(*model, kLayout, naming);
    ASSERT_EQ(names.size(), out.size());
    for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(vexp::map_key(out[i].first, kLayout, kNodes), names[i].first);
  }
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
  // Nested as the official TSM code and mmaction2 save theirs: checkpoint['state_dict'].
  const std::string npath = (dir / "nested.pth").string();
  vexp::save_tensor_dict(npath, {{"a", a}}, "state_dict");
  auto root = vexp::load_torch_file(npath);
  ASSERT_EQ(root->kind, vexp::PyValue::Kind::Dict);
  ASSERT_EQ(root->entries.size(), 1u);
  EXPECT_EQ(root->entries[0].first->s, "state_dict");
  auto nested = vexp::find_state_dict(root, npath);
  ASSERT_EQ(nested.size(), 1u);
  EXPECT_TRUE(at::equal(nested[0].second, a));
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
