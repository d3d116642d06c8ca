#include <gtest/gtest.h>

#include <fstream>

#include "vexp/base/files.hpp"
#include "vexp/base/process.hpp"
#include "vexp/base/text.hpp"
#include "vexp/rundir/provenance.hpp"

using namespace vexp::rundir;
using json = nlohmann::json;

namespace {
Invocation sample() {
  Invocation inv;
  inv.start = "2026-01-31T12:00:00Z";
  inv.vexp_version = "0.1.0";
  inv.vexp_commit = "abc";
  inv.build_tag = "torch=1.13";
  inv.argv = {"vexp", "run", "my recipe.toml", "--set", "optim.lr=0.1"};
  inv.recipe = "/r/my recipe.toml";
  inv.recipe_files = {{"/r/my recipe.toml", "11", ""}, {"/r/base.toml", "22", ""}};
  inv.overrides = {"optim.lr=0.1"};
  inv.variables = {{"DATA", std::string("/d"), "/d"}, {"EPOCHS", std::nullopt, "2"}};
  inv.dataset = "kinetics";
  inv.data_roots = {{"root", "/d"}};
  inv.hosts = {"h0", "h1"};
  inv.ranks = 2;
  inv.launcher = "none";
  inv.comm = "mpi";
  inv.libraries = {{"torch", "1.13.0"}, {"mpi", "libmpi.so.40"}};
  inv.plugins = {{"/p/libresnet.so", "resnet", "1.2", "tag", "33"}};
  return inv;
}
}  // namespace

TEST(Provenance, AppendFinishAndReadBack) {
  vexp::base::TempDir tmp;
  Invocation a = sample();
  EXPECT_EQ(append_invocation(tmp.path(), a), 1);
  Provenance p = read_provenance(tmp.path());
  ASSERT_EQ(p.records.size(), 1u);
  EXPECT_EQ(p.records[0]["format"], kProvenanceFormat);
  EXPECT_EQ(p.records[0]["end"], "");
  finish_invocation(tmp.path(), 1, "stopped");
  Invocation b = sample();
  b.argv.push_back("--resume");
  EXPECT_EQ(append_invocation(tmp.path(), b), 2);
  finish_invocation(tmp.path(), 2, "finished", {{"ema", {"/r/checkpoints/epoch_0002.ema.pt", "ab12", ""}}});
  p = read_provenance(tmp.path());
  EXPECT_FALSE(p.records[0].contains("weights"));
  EXPECT_EQ(p.records[1]["weights"]["ema"]["path"], "/r/checkpoints/epoch_0002.ema.pt");
  EXPECT_EQ(p.records[1]["weights"]["ema"]["sha256"], "ab12");
  ASSERT_EQ(p.records.size(), 2u);
  EXPECT_EQ(p.records[0]["outcome"], "stopped");
  EXPECT_NE(p.records[0]["end"], "");
  EXPECT_EQ(p.records[1]["invocation"], 2);
  EXPECT_EQ(p.records[1]["outcome"], "finished");
  EXPECT_EQ(p.records[1]["argv"].back(), "--resume");
  EXPECT_EQ(p.records[1]["overrides"], json::array({"optim.lr=0.1"}));
  EXPECT_TRUE(p.records[1]["variables"][1]["environment"].is_null());
  EXPECT_THROW(finish_invocation(tmp.path(), 7, "failed"), Error);
}

TEST(Provenance, ForeignLinesAreKeptAndSkipped) {
  vexp::base::TempDir tmp;
  std::ofstream(tmp.path() / "provenance.jsonl") << "garbage\n{\"format\":\"vexp-provenance-1\",\"invocation\":4}\n";
  Invocation a = sample();
  EXPECT_EQ(append_invocation(tmp.path(), a), 5);
  const Provenance p = read_provenance(tmp.path());
  EXPECT_EQ(p.records.size(), 2u);
  EXPECT_EQ(p.skipped.count, 1);
  EXPECT_EQ(read_text(tmp.path() / "provenance.jsonl").rfind("garbage\n", 0), 0u);
}

TEST(Provenance, FlattenAndDifferences) {
  const json a = sample().to_json();
  const auto rows = flatten_record(a);
  std::map<std::string, std::string> m(rows.begin(), rows.end());
  EXPECT_EQ(m.at("argv"), "vexp run 'my recipe.toml' --set optim.lr=0.1");
  EXPECT_EQ(m.at("recipe.files[1].sha256"), "22");
  EXPECT_EQ(m.at("variables.EPOCHS.environment"), "(none)");
  EXPECT_EQ(m.at("variables.DATA.value"), "/d");
  EXPECT_EQ(m.at("plugins.resnet.version"), "1.2");
  EXPECT_EQ(m.at("libraries.mpi"), "libmpi.so.40");
  EXPECT_EQ(rows.front().first, "invocation");
  Invocation other = sample();
  other.overrides = {"optim.lr=0.2"};
  other.start = "2027-01-01T00:00:00Z";
  other.plugins[0].sha256 = "44";
  other.libraries.erase("mpi");
  const auto d = differences(a, other.to_json());
  std::vector<std::string> keys;
  for (const auto& x : d) keys.push_back(x.key);
  EXPECT_EQ(keys, (std::vector<std::string>{"overrides", "libraries.mpi", "plugins.resnet.sha256"}));
  EXPECT_EQ(d[0].a, "optim.lr=0.1");
  EXPECT_EQ(d[0].b, "optim.lr=0.2");
  EXPECT_EQ(d[1].b, "");
  EXPECT_TRUE(differences(a, a).empty());
}

TEST(Provenance, LoadedLibrariesFromMaps) {
  const std::string maps =
      "7f0-7f1 r-xp 00000000 08:01 11 /usr/lib/x86_64-linux-gnu/openmpi/lib/libmpi.so.40.30.2\n"
      "7f1-7f2 r-xp 00000000 08:01 12 /usr/lib/x86_64-linux-gnu/openmpi/lib/libmpi_cxx.so.40.30.1\n"
      "7f2-7f3 r--p 00000000 08:01 11 /usr/lib/x86_64-linux-gnu/openmpi/lib/libmpi.so.40.30.2\n"
      "7f3-7f4 r-xp 00000000 08:01 13 /usr/lib/x86_64-linux-gnu/libavcodec.so.59.37.100\n"
      "7f4-7f5 r-xp 00000000 08:01 14 /opt/torch/lib/libcudart-d0da41ae.so.11.0\n"
      "7f5-7f6 rw-p 00000000 00:00 0 [heap]\n";
  const auto files = mapped_files_of(maps);
  EXPECT_EQ(files.size(), 4u);
  EXPECT_EQ(loaded_library(files, "mpi"), "libmpi.so.40.30.2");
  EXPECT_EQ(loaded_library(files, "nccl"), "not loaded");
  const auto libs = loaded_libraries(files);
  EXPECT_EQ(libs.at("cuda"), "libcudart-d0da41ae.so.11.0");
  EXPECT_EQ(libs.at("ffmpeg"), "libavcodec.so.59.37.100");
  EXPECT_EQ(libs.at("cudnn"), "not loaded");
  // this very process: the test binary is mapped, libstdc++ too
  EXPECT_NE(loaded_library(mapped_files(), "stdc++"), "not loaded");
}

TEST(Provenance, ProcessFacts) {
  const auto argv = vexp::base::own_argv();
  ASSERT_FALSE(argv.empty());
  EXPECT_NE(argv[0].find("vexp_rundir_tests"), std::string::npos);
  EXPECT_FALSE(host_name().empty());
  const auto jobs = job_ids([](const char* v) -> const char* {
    return std::string(v) == "SLURM_JOB_ID" ? "123" : std::string(v) == "PBS_JOBID" ? "" : nullptr;
  });
  EXPECT_EQ(jobs, (std::map<std::string, std::string>{{"SLURM_JOB_ID", "123"}}));
  EXPECT_EQ(vexp::base::utc_now().size(), 20u);
  EXPECT_STRNE(vexp_version(), "");
  // the tree's state is known exactly when the commit is
  const std::string tree = vexp_tree(), commit = vexp_commit();
  EXPECT_TRUE(commit == "unknown" ? tree == "unknown" : tree == "clean" || tree == "dirty") << commit << " " << tree;
  EXPECT_EQ(sample().to_json()["vexp"].count("tree"), 1u);
  EXPECT_EQ(absolute_path("/a/b/../c"), "/a/c");
  EXPECT_EQ(absolute_path("x/./y"), (fs::current_path() / "x/y").string());
}

TEST(Provenance, RunEnvironmentKeepsWhatChangesARunAndNoSecret) {
  const auto env = vexp::rundir::run_environment(
      {"OMP_NUM_THREADS=4", "CUDA_VISIBLE_DEVICES=0,1", "VEXP_PLUGIN_PATH=/p", "HOME=/root", "PATH=/bin",
       "NCCL_IB_DISABLE=1", "VEXP_API_TOKEN=abc123", "TORCH_AUTH_KEY=zzz", "LD_PRELOAD=/x.so", "EMPTY=", "=junk",
       "noequals"});
  EXPECT_EQ(env.at("OMP_NUM_THREADS"), "4");
  EXPECT_EQ(env.at("CUDA_VISIBLE_DEVICES"), "0,1");
  EXPECT_EQ(env.at("VEXP_PLUGIN_PATH"), "/p");
  EXPECT_EQ(env.at("NCCL_IB_DISABLE"), "1");
  EXPECT_EQ(env.at("LD_PRELOAD"), "/x.so");
  EXPECT_EQ(env.count("HOME"), 0u);
  EXPECT_EQ(env.count("PATH"), 0u);
  EXPECT_EQ(env.count("EMPTY"), 0u);
  for (const char* secret : {"VEXP_API_TOKEN", "TORCH_AUTH_KEY"}) {
    EXPECT_EQ(env.at(secret), "(set; not recorded: the name looks secret)") << secret;
    for (const auto& [k, v] : env) EXPECT_EQ(v.find("abc123"), std::string::npos) << k;
  }
}

// Slurm's variables that shape a job are recorded, those that name its instance are
// not (they differ between any two jobs); any name holding KEY, in any case, is secret.
TEST(Provenance, RunEnvironmentSlurmShapeAndKeys) {
  const auto env = vexp::rundir::run_environment(
      {"SLURM_NTASKS=8", "SLURM_CPUS_PER_TASK=4", "SLURM_JOB_PARTITION=gpu", "SLURM_GPUS_ON_NODE=4",
       "SLURM_JOB_NODELIST=n[01-02]", "SLURM_JOB_ID=4711", "SLURM_JOBID=4711", "SLURM_PROCID=0", "SLURM_LOCALID=0",
       "SLURM_NODEID=0", "SLURM_STEP_ID=0", "SLURM_TASK_PID=999", "SLURM_GTIDS=0", "SLURM_SRUN_COMM_PORT=4242",
       "SLURM_LAUNCH_NODE_IPADDR=10.0.0.1", "SLURM_SUBMIT_HOST=login1", "SLURM_JOB_START_TIME=1764900000",
       "SLURM_RESTART_COUNT=1", "SLURMD_NODENAME=n01", "VEXP_SIGNING_KEY=s3cr3t", "NCCL_ApiKey=s3cr3t",
       "SLURM_MUNGE_KEY=s3cr3t", "CUDA_VISIBLE_DEVICES="});
  EXPECT_EQ(env.at("SLURM_NTASKS"), "8");
  EXPECT_EQ(env.at("SLURM_CPUS_PER_TASK"), "4");
  EXPECT_EQ(env.at("SLURM_JOB_PARTITION"), "gpu");
  EXPECT_EQ(env.at("SLURM_GPUS_ON_NODE"), "4");
  EXPECT_EQ(env.at("SLURM_JOB_NODELIST"), "n[01-02]");
  for (const char* instance : {"SLURM_JOB_ID", "SLURM_JOBID", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NODEID",
                               "SLURM_STEP_ID", "SLURM_TASK_PID", "SLURM_GTIDS", "SLURM_SRUN_COMM_PORT",
                               "SLURM_LAUNCH_NODE_IPADDR", "SLURM_SUBMIT_HOST", "SLURM_JOB_START_TIME",
                               "SLURM_RESTART_COUNT", "SLURMD_NODENAME"})
    EXPECT_EQ(env.count(instance), 0u) << instance;
  for (const char* secret : {"VEXP_SIGNING_KEY", "NCCL_ApiKey", "SLURM_MUNGE_KEY"})
    EXPECT_EQ(env.at(secret), "(set; not recorded: the name looks secret)") << secret;
  for (const auto& [k, v] : env) EXPECT_EQ(v.find("s3cr3t"), std::string::npos) << k;
  // set but empty is a setting too (no GPU visible)
  EXPECT_EQ(env.at("CUDA_VISIBLE_DEVICES"), "");
}

TEST(Provenance, DifferencesBetweenRunsAndTheirLabels) {
  const nlohmann::json a{{"format", "vexp-provenance-1"}, {"invocation", 1}, {"start", "s1"}, {"argv", {"vexp", "run", "a"}},
                         {"comm", "local"}};
  nlohmann::json b = a;
  b["invocation"] = 2;
  b["start"] = "s2";
  b["argv"] = {"vexp", "run", "b"};
  const auto d = vexp::rundir::differences_between(std::vector<nlohmann::json>{a, b, nlohmann::json()});
  EXPECT_EQ(d.recorded, 2u);
  ASSERT_EQ(d.rows.size(), 2u);  // argv and comm: the third run has no record
  for (const auto& row : d.rows) {
    EXPECT_NE(row.key, "start");
    EXPECT_NE(row.key, "invocation");
    EXPECT_EQ(row.values[2], "(not recorded)");
  }
  EXPECT_TRUE(vexp::rundir::differences_between(std::vector<nlohmann::json>{a, a}).rows.empty());
  const auto labels = vexp::rundir::run_labels({"tsm", "tsm", "tsn"}, {"/x/a/tsm", "/x/b/tsm", "/x/c/run"});
  EXPECT_EQ(labels, (std::vector<std::string>{"tsm (a/tsm)", "tsm (b/tsm)", "tsn"}));
}
