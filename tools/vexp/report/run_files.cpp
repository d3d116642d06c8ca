#include "report/run_files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common.hpp"
#include "vexp/base/text.hpp"

namespace vexp::report {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

bool exists_at_all(const fs::path& p) {
  std::error_code ec;
  return fs::exists(fs::symlink_status(p, ec)) && fs::exists(p, ec);
}

const char* type_word(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::object: return "an object";
    case json::value_t::array: return "an array";
    case json::value_t::string: return "a string";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::binary: return "binary data";
    case json::value_t::discarded: return "nothing";
    default: return "a number";
  }
}

// Keys whose values vexp reads as numbers (null stands for a value that was not finite).
bool number_or_null(const json& j, const char* key, std::string& why) {
  auto it = j.find(key);
  if (it == j.end() || it->is_number() || it->is_null()) return true;
  why = std::string("key '") + key + "' is " + type_word(*it) + ", expected a number";
  return false;
}
bool string_key(const json& j, const char* key, std::string& why) {
  auto it = j.find(key);
  if (it == j.end() || it->is_string()) return true;
  why = std::string("key '") + key + "' is " + type_word(*it) + ", expected a string";
  return false;
}

}  // namespace

std::string read_run_file(const fs::path& path, std::uint64_t max_bytes) {
  if (!exists_at_all(path)) return "";
  try {
    return base::read_file_bounded(path.string(), max_bytes);
  } catch (const std::exception& e) {
    throw cli::Exit{cli::kExitFailure, base::printable(e.what(), 1024)};
  }
}

void for_each_log_line(const fs::path& path, const std::function<void(const std::string&, std::int64_t)>& fn) {
  if (!exists_at_all(path)) return;
  const std::string problem = base::regular_file_problem(path.string(), base::kMaxLogFileBytes);
  if (!problem.empty()) throw cli::Exit{cli::kExitFailure, base::printable(problem, 1024)};
  // O_NONBLOCK and a second look after open: a file swapped for a FIFO in between
  // is refused, not waited on.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) throw cli::Exit{cli::kExitFailure, "cannot read '" + base::printable(path.string()) + "': " + std::strerror(errno)};
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
    throw cli::Exit{cli::kExitFailure, "'" + base::printable(path.string()) + "' is not a regular file"};
  std::string pending;
  std::int64_t number = 0;
  std::uint64_t total = 0;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw cli::Exit{cli::kExitFailure, "cannot read '" + base::printable(path.string()) + "': " + std::strerror(errno)};
    if (n == 0) break;
    total += static_cast<std::uint64_t>(n);
    // A log that grows past the limit while read (a run writing it) is read up to it.
    if (total > base::kMaxLogFileBytes) break;
    pending.append(buf, static_cast<size_t>(n));
    size_t start = 0;
    for (size_t nl; (nl = pending.find('\n', start)) != std::string::npos; start = nl + 1)
      fn(pending.substr(start, nl - start), ++number);
    pending.erase(0, start);
  }
  if (!pending.empty()) fn(pending, ++number);
}

json read_summary(const fs::path& file) {
  const std::string text = read_run_file(file);
  if (text.empty() && !exists_at_all(file)) return json();
  const std::string shown = "'" + base::printable(file.string()) + "'";
  json j;
  try {
    j = json::parse(text);
  } catch (const std::exception& e) {
    throw cli::Exit{cli::kExitFailure, shown + " is not valid JSON: " + e.what()};
  }
  if (!j.is_object()) throw cli::Exit{cli::kExitFailure, shown + " is " + type_word(j) + ", not a JSON object"};
  std::string why;
  for (const char* k : {"name", "status", "device", "precision", "memory_format", "recipe_hash"})
    if (!string_key(j, k, why)) throw cli::Exit{cli::kExitFailure, shown + ": " + why};
  for (const char* k : {"top1", "top5", "val_loss", "epochs", "steps", "clips_per_s", "wall_s", "train_s", "params",
                        "flops_per_clip", "frames", "global_batch", "threads", "skipped_steps", "skipped_samples"})
    if (!number_or_null(j, k, why)) throw cli::Exit{cli::kExitFailure, shown + ": " + why};
  return j;
}

std::string metrics_record_problem(const json& j) {
  if (!j.is_object()) return std::string("a JSON ") + (j.is_array() ? "array" : "value") + ", not an object";
  std::string why;
  if (!string_key(j, "type", why)) return why;
  for (const char* k : {"epoch", "step", "global_step", "epochs_trained", "loss", "lr", "clips_per_s", "step_s", "data_s",
                        "compute_s", "comm_s", "ranks", "top1", "top5", "val_loss"})
    if (!number_or_null(j, k, why)) return why;
  return "";
}

void SkippedLines::add(const fs::path& file, std::int64_t line, const std::string& why) {
  if (++count > 5) return;
  where += (where.empty() ? "" : "; ") + base::printable(file.string()) + ":" + std::to_string(line) + ": " + why;
}

std::string SkippedLines::text(const fs::path& file) const {
  return "skipped " + std::to_string(count) + (count == 1 ? " line" : " lines") + " of '" +
         base::printable(file.string()) + "' (" + where + (count > 5 ? "; ..." : "") + ")";
}

}  // namespace vexp::report
