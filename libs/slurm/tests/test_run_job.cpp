// One Slurm job of a run (vexp/slurm/run_job.hpp): the spec built from the cluster's
// settings, the shape and the run, and the one submit, against a stand-in sbatch on
// PATH (tests/slurm/ runs it against a real Slurm).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "vexp/base/files.hpp"
#include "vexp/base/lock.hpp"
#include "vexp/slurm/run_job.hpp"

namespace fs = std::filesystem;
using namespace vexp::slurm;

namespace {

RunToSubmit run_in(const std::string& dir) {
  RunToSubmit r;
  r.run_dir = dir;
  r.job_name = "tiny";
  r.exe = "/opt/vexp/bin/vexp";
  r.recipe = "/recipes/tiny.toml";
  r.sets = {"optim.lr=0.05"};
  r.plugin_dirs = {"/opt/plugins"};
  r.cluster_file = "c.toml";
  r.submit_command = "vexp submit tiny.toml --cluster c.toml";
  return r;
}

// A PATH whose sbatch is `body` (sh), restored afterwards.
struct StandInSbatch {
  vexp::base::TempDir bin{"vexp_sbatch"};
  std::string old_path;
  explicit StandInSbatch(const std::string& body) {
    const std::string p = (bin.path() / "sbatch").string();
    std::ofstream(p) << "#!/bin/sh\n" << body << "\n";
    fs::permissions(p, fs::perms::owner_all);
    old_path = std::getenv("PATH") ? std::getenv("PATH") : "";
    ::setenv("PATH", (bin.path().string() + ":" + old_path).c_str(), 1);
  }
  ~StandInSbatch() { ::setenv("PATH", old_path.c_str(), 1); }
};

std::string read(const fs::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

TEST(SlurmRunJob, TheSpecIsTheSettingsTheShapeAndTheRun) {
  Settings s;
  s.partition = "gpu";
  s.account = "proj";
  s.time = "04:00:00";
  s.gpus_per_node = 4;
  s.cpus_per_node = 30;
  s.launcher = {"srun", "--mpi=pmix", "--kill-on-bad-exit=1"};
  s.sbatch = {"--exclusive"};
  s.setup = {"module load openmpi"};
  s.signal_lead_s = 300;
  s.max_requeues = 10;
  Shape shape;
  shape.nodes = 2;
  shape.tasks_per_node = 4;
  shape.backend_set = "dist.backend=mpi";
  const JobSpec j = run_job_spec(s, shape, run_in("/runs/tiny"));
  EXPECT_EQ(j.run_dir, "/runs/tiny");
  EXPECT_EQ(j.job_name, "tiny");
  EXPECT_EQ(j.nodes, 2);
  EXPECT_EQ(j.tasks_per_node, 4);
  EXPECT_EQ(j.cpus_per_task, 7);  // 30 CPUs shared by 4 tasks
  EXPECT_EQ(j.gpus_per_node, 4);
  EXPECT_EQ(j.time, "04:00:00");
  EXPECT_EQ(j.partition, "gpu");
  EXPECT_EQ(j.account, "proj");
  EXPECT_EQ(j.signal_lead_s, 300);
  EXPECT_EQ(j.max_requeues, 10);
  EXPECT_EQ(j.sbatch_extra, s.sbatch);
  EXPECT_EQ(j.setup, s.setup);
  EXPECT_EQ(j.launcher, s.launcher);
  EXPECT_EQ(j.vexp_argv, (std::vector<std::string>{"/opt/vexp/bin/vexp", "run", "/recipes/tiny.toml", "--set",
                                                   "optim.lr=0.05", "--set", "dist.backend=mpi", "--plugin-path",
                                                   "/opt/plugins", "--out", "/runs/tiny", "--resume", "auto"}));
  EXPECT_EQ(j.cluster_file, "c.toml");
  EXPECT_EQ(j.submit_command, "vexp submit tiny.toml --cluster c.toml");
  EXPECT_EQ(job_spec_problem(j), "");
  // No cpus_per_node: none asked for; fewer CPUs than tasks: one each.
  s.cpus_per_node = 0;
  EXPECT_EQ(run_job_spec(s, shape, run_in("/r")).cpus_per_task, 0);
  s.cpus_per_node = 2;
  EXPECT_EQ(run_job_spec(s, shape, run_in("/r")).cpus_per_task, 1);
}

TEST(SlurmRunJob, SubmitWritesTheScriptCallsSbatchAndRecords) {
  vexp::base::TempDir t("vexp_submit_test");
  const std::string dir = (t.path() / "run").string();
  StandInSbatch sb("echo \"$@\" >\"" + t.path().string() + "/sbatch.args\"\necho '4242;cluster'");
  const JobSpec j = run_job_spec(Settings{}, Shape{}, run_in(dir));
  bool before = false;
  const Submitted s = submit_run(j, {2, "test cluster", 7}, "vexp sweep", [&] {
    before = true;
    EXPECT_TRUE(fs::exists(dir + "/job.sbatch"));  // written before sbatch
    EXPECT_FALSE(fs::exists(t.path() / "sbatch.args"));
    EXPECT_NE(vexp::base::DirLock::holder(dir), "");  // the run's lock held meanwhile
  });
  EXPECT_TRUE(before);
  EXPECT_EQ(s.job, "4242");
  EXPECT_EQ(s.record_problem, "");
  EXPECT_EQ(read(dir + "/job.sbatch"), batch_script(j));
  EXPECT_EQ(read(t.path() / "sbatch.args"), "--parsable " + dir + "/job.sbatch\n");
  EXPECT_EQ(vexp::base::DirLock::holder(dir), "");  // released
  const std::string lines = read(dir + "/jobs.jsonl");
  ASSERT_EQ(std::count(lines.begin(), lines.end(), '\n'), 1);
  const auto rec = nlohmann::json::parse(lines);
  EXPECT_EQ(rec["event"], "submitted");
  EXPECT_EQ(rec["job"], "4242");
  EXPECT_EQ(rec["world_size"], 2);
  EXPECT_EQ(rec["cluster"], "test cluster");
  EXPECT_EQ(rec["sweep_trial"], 7);
  EXPECT_EQ(rec["max_requeues"], 3);
  EXPECT_EQ(rec["script"], "job.sbatch");
  // Not a sweep's job: no sweep_trial. The run's record grows by one line.
  const Submitted again = submit_run(j, {1, "c"}, "vexp submit");
  EXPECT_EQ(again.job, "4242");
  const std::string both = read(dir + "/jobs.jsonl");
  ASSERT_EQ(std::count(both.begin(), both.end(), '\n'), 2);
  EXPECT_FALSE(nlohmann::json::parse(both.substr(both.find('\n') + 1)).contains("sweep_trial"));
}

TEST(SlurmRunJob, ARefusedJobLeavesNothing) {
  vexp::base::TempDir t("vexp_submit_test");
  const std::string dir = (t.path() / "run").string();
  StandInSbatch sb("echo 'sbatch: error: Batch job submission failed: Invalid partition name specified' >&2; exit 1");
  const JobSpec j = run_job_spec(Settings{}, Shape{}, run_in(dir));
  try {
    submit_run(j, {}, "vexp submit");
    FAIL() << "a refused job was submitted";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "sbatch refused the job (exit code 1): sbatch: error: Batch job submission failed: Invalid partition "
              "name specified; nothing submitted");
  }
  EXPECT_FALSE(fs::exists(dir)) << "the run directory this submit made is left";
  // A directory that was there stays, without the script; an older record stays too.
  fs::create_directories(dir);
  std::ofstream(dir + "/jobs.jsonl") << R"({"event":"submitted","job":"1"})" << "\n";
  EXPECT_THROW(submit_run(j, {}, "vexp submit"), Error);
  EXPECT_TRUE(fs::exists(dir + "/jobs.jsonl"));
  EXPECT_FALSE(fs::exists(dir + "/job.sbatch"));
  // What the caller's step throws is undone and thrown as it came; sbatch is not called.
  fs::remove_all(dir);
  EXPECT_THROW(submit_run(j, {}, "vexp sweep", [] { throw std::runtime_error("the store is gone"); }),
               std::runtime_error);
  EXPECT_FALSE(fs::exists(dir));
}

TEST(SlurmRunJob, ARecordThatCannotBeWrittenIsNoFailedSubmit) {
  vexp::base::TempDir t("vexp_submit_test");
  const std::string dir = (t.path() / "run").string();
  StandInSbatch sb("echo 4243");
  fs::create_directories(dir);
  std::ofstream(t.path() / "elsewhere") << "";
  fs::create_symlink(t.path() / "elsewhere", dir + "/jobs.jsonl");
  const Submitted s = submit_run(run_job_spec(Settings{}, Shape{}, run_in(dir)), {}, "vexp submit");
  EXPECT_EQ(s.job, "4243");
  EXPECT_NE(s.record_problem.find("it is a symbolic link"), std::string::npos) << s.record_problem;
  EXPECT_TRUE(fs::exists(dir + "/job.sbatch"));
  EXPECT_EQ(read(t.path() / "elsewhere"), "");
}

TEST(SlurmRunJob, ASpecTheScriptCannotHoldIsRefusedBeforeAnythingIsWritten) {
  vexp::base::TempDir t("vexp_submit_test");
  const std::string dir = (t.path() / "run").string();
  RunToSubmit r = run_in(dir);
  r.sets.push_back("run.name=a\nb");
  EXPECT_THROW(submit_run(run_job_spec(Settings{}, Shape{}, r), {}, "vexp submit"), Refused);
  EXPECT_FALSE(fs::exists(dir));
}
