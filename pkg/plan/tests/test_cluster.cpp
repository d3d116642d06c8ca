// Cluster description files: plan::load_cluster (vexp/plan/cluster.hpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "vexp/plan/cluster.hpp"

namespace fs = std::filesystem;
using vexp::plan::Cluster;
using vexp::dsl::Diagnostics;

namespace {

// Line numbers below count from 1 in this text.
const char* kValid = R"([cluster]
name = "test cluster"
nodes = 2
gpus_per_node = 4
source = "made up for the tests"

[gpu]
name = "Test GPU"

[[gpu.profile]]
model = "tsm_resnet50"
frames = 8
size = 224
precision = "fp16"
batch = 8
forward_ms = 40.0
backward_ms = 80.0
optimizer_ms = 2
source = "typed in"

[gpu.derive]
train_macs_per_s = 1e13
optimizer_ms_per_mparam = 0.02
source = "assumed"

[links.intra]
bandwidth_GBps = 10.0
latency_us = 10
source = "assumed"

[links.inter]
bandwidth_GBps = 1.0
rails = 2
latency_us = 50
source = "assumed"

[cpu]
cores_per_node = 8
frames_clips_per_s_per_core = 10.0
source = "assumed"

[storage]
read_GBps = 100
frames_clip_bytes = 1e6
source = "assumed"
)";

std::string replace(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

// The diagnostics of `text` loaded as /virtual/c.toml, one per line.
std::string errors_of(const std::string& text, const std::string& path = "/virtual/c.toml") {
  Diagnostics d;
  auto c = vexp::plan::load_cluster_text(text, path, d);
  EXPECT_FALSE(c.has_value());
  return d.str();
}

struct TempDir {
  fs::path dir;
  TempDir() {
    dir = fs::temp_directory_path() / ("vexp_cluster_test_" + std::to_string(::getpid()));
    fs::create_directories(dir);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(dir / name) << text;
    return (dir / name).string();
  }
};

}  // namespace

TEST(Cluster, ValidFileIsRead) {
  Diagnostics d;
  auto c = vexp::plan::load_cluster_text(kValid, "/virtual/c.toml", d);
  ASSERT_TRUE(c.has_value()) << d.str();
  EXPECT_EQ(c->name, "test cluster");
  EXPECT_EQ(c->nodes, 2);
  EXPECT_EQ(c->gpus_per_node, 4);
  ASSERT_EQ(c->profiles.size(), 1u);
  EXPECT_EQ(c->profiles[0].model, "tsm_resnet50");
  EXPECT_EQ(c->profiles[0].precision, "fp16");
  EXPECT_DOUBLE_EQ(c->profiles[0].optimizer_ms, 2.0);  // an integer is a number
  EXPECT_TRUE(c->derive.given);
  EXPECT_DOUBLE_EQ(c->inter.bandwidth_GBps, 1.0);
  EXPECT_EQ(c->inter.rails, 2);
  EXPECT_DOUBLE_EQ(c->cpu.frames_clips_per_s_per_core, 10.0);
  EXPECT_DOUBLE_EQ(c->cpu.videos_clips_per_s_per_core, 0.0);
  EXPECT_TRUE(c->storage.given);
  EXPECT_NE(vexp::plan::cluster_summary(*c).find("2 node(s) x 4 GPU(s)"), std::string::npos);
}

// Positions are where the key was written (line:1 here), as in recipes.
TEST(Cluster, UnknownKeyAtItsValue) {
  const std::string e = errors_of(replace(kValid, "nodes = 2\n", "nodes = 2\nnode = 3\n"));
  EXPECT_NE(e.find("/virtual/c.toml:4:1: error: unknown key 'node' in [cluster] (did you mean 'nodes'?)"),
            std::string::npos) << e;
}

TEST(Cluster, WrongTypeAtItsValue) {
  const std::string e = errors_of(replace(kValid, "forward_ms = 40.0", "forward_ms = \"40\""));
  EXPECT_NE(e.find("/virtual/c.toml:16:1: error: 'forward_ms' in [[gpu.profile]]"), std::string::npos) << e;
}

TEST(Cluster, MissingRequiredKeyAtItsTable) {
  const std::string e = errors_of(replace(kValid, "gpus_per_node = 4\n", ""));
  EXPECT_NE(e.find("/virtual/c.toml:1:1: error: [cluster] needs 'gpus_per_node'"), std::string::npos) << e;
  const std::string e2 = errors_of(replace(kValid, "latency_us = 10\n", ""));
  EXPECT_NE(e2.find("/virtual/c.toml:26:1: error: [links.intra] needs 'latency_us'"), std::string::npos) << e2;
}

TEST(Cluster, NonPositiveNumber) {
  const std::string e = errors_of(replace(kValid, "bandwidth_GBps = 1.0", "bandwidth_GBps = 0.0"));
  EXPECT_NE(e.find("/virtual/c.toml:32:1: error: 'bandwidth_GBps' in [links.inter]"), std::string::npos) << e;
  const std::string e2 = errors_of(replace(kValid, "nodes = 2", "nodes = -1"));
  EXPECT_NE(e2.find("/virtual/c.toml:3:1: error: 'nodes' in [cluster]"), std::string::npos) << e2;
}

TEST(Cluster, TypedInFiguresNeedTheirSource) {
  const std::string e = errors_of(replace(kValid, "optimizer_ms = 2\nsource = \"typed in\"\n", "optimizer_ms = 2\n"));
  EXPECT_NE(e.find("/virtual/c.toml:10:1: error: [[gpu.profile]] with typed-in times needs 'source'"),
            std::string::npos) << e;
  const std::string e2 = errors_of(replace(kValid, "frames_clips_per_s_per_core = 10.0\nsource = \"assumed\"\n",
                                           "frames_clips_per_s_per_core = 10.0\n"));
  EXPECT_NE(e2.find("/virtual/c.toml:37:1: error: [cpu] with typed-in decode rates needs 'source'"),
            std::string::npos) << e2;
  const std::string e3 = errors_of(replace(kValid, "rails = 2\nlatency_us = 50\nsource = \"assumed\"\n",
                                           "rails = 2\nlatency_us = 50\n"));
  EXPECT_NE(e3.find("/virtual/c.toml:31:1: error: [links.inter] needs 'source'"), std::string::npos) << e3;
}

TEST(Cluster, MissingSections) {
  // Several nodes need [links.inter]; a file without [cluster] is not a cluster file.
  std::string t = kValid;
  t = replace(t, "[links.inter]\nbandwidth_GBps = 1.0\nrails = 2\nlatency_us = 50\nsource = \"assumed\"\n", "");
  EXPECT_NE(errors_of(t).find("error: [cluster] has 2 nodes: the cluster file needs [links.inter]"), std::string::npos);
  EXPECT_NE(errors_of("[gpu]\nname = \"x\"\n").find("/virtual/c.toml:1:1: error: a cluster file needs a [cluster] table"),
            std::string::npos);
}

TEST(Cluster, ProfileNeedsFiguresOrFrom) {
  const std::string e = errors_of(replace(kValid, "backward_ms = 80.0\n", ""));
  EXPECT_NE(e.find("/virtual/c.toml:10:1: error: [[gpu.profile]] needs 'backward_ms' (or 'from'"), std::string::npos)
      << e;
}

TEST(Cluster, FromRoundsKeepsTheMachinesDrift) {
  // --measure-local --measure-rounds 3: the pooled step median 400 ms, the rounds' 360 to 480.
  TempDir t;
  t.write("bench.json", R"({"precision": "fp32", "threads": 1, "clips_per_step": 4, "clip": [8, 3, 112, 112],
    "phases": {"step": {"median_ms": 400}, "forward": {"median_ms": 100}, "backward": {"median_ms": 250},
               "optimizer": {"median_ms": 5}}, "rounds": 3, "round_step_medians_ms": [410, 360, 480]})");
  const std::string text = replace(kValid, "frames = 8\nsize = 224\nprecision = \"fp16\"\nbatch = 8\nforward_ms = 40.0\n"
                                           "backward_ms = 80.0\noptimizer_ms = 2\nsource = \"typed in\"\n",
                                   "from = \"bench.json\"\n");
  Diagnostics d;
  auto c = vexp::plan::load_cluster(t.write("c.toml", text), d);
  ASSERT_TRUE(c.has_value()) << d.str();
  const auto& p = c->profiles.at(0);
  EXPECT_DOUBLE_EQ(p.round_low, 0.9);
  EXPECT_DOUBLE_EQ(p.round_high, 1.2);
  EXPECT_DOUBLE_EQ(p.round_low_ms, 360);
  EXPECT_DOUBLE_EQ(p.round_high_ms, 480);
}

TEST(Cluster, FromBenchJson) {
  TempDir t;
  const std::string bench = R"({"recipe": "r.toml", "device": "cpu", "precision": "fp32", "threads": 2, "ranks": 1,
    "clips_per_step": 4, "clip": [8, 3, 112, 112], "params": 100,
    "phases": {"step": {"median_ms": 400}, "forward": {"median_ms": 100.5}, "backward": {"median_ms": 250},
               "optimizer": {"median_ms": 5}, "data": {"median_ms": 1, "samples_ms": [0, 1, 5]}, "comm": {"median_ms": 0}}})";
  t.write("bench.json", bench);
  t.write("data.json", R"({"dataset": "kinetics", "results": [{"threads": 1, "clips_per_s_per_thread": 9.0},
    {"threads": 2, "clips_per_s_per_thread": 7.5}]})");
  std::string text = replace(kValid, "frames = 8\nsize = 224\nprecision = \"fp16\"\nbatch = 8\nforward_ms = 40.0\n"
                                     "backward_ms = 80.0\noptimizer_ms = 2\nsource = \"typed in\"\n",
                             "from = \"bench.json\"\n");
  text = replace(text, "frames_clips_per_s_per_core = 10.0\n", "from_frames = \"data.json\"\n");
  const std::string path = t.write("c.toml", text);
  Diagnostics d;
  auto c = vexp::plan::load_cluster(path, d);
  ASSERT_TRUE(c.has_value()) << d.str();
  const auto& p = c->profiles.at(0);
  EXPECT_EQ(p.frames, 8);
  EXPECT_EQ(p.size, 112);
  EXPECT_EQ(p.precision, "fp32");
  EXPECT_DOUBLE_EQ(p.batch, 4);
  EXPECT_EQ(p.threads, 2);
  EXPECT_DOUBLE_EQ(p.data_wait_ms, 2);  // the data wait, kept apart: its samples' mean
  // The phases scaled to the step: 400 ms less 1 of data and 0 of exchange, over their 355.5.
  const double k = 399.0 / 355.5;
  EXPECT_DOUBLE_EQ(p.forward_ms, 100.5 * k);
  EXPECT_DOUBLE_EQ(p.backward_ms, 250 * k);
  EXPECT_DOUBLE_EQ(p.optimizer_ms, 5 * k);
  EXPECT_EQ(p.from, (t.dir / "bench.json").string());
  EXPECT_DOUBLE_EQ(c->cpu.frames_clips_per_s_per_core, 7.5);  // at the most threads
  EXPECT_DOUBLE_EQ(p.round_low, 1);  // one round: no drift known
  EXPECT_DOUBLE_EQ(p.round_high, 1);

  // Missing, not JSON, not a bench-train JSON: at the `from` value.
  for (const auto& [content, expect] : std::vector<std::pair<std::string, std::string>>{
           {"", "no such file"}, {"not json", "is not JSON"}, {"{\"results\": []}", "is not a `vexp bench train --json`"}}) {
    std::error_code ec;
    fs::remove(t.dir / "bench.json", ec);
    if (!content.empty()) t.write("bench.json", content);
    Diagnostics d2;
    EXPECT_FALSE(vexp::plan::load_cluster(path, d2).has_value());
    EXPECT_NE(d2.str().find(path + ":12:1: error: 'from' = \"bench.json\": "), std::string::npos) << d2.str();
    EXPECT_NE(d2.str().find(expect), std::string::npos) << d2.str();
  }
  // A bench-train JSON where a bench-data one belongs.
  t.write("bench.json", bench);
  t.write("data.json", bench);
  Diagnostics d3;
  EXPECT_FALSE(vexp::plan::load_cluster(path, d3).has_value());
  EXPECT_NE(d3.str().find("is not a `vexp bench data --json` output"), std::string::npos) << d3.str();
  EXPECT_EQ(d3.error_count(), 1u);
}

TEST(Cluster, FromAndFiguresTogetherIsAnError) {
  const std::string e = errors_of(replace(kValid, "source = \"typed in\"\n", "source = \"typed in\"\nfrom = \"x.json\"\n"));
  EXPECT_NE(e.find("/virtual/c.toml:20:1: error: 'from' in [[gpu.profile]]: give either 'from' (a bench JSON) or the measured figures ('frames', 'size'"), std::string::npos) << e;
  EXPECT_EQ(std::count(e.begin(), e.end(), '\n'), 1) << e;  // one line
}

TEST(Cluster, IsClusterFile) {
  TempDir t;
  EXPECT_TRUE(vexp::plan::is_cluster_file(t.write("c.toml", kValid)));
  EXPECT_FALSE(vexp::plan::is_cluster_file(t.write("r.toml", "[run]\nname = \"x\"\n")));
  EXPECT_FALSE(vexp::plan::is_cluster_file(t.write("bad.toml", "[cluster\n")));
  EXPECT_FALSE(vexp::plan::is_cluster_file((t.dir / "missing.toml").string()));
}

TEST(Cluster, UnreadableFileIsAnInvalidInputNamingIt) {
  // vexp's one error vocabulary: a base::Error of kind invalid (exit 2), naming the file.
  TempDir t;
  const std::string missing = (t.dir / "missing.toml").string();
  Diagnostics d;
  try {
    vexp::plan::load_cluster(missing, d);
    FAIL() << "no error for a missing cluster file";
  } catch (const vexp::base::Error& e) {
    EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what();
    EXPECT_EQ(e.kind(), vexp::base::ErrorKind::invalid);
  }
  EXPECT_THROW(vexp::plan::load_cluster(t.dir.string(), d), vexp::base::Error);  // a folder
}

TEST(Cluster, BusyRanks) {
  Diagnostics d;
  auto c = vexp::plan::load_cluster_text(kValid, "/virtual/c.toml", d);
  ASSERT_TRUE(c.has_value()) << d.str();
  EXPECT_EQ(c->profiles.at(0).busy_ranks, 1);  // the default: measured alone
  d = Diagnostics{};
  c = vexp::plan::load_cluster_text(replace(kValid, "batch = 8\n", "batch = 8\nbusy_ranks = 4\nthreads = 2\n"),
                                   "/virtual/c.toml", d);
  ASSERT_TRUE(c.has_value()) << d.str();
  EXPECT_EQ(c->profiles.at(0).busy_ranks, 4);
  EXPECT_EQ(c->profiles.at(0).threads, 2);
  const std::string e = errors_of(replace(kValid, "batch = 8\n", "batch = 8\nbusy_ranks = 0\n"));
  EXPECT_NE(e.find("/virtual/c.toml:16:1: error:"), std::string::npos) << e;
  EXPECT_NE(e.find("busy_ranks"), std::string::npos) << e;

  // From a bench JSON that says how many ranks were busy (vexp plan --measure-local's mpirun runs).
  TempDir t;
  t.write("busy.json", R"({"device": "cpu", "precision": "fp32", "threads": 1, "ranks": 1, "busy_ranks": 2,
    "clips_per_step": 4, "clip": [8, 3, 112, 112],
    "phases": {"forward": {"median_ms": 10}, "backward": {"median_ms": 20}, "optimizer": {"median_ms": 1}}})");
  const std::string path =
      t.write("c.toml", replace(kValid, "frames = 8\nsize = 224\nprecision = \"fp16\"\nbatch = 8\nforward_ms = 40.0\n"
                                        "backward_ms = 80.0\noptimizer_ms = 2\nsource = \"typed in\"\n",
                                "from = \"busy.json\"\n"));
  d = Diagnostics{};
  c = vexp::plan::load_cluster(path, d);
  ASSERT_TRUE(c.has_value()) << d.str();
  EXPECT_EQ(c->profiles.at(0).busy_ranks, 2);
  EXPECT_EQ(c->profiles.at(0).threads, 1);
  EXPECT_EQ(c->profiles.at(0).background_load, 0);  // unknown: taken as none
}

// The load a profile was measured under (vexp plan --measure-local writes it beside
// `from`; typed-in profiles may say it): the plan widens that profile's range.
TEST(Cluster, BackgroundLoad) {
  Diagnostics d;
  auto c = vexp::plan::load_cluster_text(replace(kValid, "batch = 8\n", "batch = 8\nbackground_load = 1.75\n"),
                                         "/virtual/c.toml", d);
  ASSERT_TRUE(c.has_value()) << d.str();
  EXPECT_DOUBLE_EQ(c->profiles.at(0).background_load, 1.75);
  const std::string e = errors_of(replace(kValid, "batch = 8\n", "batch = 8\nbackground_load = -1\n"));
  EXPECT_NE(e.find("/virtual/c.toml:16:1: error: 'background_load' in [[gpu.profile]]"), std::string::npos) << e;
  TempDir t;
  t.write("b.json", R"({"device": "cpu", "precision": "fp32", "threads": 1, "clips_per_step": 4, "clip": [8, 3, 112, 112],
    "phases": {"forward": {"median_ms": 10}, "backward": {"median_ms": 20}, "optimizer": {"median_ms": 1}}})");
  const std::string path =
      t.write("c.toml", replace(kValid, "frames = 8\nsize = 224\nprecision = \"fp16\"\nbatch = 8\nforward_ms = 40.0\n"
                                        "backward_ms = 80.0\noptimizer_ms = 2\nsource = \"typed in\"\n",
                                "from = \"b.json\"\nbackground_load = 0.5\n"));
  d = Diagnostics{};
  c = vexp::plan::load_cluster(path, d);
  ASSERT_TRUE(c.has_value()) << d.str();
  EXPECT_DOUBLE_EQ(c->profiles.at(0).background_load, 0.5);
}

// Every number is bounded: inf was accepted where nan was refused, gpus_per_node = 1e9
// planned "8e-09 decode threads", nodes = 2^63-1 overflowed nodes x gpus_per_node.
TEST(Cluster, NumbersAreBoundedAndFinite) {
  const std::string e = errors_of(replace(kValid, "forward_ms = 40.0", "forward_ms = inf"));
  EXPECT_NE(e.find("/virtual/c.toml:16:1: error: 'forward_ms' in [[gpu.profile]]"), std::string::npos) << e;
  const std::string e2 = errors_of(replace(kValid, "gpus_per_node = 4", "gpus_per_node = 1000000000"));
  EXPECT_NE(e2.find("/virtual/c.toml:4:1: error: 'gpus_per_node' in [cluster]"), std::string::npos) << e2;
  const std::string e3 = errors_of(replace(kValid, "nodes = 2", "nodes = 9223372036854775807"));
  EXPECT_NE(e3.find("/virtual/c.toml:3:1: error: 'nodes' in [cluster]"), std::string::npos) << e3;
  const std::string e4 = errors_of(replace(kValid, "read_GBps = 100", "read_GBps = inf"));
  EXPECT_NE(e4.find("'read_GBps' in [storage]"), std::string::npos) << e4;
  const std::string e5 = errors_of(replace(kValid, "latency_us = 50", "latency_us = inf"));
  EXPECT_NE(e5.find("'latency_us' in [links.inter]"), std::string::npos) << e5;
  // The largest machine allowed loads, and its GPU count fits easily.
  Diagnostics d;
  auto c = vexp::plan::load_cluster_text(
      replace(replace(kValid, "nodes = 2", "nodes = 100000"), "gpus_per_node = 4", "gpus_per_node = 1024"),
      "/virtual/c.toml", d);
  ASSERT_TRUE(c.has_value()) << d.str();
  EXPECT_EQ(c->nodes * c->gpus_per_node, 102400000);
}

// [scheduler] (vexp submit): optional for vexp plan; checked where it is written.
TEST(ClusterScheduler, AbsentIsNotGiven) {
  Diagnostics d;
  auto c = vexp::plan::load_cluster_text(kValid, "/virtual/c.toml", d);
  ASSERT_TRUE(c.has_value()) << d.str();
  EXPECT_FALSE(c->scheduler.given);
}

TEST(ClusterScheduler, ValuesAndDefaults) {
  const std::string text = std::string(kValid) +
                           "\n[scheduler]\nkind = \"slurm\"\npartition = \"gpu-a100\"\naccount = \"proj.42\"\n"
                           "time = \"1-02:00:00\"\ncpus_per_node = 32\nsbatch = [\"--qos=high\"]\n"
                           "setup = [\"module load openmpi\"]\nbackend = \"nccl\"\n";
  Diagnostics d;
  auto c = vexp::plan::load_cluster_text(text, "/virtual/c.toml", d);
  ASSERT_TRUE(c.has_value()) << d.str();
  EXPECT_TRUE(c->scheduler.given);
  EXPECT_EQ(c->scheduler.kind, "slurm");
  const auto& s = c->scheduler.settings;
  EXPECT_EQ(s.partition, "gpu-a100");
  EXPECT_EQ(s.account, "proj.42");
  EXPECT_EQ(s.time, "1-02:00:00");
  EXPECT_EQ(s.cpus_per_node, 32);
  EXPECT_EQ(s.gpus_per_node, 0);
  EXPECT_EQ(s.launcher, (std::vector<std::string>{"srun", "--mpi=pmix"}));
  EXPECT_EQ(s.sbatch, (std::vector<std::string>{"--qos=high"}));
  EXPECT_EQ(s.setup, (std::vector<std::string>{"module load openmpi"}));
  EXPECT_EQ(s.backend, "nccl");
  EXPECT_EQ(s.signal_lead_s, 120);
  EXPECT_EQ(s.max_requeues, 3);
}

TEST(ClusterScheduler, ProblemsAtTheirValues) {
  const std::string base = std::string(kValid) + "\n[scheduler]\nkind = \"slurm\"\n";  // [scheduler] on line 47
  auto with = [&](const std::string& extra) { return errors_of(base + extra); };
  std::string e = with("partitoin = \"x\"\n");
  EXPECT_NE(e.find("/virtual/c.toml:49:1: error: unknown key 'partitoin' in [scheduler] (did you mean 'partition'?)"),
            std::string::npos) << e;
  e = errors_of(std::string(kValid) + "\n[scheduler]\nkind = \"lsf\"\n");
  EXPECT_NE(e.find("/virtual/c.toml:48:1: error: 'kind' in [scheduler]"), std::string::npos) << e;
  e = with("partition = \"gpu; rm -rf ~\"\n");
  EXPECT_NE(e.find("/virtual/c.toml:49:1: error: 'partition' in [scheduler] holds ';'"), std::string::npos) << e;
  e = with("time = \"two hours\"\n");
  EXPECT_NE(e.find("/virtual/c.toml:49:1: error: 'time' in [scheduler] is not a Slurm time limit"), std::string::npos)
      << e;
  e = with("setup = [\"module load a\\nexport X=1\"]\n");
  EXPECT_NE(e.find("/virtual/c.toml:49:1: error: 'setup' in [scheduler] holds a newline or control character"),
            std::string::npos) << e;
  e = with("sbatch = [\"qos=high\"]\n");
  EXPECT_NE(e.find("'sbatch' in [scheduler] holds \"qos=high\", not an sbatch option"), std::string::npos) << e;
  e = with("launcher = []\n");
  EXPECT_NE(e.find("'launcher' in [scheduler] is empty"), std::string::npos) << e;
  e = with("signal_lead_s = 0\n");
  EXPECT_NE(e.find("/virtual/c.toml:49:1: error: 'signal_lead_s' in [scheduler]"), std::string::npos) << e;
  e = with("cpus_per_node = 2\n");  // 4 tasks per node
  EXPECT_NE(e.find("'cpus_per_node' in [scheduler] is 2, fewer than the 4 tasks per node"), std::string::npos) << e;
  e = with("account = \"\"\n");
  EXPECT_NE(e.find("/virtual/c.toml:49:1: error: 'account' in [scheduler] is empty"), std::string::npos) << e;
  // The stop signal comes signal_lead_s before the limit: the limit must be longer.
  e = with("time = \"2\"\n");
  EXPECT_NE(e.find("/virtual/c.toml:49:1: error: 'time' in [scheduler] is 120 s, not longer than signal_lead_s = 120 "
                   "(the run is told to stop that long before the limit)"),
            std::string::npos) << e;
  e = with("signal_lead_s = 45\ntime = \"0:45\"\n");
  EXPECT_NE(e.find("/virtual/c.toml:50:1: error: 'time' in [scheduler] is 45 s, not longer than signal_lead_s = 45"),
            std::string::npos) << e;
  Diagnostics ok;
  EXPECT_TRUE(vexp::plan::load_cluster_text(base + "signal_lead_s = 45\ntime = \"0:46\"\n", "/virtual/c.toml", ok))
      << ok.str();
  e = errors_of(std::string(kValid) + "\n[scheduler]\npartition = \"debug\"\n");
  EXPECT_NE(e.find("/virtual/c.toml:47:1: error: [scheduler] needs 'kind'"), std::string::npos) << e;
}


// A cluster file for jobs only (#36): vexp submit and vexp sweep --cluster read [cluster]
// and [scheduler]; vexp plan's tables are not required for them, and what vexp plan
// would lack is noted. Read for planning, the same file is refused at each missing table.
TEST(ClusterScheduler, ClusterAndSchedulerAloneAreEnoughForJobs) {
  const std::string text =
      "[cluster]\nname = \"jobs only\"\nnodes = 4\ngpus_per_node = 8\n\n[scheduler]\nkind = \"slurm\"\n"
      "partition = \"gpu\"\ngpus_per_node = 8\n";
  Diagnostics d;
  auto c = vexp::plan::load_cluster_text(text, "/virtual/j.toml", d, vexp::plan::ClusterUse::jobs);
  ASSERT_TRUE(c.has_value()) << d.str();
  EXPECT_EQ(d.error_count(), 0u);
  EXPECT_TRUE(c->scheduler.given);
  EXPECT_EQ(c->nodes, 4);
  EXPECT_EQ(c->gpus_per_node, 8);
  EXPECT_EQ(c->scheduler.settings.partition, "gpu");
  EXPECT_EQ(c->plan_missing, (std::vector<std::string>{"[gpu]", "[cpu]", "[links.inter]", "[links.intra]"}));
  EXPECT_EQ(vexp::plan::cluster_summary(*c), "cluster 'jobs only': 4 node(s) x 8 GPU(s), [scheduler] slurm");
  // For planning: every missing table is an error, as before.
  const std::string e = errors_of(text, "/virtual/j.toml");
  for (const char* want : {"needs a [gpu] table", "needs a [cpu] table", "needs [links.intra]", "needs [links.inter]"})
    EXPECT_NE(e.find(want), std::string::npos) << e;
  // The tables that are there are checked all the same.
  Diagnostics bad;
  EXPECT_FALSE(vexp::plan::load_cluster_text(text + "\n[cpu]\ncores_per_node = -1\n", "/virtual/j.toml", bad,
                                             vexp::plan::ClusterUse::jobs));
  EXPECT_NE(bad.str().find("'cores_per_node' in [cpu]"), std::string::npos) << bad.str();
  // A complete file read for jobs lacks nothing.
  Diagnostics full;
  auto f = vexp::plan::load_cluster_text(kValid, "/virtual/c.toml", full, vexp::plan::ClusterUse::jobs);
  ASSERT_TRUE(f.has_value()) << full.str();
  EXPECT_TRUE(f->plan_missing.empty());
}

// gpus_per_node means the ranks per node in [cluster] and the GPUs asked of Slurm in
// [scheduler] (#36): where they differ, the error says both meanings and the fix.
TEST(ClusterScheduler, TheTwoGpusPerNodeMustAgree) {
  const std::string base = std::string(kValid) + "\n[scheduler]\nkind = \"slurm\"\n";  // [cluster] gpus_per_node = 4
  std::string e = errors_of(base + "gpus_per_node = 2\n");
  EXPECT_NE(e.find("/virtual/c.toml:49:1: error: 'gpus_per_node' in [scheduler] is 2, and [cluster] gpus_per_node is "
                   "4: the two differ in meaning ([cluster] gpus_per_node is the ranks vexp starts on each node, one "
                   "per GPU; [scheduler] gpus_per_node the GPUs each node asks Slurm for, sbatch --gpus-per-node), so "
                   "the job would start 4 rank(s) per node on 2 GPU(s) (ranks sharing a GPU): give both the GPUs a "
                   "node has (or [scheduler] gpus_per_node = 0 for CPU ranks)"),
            std::string::npos)
      << e;
  e = errors_of(base + "gpus_per_node = 8\n");
  EXPECT_NE(e.find("4 rank(s) per node on 8 GPU(s) (GPUs left idle)"), std::string::npos) << e;
  for (const char* ok : {"gpus_per_node = 4\n", "gpus_per_node = 0\n", ""}) {
    Diagnostics d;
    EXPECT_TRUE(vexp::plan::load_cluster_text(base + ok, "/virtual/c.toml", d)) << ok << d.str();
  }
}

// [reducer]: optional; per_bucket_ms and source, checked like every other table.
TEST(Cluster, Reducer) {
  Diagnostics d;
  auto c = vexp::plan::load_cluster_text(kValid, "/virtual/c.toml", d);
  ASSERT_TRUE(c.has_value()) << d.str();
  EXPECT_FALSE(c->reducer.given);
  d = Diagnostics{};
  c = vexp::plan::load_cluster_text(std::string(kValid) + "\n[reducer]\nper_bucket_ms = 0.25\nsource = \"measured\"\n", "/virtual/c.toml", d);
  ASSERT_TRUE(c.has_value()) << d.str();
  EXPECT_TRUE(c->reducer.given);
  EXPECT_DOUBLE_EQ(c->reducer.per_bucket_ms, 0.25);
  EXPECT_EQ(c->reducer.source, "measured");
  const std::string e = errors_of(std::string(kValid) + "\n[reducer]\nper_bucket_ms = -1\n");
  EXPECT_NE(e.find("'per_bucket_ms' in [reducer]"), std::string::npos) << e;
  EXPECT_NE(e.find("source"), std::string::npos) << e;
}

// [cpu] core_speed_min: (0, 1] with its core_speed_source; absent, 1.
TEST(Cluster, CoreSpeedMin) {
  const std::string at = "cores_per_node = 8\n";
  auto with = [&](const std::string& extra) { return replace(kValid, at, at + extra); };
  Diagnostics d;
  auto c = vexp::plan::load_cluster_text(kValid, "/virtual/c.toml", d);
  ASSERT_TRUE(c.has_value()) << d.str();
  EXPECT_DOUBLE_EQ(c->cpu.core_speed_min, 1);
  d = Diagnostics{};
  c = vexp::plan::load_cluster_text(with("core_speed_min = 0.79\ncore_speed_source = \"measured\"\n"), "/virtual/c.toml", d);
  ASSERT_TRUE(c.has_value()) << d.str();
  EXPECT_DOUBLE_EQ(c->cpu.core_speed_min, 0.79);
  EXPECT_EQ(c->cpu.core_speed_source, "measured");
  std::string e = errors_of(with("core_speed_min = 0.79\n"));
  EXPECT_NE(e.find("'core_speed_min' in [cpu] needs 'core_speed_source'"), std::string::npos) << e;
  for (const char* bad : {"0", "1.5", "-0.5"}) {
    e = errors_of(with(std::string("core_speed_min = ") + bad + "\ncore_speed_source = \"x\"\n"));
    EXPECT_NE(e.find("'core_speed_min'"), std::string::npos) << bad << ": " << e;
  }
}

// A profile's own bucket cost: per_bucket_ms with its per_bucket_source; absent, -1.
TEST(Cluster, ProfileBucketCost) {
  const std::string at = "source = \"typed in\"\n";
  auto with = [&](const std::string& extra) { return replace(kValid, at, at + extra); };
  Diagnostics d;
  auto c = vexp::plan::load_cluster_text(kValid, "/virtual/c.toml", d);
  ASSERT_TRUE(c.has_value()) << d.str();
  EXPECT_DOUBLE_EQ(c->profiles.at(0).per_bucket_ms, -1);
  d = Diagnostics{};
  c = vexp::plan::load_cluster_text(with("per_bucket_ms = 1.5\nper_bucket_source = \"measured\"\n"), "/virtual/c.toml", d);
  ASSERT_TRUE(c.has_value()) << d.str();
  EXPECT_DOUBLE_EQ(c->profiles.at(0).per_bucket_ms, 1.5);
  EXPECT_EQ(c->profiles.at(0).per_bucket_source, "measured");
  std::string e = errors_of(with("per_bucket_ms = 1.5\n"));
  EXPECT_NE(e.find("'per_bucket_ms' in [[gpu.profile]] needs 'per_bucket_source'"), std::string::npos) << e;
  EXPECT_NE(e.find("c.toml:20:1: "), std::string::npos) << e;  // the key's line
  e = errors_of(with("per_bucket_ms = -2\nper_bucket_source = \"x\"\n"));
  EXPECT_NE(e.find("'per_bucket_ms'"), std::string::npos) << e;
}
