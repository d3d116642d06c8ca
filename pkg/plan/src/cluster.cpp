#include "vexp/plan/cluster.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <tuple>

#include <nlohmann/json.hpp>
#include <toml++/toml.h>

#include "vexp/base/files.hpp"
#include "vexp/base/text.hpp"
#include "vexp/dsl/recipe.hpp"
#include "vexp/schema/schema.hpp"
#include "vexp/dsl/table_check.hpp"
#include "vexp/slurm/settings.hpp"

namespace vexp::plan {
using namespace vexp::dsl;  // the recipe language reads and checks the file
namespace fs = std::filesystem;

std::optional<RoundRange> round_range(const nlohmann::json& bench) {
  if (!bench.is_object() || !bench.contains("round_step_medians_ms")) return std::nullopt;
  const nlohmann::json& rounds = bench["round_step_medians_ms"];
  if (!rounds.is_array() || rounds.size() < 2) return std::nullopt;
  std::optional<RoundRange> r;
  for (const auto& v : rounds) {
    const double x = v.is_number() ? v.get<double>() : 0;
    if (!(x > 0) || !std::isfinite(x)) return std::nullopt;
    if (!r) r = RoundRange{x, x};
    r->low_ms = std::min(r->low_ms, x);
    r->high_ms = std::max(r->high_ms, x);
  }
  return r;
}

namespace {

ParamSpec& sub_table(Schema& s, const std::string& name, const std::string& doc) {
  ParamSpec& p = s.text(name, "", doc);
  p.type = ParamType::Table;
  p.default_value = Value::table();
  return p;
}

// The ranges of a cluster file (docs/planning.md): each figure physically meaningful,
// from a lower bound above zero (a forward pass of 1e-300 ms planned 10^300 clips/s)
// to an upper one (10^300 ms from a bench JSON ran the table's columns together), so
// every derived figure of the plan stays finite and fits its column. Upper bounds also
// keep nodes x gpus_per_node within 10^8 GPUs, `vexp plan --gpus`' limit, far from
// int64 overflow. A bench JSON named by `from` is held to the same ranges.
constexpr double kMaxNodes = 100000;
constexpr double kMaxGpusPerNode = 1024;
constexpr double kMinMs = 1e-3;  // a microsecond
constexpr double kMaxMs = 1e7;   // about three hours per step

struct ClusterSchemas {
  Schema file, cluster, gpu, profile, derive, links, intra, inter, cpu, storage, reducer;
};

const ClusterSchemas& schemas() {
  static const ClusterSchemas s = [] {
    ClusterSchemas d;
    sub_table(d.file, "cluster", "The machine: name, nodes, gpus_per_node");
    sub_table(d.file, "gpu", "One rank's compute: name, [[gpu.profile]], [gpu.derive]");
    sub_table(d.file, "links", "[links.intra] and [links.inter]");
    sub_table(d.file, "cpu", "Cores per node and decode rates per core");
    sub_table(d.file, "storage", "File-system read bandwidth and bytes per clip");
    sub_table(d.file, "reducer", "What each gradient bucket costs the backward pass on more than one rank");
    d.reducer.real("per_bucket_ms", 0, "Backward time each bucket adds on more than one rank").require().at_least(0)
        .at_most(kMaxMs);
    d.reducer.text("source", "", "Where the figure comes from").require();
    sub_table(d.file, "scheduler", "The batch system vexp submit uses (kind = \"slurm\")");

    d.cluster.text("name", "", "The machine's name").require();
    d.cluster.integer("nodes", 1, "Nodes the machine has").require().at_least(1).at_most(kMaxNodes);
    d.cluster.integer("gpus_per_node", 1, "Ranks per node").require().at_least(1).at_most(kMaxGpusPerNode);
    d.cluster.text("source", "", "Where the figures come from");

    d.gpu.text("name", "", "The accelerator's name").require();
    sub_table(d.gpu, "derive", "Compute of models without a profile, from their MACs");

    Schema& p = d.profile;
    p.text("model", "", "The recipe's model key (vexp plan prints it)").require();
    p.integer("frames", 0, "Frames per clip").above(0).at_most(100000);
    p.integer("size", 0, "Crop size").above(0).at_most(100000);
    p.text("precision", "fp32", "fp32, bf16 or fp16").one_of({"fp32", "bf16", "fp16"});
    p.real("batch", 0, "Clips per rank per micro-step the times were measured at").at_least(1e-3).at_most(1e6);
    p.integer("threads", 0, "Compute threads per rank when measured").at_least(1).at_most(4096);
    p.integer("busy_ranks", 1, "Ranks computing at once on the node when measured").at_least(1).at_most(kMaxGpusPerNode);
    p.real("background_load", 0, "Other programs' runnable threads on the node when measured (its 1-minute load "
           "average just before)").at_least(0).at_most(1e6);
    p.real("forward_ms", 0, "Forward time per micro-step of `batch` clips").at_least(kMinMs).at_most(kMaxMs);
    p.real("backward_ms", 0, "Backward time per micro-step").at_least(kMinMs).at_most(kMaxMs);
    p.real("optimizer_ms", 0, "Optimizer time per step").at_least(0).at_most(kMaxMs);
    p.real("data_wait_ms", 0, "The step's wait for a loader that keeps up, per micro-step (its decode threads taking "
           "a core from the compute threads)").at_least(0).at_most(kMaxMs);
    p.text("source", "", "Where the typed-in times come from");
    p.text("from", "", "A `vexp bench train --json` output, relative to the cluster file");
    p.real("per_bucket_ms", 0, "Backward time each gradient bucket adds to this model's step on more than one rank "
           "(else [reducer]'s)").at_least(0).at_most(kMaxMs);
    p.text("per_bucket_source", "", "Where per_bucket_ms comes from");

    d.derive.real("train_macs_per_s", 0, "Multiply-adds per second of forward + backward").require().at_least(1e3).at_most(1e20);
    d.derive.real("optimizer_ms_per_mparam", 0, "Optimizer time per million parameters").require().at_least(0).at_most(kMaxMs);
    d.derive.text("source", "", "Where the rates come from").require();

    sub_table(d.links, "intra", "Between ranks of one node");
    sub_table(d.links, "inter", "Between nodes");
    for (Schema* l : {&d.intra, &d.inter}) {
      l->real("bandwidth_GBps", 0, "Bandwidth, GB/s one direction").require().at_least(1e-6).at_most(1e6);
      l->real("latency_us", 0, "Latency per message, microseconds").require().at_least(0).at_most(1e9);
      l->text("source", "", "Where the figures come from").require();
    }
    d.inter.integer("rails", 1, "Rails (NICs) per node used together").at_least(1).at_most(1024);

    Schema& c = d.cpu;
    c.real("cores_per_node", 0, "Cores free for data loading per node").require().at_least(1e-3).at_most(1e5);
    c.real("frames_clips_per_s_per_core", 0, "Decode + augment rate on frame folders").at_least(1e-6).at_most(1e9);
    c.real("videos_clips_per_s_per_core", 0, "Decode + augment rate on video files").at_least(1e-6).at_most(1e9);
    c.text("from_frames", "", "A `vexp bench data --json` output on frame folders");
    c.text("from_videos", "", "A `vexp bench data --json` output on video files");
    c.text("source", "", "Where typed-in rates come from");
    c.real("core_speed_min", 1, "The slowest core's speed over the fastest's, measured (1: alike; a virtual "
           "machine's vCPUs differ where its host shares a core with other work)").above(0).at_most(1);
    c.text("core_speed_source", "", "Where core_speed_min comes from");

    Schema& st = d.storage;
    st.real("read_GBps", 0, "Aggregate read bandwidth, GB/s").require().at_least(1e-6).at_most(1e9);
    st.real("node_read_GBps", 0, "Per-node read cap, GB/s").at_least(1e-6).at_most(1e9);
    st.real("frames_clip_bytes", 0, "Bytes read per clip on frame folders").at_least(1).at_most(1e12);
    st.real("videos_clip_bytes", 0, "Bytes read per clip on video files").at_least(1).at_most(1e12);
    st.text("source", "", "Where the figures come from").require();
    return d;
  }();
  return s;
}

const Value* table_of(const Value& t, const std::string& key);

// [scheduler]: kept apart from the plan's schemas (vexp plan never reads it).
const Schema& scheduler_schema() {
  static const Schema s = [] {
    Schema d;
    d.text("kind", "", "The batch system: slurm").require().one_of({Value(std::string("slurm"))});
    d.text("partition", "", "Partition (sbatch --partition); default: the cluster's");
    d.text("account", "", "Account charged (sbatch --account)");
    d.text("time", "", "Default time limit, Slurm syntax (MINUTES, HH:MM:SS, D-HH:MM:SS)");
    d.integer("gpus_per_node", 0, "GPUs asked for per node (--gpus-per-node); 0: none").at_least(0).at_most(kMaxGpusPerNode);
    d.integer("cpus_per_node", 0, "CPUs per node, shared by its tasks (--cpus-per-task); 0: Slurm's default")
        .at_least(0)
        .at_most(1e5);
    d.text_list("launcher", {"srun", "--mpi=pmix"}, "The words that start the ranks, before `vexp run`");
    d.text("backend", "", "dist.backend of the job's ranks when the recipe's is local (nccl on GPUs, mpi)");
    d.text_list("sbatch", {}, "Extra #SBATCH options, one per element (\"--qos=high\")");
    d.text_list("setup", {}, "Shell lines the job runs before vexp (\"module load ...\")");
    d.integer("signal_lead_s", 120, "Seconds before the time limit at which the run is told to stop")
        .at_least(10)
        .at_most(86400);
    d.integer("max_requeues", 3, "Requeues at the time limit before the run ends").at_least(0).at_most(1000);
    return d;
  }();
  return s;
}

void load_scheduler(const Value& root, Cluster& c, Diagnostics& d) {
  const Value* t = table_of(root, "scheduler");
  if (!t) return;
  const CheckedTable ct = check_table(scheduler_schema(), t, t->loc(), "[scheduler]", {}, d);
  if (!ct.ok) return;
  const Params& q = ct.params;
  bool ok = true;
  auto at = [&](const std::string& key) { const Value* v = t->find(key); return v ? v->loc() : t->loc(); };
  auto bad = [&](const std::string& key, const std::string& why) {
    d.error(at(key), "'" + key + "' in [scheduler] " + why);
    ok = false;
  };
  ClusterScheduler& sch = c.scheduler;
  slurm::Settings& s = sch.settings;
  sch.kind = q.str("kind");
  for (auto [key, out] : {std::pair<const char*, std::string*>{"partition", &s.partition}, {"account", &s.account},
                          {"backend", &s.backend}, {"time", &s.time}}) {
    if (!t->find(key)) continue;
    *out = q.str(key);
    if (out->empty()) bad(key, "is empty");  // written: not the cluster's default
  }
  s.gpus_per_node = q.i64("gpus_per_node");
  s.cpus_per_node = q.i64("cpus_per_node");
  // Two keys of one name and two meanings: [cluster] gpus_per_node is the ranks (tasks)
  // vexp starts per node, one per GPU; [scheduler] gpus_per_node the GPUs each node asks
  // Slurm for. Where both are given they must agree.
  if (s.gpus_per_node > 0 && c.gpus_per_node > 0 && s.gpus_per_node != c.gpus_per_node) {
    const std::string n = std::to_string(s.gpus_per_node), r = std::to_string(c.gpus_per_node);
    bad("gpus_per_node",
        "is " + n + ", and [cluster] gpus_per_node is " + r + ": the two differ in meaning ([cluster] gpus_per_node " +
            "is the ranks vexp starts on each node, one per GPU; [scheduler] gpus_per_node the GPUs each node asks " +
            "Slurm for, sbatch --gpus-per-node), so the job would start " + r + " rank(s) per node on " + n +
            " GPU(s)" + (s.gpus_per_node < c.gpus_per_node ? " (ranks sharing a GPU)" : " (GPUs left idle)") +
            ": give both the GPUs a node has (or [scheduler] gpus_per_node = 0 for CPU ranks)");
  }
  if (s.cpus_per_node > 0 && c.gpus_per_node > 0 && s.cpus_per_node < c.gpus_per_node)
    bad("cpus_per_node", "is " + std::to_string(s.cpus_per_node) + ", fewer than the " +
                             std::to_string(c.gpus_per_node) + " tasks per node ([cluster] gpus_per_node)");
  s.launcher = q.str_list("launcher");
  s.sbatch = q.str_list("sbatch");
  s.setup = q.str_list("setup");
  s.signal_lead_s = q.i64("signal_lead_s");
  s.max_requeues = q.i64("max_requeues");
  // Slurm's syntax, lines a batch script can hold, a time limit longer than the lead.
  for (const auto& p : slurm::settings_problems(s)) bad(p.key, p.why);
  sch.loc = t->loc();
  sch.given = ok;
}

const Value* table_of(const Value& t, const std::string& key) {
  const Value* v = t.find(key);
  return v && v->is_table() ? v : nullptr;
}

std::string resolve(const std::string& cluster_file, const std::string& rel) {
  if (fs::path(rel).is_absolute()) return rel;
  return (fs::path(cluster_file).parent_path() / rel).lexically_normal().string();
}

// The JSON file a `from` names, or nullopt with an error at the `from` value.
std::optional<nlohmann::json> read_json(const std::string& file, const Value& at, const std::string& key,
                                        const std::string& what, Diagnostics& d) {
  std::error_code ec;
  const std::string shown = "'" + key + "' = \"" + at.as_string() + "\"";
  if (!fs::is_regular_file(file, ec)) {
    d.error(at.loc(), shown + ": " + (fs::exists(file, ec) ? "'" + file + "' is not a regular file"
                                                            : "no such file '" + file + "'") +
                          " (expected " + what + ")");
    return std::nullopt;
  }
  if (fs::file_size(file, ec) > kMaxRecipeBytes) {
    d.error(at.loc(), shown + ": '" + file + "' is larger than 16 MiB (expected " + what + ")");
    return std::nullopt;
  }
  std::string text;
  try {
    // Checked again as it is opened: a file swapped for a FIFO is refused, not waited on.
    text = base::read_file_bounded(file, kMaxRecipeBytes);
  } catch (const std::exception& e) {
    d.error(at.loc(), shown + ": " + e.what() + " (expected " + what + ")");
    return std::nullopt;
  }
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    d.error(at.loc(), shown + ": '" + file + "' is not JSON (expected " + what + ")");
    return std::nullopt;
  }
  return j;
}

bool positive_number(const nlohmann::json& j) { return j.is_number() && j.get<double>() > 0; }

// Fills a profile from `vexp bench train --json`; false (reported) when the file is not one.
bool profile_from_bench(ClusterProfile& p, const Value& at, Diagnostics& d) {
  const std::string what = "a `vexp bench train --json` output";
  auto j = read_json(p.from, at, "from", what, d);
  if (!j) return false;
  const nlohmann::json& ph = (*j)["phases"];
  auto median = [&](const char* name) -> const nlohmann::json* {
    if (!ph.is_object() || !ph.contains(name) || !ph[name].is_object()) return nullptr;
    const auto& m = ph[name];
    return m.contains("median_ms") && m["median_ms"].is_number() ? &m["median_ms"] : nullptr;
  };
  const nlohmann::json& clip = (*j)["clip"];
  const bool ok = median("forward") && median("backward") && median("optimizer") && clip.is_array() &&
                  clip.size() == 4 && clip[0].is_number_integer() && clip[2].is_number_integer() &&
                  (*j)["precision"].is_string() && (*j)["clips_per_step"].is_number_integer() &&
                  (*j)["clips_per_step"].get<int64_t>() > 0;
  if (!ok) {
    d.error(at.loc(), "'from' = \"" + at.as_string() + "\": '" + p.from + "' is not " + what +
                          " (it needs phases.forward/backward/optimizer.median_ms, clip, precision, clips_per_step)");
    return false;
  }
  p.frames = clip[0].get<int64_t>();
  p.size = clip[2].get<int64_t>();
  p.precision = (*j)["precision"].get<std::string>();
  p.batch = static_cast<double>((*j)["clips_per_step"].get<int64_t>());
  if ((*j)["threads"].is_number_integer()) p.threads = (*j)["threads"].get<int64_t>();
  if ((*j)["busy_ranks"].is_number_integer() && (*j)["busy_ranks"].get<int64_t>() >= 1)
    p.busy_ranks = (*j)["busy_ranks"].get<int64_t>();
  p.forward_ms = median("forward")->get<double>();
  p.backward_ms = median("backward")->get<double>();
  p.optimizer_ms = median("optimizer")->get<double>();
  // The data wait's mean over the steps, not its median: on busy cores it is 0 in some
  // steps and 2-3 ms in the others (the loader's handoff), about half and half, and its
  // median jumps between the two from one round to the next (0.05 ms pooled over three
  // rounds of the small I3D at 2 threads whose cases waited 2.3). The mean is the wait a
  // long run adds per step. Without samples, the median.
  p.data_wait_ms = median("data") ? median("data")->get<double>() : 0;
  if (const auto& s = ph.is_object() && ph.contains("data") && ph["data"].is_object() ? ph["data"].value("samples_ms", nlohmann::json())
                                                                                        : nlohmann::json();
      s.is_array() && !s.empty()) {
    double sum = 0;
    bool numbers = true;
    for (const auto& x : s) {
      numbers = numbers && x.is_number();
      if (numbers) sum += x.get<double>();
    }
    if (numbers) p.data_wait_ms = sum / static_cast<double>(s.size());
  }
  if ((*j)["data_workers"].is_number_integer() && (*j)["data_workers"].get<int64_t>() > 0)
    p.data_threads = static_cast<double>((*j)["data_workers"].get<int64_t>());
  // Rounds of --measure-local: how far the machine's speed moved while it measured.
  const std::optional<RoundRange> rounds = round_range(*j);
  const double pooled = median("step") ? median("step")->get<double>() : 0;
  if (rounds && pooled > 0 && std::isfinite(pooled)) {
    p.round_low = std::min(1.0, rounds->low_ms / pooled);
    p.round_high = std::max(1.0, rounds->high_ms / pooled);
    p.round_low_ms = rounds->low_ms;
    p.round_high_ms = rounds->high_ms;
  }
  // The file's figures are held to the ranges of typed-in ones.
  bool in_range = true;
  for (const auto& [key, field, v] : std::vector<std::tuple<const char*, const char*, Value>>{
           {"frames", "clip[0]", Value(p.frames)}, {"size", "clip[2]", Value(p.size)},
           {"batch", "clips_per_step", Value(p.batch)}, {"threads", "threads", Value(p.threads)},
           {"busy_ranks", "busy_ranks", Value(p.busy_ranks)},
           {"forward_ms", "phases.forward.median_ms", Value(p.forward_ms)},
           {"backward_ms", "phases.backward.median_ms", Value(p.backward_ms)},
           {"optimizer_ms", "phases.optimizer.median_ms", Value(p.optimizer_ms)},
           {"data_wait_ms", "phases.data (the mean of its samples_ms, else its median_ms)", Value(p.data_wait_ms)}}) {
    if (std::string(key) == "threads" && !(*j)["threads"].is_number_integer()) continue;
    Value x = v;
    const std::string why = check_value(*schemas().profile.find(key), x);
    if (why.empty()) continue;
    d.error(at.loc(), "'from' = \"" + at.as_string() + "\": '" + p.from + "': " + field + " (the profile's '" + key +
                          "') " + why);
    in_range = false;
  }
  // (the file's own figures are held to the ranges above, before any scaling)
  // What a step took, not only its phases: the gaps between them. Medians do not add
  // (the small I3D at 2 threads on the 2-core machine: phases 29.5 ms, steps 30.1), and
  // `vexp run` measures steps. The step's median less its data wait (kept apart as
  // data_wait_ms: the plan adds it, or the wait of a loader too slow for the compute
  // instead, model.cpp) and its exchange (the plan predicts it itself) is the compute
  // the profile measured; the phases are scaled to it, in their proportions.
  if (in_range && median("step")) {
    const double sum = p.forward_ms + p.backward_ms + p.optimizer_ms;
    const double rest = median("step")->get<double>() - (median("data") ? median("data")->get<double>() : 0.0) -
                        (median("comm") ? median("comm")->get<double>() : 0.0);
    if (sum > 0 && rest > 0 && std::isfinite(rest)) {
      const double k = rest / sum;
      // The scaled figures are held to the same ranges (a step median of 1e300 is not a step).
      for (const auto& [key, v] : std::vector<std::pair<const char*, double>>{
               {"forward_ms", p.forward_ms * k}, {"backward_ms", p.backward_ms * k}, {"optimizer_ms", p.optimizer_ms * k}}) {
        Value x(v);
        const std::string why = check_value(*schemas().profile.find(key), x);
        if (why.empty()) continue;
        d.error(at.loc(), "'from' = \"" + at.as_string() + "\": '" + p.from +
                              "': phases.step.median_ms scales the profile's '" + key + "' out of its range: " + why);
        in_range = false;
        break;  // one error for the one figure at fault
      }
      if (in_range) {
        p.forward_ms *= k;
        p.backward_ms *= k;
        p.optimizer_ms *= k;
      }
    }
  }
  return in_range;
}

// The per-thread decode rate of `vexp bench data --json` at its largest thread
// count (cores busy together, as on a training node); 0 (reported) when the file is not one.
double rate_from_bench(const std::string& file, const Value& at, const std::string& key, Diagnostics& d) {
  const std::string what = "a `vexp bench data --json` output";
  auto j = read_json(file, at, key, what, d);
  if (!j) return 0;
  const nlohmann::json& results = (*j)["results"];
  const nlohmann::json* best = nullptr;
  if (results.is_array())
    for (const auto& r : results) {
      if (!r.is_object() || !r.contains("threads") || !r["threads"].is_number() || !r.contains("clips_per_s_per_thread") ||
          !positive_number(r["clips_per_s_per_thread"])) {
        best = nullptr;
        break;
      }
      if (!best || r["threads"].get<double>() > (*best)["threads"].get<double>()) best = &r;
    }
  if (!best) {
    d.error(at.loc(), "'" + key + "' = \"" + at.as_string() + "\": '" + file + "' is not " + what +
                          " (it needs results[] with threads and clips_per_s_per_thread > 0)");
    return 0;
  }
  // Held to the range of a typed-in rate.
  Value rate((*best)["clips_per_s_per_thread"].get<double>());
  const std::string why = check_value(*schemas().cpu.find("frames_clips_per_s_per_core"), rate);
  if (!why.empty()) {
    d.error(at.loc(), "'" + key + "' = \"" + at.as_string() + "\": '" + file + "': clips_per_s_per_thread " + why);
    return 0;
  }
  return rate.as_double();
}

// A measured figure `key` of table `t` needs its source `source_key` beside it: false,
// with the error at the figure, when `key` is there without it.
bool sourced(const Value& t, const char* key, const char* source_key, const std::string& where, Diagnostics& d) {
  const Value* v = t.find(key);
  if (!v || t.find(source_key)) return true;
  d.error(v->loc(), std::string("'") + key + "' in " + where + " needs '" + source_key + "' (where it comes from)");
  return false;
}

void load_profile(const Value& t, const std::string& file, Cluster& c, Diagnostics& d) {
  const std::string W = "[[gpu.profile]]";
  const CheckedTable ct = check_table(schemas().profile, &t, t.loc(), W, {}, d);
  ClusterProfile p;
  p.loc = t.loc();
  const Params& q = ct.params;
  if (q.has("model")) p.model = q.str("model");
  p.source = q.has("source") ? q.str("source") : "";
  if (!sourced(t, "per_bucket_ms", "per_bucket_source", W, d)) return;
  if (t.find("per_bucket_ms") && q.has("per_bucket_ms")) {
    p.per_bucket_ms = q.f64("per_bucket_ms");
    p.per_bucket_source = q.has("per_bucket_source") ? q.str("per_bucket_source") : "";
  }
  static const std::vector<std::string> measured{"frames", "size", "precision", "batch",
                                                 "forward_ms", "backward_ms", "optimizer_ms"};
  if (const Value* from = t.find("from"); from && from->is_string()) {
    std::string both;
    std::vector<std::string> figures = measured;
    figures.push_back("data_wait_ms");  // optional when typed in, but measured all the same
    for (const auto& k : figures)
      if (t.find(k)) both += (both.empty() ? "'" : ", '") + k + "'";
    if (!both.empty()) {
      d.error(from->loc(), "'from' in " + W + ": give either 'from' (a bench JSON) or the measured figures (" + both +
                               "), not both");
      return;
    }
    p.from = resolve(file, from->as_string());
    if (!ct.ok || !profile_from_bench(p, *from, d)) return;
    if (const Value* th = t.find("threads"); th && q.has("threads")) p.threads = q.i64("threads");
    if (t.find("busy_ranks") && q.has("busy_ranks")) p.busy_ranks = q.i64("busy_ranks");
    if (t.find("background_load") && q.has("background_load")) p.background_load = q.f64("background_load");
  } else if (!t.find("from")) {
    bool complete = true;
    for (const auto& k : measured)
      if (!t.find(k) && k != "precision") {
        d.error(t.loc(), W + " needs '" + k + "' (or 'from', a `vexp bench train --json` output)");
        complete = false;
      }
    if (!t.find("source")) {
      d.error(t.loc(), W + " with typed-in times needs 'source' (where they come from)");
      complete = false;
    }
    if (!ct.ok || !complete) return;
    p.frames = q.i64("frames");
    p.size = q.i64("size");
    p.precision = q.str("precision");
    p.batch = q.f64("batch");
    p.threads = t.find("threads") ? q.i64("threads") : 0;
    p.busy_ranks = t.find("busy_ranks") ? q.i64("busy_ranks") : 1;
    p.background_load = t.find("background_load") ? q.f64("background_load") : 0;
    p.forward_ms = q.f64("forward_ms");
    p.backward_ms = q.f64("backward_ms");
    p.optimizer_ms = q.f64("optimizer_ms");
    p.data_wait_ms = t.find("data_wait_ms") ? q.f64("data_wait_ms") : 0;
  } else {
    return;  // `from` of the wrong type: reported by check_table
  }
  c.profiles.push_back(std::move(p));
}

void load_link(const Value* t, const Schema& schema, const std::string& where, ClusterLink& l, Diagnostics& d) {
  if (!t) return;
  const CheckedTable ct = check_table(schema, t, t->loc(), where, {}, d);
  if (!ct.ok) return;
  l.given = true;
  l.bandwidth_GBps = ct.params.f64("bandwidth_GBps");
  l.latency_us = ct.params.f64("latency_us");
  l.source = ct.params.str("source");
  if (ct.params.has("rails")) l.rails = ct.params.i64("rails");
}

// The parameters of the table `key` of `parent`, checked against `schema`: none when
// it is absent or not valid (reported to `d`).
std::optional<Params> checked_table(const Value& parent, const char* key, const Schema& schema,
                                    const std::string& where, Diagnostics& d) {
  const Value* t = table_of(parent, key);
  if (!t) return std::nullopt;
  CheckedTable ct = check_table(schema, t, t->loc(), where, {}, d);
  if (!ct.ok) return std::nullopt;
  return std::move(ct.params);
}

std::optional<Cluster> load_from(const Recipe& rec, const std::string& file, Diagnostics& d, ClusterUse use) {
  // A table vexp plan needs: an error when read for planning, else noted (plan_missing).
  const bool plan = use == ClusterUse::plan;
  const ClusterSchemas& S = schemas();
  const Value& root = rec.root;
  const Loc file_loc{file, 1, 1};
  const size_t errors_before = d.error_count();
  check_table(S.file, &root, file_loc, "the cluster file", {}, d);
  Cluster c;
  c.path = file;
  const Value* cl = table_of(root, "cluster");
  if (!cl) {
    if (!root.find("cluster")) d.error(file_loc, "a cluster file needs a [cluster] table (name, nodes, gpus_per_node)");
    return std::nullopt;
  }
  const CheckedTable top = check_table(S.cluster, cl, cl->loc(), "[cluster]", {}, d);
  if (top.ok) {
    c.name = top.params.str("name");
    c.nodes = top.params.i64("nodes");
    c.gpus_per_node = top.params.i64("gpus_per_node");
    c.source = top.params.str("source");
  }

  if (const Value* gpu = table_of(root, "gpu")) {
    const CheckedTable g = check_table(S.gpu, gpu, gpu->loc(), "[gpu]", {}, d, {"profile"});
    if (g.params.has("name")) c.gpu_name = g.params.str("name");
    if (const Value* profiles = gpu->find("profile")) {
      if (!profiles->is_array()) {
        d.error(profiles->loc(), "'profile' in [gpu]: expected an array of tables ([[gpu.profile]]), got " +
                                     std::string(profiles->kind_name()));
      } else {
        for (const auto& t : profiles->as_array()) {
          if (!t.is_table()) d.error(t.loc(), "[[gpu.profile]] entries must be tables");
          else load_profile(t, file, c, d);
        }
      }
    }
    if (const auto p = checked_table(*gpu, "derive", S.derive, "[gpu.derive]", d)) {
      c.derive.given = true;
      c.derive.train_macs_per_s = p->f64("train_macs_per_s");
      c.derive.optimizer_ms_per_mparam = p->f64("optimizer_ms_per_mparam");
      c.derive.source = p->str("source");
    }
  } else if (!root.find("gpu")) {
    if (plan) d.error(file_loc, "a cluster file needs a [gpu] table (name, [[gpu.profile]] and/or [gpu.derive])");
    else c.plan_missing.push_back("[gpu]");
  }

  const Value* links = table_of(root, "links");
  if (links) check_table(S.links, links, links->loc(), "[links]", {}, d);
  const Value* intra = links ? table_of(*links, "intra") : nullptr;
  const Value* inter = links ? table_of(*links, "inter") : nullptr;
  load_link(intra, S.intra, "[links.intra]", c.intra, d);
  load_link(inter, S.inter, "[links.inter]", c.inter, d);
  const Loc links_loc = links ? links->loc() : cl->loc();
  const bool no_intra = top.ok && c.gpus_per_node > 1 && !(links && links->find("intra"));
  const bool no_inter = top.ok && c.nodes > 1 && !(links && links->find("inter"));
  if (no_intra && plan)
    d.error(links_loc, "[cluster] has " + std::to_string(c.gpus_per_node) +
                           " GPUs per node: the cluster file needs [links.intra] (bandwidth_GBps, latency_us, source)");
  if (no_inter && plan)
    d.error(links_loc, "[cluster] has " + std::to_string(c.nodes) +
                           " nodes: the cluster file needs [links.inter] (bandwidth_GBps, rails, latency_us, source)");

  if (const Value* cpu = table_of(root, "cpu")) {
    const CheckedTable ct = check_table(S.cpu, cpu, cpu->loc(), "[cpu]", {}, d);
    const Params& q = ct.params;
    if (q.has("cores_per_node")) c.cpu.cores_per_node = q.f64("cores_per_node");
    c.cpu.source = q.has("source") ? q.str("source") : "";
    if (sourced(*cpu, "core_speed_min", "core_speed_source", "[cpu]", d) && cpu->find("core_speed_min") &&
        q.has("core_speed_min")) {
      c.cpu.core_speed_min = q.f64("core_speed_min");
      c.cpu.core_speed_source = q.has("core_speed_source") ? q.str("core_speed_source") : "";
    }
    bool typed = false, any = false;
    for (auto [rate_key, from_key, out] :
         {std::tuple<const char*, const char*, double*>{"frames_clips_per_s_per_core", "from_frames",
                                                         &c.cpu.frames_clips_per_s_per_core},
          {"videos_clips_per_s_per_core", "from_videos", &c.cpu.videos_clips_per_s_per_core}}) {
      const Value* rate = cpu->find(rate_key);
      const Value* from = cpu->find(from_key);
      if (rate && from) {
        d.error(from->loc(), std::string("'") + from_key + "' in [cpu]: give either '" + rate_key + "' or '" +
                                 from_key + "', not both");
        continue;
      }
      if (rate && q.has(rate_key)) {
        *out = q.f64(rate_key);
        typed = any = true;
      } else if (from && q.has(from_key)) {
        *out = rate_from_bench(resolve(file, from->as_string()), *from, from_key, d);
        any = true;
      }
    }
    if (typed && !cpu->find("source")) d.error(cpu->loc(), "[cpu] with typed-in decode rates needs 'source'");
    if (!any && !cpu->find("frames_clips_per_s_per_core") && !cpu->find("videos_clips_per_s_per_core") &&
        !cpu->find("from_frames") && !cpu->find("from_videos"))
      d.error(cpu->loc(), "[cpu] needs a decode rate: frames_clips_per_s_per_core, videos_clips_per_s_per_core, "
                          "from_frames or from_videos");
  } else if (!root.find("cpu")) {
    if (plan) d.error(file_loc, "a cluster file needs a [cpu] table (cores_per_node and a decode rate per core)");
    else c.plan_missing.push_back("[cpu]");
  }
  if (no_inter && !plan) c.plan_missing.push_back("[links.inter]");
  if (no_intra && !plan) c.plan_missing.push_back("[links.intra]");

  if (const auto p = checked_table(root, "reducer", S.reducer, "[reducer]", d)) {
    c.reducer.given = true;
    c.reducer.per_bucket_ms = p->f64("per_bucket_ms");
    c.reducer.source = p->str("source");
  }
  if (const auto p = checked_table(root, "storage", S.storage, "[storage]", d)) {
    c.storage.given = true;
    c.storage.read_GBps = p->f64("read_GBps");
    c.storage.node_read_GBps = p->f64("node_read_GBps");
    c.storage.frames_clip_bytes = p->f64("frames_clip_bytes");
    c.storage.videos_clip_bytes = p->f64("videos_clip_bytes");
    c.storage.source = p->str("source");
  }
  load_scheduler(root, c, d);
  if (d.error_count() > errors_before) return std::nullopt;
  return c;
}

LoadOptions literal_options() {
  LoadOptions opts;
  // A cluster file has no ${VAR} interpolation: its figures are written out.
  opts.env = [](const std::string& name) -> std::optional<std::string> { return "${" + name + "}"; };
  return opts;
}

}  // namespace

bool is_cluster_file(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec) || fs::file_size(path, ec) > kMaxRecipeBytes) return false;
  try {
    const toml::table t = toml::parse(base::read_file_bounded(path, kMaxRecipeBytes), path);
    return t.contains("cluster") && t["cluster"].is_table();
  } catch (const std::exception&) {
    return false;
  }
}

std::optional<Cluster> load_cluster(const std::string& path, Diagnostics& diags, ClusterUse use) {
  // A file that cannot be read at all: the recipe reader's error (kind invalid), naming it.
  std::optional<Recipe> rec = load_recipe(path, literal_options(), diags);
  if (!rec) return std::nullopt;
  return load_from(*rec, path, diags, use);
}

std::optional<Cluster> load_cluster_text(const std::string& text, const std::string& virtual_path, Diagnostics& diags,
                                         ClusterUse use) {
  auto rec = load_recipe_text(text, virtual_path, literal_options(), diags);
  if (!rec) return std::nullopt;
  return load_from(*rec, virtual_path, diags, use);
}

std::string cluster_summary(const Cluster& c) {
  char buf[512];
  std::string layouts;
  if (c.cpu.frames_clips_per_s_per_core > 0) layouts += "frames";
  if (c.cpu.videos_clips_per_s_per_core > 0) layouts += layouts.empty() ? "videos" : " and videos";
  if (c.gpu_name.empty() && c.profiles.empty() && !c.derive.given && layouts.empty()) {
    // A file for jobs only ([cluster] and [scheduler]).
    std::snprintf(buf, sizeof buf, "cluster '%s': %lld node(s) x %lld GPU(s)%s", base::printable(c.name, 120).c_str(),
                  (long long)c.nodes, (long long)c.gpus_per_node, c.scheduler.given ? ", [scheduler] slurm" : "");
    return buf;
  }
  std::snprintf(buf, sizeof buf,
                "cluster '%s': %lld node(s) x %lld GPU(s) (%s), %zu compute profile(s)%s, %s, decode rates for %s%s",
                base::printable(c.name, 120).c_str(), (long long)c.nodes, (long long)c.gpus_per_node,
                base::printable(c.gpu_name, 120).c_str(), c.profiles.size(),
                c.derive.given ? " + derived from MACs" : "",
                c.inter.given ? ("inter-node " + std::to_string(c.inter.rails) + " rail(s)").c_str() : "one node",
                layouts.empty() ? "none" : layouts.c_str(), c.storage.given ? ", storage" : "");
  return buf;
}

}  // namespace vexp::plan
