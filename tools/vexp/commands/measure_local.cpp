#include "commands/measure_local.hpp"

#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "commands/common.hpp"
#include "vexp/plan/cluster.hpp"
#include "vexp/plan/link_fit.hpp"
#include "vexp/plan/planner.hpp"
#include "vexp/base/files.hpp"
#include "vexp/base/process.hpp"
#include "vexp/base/text.hpp"
#include "vexp/runtime/dry_run.hpp"

namespace vexp::cli {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {
using Clock = std::chrono::steady_clock;

// A TOML basic string.
std::string toml_str(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    if (c == '\n') {
      o += "\\n";
      continue;
    }
    o += c;
  }
  return o + "\"";
}

std::string fmt(double v, const char* f = "%.6g") {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  std::string s = b;
  // A TOML float needs a '.' or an exponent.
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

std::string join_cmd(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) s += (s.empty() ? "" : " ") + shell_quote(a);
  return s;
}

// `path` may be written: absent, or a regular file. base::Error (invalid) otherwise.
void check_writable_target(const fs::path& path) {
  std::error_code ec;
  const auto st = fs::symlink_status(path, ec);
  if (ec || st.type() == fs::file_type::not_found) return;
  if (st.type() != fs::file_type::regular)
    throw base::invalid("'" + path.string() + "' exists and is not a regular file; not overwriting it");
}

// Refuses a target that is not a regular file, then writes it atomically.
void write_target_atomic(const fs::path& path, const std::string& text) {
  check_writable_target(path);
  base::write_file_atomic(path.string(), text);
}

struct Proc {
  int rc = -1;
  std::string out, err;
};

// Runs argv[0] (searched on PATH) through vexp::base with the arguments, stdin from
// /dev/null, its standard output and error in files of `scratch`; returns its exit
// code (128 + N for signal N) and both outputs.
Proc run_process(const std::vector<std::string>& argv, const fs::path& scratch) {
  base::SpawnOptions o;
  o.stdin_path = "/dev/null";
  o.stdout_path = (scratch / "stdout").string();
  o.stderr_path = (scratch / "stderr").string();
  base::ProcessStatus st;
  st = base::run_program(argv, o);
  Proc p;
  p.rc = st.signal ? 128 + st.signal : st.exit_code;
  p.out = base::read_file_bounded(o.stdout_path, base::kMaxLogFileBytes);
  p.err = base::read_file_bounded(o.stderr_path, base::kMaxLogFileBytes);
  std::error_code ec;
  fs::remove(o.stdout_path, ec);
  fs::remove(o.stderr_path, ec);
  return p;
}

// A failed measurement: what it printed last goes to stderr as its own lines (each
// escaped), the error itself stays one line.
base::Error measurement_error(const std::string& what, const std::string& output) {
  std::string t = output.size() > 1500 ? "..." + output.substr(output.size() - 1500) : output;
  while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
  if (!t.empty()) {
    std::cerr << "vexp: the measurement's last output:\n";
    std::istringstream lines(t);
    for (std::string line; std::getline(lines, line);) std::cerr << "  " << base::printable(line) << "\n";
  }
  return base::failure(what);
}

// Runs a measurement and parses its JSON output; Exit naming the command when it fails.
json run_json(const std::vector<std::string>& argv, const fs::path& scratch) {
  Proc p = run_process(argv, scratch);
  if (p.rc != 0)
    throw measurement_error("measurement failed (exit " + std::to_string(p.rc) + "): " + join_cmd(argv), p.err);
  // mpirun may print lines of its own; the JSON object is the last top-level `{`.
  const size_t at = p.out.find("{\n");
  try {
    return json::parse(at == std::string::npos ? p.out : p.out.substr(at));
  } catch (const std::exception& e) {
    throw measurement_error("measurement printed no JSON: " + join_cmd(argv) + ": " + e.what(), p.out);
  }
}

int available_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

// The speed of each core this process may run on, at a fixed loop of multiply-adds
// over a 64 KiB array (cache-resident: the core, not the memory), the calling thread
// pinned to each core in turn, `rounds` rounds interleaved; its affinity is restored
// after. `ratio`: the slowest core's median time over the fastest's, inverted (1: alike);
// 1 when the thread cannot be pinned or there is one core. A virtual machine's vCPUs
// differ where the host shares a physical core with other work: the 2-core machine's
// second vCPU ran vexp's steps 25 % slower than its first for an hour at a time.
constexpr int kCoreRounds = 5;

struct CoreSpeeds {
  std::vector<int> cpus;
  std::vector<double> ms;  // median loop time per core
  double ratio = 1;
};

CoreSpeeds measure_core_speeds(int rounds) {
  CoreSpeeds s;
  cpu_set_t mine;
  CPU_ZERO(&mine);
  if (::sched_getaffinity(0, sizeof mine, &mine) != 0) return s;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &mine)) s.cpus.push_back(c);
  std::vector<std::vector<double>> times(s.cpus.size());
  std::vector<float> a(16384);
  for (size_t i = 0; i < a.size(); ++i) a[i] = 1.0f + static_cast<float>(i % 7) * 1e-4f;
  volatile float sink = 0;
  bool pinned = true;
  for (int r = 0; r < rounds && pinned; ++r)
    for (size_t k = 0; k < s.cpus.size(); ++k) {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(s.cpus[k], &one);
      if (::sched_setaffinity(0, sizeof one, &one) != 0) {
        pinned = false;
        break;
      }
      std::this_thread::yield();
      const auto t0 = Clock::now();
      float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      for (int rep = 0; rep < 6000; ++rep)
        for (size_t i = 0; i < a.size(); i += 8)
          for (int l = 0; l < 8; ++l) acc[l] = acc[l] * 0.999f + a[i + static_cast<size_t>(l)];
      times[k].push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      float total = 0;
      for (float x : acc) total += x;
      sink = sink + total;
    }
  ::sched_setaffinity(0, sizeof mine, &mine);
  if (!pinned || s.cpus.size() < 2) {
    s.ms.clear();
    return s;
  }
  for (auto& t : times) {
    std::sort(t.begin(), t.end());
    s.ms.push_back(t[t.size() / 2]);
  }
  const auto [lo, hi] = std::minmax_element(s.ms.begin(), s.ms.end());
  s.ratio = *hi > 0 ? *lo / *hi : 1;
  return s;
}

// "core 0 10.2 ms, core 1 12.9 ms".
std::string core_speeds_text(const CoreSpeeds& s) {
  std::string t;
  for (size_t k = 0; k < s.ms.size(); ++k)
    t += (k ? ", core " : "core ") + std::to_string(s.cpus[k]) + " " + fmt(s.ms[k], "%.1f") + " ms";
  return t.empty() ? std::string("not measured (the thread cannot be pinned, or one core)") : t;
}

// The 1-minute load average (/proc/loadavg; the tests set VEXP_TEST_LOADAVG), or a
// negative number when unknown.
double load_average() {
  const char* given = std::getenv("VEXP_TEST_LOADAVG");
  const std::string text = given ? std::string(given) : base::read_file_or_empty("/proc/loadavg", 4096);
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  return end != text.c_str() ? v : -1.0;
}

std::string host_name() {
  char b[256] = {0};
  if (::gethostname(b, sizeof b - 1) != 0) return "localhost";
  return b;
}

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) {
      const size_t c = line.find(':');
      if (c != std::string::npos) {
        std::string m = line.substr(c + 1);
        m.erase(0, m.find_first_not_of(' '));
        return m;
      }
    }
  return "unknown CPU";
}

std::string utc_date() { return base::utc_now("%Y-%m-%d %H:%M UTC"); }

struct Storage {
  double read_GBps = 0;
  json runs = json::array();
};

// Writes `mb` MiB of random bytes into `dir`, flushes them to disk, drops them
// from the page cache and times reading them back (3 times; the median).
Storage measure_storage(const fs::path& dir, double mb) {
  const size_t chunk = 4u << 20;
  const size_t total = std::max<size_t>(chunk, static_cast<size_t>(mb * 1048576.0) / chunk * chunk);
  const fs::path file = dir / "read_test.bin";
  std::vector<char> buf(chunk);
  std::mt19937_64 rng(1);
  for (size_t i = 0; i + 8 <= chunk; i += 8) {
    const uint64_t v = rng();
    std::memcpy(buf.data() + i, &v, 8);
  }
  {
    const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) throw base::failure("cannot write '" + file.string() + "' for the storage measurement");
    for (size_t done = 0; done < total; done += chunk) {
      buf[0] = static_cast<char>(done >> 22);  // no two chunks alike
      if (::write(fd, buf.data(), chunk) != static_cast<ssize_t>(chunk)) {
        ::close(fd);
        throw base::failure("cannot write '" + file.string() + "' (disk full?)");
      }
    }
    ::fsync(fd);
    ::close(fd);
  }
  Storage s;
  std::vector<double> rates;
  for (int r = 0; r < 3; ++r) {
    const int fd = ::open(file.c_str(), O_RDONLY);
    if (fd < 0) throw base::failure("cannot read '" + file.string() + "'");
    const int dropped = ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    const auto t0 = Clock::now();
    size_t got = 0;
    for (;;) {
      const ssize_t n = ::read(fd, buf.data(), chunk);
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    ::close(fd);
    const double rate = static_cast<double>(got) / secs / 1e9;
    rates.push_back(rate);
    s.runs.push_back({{"bytes", got}, {"seconds", secs}, {"GBps", rate}, {"page_cache_dropped", dropped == 0}});
  }
  std::error_code ec;
  fs::remove(file, ec);
  std::sort(rates.begin(), rates.end());
  s.read_GBps = rates[1];
  return s;
}

// Total size of the regular files under `dir` with extension `ext`, and their count.
std::pair<double, int64_t> file_bytes(const fs::path& dir, const std::string& ext) {
  double bytes = 0;
  int64_t n = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file() && e.path().extension() == ext) {
      bytes += static_cast<double>(e.file_size());
      ++n;
    }
  return {bytes, n};
}

std::string stem_of(const std::string& recipe) { return fs::path(recipe).stem().string(); }

// What [[gpu.profile]] model must say for `vexp plan` to match the recipe (plan::model_key).
std::string recipe_model_key(const std::string& recipe, const std::vector<std::string>& plugin_paths) {
  Session s;
  load_session_plugins(s, plugin_paths);
  bool ok = false;
  ok = open_recipe(s, recipe, planning_options());
  if (!ok) {
    print_recipe_diagnostics(s, recipe, false);
    throw base::invalid("");
  }
  return plan::model_key(*s.plan);
}

// The median of `v` (0 when empty), `v` sorted in place.
double median_of(std::vector<double>& v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0.0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// `phase` given `samples` (sorted here) and their median.
void set_samples(json& phase, std::vector<double> samples) {
  phase["median_ms"] = median_of(samples);
  phase["samples_ms"] = std::move(samples);
}

// `parts[0]` with each phase's samples pooled over all `parts` (bench train JSONs:
// the rounds of one profile) and their median.
json pooled(const std::vector<json>& parts) {
  json j = parts.at(0);
  for (auto& [name, phase] : j.at("phases").items()) {
    std::vector<double> all;
    for (const auto& pr : parts)
      for (const auto& v : pr.at("phases").at(name).at("samples_ms")) all.push_back(v.get<double>());
    set_samples(phase, std::move(all));
  }
  return j;
}

// The ranks of one run (bench train JSONs of copies started together) as one
// data-parallel run: at each step, every phase of the rank whose compute (forward +
// backward + optimizer) took longest, since a synchronous step waits for its slowest
// rank; the phases' medians over those steps. `slowest_rank_steps` counts the steps
// each rank was the slowest. The average of the ranks would miss what a run waits
// for where the ranks' cores differ in speed (a virtual machine's vCPUs, one of them
// sharing its physical core with another tenant: 27 % apart on the 2-core machine
// at times).
json lockstep(const json& per_rank) {
  json j = per_rank.at(0);
  size_t n = SIZE_MAX;
  for (const json& r : per_rank) n = std::min(n, r.at("phases").at("step").at("samples_ms").size());
  auto at = [](const json& r, const std::string& phase, size_t i) {
    return r.at("phases").at(phase).at("samples_ms").at(i).get<double>();
  };
  std::vector<size_t> slowest(n, 0);
  json counts = json::array();
  for (size_t k = 0; k < per_rank.size(); ++k) counts.push_back(0);
  for (size_t i = 0; i < n; ++i) {
    double worst = -1;
    for (size_t k = 0; k < per_rank.size(); ++k) {
      const json& r = per_rank[k];
      const double compute = at(r, "forward", i) + at(r, "backward", i) + at(r, "optimizer", i);
      if (compute > worst) {
        worst = compute;
        slowest[i] = k;
      }
    }
    counts[slowest[i]] = counts[slowest[i]].get<int64_t>() + 1;
  }
  for (auto& [name, phase] : j.at("phases").items()) {
    std::vector<double> v;
    for (size_t i = 0; i < n; ++i) v.push_back(at(per_rank[slowest[i]], name, i));
    set_samples(phase, std::move(v));
  }
  // Each step's backward over its own forward (the slowest rank's): the two phases of
  // one step see the same minute of the machine, two runs' medians do not (BucketCost).
  json ratios = json::array();
  for (size_t i = 0; i < n; ++i) {
    const double f = at(per_rank[slowest[i]], "forward", i);
    if (f > 0) ratios.push_back(at(per_rank[slowest[i]], "backward", i) / f);
  }
  j["backward_over_forward"] = ratios;
  j["slowest_rank_steps"] = counts;
  return j;
}

// `vexp bench train ... --json` (argv) run by `np` ranks at once with `sets` added
// (the local backend: independent copies; the MPI one: training together): rank 0's
// JSON with each phase's samples the slowest rank's at each step (lockstep) and their
// median, plus busy_ranks = np and every rank's JSON under "per_rank".
json bench_train_busy(std::vector<std::string> argv, int np, const fs::path& scratch,
                      const std::vector<std::string>& sets) {
  for (auto it = sets.rbegin(); it != sets.rend(); ++it) argv.insert(argv.begin() + 4, {"--set", *it});
  const fs::path out_dir = scratch / "busy";
  std::error_code ec;
  fs::remove_all(out_dir, ec);
  fs::create_directories(out_dir, ec);
  const std::vector<std::string> m = base::mpirun_argv(np, argv, out_dir.string());
  Proc p = run_process(m, scratch);
  if (p.rc != 0)
    throw measurement_error("measurement failed (exit " + std::to_string(p.rc) + "): " + join_cmd(m), p.err);
  json per_rank = json::array();
  for (int r = 0; r < np; ++r) {
    const fs::path f = out_dir / ("rank." + std::to_string(r) + ".out");
    std::ifstream in(f);
    std::stringstream ss;
    ss << in.rdbuf();
    try {
      per_rank.push_back(json::parse(ss.str()));
    } catch (const std::exception& e) {
      throw base::failure("rank " + std::to_string(r) + " of " + join_cmd(m) + " printed no JSON (" +
                                   f.string() + "): " + e.what());
    }
  }
  json j = lockstep(per_rank);
  j["busy_ranks"] = np;
  j["per_rank"] = per_rank;
  j["command"] = join_cmd(m);
  return j;
}

}  // namespace

void add_measure_local_options(CLI::App* cmd, MeasureLocalArgs& a) {
  auto* g = cmd->add_option_group("measure-local", "Measuring this machine (--measure-local)");
  g->add_flag("--measure-local", a.enabled,
              "Measure this machine and write a cluster file (--out); the recipes given are the compute "
              "profiles measured (default: vexp's quickstart tsm_motion.toml and tsn_motion.toml)");
  g->add_option("--out", a.out, "Cluster file --measure-local writes (default clusters/local.toml); its "
                                "measurements go to the folder of its stem (clusters/local/)");
  g->add_option("--ranks", a.ranks, "Ranks per node measured (default: this machine's cores, at least 2)")
      ->check(CLI::Range(2, 4096));
  g->add_option("--measure-threads", a.threads,
                "Compute threads per rank of the measured profiles, e.g. 1,2 (default: cores / ranks)")
      ->delimiter(',')
      ->check(CLI::Range(1, 4096));
  g->add_option("--measure-steps", a.steps, "Timed training steps per profile (median)")->check(CLI::Range(1, 100000));
  g->add_option("--measure-warmup", a.warmup, "Untimed training steps first")->check(CLI::Range(0, 100000));
  g->add_option("--measure-rounds", a.rounds,
                "Times each compute profile is measured, the rounds interleaved (every profile once, then again): "
                "a machine whose speed drifts spreads over every profile alike; the median of all rounds' steps")
      ->check(CLI::Range(1, 100));
  g->add_flag("--measure-append", a.append,
              "Pool this run's rounds with the measurements already in --out's folder (an earlier --measure-local "
              "of the same recipes, --measure-threads, --ranks and --measure-steps): each profile, bucket cost and "
              "core-speed figure then spans every run, e.g. rounds taken between other work or at several times "
              "of day; refused, before anything is measured, where an earlier measurement is missing or differs");
  g->add_option("--measure-settle", a.settle,
                "Measure a profile's round again (after 5 s) when its step median is slower than the profile's fastest "
                "earlier round (this run's or, with --measure-append, an earlier run's) by more than this fraction, "
                "e.g. 0.08: a round caught in a slow stretch of a machine whose speed moves for minutes (0: never)")
      ->check(CLI::Range(0.0, 10.0));
  g->add_option("--measure-settle-tries", a.settle_tries, "Measurements of a round at most with --measure-settle")
      ->check(CLI::Range(1, 100));
  g->add_flag("--synthetic-input", a.synthetic,
              "Profile compute on random clips instead of the recipe's dataset through its loader (for recipes "
              "whose data is not on this machine; the loader's share of the cores is then not in the profile)");
  g->add_option("--allreduce-mb", a.allreduce_mb, "Allreduce sizes in MiB the link is fitted to (two or more)")
      ->delimiter(',')
      ->check(CLI::Range(0.001, 65536.0));
  g->add_option("--storage-mb", a.storage_mb, "Size of the file read for the storage bandwidth (MiB)")
      ->check(CLI::Range(4.0, 1048576.0));
}

namespace {

// One --measure-local run: where its measurements go and how each step runs.
struct Measuring {
  explicit Measuring(const MeasureLocalArgs& args) : a(args) {}
  const MeasureLocalArgs& a;
  std::string exe;
  int cores = 0, ranks = 0;
  double load = -1;  // the 1-minute load average before the measurements (negative: unknown)
  fs::path out, meas, meas_rel;  // the cluster file; the folder of its measurements (and its name beside it)
  std::optional<base::TempDir> scratch;  // on the output's file system: the storage measurement reads it
  std::vector<std::string> plugin_argv;
  CoreSpeeds cores_before, cores_after;  // around the compute profiles
  json earlier_cores = json::array();    // --measure-append: the earlier runs' (cores.json)
  std::string date;                      // when this run began (UTC)
  // This run's: the slower of its two measurements' ratios (cores.json's "min").
  double run_core_speed_min() const { return std::min(cores_before.ratio, cores_after.ratio); }
  // [cpu] core_speed_min: this run's, or an earlier run's the profiles are pooled with
  // where smaller.
  double core_speed_min() const {
    double s = run_core_speed_min();
    for (const json& r : earlier_cores) s = std::min(s, r.at("min").get<double>());
    return s;
  }
  Clock::time_point t_start = Clock::now();
  const fs::path& tmp() const { return scratch->path(); }
  // A progress line on stderr.
  void say(const std::string& what) const {
    std::cerr << "vexp: measure-local [" << static_cast<int>(std::chrono::duration<double>(Clock::now() - t_start).count())
              << " s] " << what << "\n";
  }
  // A measurement's JSON in the folder; returns its name relative to the cluster file.
  std::string save(const std::string& name, const json& j) const {
    write_target_atomic(meas / name, j.dump(2) + "\n");
    return (meas_rel / name).generic_string();
  }
};

// "a to b" over a profile's rounds' step medians (plan::round_range, as the plan reads them).
std::string round_range_text(const json& j) {
  const std::optional<plan::RoundRange> r = plan::round_range(j);
  return r ? fmt(r->low_ms, "%.1f") + " to " + fmt(r->high_ms, "%.1f") : std::string("unknown");
}

// What each gradient bucket costs one model's backward on more than one rank
// (per_bucket_ms): the model trained by all the ranks together (the MPI backend,
// world_size = ranks) with 25 MiB buckets and with 0.05 MiB ones; the backward grows
// with the bucket count. The machine's own speed moves by a quarter between two runs
// seconds apart (a virtual machine's vCPUs), far more than a few buckets' milliseconds,
// so each step's backward is read against the same step's forward, which the buckets
// do not touch: per_bucket_ms = (median(b / f)_small - median(b / f)_large) * f /
// (n_small - n_large), b / f per step of the slowest rank (lockstep), pooled over the
// rounds, f the two forwards' pooled medians' mean, at least 0. The cost is the
// model's own: a bucket's allreduce waits for the ranks that are behind in the
// backward, and how far they drift apart grows with the backward's length. Both sizes
// are measured twice a round, in the order 25, 0.05, 0.05, 25 MiB (measure_profiles).
// Both runs' JSON go to buckets_STEM.json.
struct BucketCost {
  double per_bucket_ms = 0;
  int threads = 0;
  std::string from, how;
};

struct Profile {
  std::string recipe, key, from;
  int threads, busy;
  json j;
  BucketCost bucket;  // its model's (measured at the first thread count)
};

constexpr double kBucketMb[2] = {25.0, 0.05};

BucketCost bucket_cost(const Measuring& m, const std::string& recipe, int threads, const json& large,
                       const json& small) {
  auto median = [](const json& j, const char* phase) {
    return j.at("phases").at(phase).at("median_ms").get<double>();
  };
  auto buckets = [](const json& j) { return j.value("buckets", int64_t{0}); };
  BucketCost b;
  b.threads = threads;
  // The median over the steps of each step's backward / forward (lockstep); a file
  // without them (an older measurement) gives its medians' ratio.
  auto ratio = [&](const json& j) {
    std::vector<double> v;
    for (const json& x : j.value("backward_over_forward", json::array()))
      if (x.is_number()) v.push_back(x.get<double>());
    if (v.empty()) return median(j, "backward") / median(j, "forward");
    return median_of(v);
  };
  const int64_t dn = buckets(small) - buckets(large);
  const double fl = median(large, "forward"), fs = median(small, "forward");
  if (dn > 0 && fl > 0 && fs > 0) {
    const double rl = ratio(large), rs = ratio(small);
    const double f = 0.5 * (fl + fs), grow = (rs - rl) * f;
    b.per_bucket_ms = std::max(0.0, grow / static_cast<double>(dn));
    b.how = "each step's backward over its forward (25, 0.05, 0.05, 25 MiB in each round), median " + fmt(rl, "%.3f") + " with " +
            std::to_string(buckets(large)) + " bucket(s) of 25 MiB, " + fmt(rs, "%.3f") + " with " +
            std::to_string(buckets(small)) + " of 0.05 MiB: the backward grows by " + fmt(grow, "%.1f") +
            " ms at the forwards' mean " + fmt(f, "%.1f") + " ms" + (grow < 0 ? " (less: no cost measured)" : "");
  } else if (dn > 0) {
    b.how = "no forward time measured: no cost measured";
  } else {
    b.how = "the model's gradients fit one 0.05 MiB bucket: no cost measured";
  }
  json runs = json::array({large, small});
  for (json& r : runs) r.erase("per_rank");
  b.from = m.save("buckets_" + stem_of(recipe) + ".json",
                  json{{"recipe", recipe}, {"threads", threads}, {"ranks", m.ranks},
                       {"rounds", large.value("rounds", m.a.rounds)}, {"measured_at", large.value("measured_at", json())},
                       {"per_bucket_ms", b.per_bucket_ms}, {"how", b.how}, {"runs", runs}});
  return b;
}

// One compute measurement of --measure-local: a recipe at a thread count, alone
// (busy 1), under mpirun on all the ranks at once, or (bucket_mb > 0) trained by
// the ranks together at that bucket size; its rounds' bench train JSONs, and with
// --measure-append the earlier runs' pooled JSON of it.
struct Slot {
  std::string recipe, key, name;
  int threads, busy;
  std::vector<std::string> argv, sets;  // sets: bench_train_busy's (busy > 1)
  double bucket_mb;                     // > 0: a bucket-cost run
  std::vector<json> rounds;
  json earlier;                         // null unless --measure-append
  fs::path earlier_file;
};

std::vector<Slot> profile_slots(const Measuring& m, const std::vector<std::string>& recipes,
                                const std::vector<int>& threads) {
  const MeasureLocalArgs& a = m.a;
  const int ranks = m.ranks;
  std::vector<Slot> slots;
  const std::vector<std::string> local{"dist.backend=\"local\""};
  for (const auto& r : recipes) {
    const std::string key = recipe_model_key(r, a.plugin_paths);
    for (int t : threads) {
      // The recipe's own loader feeds the steps (unless --synthetic-input): on a CPU
      // node its decode threads share the cores with compute, as in `vexp run`, and
      // the profile's forward / backward times carry that contention.
      std::vector<std::string> argv{m.exe, "bench", "train", r, "--steps", std::to_string(a.steps),
                                    "--warmup", std::to_string(a.warmup), "--set", "run.threads=" + std::to_string(t),
                                    "--json"};
      if (a.synthetic) argv.insert(argv.begin() + 4, "--synthetic");
      argv.insert(argv.end(), m.plugin_argv.begin(), m.plugin_argv.end());
      const std::string name = "train_" + stem_of(r) + "_t" + std::to_string(t);
      slots.push_back({r, key, name + ".json", t, 1, argv, {}, 0, {}, {}, {}});
      slots.push_back({r, key, name + "_busy" + std::to_string(ranks) + ".json", t, ranks, argv, local, 0, {}, {}, {}});
      if (t != threads.front()) continue;
      for (double mb : kBucketMb)
        slots.push_back({r, key, "buckets_" + stem_of(r) + ".json", t, ranks, argv,
                         {"dist.backend=\"mpi\"", "dist.world_size=" + std::to_string(ranks), "dist.bucket_mb=" + fmt(mb)},
                         mb, {}, {}, {}});
    }
  }
  return slots;
}

// --measure-append: the earlier measurement at `file`, parsed; refused when missing or
// not JSON (`what`: what it should hold).
json read_earlier(const fs::path& file, const std::string& what) {
  std::error_code ec;
  if (!fs::exists(file, ec))
    throw base::invalid("--measure-append: there is no earlier measurement '" + file.string() + "' (" + what +
                        "): run --measure-local without --measure-append first, with the same recipes, "
                        "--measure-threads and --ranks");
  const std::string text = base::read_file_bounded(file.string(), base::kMaxTextFileBytes, "earlier measurement");
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    throw base::invalid("--measure-append: '" + file.string() + "' is not a measurement's JSON: " + e.what());
  }
}

// A phase's samples as an earlier measurement must hold them: a non-empty list of numbers.
bool is_sample_list(const json* s) {
  return s && s->is_array() && !s->empty() &&
         std::all_of(s->begin(), s->end(), [](const json& x) { return x.is_number(); });
}

// Refuses an earlier measurement that is not of the run this one makes: each of `want`'s
// keys must hold the same value (a recipe compared as a path), and its phases must have
// their samples, each a number.
void check_earlier(const json& e, const fs::path& file, const json& want) {
  const std::string bad = "--measure-append: '" + file.string() + "' ";
  if (!e.is_object()) throw base::invalid(bad + "is not a measurement's JSON object");
  for (const auto& [k, v] : want.items()) {
    bool same = e.contains(k) && e.at(k) == v;
    if (!same && k == "recipe" && e.contains(k) && e.at(k).is_string()) {
      std::error_code ec1, ec2;
      same = fs::weakly_canonical(e.at(k).get<std::string>(), ec1) == fs::weakly_canonical(v.get<std::string>(), ec2);
    }
    if (!same)
      throw base::invalid(bad + "was measured with " + k + " " + (e.contains(k) ? e.at(k).dump() : "(none)") +
                          ", this run's is " + v.dump() + ": measure again without --measure-append");
  }
  const json* ph = e.contains("phases") ? &e.at("phases") : nullptr;
  if (!ph || !ph->is_object() || !ph->contains("step"))
    throw base::invalid(bad + "has no phases with their samples");
  for (const auto& [name, phase] : ph->items()) {
    const json* s = phase.is_object() && phase.contains("samples_ms") ? &phase.at("samples_ms") : nullptr;
    if (!is_sample_list(s)) throw base::invalid(bad + "phase '" + name + "' has no samples_ms, a list of numbers");
  }
  for (const char* k : {"round_step_medians_ms", "per_rank", "slowest_rank_steps", "measured_at"})
    if (e.contains(k) && !e.at(k).is_array()) throw base::invalid(bad + "its " + std::string(k) + " is not a list");
  if (e.contains("rounds") && !e.at("rounds").is_number_integer())
    throw base::invalid(bad + "its rounds is not a whole number");
}

// A profile's earlier JSON keeps each round's samples of every phase (pool_calm_rounds),
// one entry per round_step_medians_ms.
void check_round_samples(const json& e, const fs::path& file) {
  const std::string bad = "--measure-append: '" + file.string() + "' ";
  const json* b = e.contains("round_samples_ms") ? &e.at("round_samples_ms") : nullptr;
  const json* med = e.contains("round_step_medians_ms") ? &e.at("round_step_medians_ms") : nullptr;
  if (!b || !b->is_array() || b->empty() || !med || med->size() != b->size())
    throw base::invalid(bad + "has no round_samples_ms, one per round_step_medians_ms (measured by an older vexp?): "
                              "measure again without --measure-append");
  for (const json& r : *b) {
    bool ok = r.is_object() && r.size() == e.at("phases").size();
    for (const auto& [name, phase] : e.at("phases").items()) {
      ok = ok && r.contains(name) && is_sample_list(&r.at(name));
      if (!ok) break;
    }
    if (!ok)
      throw base::invalid(bad + "has a round in round_samples_ms without a list of numbers for each of its phases");
  }
}

// --measure-append: each slot's earlier JSON, read and checked before anything is measured.
void read_earlier_slots(const Measuring& m, std::vector<Slot>& slots) {
  for (Slot& sl : slots) {
    sl.earlier_file = m.meas / sl.name;
    json want{{"recipe", sl.recipe}, {"threads", sl.threads}, {"busy_ranks", sl.busy}, {"steps", m.a.steps}};
    if (sl.bucket_mb > 0) {
      const json doc = read_earlier(sl.earlier_file, "the bucket cost of " + sl.recipe);
      const json* runs = doc.is_object() && doc.contains("runs") ? &doc.at("runs") : nullptr;
      const size_t k = sl.bucket_mb == kBucketMb[0] ? 0 : 1;
      if (!runs || !runs->is_array() || runs->size() != 2)
        throw base::invalid("--measure-append: '" + sl.earlier_file.string() + "' has no two runs (25 and 0.05 MiB)");
      sl.earlier = runs->at(k);
      want["bucket_mb"] = sl.bucket_mb;
      want["ranks"] = m.ranks;
    } else {
      sl.earlier = read_earlier(sl.earlier_file, "the profile of " + sl.recipe + " at " + std::to_string(sl.threads) +
                                                     " thread(s), " + std::to_string(sl.busy) + " rank(s) busy");
    }
    check_earlier(sl.earlier, sl.earlier_file, want);
    if (sl.bucket_mb <= 0) check_round_samples(sl.earlier, sl.earlier_file);
  }
}

// --measure-append: the earlier runs of cores.json (each with its "min", the slowest
// core's speed over the fastest's), checked.
json read_earlier_cores(const fs::path& file) {
  const json doc = read_earlier(file, "the cores' speeds");
  if (!doc.is_object() || !doc.contains("runs") || !doc.at("runs").is_array() ||
      !std::all_of(doc.at("runs").begin(), doc.at("runs").end(), [](const json& r) {
        return r.is_object() && r.contains("min") && r.at("min").is_number() && r.at("min").get<double>() > 0 &&
               r.at("min").get<double>() <= 1;
      }))
    throw base::invalid("--measure-append: '" + file.string() + "' has no runs, each with its min (above 0, up to 1)");
  return doc.at("runs");
}

// A profile's rounds (its earlier runs' with --measure-append, and this run's), each
// round's samples kept in `round_samples_ms`; with --measure-settle F > 0 a round whose
// step median is more than F slower than the fastest round's is left out of the pooled
// samples and their medians (`round_pooled`, one flag a round): a round caught in a slow
// stretch of the machine, which --measure-settle could not measure again in time (a
// profile's first round has no earlier one to compare with; the slow stretch may last
// longer than its tries), does not pull the profile away from the rounds measured in the
// calm state, whichever came first. Rounds measured again later decide again: the flags
// are recomputed over every round at each run. The bucket runs pool every round: their
// cost is read from each step's backward over the same step's forward, which a drift of
// the machine's speed does not move.
json pool_calm_rounds(const Measuring& m, const Slot& sl, json j) {
  json blocks = sl.earlier.is_object() ? sl.earlier.value("round_samples_ms", json::array()) : json::array();
  for (const json& r : sl.rounds) {
    json b = json::object();
    for (const auto& [name, phase] : r.at("phases").items()) b[name] = phase.at("samples_ms");
    blocks.push_back(std::move(b));
  }
  std::vector<double> step;
  for (const json& b : blocks) {
    std::vector<double> v = b.at("step").get<std::vector<double>>();
    step.push_back(median_of(v));
  }
  const double fastest = *std::min_element(step.begin(), step.end());
  json flags = json::array();
  for (double s : step) flags.push_back(m.a.settle <= 0 || s <= fastest * (1 + m.a.settle));
  for (auto& [name, phase] : j.at("phases").items()) {
    std::vector<double> all;
    for (size_t k = 0; k < blocks.size(); ++k)
      if (flags[k].get<bool>())
        for (const json& v : blocks[k].at(name)) all.push_back(v.get<double>());
    set_samples(phase, std::move(all));
  }
  j["round_samples_ms"] = std::move(blocks);
  j["round_pooled"] = std::move(flags);
  return j;
}

// A slot's JSON: every phase's samples pooled over its earlier measurement (with
// --measure-append) and this run's rounds, their medians, and the rounds' records
// appended to the earlier ones (round_step_medians_ms, per_rank, slowest_rank_steps,
// rounds, measured_at).
json pooled_slot(const Measuring& m, const Slot& sl) {
  std::vector<json> parts;
  if (!sl.earlier.is_null()) {
    auto names = [](const json& j) {
      std::vector<std::string> n;
      for (const auto& [name, phase] : j.at("phases").items()) n.push_back(name);
      return n;  // sorted: a json object's keys are
    };
    for (const json& r : sl.rounds)
      if (names(r) != names(sl.earlier))
        throw base::invalid("--measure-append: '" + sl.earlier_file.string() +
                            "' has other phases than this run's measurement of it");
    parts.push_back(sl.earlier);
  }
  parts.insert(parts.end(), sl.rounds.begin(), sl.rounds.end());
  // A profile's phases pooled by round (pool_calm_rounds); a bucket run's, every sample.
  json j = sl.bucket_mb > 0 ? pooled(parts) : pool_calm_rounds(m, sl, parts.at(0));
  auto earlier_list = [&](const char* k) { return sl.earlier.is_object() ? sl.earlier.value(k, json::array()) : json::array(); };
  json medians = earlier_list("round_step_medians_ms"), per_rank = earlier_list("per_rank"),
       slowest = earlier_list("slowest_rank_steps"), at = earlier_list("measured_at"),
       ratios = earlier_list("backward_over_forward"), attempts = earlier_list("settle_attempts");
  for (const json& r : sl.rounds) {
    attempts.push_back(r.value("settle_attempts", 1));  // per round: --measure-settle's measurements of it
    medians.push_back(r.at("phases").at("step").at("median_ms"));
    for (const json& x : r.value("backward_over_forward", json::array())) ratios.push_back(x);
    if (r.contains("per_rank"))
      for (const json& x : r.at("per_rank")) per_rank.push_back(x);
    if (r.contains("slowest_rank_steps")) slowest.push_back(r.at("slowest_rank_steps"));
  }
  if (sl.busy > 1) {
    j["per_rank"] = per_rank;
    j["slowest_rank_steps"] = slowest;  // per round
    j["backward_over_forward"] = ratios;  // per step, every round's
  }
  at.push_back(m.date);
  j["rounds"] = (sl.earlier.is_object() ? sl.earlier.value("rounds", 0) : 0) + m.a.rounds;
  j["round_step_medians_ms"] = medians;
  j["settle_attempts"] = attempts;
  j["measured_at"] = at;  // one entry per run of --measure-local pooled here
  return j;
}

std::vector<Profile> measure_profiles(const Measuring& m, std::vector<Slot>& slots) {
  const MeasureLocalArgs& a = m.a;
  // 1. Compute profiles: each recipe and thread count alone (busy_ranks 1), and
  // under mpirun on all `ranks` at once (busy_ranks = ranks: on a CPU node the
  // ranks share the cores and the memory bandwidth). The mpirun copies train
  // with the local backend (no gradient exchange: the model charges the
  // allreduce separately) and each writes its own JSON; the phases are the slowest
  // rank's at each step (lockstep) and their medians. Then each recipe's bucket cost
  // (BucketCost): the ranks training it together at 25 and at 0.05 MiB buckets.
  //
  // Every run is measured `a.rounds` times, the rounds interleaved (each run once,
  // then each again): a machine whose speed drifts for minutes (the other tenants of
  // a virtual machine's host; what ran just before, such as the oversubscribed busy
  // profile of another thread count) then spreads over every profile alike instead
  // of landing on one. The phases are the medians of all rounds' samples (and, with
  // --measure-append, of the earlier runs' too); round_step_medians_ms keeps each
  // round's step median.
  //
  // A recipe's two bucket sizes are measured twice a round, in the order 25, 0.05, 0.05,
  // 25 MiB (ABBA): the bucket cost is a difference of a few milliseconds between them,
  // and the machine's speed drifts between two runs seconds apart; in that order a drift
  // that runs one way during the four runs reaches both sizes alike, and each size has
  // twice the steps (the small I3D's cost came out 0.2 to 1.1 ms a bucket from one
  // validation to the next with one run of each, its cases showing 0.1 to 0.6).
  auto measure = [&](Slot& sl, int round) {
    const std::string how = sl.bucket_mb > 0 ? std::to_string(sl.busy) + " ranks training together, " +
                                                   fmt(sl.bucket_mb) + " MiB buckets"
                            : sl.busy == 1 ? std::string("alone")
                                           : std::to_string(sl.busy) + " ranks at once under mpirun";
    m.say("bench train " + sl.recipe + " (" + std::to_string(sl.threads) + " thread(s), " + how +
          (a.rounds > 1 ? "; round " + std::to_string(round) + " of " + std::to_string(a.rounds) : "") + ")");
    // The fastest round measured of this profile so far (this run's and the earlier
    // runs' pooled with it): the reference of --measure-settle.
    double fastest = std::numeric_limits<double>::infinity();
    if (sl.earlier.is_object())
      for (const json& x : sl.earlier.value("round_step_medians_ms", json::array()))
        if (x.is_number()) fastest = std::min(fastest, x.get<double>());
    for (const json& r : sl.rounds) fastest = std::min(fastest, r.at("phases").at("step").at("median_ms").get<double>());
    json best;  // the fastest attempt
    for (int attempt = 1;; ++attempt) {
      json j;
      if (sl.busy == 1) {
        j = run_json(sl.argv, m.tmp());
        j["command"] = join_cmd(sl.argv);
        j["busy_ranks"] = 1;
      } else {
        j = bench_train_busy(sl.argv, m.ranks, m.tmp(), sl.sets);
      }
      const double step = j.at("phases").at("step").at("median_ms").get<double>();
      if (best.is_null() || step < best.at("phases").at("step").at("median_ms").get<double>()) best = std::move(j);
      best["settle_attempts"] = attempt;
      if (a.settle <= 0 || !std::isfinite(fastest) || step <= fastest * (1 + a.settle) || attempt >= a.settle_tries)
        break;
      m.say("  its step median " + fmt(step, "%.1f") + " ms is over " + fmt(100 * a.settle, "%g") +
            " % slower than its fastest round's " + fmt(fastest, "%.1f") + ": measured again in 5 s (--measure-settle)");
      std::this_thread::sleep_for(std::chrono::seconds(5));
    }
    sl.rounds.push_back(std::move(best));
  };
  for (int round = 1; round <= a.rounds; ++round)
    for (size_t i = 0; i < slots.size(); ++i) {
      if (slots[i].bucket_mb != kBucketMb[0]) {
        measure(slots[i], round);
        continue;
      }
      Slot &large = slots[i], &small = slots.at(i + 1);  // profile_slots puts the 0.05 MiB slot next
      for (Slot* sl : {&large, &small, &small, &large}) measure(*sl, round);
      ++i;
    }
  std::vector<Profile> profiles;
  std::map<std::string, BucketCost> costs;
  // Every slot pooled before any is written: a refused earlier file leaves the folder as it was.
  std::vector<json> pooled_all;
  for (const Slot& sl : slots) pooled_all.push_back(pooled_slot(m, sl));
  for (size_t i = 0; i < slots.size(); ++i) {
    const Slot& sl = slots[i];
    const json& j = pooled_all[i];
    if (sl.bucket_mb == kBucketMb[0]) {
      costs[sl.recipe] = bucket_cost(m, sl.recipe, sl.threads, j, pooled_all.at(i + 1));
      ++i;  // the 0.05 MiB slot, read with it
      continue;
    }
    profiles.push_back({sl.recipe, sl.key, m.save(sl.name, j), sl.threads, sl.busy, j, {}});
  }
  for (Profile& p : profiles) p.bucket = costs.at(p.recipe);
  return profiles;
}

// Decode rates and bytes per clip (the [cpu] and [storage] tables).
struct Decode {
  std::string from_frames, from_videos;
  double frames_clip_bytes = 0, videos_clip_bytes = 0;
  int64_t clip_frames = 0;
};

Decode measure_decode(const Measuring& m) {
  const std::string& exe = m.exe;
  const std::vector<std::string>& plugin_argv = m.plugin_argv;
  // 2. Decode rates on a synthetic dataset: videos, and the same clips as frame folders.
  m.say("vexp data make-synthetic, extract-frames");
  const fs::path vids = m.tmp() / "videos", frames = m.tmp() / "frames";
  auto run_checked = [&](const std::vector<std::string>& argv) {
    Proc p = run_process(argv, m.tmp());
    if (p.rc != 0) throw measurement_error("measurement step failed: " + join_cmd(argv), p.err);
  };
  run_checked({exe, "data", "make-synthetic", "--out", vids.string(), "--train-clips", "64", "--val-clips", "8", "--seed",
               "1"});
  const std::string data_recipe = shipped_recipe("quickstart/tsm_motion_video.toml");
  auto bench_data = [&](const std::vector<std::string>& sets, const std::string& layout) {
    m.say("bench data (" + layout + ")");
    std::vector<std::string> argv{exe, "bench", "data", data_recipe, "--split", "train", "--threads", "1", "--repeat", "2",
                                  "--json"};
    for (const auto& s : sets) argv.insert(argv.end(), {"--set", s});
    argv.insert(argv.end(), plugin_argv.begin(), plugin_argv.end());
    json j = run_json(argv, m.tmp());
    j["command"] = join_cmd(argv);
    j["layout"] = layout;
    return j;
  };
  json dv = bench_data({"data.params.root=\"" + vids.string() + "\""}, "videos");
  run_checked({exe, "data", "extract-frames", (vids / "train_list.txt").string(), "--out", frames.string(), "--workers",
               "1"});
  json df = bench_data({"data.params.root=\"" + frames.string() + "\"", "data.params.train_list=\"train_list_frames.txt\"",
                        "data.params.val_list=\"train_list_frames.txt\"", "data.params.layout=\"frames\""},
                       "frames");
  const auto [jpg_bytes, jpgs] = file_bytes(frames, ".jpg");
  const auto [mp4_bytes, mp4s] = file_bytes(vids, ".mp4");
  const int64_t clip_frames = df.at("clip").at(0).get<int64_t>();
  if (jpgs == 0 || mp4s == 0) throw base::failure("the synthetic dataset has no frames or videos");
  const double frames_clip_bytes = jpg_bytes / static_cast<double>(jpgs) * static_cast<double>(clip_frames);
  const double videos_clip_bytes = mp4_bytes / static_cast<double>(mp4s);
  df["bytes_per_frame"] = jpg_bytes / static_cast<double>(jpgs);
  df["bytes_per_clip"] = frames_clip_bytes;
  dv["bytes_per_video"] = videos_clip_bytes;
  const std::string from_frames = m.save("data_frames.json", df), from_videos = m.save("data_videos.json", dv);
  return {from_frames, from_videos, frames_clip_bytes, videos_clip_bytes, clip_frames};
}

// The intra-node link fitted to allreduce times; `from` names its JSON.
vexp::plan::LinkFit measure_link(const Measuring& m, const std::vector<double>& sizes, std::string& from_allreduce) {
  const MeasureLocalArgs& a = m.a;
  const std::string& exe = m.exe;
  const int ranks = m.ranks;
  // 3. The intra-node link: the MPI allreduce over `ranks` ranks at each size.
  std::vector<std::pair<double, double>> points;
  json ar = json::array();
  for (double mb : sizes) {
    m.say("bench allreduce --backend mpi, " + std::to_string(ranks) + " ranks, " + fmt(mb) + " MiB");
    const std::vector<std::string> argv = base::mpirun_argv(
        ranks, {exe, "bench", "allreduce", "--backend", "mpi", "--mb", fmt(mb), "--reps", std::to_string(a.reps), "--json"},
        {});
    json j = run_json(argv, m.tmp());
    j["command"] = join_cmd(argv);
    const double bytes = j.at("mb").get<double>() * 1048576.0, secs = j.at("median_ms").get<double>() / 1e3;
    points.push_back({bytes, secs});
    ar.push_back(j);
  }
  vexp::plan::LinkFit link;
  try {
    link = vexp::plan::fit_ring(points, ranks);
  } catch (const std::invalid_argument& e) {
    throw base::invalid(std::string("--allreduce-mb: ") + e.what());
  }
  if (!link.fitted) std::fprintf(stderr, "vexp: warning: the intra-node link: %s\n", link.how.c_str());
  from_allreduce =
      m.save("allreduce.json", json{{"ranks", ranks},
                                  {"model", "t = 2(n-1) latency + 2(n-1)/n bytes / bandwidth, " + link.how},
                                  {"latency_us", link.latency_us},
                                  {"bandwidth_GBps", link.bandwidth_GBps},
                                  {"results", ar}});
  return link;
}

// The cluster file's text: every table from the measurements, each with its
// source (`where`: the machine, its load, the date, the command).
std::string cluster_file_text(const Measuring& m, const std::string& where, const std::string& cpu,
                              const std::vector<Profile>& profiles, const vexp::plan::LinkFit& link,
                              const std::vector<double>& sizes, const std::string& from_allreduce, const Decode& d,
                              const Storage& st, const std::string& from_storage) {
  const MeasureLocalArgs& a = m.a;
  const int cores = m.cores, ranks = m.ranks;
  const fs::path& meas_rel = m.meas_rel;
  const std::string host = host_name();
  const std::string &from_frames = d.from_frames, &from_videos = d.from_videos;
  const double frames_clip_bytes = d.frames_clip_bytes, videos_clip_bytes = d.videos_clip_bytes;
  const int64_t clip_frames = d.clip_frames;
  std::ostringstream o;
  o << "# This machine, " << where << "\n"
    << "# Every number is a measurement of that command; the JSON files it wrote to " << meas_rel.generic_string()
    << "/ hold\n# them (`from` names them; each has the command that made it). Remake with the command above.\n\n";
  o << "[cluster]\nname = " << toml_str("local (" + host + ")") << "\nnodes = 1\ngpus_per_node = " << ranks
    << "   # ranks, " << cores << " core(s)\nsource = " << toml_str(where) << "\n\n";
  o << "[gpu]\nname = " << toml_str("CPU rank on " + cpu) << "\n\n";
  for (const auto& p : profiles) {
    const json& ph = p.j.at("phases");
    o << "[[gpu.profile]]   # " << fs::path(p.recipe).filename().string() << ", " << p.threads << " thread(s), "
      << (p.busy == 1 ? std::string("alone") : std::to_string(p.busy) + " ranks at once") << ": forward "
      << fmt(ph.at("forward").at("median_ms").get<double>(), "%.1f") << " ms, backward "
      << fmt(ph.at("backward").at("median_ms").get<double>(), "%.1f") << " ms, optimizer "
      << fmt(ph.at("optimizer").at("median_ms").get<double>(), "%.1f") << " ms per "
      << p.j.at("clips_per_step").get<int64_t>() << " clips\n"
      << "model = " << toml_str(p.key) << "\nfrom = " << toml_str(p.from) << "\nbusy_ranks = " << p.busy;
    // Other programs' threads when it began: the plan widens the range of a profile
    // measured under load (Compute::low).
    if (m.load >= 0) o << "\nbackground_load = " << fmt(m.load, "%.2f");
    o << "\nper_bucket_ms = " << fmt(p.bucket.per_bucket_ms, "%.4g") << "   # " << p.bucket.from
      << "\nper_bucket_source = "
      << toml_str("the recipe at " + std::to_string(p.bucket.threads) + " thread(s) trained by " +
                  std::to_string(ranks) + " ranks together at 25 and 0.05 MiB buckets under mpirun (" + p.bucket.from +
                  "): " + p.bucket.how + "; " + where);
    o << "\nsource = "
      << toml_str(std::string(a.synthetic ? "vexp bench train --synthetic" : "vexp bench train (the recipe's loader)") +
                  ", median of " + std::to_string(a.steps) + " steps" +
                  (p.busy == 1 ? std::string()
                               : " of each of " + std::to_string(p.busy) + " copies run at once by mpirun") +
                  [&] {
                    const int rounds = p.j.value("rounds", a.rounds);
                    const json at = p.j.value("measured_at", json::array());
                    std::string s = rounds > 1 ? " in each of " + std::to_string(rounds) +
                                                     " interleaved rounds (step medians " + round_range_text(p.j) + " ms)"
                                               : std::string();
                    const json flags = p.j.value("round_pooled", json::array());
                    const auto kept = std::count(flags.begin(), flags.end(), json(true));
                    if (kept < static_cast<std::ptrdiff_t>(flags.size()))
                      s += ", " + std::to_string(kept) + " of them pooled (the others more than " +
                           fmt(100 * a.settle, "%g") + " % slower than the fastest: --measure-settle)";
                    if (at.size() > 1)
                      s += ", pooled over " + std::to_string(at.size()) + " runs of --measure-local (--measure-append) from " +
                           at.front().get<std::string>() + " to " + at.back().get<std::string>();
                    return s;
                  }() +
                  " (" + where + ")")
      << "\n\n";
  }
  o << "[links.intra]   # " << from_allreduce << "\nbandwidth_GBps = " << fmt(link.bandwidth_GBps, "%.4g")
    << "\nlatency_us = " << fmt(link.latency_us, "%.4g") << "\nsource = "
    << toml_str("fitted to vexp bench allreduce --backend mpi over " + std::to_string(ranks) + " ranks at " + [&] {
         std::string s;
         for (size_t i = 0; i < sizes.size(); ++i) s += (i ? ", " : "") + fmt(sizes[i]);
         return s;
       }() + " MiB (" + from_allreduce + "): t = 2(n-1) latency + 2(n-1)/n bytes / bandwidth, " + link.how + "; " + where)
    << "\n\n";
  // Models without a profile of their own take the first recipe's bucket cost.
  const BucketCost& bc = profiles.front().bucket;
  o << "[reducer]   # models without a per_bucket_ms of their own: " << bc.from
    << "\nper_bucket_ms = " << fmt(bc.per_bucket_ms, "%.4g") << "\nsource = "
    << toml_str(fs::path(profiles.front().recipe).filename().string() + " at " + std::to_string(bc.threads) +
                " thread(s), vexp bench train under mpirun, " + std::to_string(ranks) +
                " ranks training together at 25 and 0.05 MiB buckets (" + bc.from + "): " + bc.how + "; " + where)
    << "\n\n";
  o << "[cpu]   # decoding shares these cores with the ranks' compute threads\ncores_per_node = " << cores
    << "\ncore_speed_min = " << fmt(m.core_speed_min(), "%.3f") << "\ncore_speed_source = "
    << toml_str("a fixed multiply-add loop, the thread pinned to each core in turn, " + std::to_string(kCoreRounds) +
                " interleaved rounds, the median per core, before the compute profiles (" +
                core_speeds_text(m.cores_before) + ") and after them (" + core_speeds_text(m.cores_after) +
                "): the slowest core over the fastest, the smaller of the two" +
                (m.earlier_cores.empty() ? std::string()
                                         : " and of the " + std::to_string(m.earlier_cores.size()) +
                                               " earlier run(s) the profiles are pooled with (" +
                                               (meas_rel / "cores.json").generic_string() + ")") +
                "; " + where)
    << "\nfrom_frames = " << toml_str(from_frames) << "\nfrom_videos = " << toml_str(from_videos) << "\nsource = "
    << toml_str("vexp bench data --threads 1 on synthetic 32x32 motion clips (vexp data make-synthetic) as mp4 "
                "files and as JPEG frame folders (vexp data extract-frames); " + where)
    << "\n\n";
  o << "[storage]   # " << from_storage << "\nread_GBps = " << fmt(st.read_GBps, "%.4g")
    << "\nnode_read_GBps = " << fmt(st.read_GBps, "%.4g") << "\nframes_clip_bytes = " << fmt(frames_clip_bytes, "%.1f")
    << "\nvideos_clip_bytes = " << fmt(videos_clip_bytes, "%.1f") << "\nsource = "
    << toml_str("read back a " + fmt(a.storage_mb) + " MiB file of the output's file system after fsync and "
                "posix_fadvise(DONTNEED) (median of 3); bytes per clip: mean JPEG frame x " +
                std::to_string(clip_frames) + " frames, mean mp4 file (a clip reads its whole video); " + where)
    << "\n";
  return o.str();
}

}  // namespace

void run_measure_local(const MeasureLocalArgs& a) {
  Measuring m(a);
  m.exe = base::exe_path();
  const std::string& exe = m.exe;
  if (exe.empty()) throw base::failure("cannot find the vexp executable (/proc/self/exe) to run the measurements");
  const int cores = m.cores = available_cores();
  // A busy machine measures slow: the cluster file would plan with its leftovers. The
  // load is said now and recorded in the cluster file (its comment and every `source`).
  const double load = m.load = load_average();
  const bool busy = load > 0.5 * cores;
  if (busy)
    std::cerr << "vexp: warning: this machine is busy (load average " << load << " over " << cores
              << " cores): the measurements will be slower than an idle machine's; measure it idle for a "
              << "cluster file to plan with\n";
  const std::string load_text =
      load < 0 ? std::string("load average unknown")
               : "load average " + fmt(load, "%.2f") + " over " + std::to_string(cores) + " core(s) at the start" +
                     (busy ? std::string(", busy: slower than idle") : std::string());
  const int ranks = m.ranks = a.ranks > 0 ? a.ranks : std::max(2, cores);
  std::vector<int> threads = a.threads;
  if (threads.empty()) threads.push_back(std::max(1, cores / ranks));
  std::vector<std::string> recipes = a.recipes;
  if (recipes.empty())
    recipes = {shipped_recipe("quickstart/tsm_motion.toml"), shipped_recipe("quickstart/tsn_motion.toml")};
  for (const auto& r : recipes) {
    std::error_code ec;
    if (!fs::is_regular_file(r, ec)) throw base::invalid("'" + r + "': no such recipe file");
  }
  std::vector<double> sizes = a.allreduce_mb;
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  if (sizes.size() < 2) throw base::invalid("--allreduce-mb: give two or more different sizes");

  // Where things go: FILE, and FILE's stem as the folder of the measurements.
  const fs::path& out = m.out = fs::path(a.out);
  check_writable_target(out);
  const fs::path out_dir = out.has_parent_path() ? out.parent_path() : fs::path(".");
  const fs::path& meas_rel = m.meas_rel = out.stem();
  const fs::path& meas = m.meas = out_dir / meas_rel;
  std::error_code ec;
  fs::create_directories(meas, ec);
  if (!fs::is_directory(meas, ec))
    throw base::invalid("cannot make the folder '" + meas.string() + "' for the measurements");
  m.scratch.emplace("vexp-measure", meas.string());
  for (const auto& d : canonical_plugin_paths(a.plugin_paths)) m.plugin_argv.insert(m.plugin_argv.end(), {"--plugin-path", d});

  const std::string host = host_name(), date = m.date = utc_date(), cpu = cpu_model();
  std::string command = "vexp plan --measure-local";
  for (const auto& r : a.recipes) command += " " + shell_quote(r);
  command += " --out " + shell_quote(a.out) + " --ranks " + std::to_string(ranks) + " --measure-threads ";
  for (size_t i = 0; i < threads.size(); ++i) command += (i ? "," : "") + std::to_string(threads[i]);
  // The options that differ from their defaults, so that "remake with the command
  // above" measures alike (validate.py's rounds: --measure-rounds 1, --measure-settle).
  const MeasureLocalArgs defaults;
  auto num = [](double v) {  // as typed: 32, not fmt's TOML float 32.0
    char b[64];
    std::snprintf(b, sizeof b, "%g", v);
    return std::string(b);
  };
  if (a.steps != defaults.steps) command += " --measure-steps " + std::to_string(a.steps);
  if (a.warmup != defaults.warmup) command += " --measure-warmup " + std::to_string(a.warmup);
  if (a.rounds != defaults.rounds) command += " --measure-rounds " + std::to_string(a.rounds);
  if (a.settle != defaults.settle) command += " --measure-settle " + num(a.settle);
  if (a.settle_tries != defaults.settle_tries) command += " --measure-settle-tries " + std::to_string(a.settle_tries);
  if (a.synthetic) command += " --synthetic-input";
  if (a.allreduce_mb != defaults.allreduce_mb) {
    command += " --allreduce-mb ";
    for (size_t i = 0; i < a.allreduce_mb.size(); ++i) command += (i ? "," : "") + num(a.allreduce_mb[i]);
  }
  if (a.storage_mb != defaults.storage_mb) command += " --storage-mb " + num(a.storage_mb);
  if (a.append) command += " --measure-append";
  m.t_start = Clock::now();

  std::vector<Slot> slots = profile_slots(m, recipes, threads);
  if (a.append) {
    // Every earlier measurement is read and checked before anything is measured.
    read_earlier_slots(m, slots);
    m.earlier_cores = read_earlier_cores(meas / "cores.json");
  }
  m.say("core speeds");
  m.cores_before = measure_core_speeds(kCoreRounds);
  const std::vector<Profile> profiles = measure_profiles(m, slots);
  m.say("core speeds");
  m.cores_after = measure_core_speeds(kCoreRounds);
  {
    auto speeds = [](const CoreSpeeds& s) { return json{{"cpus", s.cpus}, {"ms", s.ms}, {"ratio", s.ratio}}; };
    json runs = m.earlier_cores;
    runs.push_back(json{{"measured_at", m.date},
                        {"before", speeds(m.cores_before)},
                        {"after", speeds(m.cores_after)},
                        {"min", m.run_core_speed_min()}});
    m.save("cores.json", json{{"runs", runs}});
  }
  // Where the plan widens its ranges by them (Compute::low / high).
  const double speed_min = m.core_speed_min();
  if (speed_min < 1 - vexp::plan::kValidatedTolerance)
    std::cerr << "vexp: warning: this machine's cores differ in speed (before the profiles: "
              << core_speeds_text(m.cores_before) << "; after: " << core_speeds_text(m.cores_after)
              << "): the slowest runs at " << static_cast<int>(std::lround(100 * speed_min))
              << " % of the fastest (a virtual machine whose host shares a core with other work?); a step depends on "
              << "the cores its threads land on, and the plan's ranges widen by as much\n";
  const Decode d = measure_decode(m);
  std::string from_allreduce;
  const vexp::plan::LinkFit link = measure_link(m, sizes, from_allreduce);

  // 4. Storage.
  m.say("storage read bandwidth (" + fmt(a.storage_mb) + " MiB file)");
  Storage st = measure_storage(m.tmp(), a.storage_mb);
  const std::string from_storage =
      m.save("storage.json", json{{"file_system_of", fs::absolute(meas).string()}, {"read_GBps", st.read_GBps},
                                {"runs", st.runs}, {"frames_clip_bytes", d.frames_clip_bytes},
                                {"videos_clip_bytes", d.videos_clip_bytes}});

  // 5. The cluster file.
  const std::string where =
      "measured by vexp plan --measure-local on " + host + " (" + load_text + "), " + date + ": " + command;
  const std::string text =
      cluster_file_text(m, where, cpu, profiles, link, sizes, from_allreduce, d, st, from_storage);
  write_target_atomic(out, text);
  m.say("wrote " + out.string() + " and " + meas.string() + "/*.json");
  std::printf("%s: 1 node x %d ranks; intra link %.3g GB/s, %.3g us; storage %.3g GB/s; %zu profile(s)\n",
              out.string().c_str(), ranks, link.bandwidth_GBps, link.latency_us, st.read_GBps, profiles.size());
}

}  // namespace vexp::cli
