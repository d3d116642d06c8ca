#include "vexp/rundir/files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <set>
#include <sstream>

#include "vexp/base/files.hpp"
#include "vexp/base/text.hpp"

namespace vexp::rundir {

using json = nlohmann::json;

namespace {

bool exists_at_all(const fs::path& p) {
  std::error_code ec;
  return fs::exists(fs::symlink_status(p, ec)) && fs::exists(p, ec);
}

std::string shown(const fs::path& p) { return base::printable(p.string()); }

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

// Keys read as numbers (null stands for a value that was not finite).
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

double num(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : 0.0;
}
std::optional<double> opt_num(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

const std::vector<const char*> kMetricsNumberKeys = {"epoch", "step", "global_step", "epochs_trained", "loss",
                                                     "lr", "clips_per_s", "step_s", "data_s", "compute_s",
                                                     "comm_s", "ranks", "top1", "top5", "val_loss",
                                                     "clips_trained", "train_s", "wall_s"};

}  // namespace

// ---- RunDir -----------------------------------------------------------------

bool RunDir::holds_run() const {
  std::error_code ec;
  // An empty metrics.jsonl (a run stopped before its first logged step) is no run.
  const bool metrics_lines = fs::exists(metrics(), ec) && !(fs::is_regular_file(metrics(), ec) && fs::is_empty(metrics(), ec));
  return fs::exists(summary(), ec) || metrics_lines || !latest_checkpoint(checkpoints().string()).empty();
}

bool RunDir::is_run_dir(bool resolved_counts) const {
  std::error_code ec;
  return fs::exists(metrics(), ec) || fs::exists(summary(), ec) || (resolved_counts && fs::exists(resolved(), ec));
}

bool RunDir::is_sweep_dir() const {
  std::error_code ec;
  return fs::exists(dir / kSweepDb, ec);
}

// ---- files vexp manages -------------------------------------------------------

namespace {

bool is_run_folder(const fs::path& d) {
  std::error_code ec;
  const RunDir r(d);
  return r.is_run_dir(true) || fs::exists(r.jobs(), ec) || fs::exists(d / ".vexp.lock", ec);
}

bool starts_with(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }

}  // namespace

std::string managed_file_problem(const fs::path& path) {
  std::error_code ec;
  fs::path p = fs::weakly_canonical(fs::absolute(path, ec), ec);
  if (ec) p = fs::absolute(path).lexically_normal();
  const std::string name = p.filename().string();
  auto shown = [](const fs::path& d) { return "'" + base::printable(d.string()) + "'"; };
  // The folders that may own `p`: its parent (a run's own files, a sweep's store),
  // grandparent (checkpoints/X, failures/X, trials/NNN) and further up to a sweep
  // folder (trials/NNN/checkpoints/X is four below it).
  fs::path d = p.parent_path();
  for (int up = 1; up <= 4 && !d.empty(); ++up, d = d.parent_path()) {
    const std::string first = p.lexically_relative(d).begin()->string();
    if (RunDir(d).is_sweep_dir()) {
      if (first == "trials") return "is inside the trials of the sweep folder " + shown(d) + ", which vexp manages";
      if (up == 1 && (starts_with(name, kSweepDb) || name == ".vexp.lock"))
        return "is " + base::printable(name) + " of the sweep folder " + shown(d) + ", which vexp manages";
    }
    if (up <= 3 && (first == kCheckpoints || first == kFailures) && up >= 2 && is_run_folder(d))
      return "is inside " + first + "/ of the run folder " + shown(d) + ", which vexp manages";
    if (up == 1 && is_run_folder(d)) {
      for (const char* n : {kResolved, kMetrics, kSummary, kProvenance, kTrialLog, kJobs, "job.sbatch", ".vexp.lock"})
        if (name == n) return "is " + name + " of the run folder " + shown(d) + ", which vexp manages";
      const bool slurm_log = starts_with(name, "slurm-") && name.size() > 10 && name.substr(name.size() - 4) == ".out";
      if (starts_with(name, kTensorBoardPrefix) || slurm_log)
        return "is " + base::printable(name) + " of the run folder " + shown(d) + ", which vexp manages";
    }
    if (d == d.parent_path()) break;
  }
  return "";
}

void refuse_output(const std::string& out, const std::string& option,
                   const std::vector<std::pair<std::string, std::string>>& inputs) {
  if (out.empty()) return;
  const std::string shown = option + " '" + base::printable(out) + "'";
  for (const auto& [input, what] : inputs)
    if (!input.empty() && base::same_file(out, input))
      throw base::invalid(shown + " is " + what + " '" + base::printable(input) +
                                   "' that this command reads; write it elsewhere");
  if (const std::string read = base::read_as_input(out); !read.empty())
    throw base::invalid(shown + " is '" + base::printable(read) + "', which this command reads; write it elsewhere");
  if (const std::string why = managed_file_problem(out); !why.empty())
    throw base::invalid(shown + " " + why + "; write it elsewhere");
}

// ---- checkpoints ------------------------------------------------------------

std::string checkpoint_file_name(int64_t epoch, int64_t epoch_step) {
  char buf[48];
  if (epoch_step == 0)
    std::snprintf(buf, sizeof buf, "epoch_%04lld.pt", static_cast<long long>(epoch));
  else
    std::snprintf(buf, sizeof buf, "epoch_%04lld_step_%06lld.pt", static_cast<long long>(epoch),
                  static_cast<long long>(epoch_step));
  return buf;
}

std::string checkpoint_side_file(const std::string& checkpoint, const std::string& tag) {
  fs::path p(checkpoint);
  return (p.parent_path() / (p.stem().string() + "." + tag + ".pt")).string();
}

namespace {
// The side files of checkpoint `path`: STEM.TAG.pt, TAG without a dot.
std::vector<fs::path> side_files_of(const fs::path& path) {
  std::vector<fs::path> out;
  const std::string prefix = path.stem().string() + ".";
  std::error_code ec;
  for (fs::directory_iterator it(path.parent_path(), ec), end; !ec && it != end; it.increment(ec)) {
    const std::string f = it->path().filename().string();
    if (f.size() <= prefix.size() + 3 || f.compare(0, prefix.size(), prefix) != 0) continue;
    if (f.compare(f.size() - 3, 3, ".pt") != 0) continue;
    const std::string tag = f.substr(prefix.size(), f.size() - prefix.size() - 3);
    std::error_code fec;
    if (tag.find('.') == std::string::npos && it->is_regular_file(fec)) out.push_back(it->path());
  }
  return out;
}
}  // namespace

std::vector<std::string> checkpoints_newest_first(const std::string& dir) {
  std::vector<std::pair<std::pair<long long, long long>, std::string>> found;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string f = it->path().filename().string();
    long long e = 0, st = 0;
    int used = 0;
    std::error_code fec;
    if (!it->is_regular_file(fec)) continue;
    if (std::sscanf(f.c_str(), "epoch_%lld_step_%lld.pt%n", &e, &st, &used) == 2 && used == static_cast<int>(f.size())) {
      found.push_back({{e, st}, it->path().string()});
    } else if (std::sscanf(f.c_str(), "epoch_%lld.pt%n", &e, &used) == 1 && used == static_cast<int>(f.size())) {
      found.push_back({{e, 0}, it->path().string()});
    }
  }
  std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::string> out;
  for (auto& f : found) out.push_back(std::move(f.second));
  return out;
}

std::string latest_checkpoint(const std::string& dir) {
  auto all = checkpoints_newest_first(dir);
  return all.empty() ? "" : all.front();
}

std::vector<std::string> prune_checkpoints(const std::string& dir, int64_t keep, const std::string& written) {
  std::vector<std::string> removed;
  if (keep < 1) return removed;
  const std::vector<std::string> all = checkpoints_newest_first(dir);
  std::error_code ec;
  for (size_t i = static_cast<size_t>(keep); i < all.size(); ++i) {
    if (!written.empty() && fs::equivalent(all[i], written, ec)) continue;
    const std::vector<fs::path> side = side_files_of(all[i]);
    if (!fs::remove(all[i], ec)) continue;
    removed.push_back(all[i]);
    for (const auto& f : side)
      if (fs::remove(f, ec)) removed.push_back(f.string());
  }
  return removed;
}

// ---- reading ----------------------------------------------------------------

std::string read_text(const fs::path& path, std::uint64_t max_bytes) {
  if (!exists_at_all(path)) return "";
  try {
    return base::read_file_bounded(path.string(), max_bytes);
  } catch (const std::exception& e) {
    throw Error(base::printable(e.what(), 1024));
  }
}

void for_each_line(const fs::path& path, const std::function<void(const std::string&, std::int64_t)>& fn,
                   const std::function<void(std::int64_t, std::uint64_t)>& on_long) {
  if (!exists_at_all(path)) return;
  const std::string problem = base::regular_file_problem(path.string(), base::kMaxLogFileBytes);
  if (!problem.empty()) throw Error(base::printable(problem, 1024));
  // O_NONBLOCK and a second look after open: a file swapped for a FIFO in between
  // is refused, not waited on.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) throw Error("cannot read '" + shown(path) + "': " + std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) throw Error("'" + shown(path) + "' is not a regular file");
  // Each byte is looked at once: a chunk is split at its newlines, and only the part
  // of the current line not yet ended is kept (a line past kMaxLogLineBytes only counted).
  std::string line;
  std::uint64_t long_bytes = 0;  // > 0: the current line is too long and is being passed over
  std::int64_t number = 0;
  std::uint64_t total = 0;
  auto end_line = [&] {
    ++number;
    if (long_bytes > 0) {
      if (on_long) on_long(number, long_bytes);
      long_bytes = 0;
    } else {
      fn(line, number);
    }
    line.clear();
  };
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error("cannot read '" + shown(path) + "': " + std::strerror(errno));
    if (n == 0) break;
    total += static_cast<std::uint64_t>(n);
    if (total > base::kMaxLogFileBytes) break;
    const char* p = buf;
    const char* const end = buf + n;
    while (p < end) {
      const char* nl = static_cast<const char*>(std::memchr(p, '\n', static_cast<size_t>(end - p)));
      const char* stop = nl ? nl : end;
      const auto piece = static_cast<std::uint64_t>(stop - p);
      if (long_bytes > 0) {
        long_bytes += piece;
      } else if (line.size() + piece > kMaxLogLineBytes) {
        long_bytes = line.size() + piece;
        std::string().swap(line);
      } else {
        line.append(p, static_cast<size_t>(piece));
      }
      if (!nl) break;
      end_line();
      p = nl + 1;
    }
  }
  if (long_bytes > 0 || !line.empty()) end_line();
}

std::string long_line_problem(std::uint64_t bytes) {
  return "a line of " + std::to_string(bytes) + " bytes, more than the " + std::to_string(kMaxLogLineBytes) +
         " a record may have";
}

const std::vector<const char*>& summary_string_keys() {
  static const std::vector<const char*> keys = {"name", "status", "device", "precision", "memory_format", "recipe_hash"};
  return keys;
}
const std::vector<const char*>& summary_number_keys() {
  static const std::vector<const char*> keys = {"top1",   "top5",     "val_loss", "epochs",        "steps",
                                                "clips_per_s", "wall_s", "train_s", "params",       "flops_per_clip",
                                                "frames", "global_batch", "threads", "skipped_steps", "skipped_samples",
                                                "classes", "metrics_lines_lost", "noise_scale", "noise_g2",
                                                "noise_trace", "noise_measurements"};
  return keys;
}

json read_summary(const fs::path& file) {
  const std::string text = read_text(file);
  if (text.empty() && !exists_at_all(file)) return json();
  const std::string name = "'" + shown(file) + "'";
  json j;
  try {
    j = json::parse(text);
  } catch (const std::exception& e) {
    throw Error(name + " is not valid JSON: " + e.what());
  }
  if (!j.is_object()) throw Error(name + " is " + type_word(j) + ", not a JSON object");
  std::string why;
  for (const char* k : summary_string_keys())
    if (!string_key(j, k, why)) throw Error(name + ": " + why);
  for (const char* k : summary_number_keys())
    if (!number_or_null(j, k, why)) throw Error(name + ": " + why);
  return j;
}

std::string metrics_record_problem(const json& j) {
  if (!j.is_object()) return std::string("a JSON ") + (j.is_array() ? "array" : "value") + ", not an object";
  std::string why;
  if (!string_key(j, "type", why)) return why;
  for (const char* k : kMetricsNumberKeys)
    if (!number_or_null(j, k, why)) return why;
  return "";
}

std::optional<double> EvalRecord::value(const std::string& key) const {
  if (key == "top1") return top1;
  if (key == "top5") return top5;
  if (key == "val_loss") return val_loss;
  if (auto it = hooks.find(key); it != hooks.end()) return it->second;
  return std::nullopt;
}

void SkippedLines::add(const fs::path& file, std::int64_t line, const std::string& why) {
  if (++count > 5) return;
  where += (where.empty() ? "" : "; ") + shown(file) + ":" + std::to_string(line) + ": " + why;
}

std::string SkippedLines::text(const fs::path& file) const {
  return "skipped " + std::to_string(count) + (count == 1 ? " line" : " lines") + " of '" + shown(file) + "' (" + where +
         (count > 5 ? "; ..." : "") + ")";
}

void for_each_record(const fs::path& file, SkippedLines& skipped,
                     const std::function<void(const std::string&, std::int64_t)>& fn) {
  for_each_line(
      file, [&](const std::string& line, std::int64_t number) { if (!line.empty()) fn(line, number); },
      [&](std::int64_t number, std::uint64_t bytes) { skipped.add(file, number, long_line_problem(bytes)); });
}

Metrics read_metrics(const fs::path& dir) {
  Metrics m;
  const fs::path file = RunDir(dir).metrics();
  for_each_record(file, m.skipped, [&](const std::string& line, int64_t number) {
    json j;
    try {
      j = json::parse(line);
    } catch (const std::exception&) {
      m.skipped.add(file, number, "not JSON");
      return;
    }
    const std::string why = metrics_record_problem(j);
    if (!why.empty()) {
      m.skipped.add(file, number, why);
      return;
    }
    const std::string type = j.value("type", "");
    if (type == "step") {
      StepRecord s;
      s.global_step = static_cast<int64_t>(num(j, "global_step"));
      s.epoch = static_cast<int64_t>(num(j, "epoch"));
      s.step = static_cast<int64_t>(num(j, "step"));
      s.ranks = j.contains("ranks") ? static_cast<int64_t>(num(j, "ranks")) : 1;
      s.loss = j.contains("loss") && j["loss"].is_number() ? j["loss"].get<double>() : std::nan("");
      s.lr = num(j, "lr");
      s.clips_per_s = num(j, "clips_per_s");
      s.step_s = num(j, "step_s");
      s.data_s = num(j, "data_s");
      s.compute_s = num(j, "compute_s");
      s.comm_s = num(j, "comm_s");
      if (auto e = opt_num(j, "epochs_trained")) s.epochs_trained = *e;
      m.steps.push_back(s);
    } else if (type == "eval") {
      EvalRecord e;
      e.epoch = static_cast<int64_t>(num(j, "epoch"));
      e.global_step = static_cast<int64_t>(num(j, "global_step"));
      e.top1 = opt_num(j, "top1");
      e.top5 = opt_num(j, "top5");
      e.val_loss = opt_num(j, "val_loss");
      if (auto c = opt_num(j, "clips_trained")) e.clips_trained = static_cast<int64_t>(*c);
      e.train_s = opt_num(j, "train_s");
      e.wall_s = opt_num(j, "wall_s");
      static const std::set<std::string> own{"epoch", "global_step", "top1",          "top5",
                                             "val_loss", "clips_trained", "train_s", "wall_s"};
      for (auto it = j.begin(); it != j.end(); ++it)
        if (it->is_number() && !own.count(it.key())) e.hooks[it.key()] = it->get<double>();
      m.evals.push_back(e);
    }
  });
  return m;
}

std::string resolved_hash(const fs::path& resolved_toml) {
  std::istringstream in(read_text(resolved_toml));
  std::string first;
  std::getline(in, first);
  const std::string tag = kResolvedHashTag;
  return first.rfind(tag, 0) == 0 ? first.substr(tag.size()) : "";
}

std::string recorded_failure(const fs::path& dir) {
  const fs::path failures = RunDir(dir).failures();
  std::error_code ec;
  if (!fs::is_directory(failures, ec)) return "";
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(failures, ec))
    if (e.is_regular_file(ec)) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    std::istringstream in(read_text(f));
    std::string line, last;
    while (std::getline(in, line))
      if (!line.empty()) last = line;
    if (!last.empty()) return f.filename().string() + ": " + last;
  }
  return "";
}

// ---- writing ----------------------------------------------------------------

namespace {
void write_atomic(const fs::path& path, const std::string& text) {
  try {
    base::write_file_atomic(path.string(), text);
  } catch (const std::exception& e) {
    throw Error(e.what());
  }
}
}  // namespace

void write_resolved(const fs::path& dir, const std::string& recipe_hash, const std::string& toml) {
  write_atomic(RunDir(dir).resolved(), std::string(kResolvedHashTag) + recipe_hash + "\n" + toml);
}

void write_summary(const fs::path& dir, const json& summary) {
  write_atomic(RunDir(dir).summary(), summary.dump(2) + "\n");
}

void truncate_metrics(const fs::path& dir, int64_t global_step, int64_t epochs_done) {
  const fs::path path = RunDir(dir).metrics();
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(path, ec))) return;
  // A FIFO or a device in its place is refused, not read without end.
  std::istringstream in(read_text(path, base::kMaxLogFileBytes));
  std::string out, line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    try {
      json j = json::parse(line);
      // A line of the wrong types (j.value throws) is dropped like a torn one.
      std::string type = j.value("type", "");
      if (type == "step" && j.value("global_step", int64_t(0)) > global_step) continue;
      if (type == "eval" && j.value("epoch", int64_t(0)) > epochs_done) continue;
    } catch (const std::exception&) {
      continue;  // a torn last line from a crash
    }
    out += line + "\n";
  }
  write_atomic(path, out);
}

}  // namespace vexp::rundir
