// The bounded reader of .pt / .pth files (runtime/src/torch_read.cpp): each hostile
// shape of a file is refused with its own reason, in one line naming the file.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include "torch_file_builder.hpp"
#include "vexp/runtime/checkpoint.hpp"
#include "vexp/runtime/torch_save.hpp"

namespace fs = std::filesystem;
using vexp::test::PickleBuilder;
using vexp::test::write_torch_zip;

namespace {

fs::path temp_dir(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("vexp_test_read_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}
void put(const fs::path& p, const std::string& bytes) { std::ofstream(p, std::ios::binary) << bytes; }

// The one-line error of reading `path` ("" when it loads).
std::string error_of(const fs::path& path, const vexp::TorchFileLimits& lim = {}) {
  try {
    vexp::load_torch_file(path.string(), lim);
  } catch (const std::runtime_error& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    EXPECT_NE(m.find(path.filename().string()), std::string::npos) << m;
    return m;
  }
  return "";
}

#define EXPECT_HAS(text, part) EXPECT_NE((text).find(part), std::string::npos) << (text)

class TorchRead : public ::testing::Test {
 protected:
  void SetUp() override { dir = temp_dir(::testing::UnitTest::GetInstance()->current_test_info()->name()); }
  void TearDown() override { fs::remove_all(dir); }
  fs::path zip_with_pickle(const std::string& pkl, std::vector<std::pair<std::string, std::string>> extra = {}) {
    const fs::path p = dir / "w.pth";
    extra.insert(extra.begin(), {"data.pkl", pkl});
    write_torch_zip(p.string(), extra);
    return p;
  }
  fs::path dir;
};

TEST_F(TorchRead, TwoBytePicklesAreOpcodeErrors) {
  EXPECT_HAS(error_of(zip_with_pickle(std::string("\x80\x02R.", 4))),
             "pickle opcode REDUCE at byte 2 of 'archive/data.pkl' needs 2 values on the stack, found 0");
  EXPECT_HAS(error_of(zip_with_pickle(std::string("\x80\x02\x87.", 4))),
             "pickle opcode TUPLE3 at byte 2 of 'archive/data.pkl' needs 3 values on the stack, found 0");
  // Values below a MARK are not reachable from above it.
  EXPECT_HAS(error_of(zip_with_pickle(std::string("\x80\x02N(a.", 6))), "APPEND at byte 4");
  EXPECT_HAS(error_of(zip_with_pickle(std::string("\x80\x02.", 3))), "STOP at byte 2");
  EXPECT_HAS(error_of(zip_with_pickle(std::string("\x80\x02N", 3))), "ends at byte 3 without a STOP");
  EXPECT_HAS(error_of(zip_with_pickle(std::string("\x80\x02X\xff\xff\xff\x7f", 7))),
             "BINUNICODE at byte 2 of 'archive/data.pkl' holds 2147483647 bytes, but only 0 remain");
  EXPECT_HAS(error_of(zip_with_pickle(std::string("\x80\x02h\x05.", 5))), "reads memo entry 5, which was never stored");
  EXPECT_HAS(error_of(zip_with_pickle(std::string("\x80\x02\xff", 3))), "unsupported pickle opcode 0xff at byte 2");
  EXPECT_HAS(error_of(zip_with_pickle(std::string("\x80\x02I12x\n.", 8))), "INT at byte 2");
}

TEST_F(TorchRead, MillionDeepNestingIsRefused) {
  const size_t n = 1000000;
  const std::string pkl = std::string("\x80\x02", 2) + std::string(n, ']') + std::string(n - 1, 'a') + ".";
  const fs::path p = zip_with_pickle(pkl);
  EXPECT_HAS(error_of(p), "nests containers deeper than the 256 levels allowed");
  // With the limit lifted, the million-deep list loads and is freed without recursion.
  vexp::TorchFileLimits lim;
  lim.max_depth = 2 * n;
  vexp::PyRef root = vexp::load_torch_file(p.string(), lim);
  EXPECT_EQ(root->depth, n - 1);
  root.reset();
  const std::string marks = std::string("\x80\x02", 2) + std::string(n, '(') + ".";
  EXPECT_HAS(error_of(zip_with_pickle(marks)), "opens more than the 256 MARKs allowed at once");
}

TEST_F(TorchRead, CountLimitsAreNamed) {
  vexp::TorchFileLimits lim;
  lim.max_values = 10;
  EXPECT_HAS(error_of(zip_with_pickle(std::string("\x80\x02") + std::string(11, 'N') + "."), lim),
             "NONE at byte 12 of 'archive/data.pkl' makes more than the 10 values allowed");
  lim = {};
  lim.max_stack = 5;
  EXPECT_HAS(error_of(zip_with_pickle(std::string("\x80\x02N") + std::string(5, '2') + "."), lim),
             "DUP at byte 7 of 'archive/data.pkl' puts more than the 5 values allowed on the stack");
  lim = {};
  lim.max_memo = 2;
  EXPECT_HAS(error_of(zip_with_pickle(std::string("\x80\x02Nq\x01q\x02q\x03.", 10)), lim),
             "BINPUT at byte 7 of 'archive/data.pkl' stores more than the 2 memo entries allowed");
  lim = {};
  lim.max_pickle_bytes = 8;
  EXPECT_HAS(error_of(zip_with_pickle(std::string("\x80\x02") + std::string(10, 'N') + "."), lim),
             "record 'archive/data.pkl' is 13 bytes, more than the 8 allowed");
  lim = {};
  lim.max_records = 2;
  EXPECT_HAS(error_of(zip_with_pickle("\x80\x02N.", {{"a", "1"}, {"b", "2"}}), lim),
             "records, more than the 2 allowed");
}

TEST_F(TorchRead, RecordSmallerThanItsTensorIsRefusedBeforeAllocating) {
  PickleBuilder b;
  b.state_dict({{"fc.weight", {"float", "0", 1000 * 2048, 0, {1000, 2048}, {2048, 1}}}});
  const fs::path p = zip_with_pickle(b.bytes(), {{"data/0", std::string(400, '\0')}});
  EXPECT_HAS(error_of(p), "record 'archive/data/0' holds 400 bytes, but storage '0' of tensor 'fc.weight' (float32 "
                          "[1000, 2048]) needs 8192000 (2048000 float32 elements)");
  // A storage of 2^60 elements named by a few bytes: refused before at::empty.
  PickleBuilder huge;
  huge.state_dict({{"w", {"float", "0", int64_t{1} << 60, 0, {int64_t{1} << 30}, {1}}}});
  EXPECT_HAS(error_of(zip_with_pickle(huge.bytes(), {{"data/0", std::string(16, '\0')}})), "holds 16 bytes, but storage '0'");
}

TEST_F(TorchRead, ViewsPastTheirStorageAreRefused) {
  PickleBuilder b;
  b.state_dict({{"w", {"float", "0", 6, 2, {2, 3}, {3, 1}}}});
  EXPECT_HAS(error_of(zip_with_pickle(b.bytes(), {{"data/0", std::string(24, '\0')}})),
             "builds a tensor (float32 [2, 3], offset 2, strides [3, 1]) that reaches past the end of storage '0' (6 "
             "elements)");
  PickleBuilder overflow;
  overflow.state_dict({{"w", {"float", "0", 6, 0, {2, 3}, {int64_t{1} << 62, 1}}}});
  EXPECT_HAS(error_of(zip_with_pickle(overflow.bytes(), {{"data/0", std::string(24, '\0')}})), "reaches past the end");
  PickleBuilder missing;
  missing.state_dict({{"w", {"float", "7", 6, 0, {6}, {1}}}});
  EXPECT_HAS(error_of(zip_with_pickle(missing.bytes())), "storage record 'archive/data/7' is missing");
}

TEST_F(TorchRead, OnlyStateDictGlobalsAreCalled) {
  PickleBuilder b;
  b.global("torch._utils", "_rebuild_sparse_tensor").empty_tuple().reduce().stop();
  EXPECT_HAS(error_of(zip_with_pickle(b.bytes())),
             "calls 'torch._utils._rebuild_sparse_tensor': quantized, sparse and other special tensors cannot be loaded");
  PickleBuilder pid;
  pid.str("os.system").persistent().stop();
  EXPECT_HAS(error_of(zip_with_pickle(pid.bytes())), "BINPERSID at byte 16 of 'archive/data.pkl' names something other "
                                                     "than a tensor storage");
  // Another global is data, never a call: an opaque object in a dict still loads.
  PickleBuilder other;
  other.empty_dict().str("x").global("os", "system").str("rm -rf /").tuple1().reduce().setitem().stop();
  vexp::PyRef root = vexp::load_torch_file(zip_with_pickle(other.bytes()).string());
  ASSERT_EQ(root->entries.size(), 1u);
  EXPECT_EQ(root->entries[0].second->kind, vexp::PyValue::Kind::Object);
  EXPECT_EQ(root->entries[0].second->s, "os.system");
}

TEST_F(TorchRead, ZipDirectoryProblemsAreNamed) {
  vexp::save_tensor_dict((dir / "good.pth").string(), {{"w", at::arange(64, at::kFloat)}});
  const std::string good = slurp(dir / "good.pth");
  put(dir / "cut.pth", good.substr(0, good.size() / 2));
  EXPECT_HAS(error_of(dir / "cut.pth"), "it has no zip end-of-directory record (truncated, or not a zip archive?)");
  // The tensor's bytes changed: the CRC says so.
  std::string flipped = good;
  const size_t at = flipped.find(std::string(reinterpret_cast<const char*>(at::arange(64, at::kFloat).data_ptr()), 64));
  ASSERT_NE(at, std::string::npos);
  flipped[at + 5] ^= 0x10;
  put(dir / "flip.pth", flipped);
  EXPECT_HAS(error_of(dir / "flip.pth"), "record 'archive/data/0' fails its CRC check (corrupt?)");
  // A directory entry that says the record is deflated.
  std::string deflated = good;
  const size_t cd = deflated.find("PK\x01\x02");
  ASSERT_NE(cd, std::string::npos);
  deflated[cd + 10] = 8;
  put(dir / "deflate.pth", deflated);
  EXPECT_HAS(error_of(dir / "deflate.pth"), "record 'archive/data.pkl' is compressed (zip method 8)");
}

TEST_F(TorchRead, FilesThatAreNotTorchSaveFiles) {
  put(dir / "empty.pth", "");
  EXPECT_HAS(error_of(dir / "empty.pth"), "'" + (dir / "empty.pth").string() + "' is empty, not a torch.save file");
  put(dir / "text.pth", "hello");
  EXPECT_HAS(error_of(dir / "text.pth"), "neither a zip archive (torch.save's format) nor a pickle (its legacy format): "
                                         "it starts with bytes 68 65 6c 6c");
  // A 2 GB sparse file: the first bytes decide, nothing else is read.
  {
    std::ofstream(dir / "big.pth", std::ios::binary);
  }
  fs::resize_file(dir / "big.pth", uint64_t{2} << 30);
  EXPECT_HAS(error_of(dir / "big.pth"), "it starts with bytes 00 00 00 00");
  try {
    vexp::load_torch_file(dir.string());
    ADD_FAILURE() << "a directory was read";
  } catch (const vexp::TorchFileError& e) {
    EXPECT_FALSE(e.opened());
    EXPECT_HAS(std::string(e.what()), "is a directory, not a regular file");
  }
  EXPECT_THROW(vexp::load_torch_file((dir / "missing.pth").string()), vexp::TorchFileError);
}

TEST_F(TorchRead, LegacyFormatReadsAndIsBounded) {
  PickleBuilder b;
  b.state_dict({{"w", {"float", "0", 6, 0, {2, 3}, {3, 1}}}});
  std::vector<float> values{1, 2, 3, 4, 5, 6};
  const std::string data(reinterpret_cast<const char*>(values.data()), 24);
  const std::string file = vexp::test::legacy_file(b.bytes(), {{"0", 6, data}});
  put(dir / "legacy.pth", file);
  auto sd = vexp::find_state_dict(vexp::load_torch_file((dir / "legacy.pth").string()), "legacy.pth");
  ASSERT_EQ(sd.size(), 1u);
  EXPECT_TRUE(at::equal(sd[0].second, at::arange(1, 7, at::kFloat).view({2, 3})));
  put(dir / "short.pth", file.substr(0, file.size() - 4));
  EXPECT_HAS(error_of(dir / "short.pth"), "storage '0' of tensor 'w' (float32 [2, 3]) needs 24 bytes from byte");
  const std::string wrong = vexp::test::legacy_file(b.bytes(), {{"0", 7, data + std::string(4, '\0')}});
  put(dir / "count.pth", wrong);
  EXPECT_HAS(error_of(dir / "count.pth"), "storage '0' holds 7 elements, but the pickle says 6");
  put(dir / "magic.pth", std::string("\x80\x02N.", 4));
  EXPECT_HAS(error_of(dir / "magic.pth"), "it starts with a pickle, but not with torch.save's magic number");
}

// Checkpoints written by earlier vexps (libtorch's pickle_save, whose dicts carry
// restore_type_tag calls) still load.
TEST_F(TorchRead, CheckpointsOfEarlierVexpsLoad) {
  c10::impl::GenericDict root(c10::StringType::get(), c10::AnyType::get());
  c10::Dict<std::string, at::Tensor> model;
  model.insert("features.w", at::arange(12, at::kFloat).view({3, 4}));
  c10::Dict<std::string, at::Tensor> optimizer;
  optimizer.insert("features.w", at::ones({3, 4}));
  root.insert(c10::IValue(std::string("format")), c10::IValue(std::string("vexp-checkpoint-1")));
  root.insert(c10::IValue(std::string("model")), model);
  root.insert(c10::IValue(std::string("optimizer")), optimizer);
  root.insert(c10::IValue(std::string("meta")), c10::IValue(std::string(R"({"epoch": 2})")));
  const std::vector<char> bytes = torch::jit::pickle_save(c10::IValue(root));
  put(dir / "old.pt", std::string(bytes.begin(), bytes.end()));
  ASSERT_NE(slurp(dir / "old.pt").find("restore_type_tag"), std::string::npos);
  vexp::Checkpoint c = vexp::load_checkpoint((dir / "old.pt").string());
  EXPECT_TRUE(at::equal(c.model["features.w"], at::arange(12, at::kFloat).view({3, 4})));
  EXPECT_TRUE(at::equal(c.optimizer["features.w"], at::ones({3, 4})));
  EXPECT_EQ(c.meta_json, R"({"epoch": 2})");
}

TEST_F(TorchRead, CheckpointErrorsNameTheReason) {
  const fs::path p = zip_with_pickle(std::string("\x80\x02R.", 4));
  try {
    vexp::load_checkpoint(p.string());
    ADD_FAILURE();
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "'" + p.string() +
                                         "' is not a readable checkpoint: pickle opcode REDUCE at byte 2 of "
                                         "'archive/data.pkl' needs 2 values on the stack, found 0");
  }
}

}  // namespace
