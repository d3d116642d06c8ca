// The noise scale's records in a run directory (noise.hpp).
#include "vexp/rundir/noise.hpp"

#include <nlohmann/json.hpp>

#include "vexp/rundir/files.hpp"

namespace vexp::rundir {

namespace {
using json = nlohmann::json;

std::optional<double> number(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}
}  // namespace

std::vector<NoiseRecord> read_noise(const std::filesystem::path& dir) {
  std::vector<NoiseRecord> out;
  for_each_line(RunDir(dir).metrics(), [&](const std::string& line, std::int64_t) {
    if (line.find("\"noise_") == std::string::npos) return;
    json j = json::parse(line, nullptr, false);
    if (!j.is_object() || j.value("type", "") != "step") return;
    const auto step = number(j, "global_step");
    const auto big = number(j, "noise_big_batch");
    if (!step || !big) return;
    NoiseRecord r;
    r.global_step = static_cast<int64_t>(*step);
    r.epochs_trained = number(j, "epochs_trained").value_or(-1);
    r.small_batch = static_cast<int64_t>(number(j, "noise_small_batch").value_or(0));
    r.big_batch = static_cast<int64_t>(*big);
    r.small_sq = number(j, "noise_small_sq");
    r.big_sq = number(j, "noise_big_sq");
    r.g2_step = number(j, "noise_g2_step");
    r.trace_step = number(j, "noise_trace_step");
    r.g2 = number(j, "noise_g2");
    r.trace = number(j, "noise_trace");
    r.scale = number(j, "noise_scale");
    r.skipped = j.value("noise_skipped", false);
    out.push_back(r);
  });
  return out;
}

namespace {
std::optional<double> summary_noise_scale(const std::filesystem::path& dir) {
  const json s = read_summary(RunDir(dir).summary());
  return s.is_object() ? number(s, "noise_scale") : std::nullopt;
}
std::optional<double> last_of(const std::vector<NoiseRecord>& records) {
  for (auto it = records.rbegin(); it != records.rend(); ++it)
    if (it->scale) return it->scale;
  return std::nullopt;
}
}  // namespace

std::optional<double> last_noise_scale(const std::filesystem::path& dir) {
  if (auto v = summary_noise_scale(dir)) return v;
  return last_of(read_noise(dir));
}

std::optional<double> last_noise_scale(const std::filesystem::path& dir, const std::vector<NoiseRecord>& records) {
  if (auto v = summary_noise_scale(dir)) return v;
  return last_of(records);
}

}  // namespace vexp::rundir
