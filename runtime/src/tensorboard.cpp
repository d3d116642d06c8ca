#include "vexp/runtime/tensorboard.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include <array>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <set>
#include <string>

namespace vexp {

namespace {

const std::array<uint32_t, 256>& crc_table() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;  // reflected Castagnoli
      t[i] = c;
    }
    return t;
  }();
  return table;
}

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7F) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}

template <typename T>
void put_fixed(std::string& out, T v) {  // little-endian, as protobuf and TFRecord want
  unsigned char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  for (size_t i = 0; i < sizeof(T); ++i) out += static_cast<char>(b[i]);  // hosts here are little-endian
}

void put_bytes_field(std::string& out, int field, const std::string& bytes) {
  put_varint(out, (static_cast<uint64_t>(field) << 3) | 2);
  put_varint(out, bytes.size());
  out += bytes;
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

uint32_t crc32c(const void* data, size_t n) {
  const auto& t = crc_table();
  const auto* p = static_cast<const unsigned char*>(data);
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) c = t[(c ^ p[i]) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

uint32_t masked_crc32c(const void* data, size_t n) {
  uint32_t c = crc32c(data, n);
  return ((c >> 15) | (c << 17)) + 0xA282EAD8u;
}

std::string encode_version_event(double wall_time) {
  std::string e;
  e += static_cast<char>(0x09);  // field 1, fixed64
  put_fixed<double>(e, wall_time);
  put_bytes_field(e, 3, "brain.Event:2");
  return e;
}

std::string encode_scalar_event(double wall_time, int64_t step,
                                const std::vector<std::pair<std::string, float>>& scalars) {
  std::string summary;
  for (const auto& [tag, value] : scalars) {
    std::string v;
    put_bytes_field(v, 1, tag);   // Summary.Value.tag
    v += static_cast<char>(0x15);  // field 2 (simple_value), fixed32
    put_fixed<float>(v, value);
    put_bytes_field(summary, 1, v);  // Summary.value (repeated)
  }
  std::string e;
  e += static_cast<char>(0x09);
  put_fixed<double>(e, wall_time);
  e += static_cast<char>(0x10);  // field 2, varint
  put_varint(e, static_cast<uint64_t>(step));
  put_bytes_field(e, 5, summary);
  return e;
}

std::string tfrecord(const std::string& data) {
  std::string r;
  std::string len;
  put_fixed<uint64_t>(len, data.size());
  r += len;
  put_fixed<uint32_t>(r, masked_crc32c(len.data(), len.size()));
  r += data;
  put_fixed<uint32_t>(r, masked_crc32c(data.data(), data.size()));
  return r;
}

bool EventWriter::open(const std::string& dir) {
  char host[256] = "localhost";
  ::gethostname(host, sizeof host - 1);
  const double t = now_seconds();
  std::string name = "events.out.tfevents." + std::to_string(static_cast<long long>(t)) + "." + host;
  std::filesystem::path p = std::filesystem::path(dir) / name;
  // A new file of our own: O_EXCL | O_NOFOLLOW never opens what is already there (a
  // link planted under the next name included).
  for (int i = 1;; ++i) {
    const int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd >= 0) {
      ::close(fd);
      break;
    }
    if (errno != EEXIST || i > 1000) return false;
    p = std::filesystem::path(dir) / (name + "." + std::to_string(i));
  }
  out_.open(p, std::ios::binary | std::ios::app);
  if (!out_) return false;
  path_ = p.string();
  out_ << tfrecord(encode_version_event(t));
  out_.flush();
  return static_cast<bool>(out_);
}

void EventWriter::scalars(int64_t step, const std::vector<std::pair<std::string, float>>& values) {
  if (!out_.is_open() || values.empty()) return;
  out_ << tfrecord(encode_scalar_event(now_seconds(), step, values));
  out_.flush();
}

void EventWriter::metrics(const nlohmann::json& j) {
  if (!out_.is_open() || !j.is_object()) return;
  const std::string type = j.value("type", "");
  const int64_t step = j.value("global_step", int64_t(0));
  std::vector<std::pair<std::string, float>> v;
  auto add = [&](const char* key, const char* tag) {
    auto it = j.find(key);
    if (it != j.end() && it->is_number()) v.emplace_back(tag, it->get<float>());
  };
  // The trainer's own keys: mapped above, or bookkeeping that is not a curve.
  static const std::set<std::string> own{"type", "epoch", "step", "global_step", "epochs_trained", "loss", "lr",
                                         "clips_per_s", "data_s", "compute_s", "comm_s", "step_s", "ranks", "buckets",
                                         "buckets_in_backward", "loss_scale", "skipped_steps", "top1", "top5", "val_loss",
                                         "hooks_s", "clips_trained", "train_s", "wall_s"};
  const char* prefix = nullptr;
  if (type == "step") {
    add("loss", "train/loss");
    add("lr", "train/lr");
    add("epochs_trained", "train/epochs");  // epochs' worth of clips trained
    add("clips_per_s", "train/clips_per_s");
    add("data_s", "time/data_s");
    add("compute_s", "time/compute_s");
    add("comm_s", "time/comm_s");
    add("step_s", "time/step_s");
    add("hooks_s", "time/hooks_s");
    prefix = "train/";
  } else if (type == "eval") {
    add("top1", "val/top1");
    add("top5", "val/top5");
    add("val_loss", "val/loss");
    prefix = "val/";
  }
  // The hooks' metrics in the record (ema_top1, ...): train/NAME or val/NAME.
  if (prefix)
    for (auto it = j.begin(); it != j.end(); ++it)
      if (!own.count(it.key()) && it->is_number()) v.emplace_back(prefix + it.key(), it->get<float>());
  scalars(step, v);
}

}  // namespace vexp
