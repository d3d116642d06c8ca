#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <ATen/ATen.h>

#include "vexp/runtime/checkpoint.hpp"

namespace fs = std::filesystem;

namespace {

fs::path temp_dir(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("vexp_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

TEST(Checkpoint, RoundTrip) {
  auto dir = temp_dir("ckpt");
  vexp::Checkpoint c;
  c.model["features.conv1.weight"] = at::randn({4, 3, 3, 3});
  c.model["features.bn1.num_batches_tracked"] = at::tensor(int64_t(7));
  c.optimizer["features.conv1.weight"] = at::randn({4, 3, 3, 3});
  c.meta_json = R"({"epoch": 3})";
  vexp::save_checkpoint((dir / "a.pt").string(), c);
  for (const auto& e : fs::directory_iterator(dir))  // no temporary file is left
    EXPECT_EQ(e.path().filename().string(), "a.pt");
  vexp::Checkpoint r = vexp::load_checkpoint((dir / "a.pt").string());
  ASSERT_EQ(r.model.size(), 2u);
  EXPECT_TRUE(at::equal(r.model["features.conv1.weight"], c.model["features.conv1.weight"]));
  EXPECT_EQ(r.model["features.bn1.num_batches_tracked"].item<int64_t>(), 7);
  EXPECT_TRUE(at::equal(r.optimizer["features.conv1.weight"], c.optimizer["features.conv1.weight"]));
  EXPECT_EQ(r.meta_json, c.meta_json);
  fs::remove_all(dir);
}

// PyTorch 2.6 made weights_only=True torch.load's default: its unpickler refuses any
// global outside an allowlist, such as the torch.jit._pickle.restore_type_tag that
// libtorch's pickle_save wraps around every dict. The checkpoint is a stored (not
// deflated) zip, so a global's name would appear in its bytes.
TEST(Checkpoint, NamesNoGlobalThatWeightsOnlyTorchLoadRefuses) {
  auto dir = temp_dir("ckpt_plain");
  vexp::Checkpoint c;
  c.model["w"] = at::randn({4, 3});
  c.model["view"] = at::arange(10, at::kLong).slice(0, 2, 6);  // a view: its whole storage is written
  c.meta_json = R"({"epoch": 1})";
  vexp::save_checkpoint((dir / "a.pt").string(), c);
  std::ifstream in(dir / "a.pt", std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(bytes.rfind("PK", 0), 0u) << "not torch.save's zip format";
  EXPECT_EQ(bytes.find("torch.jit"), std::string::npos);
  EXPECT_EQ(bytes.find("restore_type_tag"), std::string::npos);
  EXPECT_NE(bytes.find("_rebuild_tensor_v2"), std::string::npos);
  vexp::Checkpoint r = vexp::load_checkpoint((dir / "a.pt").string());
  EXPECT_TRUE(at::equal(r.model["view"], at::arange(2, 6, at::kLong)));
  EXPECT_TRUE(at::equal(r.model["w"], c.model["w"]));
  fs::remove_all(dir);
}

TEST(Checkpoint, TruncatedFileIsAClearError) {
  auto dir = temp_dir("ckpt_trunc");
  vexp::Checkpoint c;
  c.model["w"] = at::randn({64, 64});
  vexp::save_checkpoint((dir / "a.pt").string(), c);
  auto size = fs::file_size(dir / "a.pt");
  fs::resize_file(dir / "a.pt", size / 2);
  try {
    vexp::load_checkpoint((dir / "a.pt").string());
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("a.pt"), std::string::npos) << e.what();
  }
  try {
    vexp::load_checkpoint((dir / "missing.pt").string());
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot read checkpoint"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

}  // namespace
