// TensorBoard event files without protobuf: scalar summaries hand-encoded in the
// Event/Summary wire format, framed as TFRecords (length, masked CRC32C, data,
// masked CRC32C), which is what TensorBoard's event reader expects.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace vexp {

// CRC32C (Castagnoli) of `n` bytes, and TFRecord's masked form of it.
uint32_t crc32c(const void* data, size_t n);
uint32_t masked_crc32c(const void* data, size_t n);

// One serialized Event protobuf: wall_time (field 1), step (2) and either
// file_version (3) or a Summary (5) of simple_value scalars.
std::string encode_scalar_event(double wall_time, int64_t step,
                                const std::vector<std::pair<std::string, float>>& scalars);
std::string encode_version_event(double wall_time);
// TFRecord framing of one record.
std::string tfrecord(const std::string& data);

class EventWriter {
 public:
  EventWriter() = default;
  // Opens DIR/events.out.tfevents.<seconds>.<host> (a new file per invocation, as
  // TensorBoard expects) and writes the version record. Returns false on failure.
  bool open(const std::string& dir);
  bool is_open() const { return out_.is_open(); }
  // A write failed (a full disk): later records are dropped by the stream, since a
  // torn record ends what TensorBoard reads of the file anyway.
  bool failed() const { return out_.is_open() && !out_; }
  const std::string& path() const { return path_; }
  void scalars(int64_t step, const std::vector<std::pair<std::string, float>>& values);
  // Maps one metrics.jsonl record (type "step" or "eval") to scalars:
  // train/loss, train/lr, train/clips_per_s, time/{data,compute,comm,step}_s,
  // val/top1, val/top5, val/loss; a hook's metric NAME in the record (ema_top1):
  // train/NAME in a step record, val/NAME in an eval record.
  void metrics(const nlohmann::json& record);

 private:
  std::ofstream out_;
  std::string path_;
};

}  // namespace vexp
