// The TensorBoard event writer: CRC32C, TFRecord framing, Event wire format.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "vexp/runtime/tensorboard.hpp"

namespace vexp {
namespace {

TEST(TensorBoard, Crc32cMatchesTheStandardCheckValue) {
  const char* s = "123456789";
  EXPECT_EQ(crc32c(s, 9), 0xE3069283u);  // the CRC-32C check value (RFC 3720)
  EXPECT_EQ(crc32c("", 0), 0u);
  const uint32_t c = crc32c(s, 9);
  EXPECT_EQ(masked_crc32c(s, 9), ((c >> 15) | (c << 17)) + 0xA282EAD8u);
}

TEST(TensorBoard, RecordsAreFramedWithLengthAndMaskedCrcs) {
  const std::string data = encode_scalar_event(1.7e9, 300, {{"train/loss", 0.5f}});
  const std::string r = tfrecord(data);
  ASSERT_EQ(r.size(), data.size() + 16);
  uint64_t len;
  std::memcpy(&len, r.data(), 8);
  EXPECT_EQ(len, data.size());
  uint32_t hcrc, dcrc;
  std::memcpy(&hcrc, r.data() + 8, 4);
  std::memcpy(&dcrc, r.data() + 12 + data.size(), 4);
  EXPECT_EQ(hcrc, masked_crc32c(r.data(), 8));
  EXPECT_EQ(dcrc, masked_crc32c(data.data(), data.size()));
  EXPECT_EQ(r.substr(12, data.size()), data);
}

TEST(TensorBoard, ScalarEventWireFormat) {
  const std::string e = encode_scalar_event(2.0, 300, {{"a", 1.0f}});
  // wall_time: tag 0x09 + double 2.0
  ASSERT_GE(e.size(), 9u);
  EXPECT_EQ(static_cast<unsigned char>(e[0]), 0x09);
  double wall;
  std::memcpy(&wall, e.data() + 1, 8);
  EXPECT_EQ(wall, 2.0);
  // step: tag 0x10, varint 300 = 0xAC 0x02
  EXPECT_EQ(static_cast<unsigned char>(e[9]), 0x10);
  EXPECT_EQ(static_cast<unsigned char>(e[10]), 0xAC);
  EXPECT_EQ(static_cast<unsigned char>(e[11]), 0x02);
  // summary (field 5) { value (field 1) { tag (1) "a", simple_value (2) 1.0f } }
  const std::string expect_summary = std::string("\x2a\x0a\x0a\x08\x0a\x01" "a" "\x15", 8) + std::string("\x00\x00\x80\x3f", 4);
  EXPECT_EQ(e.substr(12), expect_summary);
}

TEST(TensorBoard, WriterMapsMetricRecordsToScalars) {
  auto dir = std::filesystem::temp_directory_path() / "vexp_tb_test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  {
    EventWriter w;
    ASSERT_TRUE(w.open(dir.string()));
    EXPECT_NE(w.path().find("events.out.tfevents."), std::string::npos);
    w.metrics({{"type", "step"}, {"global_step", 5}, {"loss", 1.5}, {"lr", 0.1}, {"epochs_trained", 0.25}});
    w.metrics({{"type", "eval"}, {"global_step", 5}, {"top1", 0.75}, {"ema_top1", 0.5}, {"epoch", 1}});
    w.metrics({{"type", "other"}});  // ignored
  }
  int files = 0;
  for (auto& f : std::filesystem::directory_iterator(dir)) {
    ++files;
    std::ifstream in(f.path(), std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    size_t pos = 0;
    int records = 0;
    while (pos < bytes.size()) {
      uint64_t len;
      std::memcpy(&len, bytes.data() + pos, 8);
      ASSERT_LE(pos + 16 + len, bytes.size());
      uint32_t dcrc;
      std::memcpy(&dcrc, bytes.data() + pos + 12 + len, 4);
      EXPECT_EQ(dcrc, masked_crc32c(bytes.data() + pos + 12, len));
      pos += 16 + len;
      ++records;
    }
    EXPECT_EQ(records, 3);  // version, step scalars, eval scalars
    EXPECT_NE(bytes.find("brain.Event:2"), std::string::npos);
    EXPECT_NE(bytes.find("train/loss"), std::string::npos);
    EXPECT_NE(bytes.find("train/lr"), std::string::npos);
    EXPECT_NE(bytes.find("train/epochs"), std::string::npos);
    EXPECT_NE(bytes.find("val/top1"), std::string::npos);
    // A hook's metric in the record becomes a scalar of its own; bookkeeping keys do not.
    EXPECT_NE(bytes.find("val/ema_top1"), std::string::npos);
    EXPECT_EQ(bytes.find("val/epoch"), std::string::npos);
    EXPECT_EQ(bytes.find("train/global_step"), std::string::npos);
  }
  EXPECT_EQ(files, 1);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace vexp
