// vexp::slurm without a Slurm: the job's shape, squeue's answer, the batch script's
// guards, the job record. (tests/slurm/ runs the commands against a real one.)
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <fstream>

#include <nlohmann/json.hpp>

#include "vexp/base/files.hpp"
#include "vexp/slurm/job.hpp"
#include "vexp/slurm/scheduler.hpp"

namespace fs = std::filesystem;
using namespace vexp::slurm;

namespace {
ShapeRequest req(int64_t world, int64_t cluster_nodes, int64_t gpn, int64_t nodes = 0, std::string comm = "mpi",
                 std::string backend = "") {
  return {world, comm, cluster_nodes, gpn, backend, nodes, "c.toml", "r.toml"};
}
}  // namespace

TEST(SlurmShape, OneTaskPerGpuOfTheWorld) {
  const Shape s = job_shape(req(16, 4, 4));
  EXPECT_EQ(s.nodes, 4);
  EXPECT_EQ(s.tasks_per_node, 4);
  EXPECT_EQ(s.ranks, 16);
  EXPECT_EQ(s.text, "4 node(s) x 4 task(s) = 16 rank(s) for dist.world_size = 16");
  EXPECT_EQ(s.emulation, "");
}

TEST(SlurmShape, FewerNodesEmulate) {
  const Shape s = job_shape(req(16, 4, 4, 2));
  EXPECT_EQ(s.ranks, 8);
  EXPECT_NE(s.emulation.find("each rank emulates 2 of them"), std::string::npos) << s.emulation;
}

TEST(SlurmShape, Refusals) {
  try {
    job_shape(req(16, 2, 4));
    FAIL();
  } catch (const Refused& e) {
    EXPECT_STREQ(e.what(), "dist.world_size = 16 needs 4 nodes of 4 GPU(s), and c.toml has 2; --nodes 2 emulates "
                           "that world exactly; nothing submitted");
  }
  EXPECT_THROW(job_shape(req(6, 4, 4)), Refused);      // 6 is no multiple of 4 per node
  EXPECT_THROW(job_shape(req(16, 4, 4, 3)), Refused);  // 12 ranks do not divide 16
  EXPECT_THROW(job_shape(req(16, 4, 4, 5)), Refused);  // more nodes than the cluster's
  // A local recipe on several ranks: refused, or switched by the cluster file.
  EXPECT_THROW(job_shape(req(2, 2, 1, 0, "local")), Refused);
  EXPECT_EQ(job_shape(req(2, 2, 1, 0, "local", "mpi")).backend_set, "dist.backend=mpi");
  EXPECT_EQ(job_shape(req(1, 2, 1, 0, "local")).backend_set, "");  // one rank: local is right
}

TEST(SlurmQueue, ParsesSqueueLines) {
  const auto m = parse_queue(
      "12|RUNNING|None|n[1-2]\n13|PENDING|BeginTime|(null)\n"
      "garbage line\n14|COMPLETED|None|n1|extra\nx15|FAILED|None|n1\n16|TIMEOUT|None|n2\r\n");
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m.at("12").state, "RUNNING");
  EXPECT_EQ(m.at("12").nodes, "n[1-2]");
  EXPECT_EQ(m.at("13").reason, "BeginTime");
  EXPECT_EQ(m.at("13").nodes, "");
  EXPECT_EQ(m.at("16").nodes, "n2");
}

TEST(SlurmQueue, States) {
  for (const char* s : {"COMPLETED", "FAILED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "CANCELLED"})
    EXPECT_TRUE(is_final(s)) << s;
  for (const char* s : {"PENDING", "RUNNING", "COMPLETING", "REQUEUED"}) EXPECT_FALSE(is_final(s)) << s;
  EXPECT_TRUE(is_running("RUNNING"));
  EXPECT_TRUE(is_running("COMPLETING"));
  EXPECT_FALSE(is_running("PENDING"));
}

TEST(SlurmNames, JobNames) {
  EXPECT_EQ(job_name_of("tsm k400/1536"), "tsm_k400_1536");
  EXPECT_EQ(job_name_of(""), "vexp");
  EXPECT_EQ(job_name_of(std::string(100, 'a')).size(), 64u);
}

TEST(SlurmScript, CountsOnlyARunWithASummaryAsComplete) {
  JobSpec j;
  j.run_dir = "/runs/a";
  j.job_name = "a";
  j.vexp_argv = {"/bin/vexp", "run", "/r.toml", "--out", "/runs/a", "--resume", "auto"};
  const std::string s = batch_script(j);
  EXPECT_NE(s.find("[ ! -f \"$run_dir/summary.json\" ]"), std::string::npos);
  EXPECT_NE(s.find("#SBATCH --requeue"), std::string::npos);
  EXPECT_NE(s.find("#SBATCH --signal=B:USR1@120"), std::string::npos);
  EXPECT_NE(s.find("--resume auto"), std::string::npos);
  EXPECT_EQ(s.find("--ntasks="), std::string::npos);  // no launcher: nothing to size
  // srun: one task per GPU of the nodes granted now (a requeue may grant fewer).
  j.launcher = {"srun", "--mpi=pmix"};
  j.nodes = 4;
  j.tasks_per_node = 8;
  const std::string t = batch_script(j);
  EXPECT_NE(t.find("srun --mpi=pmix --ntasks=$((nodes_now * tasks_per_node)) --ntasks-per-node=$tasks_per_node "),
            std::string::npos)
      << t;
  EXPECT_NE(t.find("nodes_now=$(printf %s \"${SLURM_JOB_NUM_NODES:-4}\" | tr -cd 0-9)"), std::string::npos) << t;
}

TEST(SlurmRecord, EventsMakeAHistory) {
  vexp::base::TempDir t("vexp_slurm_test");
  const std::string d = t.path().string();
  append_event(d, R"({"event":"submitted","job":"7","time":"t0","max_requeues":3})");
  append_event(d, R"({"event":"start","job":"7","nodes":"n1","time":"t1"})");
  append_event(d, R"({"event":"end","job":"7","state":"requeued","exit":130,"time":"t2"})");
  append_event(d, R"({"event":"start","job":"7","nodes":"n2","time":"t3"})");
  append_event(d, "not json");
  const JobRecord r = read_jobs(d);
  ASSERT_EQ(r.jobs.size(), 1u);
  EXPECT_EQ(r.bad_lines, 1);
  EXPECT_EQ(r.jobs[0].starts, 2);
  EXPECT_EQ(r.jobs[0].requeues, 1);
  EXPECT_EQ(r.jobs[0].state, "running");
  EXPECT_EQ(r.jobs[0].nodes, "n2");
}

// Every string of the batch script is checked where it is written, comment lines
// included (issue #36 item 2): a newline in the cluster file's name or the submit
// command would start a shell line.
TEST(SlurmBatchScript, EveryStringIsCheckedCommentsIncluded) {
  JobSpec j;
  j.run_dir = "/runs/a";
  j.job_name = "a";
  j.vexp_argv = {"/opt/vexp/bin/vexp", "run", "r.toml", "--out", "/runs/a", "--resume", "auto"};
  j.launcher = {"srun"};
  j.cluster_file = "c.toml";
  j.submit_command = "vexp submit r.toml --cluster c.toml";
  const std::string ok = batch_script(j);
  EXPECT_NE(ok.find("vexp=/opt/vexp/bin/vexp\n"), std::string::npos);
  EXPECT_NE(ok.find("\"$vexp\" job-record \"$run_dir\" \"$1\" \"$2\""), std::string::npos);
  EXPECT_EQ(ok.find(">>\"$run_dir/jobs.jsonl\""), std::string::npos);
  for (auto set : std::vector<std::function<void(JobSpec&)>>{
           [](JobSpec& x) { x.cluster_file = "c\ntouch PWNED.toml"; },
           [](JobSpec& x) { x.submit_command = "vexp submit --cluster 'c\ntouch PWNED'"; },
           [](JobSpec& x) { x.setup = {"module load a\x1b]0;x\x07"}; },
           [](JobSpec& x) { x.partition = "debug\r"; },
           [](JobSpec& x) { x.vexp_argv.push_back("--set\nrun.name=x"); }}) {
    JobSpec bad = j;
    set(bad);
    EXPECT_NE(job_spec_problem(bad), "");
    try {
      batch_script(bad);
      FAIL() << "a control character reached the batch script";
    } catch (const Refused& e) {
      EXPECT_NE(std::string(e.what()).find("holds a newline or another control character"), std::string::npos)
          << e.what();
    }
  }
}

TEST(SlurmJobRecord, EventLinesAreBuiltFromSlurmsVariablesOnly) {
  ::setenv("SLURM_JOB_ID", "12\"34", 1);
  ::setenv("SLURM_RESTART_COUNT", "2", 1);
  ::setenv("SLURM_JOB_NODELIST", "n[1-2]\n\"x\":1", 1);
  const auto j = nlohmann::json::parse(job_event_line("end", "requeued", 130));
  EXPECT_EQ(j["job"], "1234");
  EXPECT_EQ(j["restart"], 2);
  EXPECT_EQ(j["nodes"], "n[1-2]x1");
  EXPECT_EQ(j["state"], "requeued");
  EXPECT_EQ(j["exit"], 130);
  EXPECT_THROW(job_event_line("begin", "running", -1), Refused);
  EXPECT_THROW(job_event_line("end", "done\n", 0), Refused);
  ::unsetenv("SLURM_JOB_ID");
  ::unsetenv("SLURM_RESTART_COUNT");
  ::unsetenv("SLURM_JOB_NODELIST");
}

// vexp cancel (#36): its record makes the job "cancelled" and says who did it; a job
// that had already ended keeps its end; the batch script's own end record may follow.
TEST(SlurmRecord, ACancelByVexpCancelIsRecorded) {
  vexp::base::TempDir t("vexp_slurm_test");
  const std::string d = t.path().string();
  append_event(d, R"({"event":"submitted","job":"7","time":"t0","max_requeues":3})");
  append_event(d, R"({"event":"start","job":"7","nodes":"n1","time":"t1"})");
  JobRecord r = read_jobs(d);
  ASSERT_EQ(r.jobs.size(), 1u);
  EXPECT_FALSE(record_ended(r.jobs[0]));
  const std::string line = cancel_event_line("7");
  const auto j = nlohmann::json::parse(line);
  EXPECT_EQ(j["event"], "cancel");
  EXPECT_EQ(j["job"], "7");
  EXPECT_EQ(j["by"], "vexp cancel");
  append_event(d, line);
  r = read_jobs(d);
  EXPECT_EQ(r.bad_lines, 0);
  EXPECT_EQ(r.jobs[0].state, "cancelled");
  EXPECT_FALSE(r.jobs[0].cancelled.empty());
  EXPECT_TRUE(record_ended(r.jobs[0]));
  EXPECT_EQ(state_text(r.jobs[0]).rfind("cancelled by vexp cancel (", 0), 0u) << state_text(r.jobs[0]);
  // The script's end after the SIGTERM: still the cancel of vexp cancel.
  append_event(d, R"({"event":"end","job":"7","state":"cancelled","exit":130,"time":"t3"})");
  r = read_jobs(d);
  EXPECT_EQ(r.jobs[0].state, "cancelled");
  EXPECT_EQ(r.jobs[0].exit_code, 130);
  EXPECT_NE(state_text(r.jobs[0]).find("by vexp cancel"), std::string::npos);
  // A job that completed just before: its end stands.
  append_event(d, R"({"event":"submitted","job":"8","time":"t4"})");
  append_event(d, R"({"event":"end","job":"8","state":"completed","exit":0,"time":"t5"})");
  append_event(d, cancel_event_line("8"));
  r = read_jobs(d);
  ASSERT_EQ(r.jobs.size(), 2u);
  EXPECT_EQ(r.jobs[1].state, "completed");
  EXPECT_TRUE(r.jobs[1].cancelled.empty());
  // A plain scancel (the script's SIGTERM) is no vexp cancel.
  append_event(d, R"({"event":"submitted","job":"9","time":"t6"})");
  append_event(d, R"({"event":"end","job":"9","state":"cancelled","exit":130,"time":"t7"})");
  r = read_jobs(d);
  EXPECT_EQ(state_text(r.jobs[2]).rfind("cancelled (scancel", 0), 0u);
  // "requeued" is pending again: not ended.
  JobHistory h;
  h.state = "requeued";
  EXPECT_FALSE(record_ended(h));
}

// srun reports a rank's clean stop (exit code 130) as "task N: Exited with exit code
// 130" (#36): the USR1 trap says first that those lines are expected.
TEST(SlurmScript, TheStopSaysThatExitCode130IsExpected) {
  JobSpec j;
  j.run_dir = "/runs/a";
  j.job_name = "a";
  j.vexp_argv = {"/bin/vexp", "run", "/r.toml", "--out", "/runs/a", "--resume", "auto"};
  j.launcher = {"/usr/bin/srun", "--mpi=pmix"};
  std::string s = batch_script(j);
  EXPECT_NE(s.find("srun's 'task N: Exited with exit code 130' lines below are expected, not failures"),
            std::string::npos)
      << s;
  const size_t trap = s.find("trap 'signalled=${signalled:-USR1};");
  ASSERT_NE(trap, std::string::npos);
  EXPECT_NE(s.substr(trap, s.find('\n', trap) - trap).find("; stop_note' USR1"), std::string::npos) << s;
  j.launcher = {"mpirun"};
  s = batch_script(j);
  EXPECT_NE(s.find("the launcher's lines about exit code 130 below are expected"), std::string::npos) << s;
}

// SIGUSR1 before any rank caught it (#36, seen under make sanitize): during the setup
// lines the step is not started; a rank killed by it while starting (the launcher's
// 128 + 10) ends as a clean stop does, with 130. tests/slurm's usr1_while_starting
// runs both against a real Slurm.
TEST(SlurmScript, ASignalBeforeAnyRankCaughtItIsACleanStop) {
  JobSpec j;
  j.run_dir = "/runs/a";
  j.job_name = "a";
  j.vexp_argv = {"/bin/vexp", "run", "/r.toml", "--out", "/runs/a", "--resume", "auto"};
  j.launcher = {"srun", "--mpi=pmix"};
  j.setup = {"module load x"};
  const std::string s = batch_script(j);
  const size_t setup = s.find("module load x"), before = s.find("if [ \"$signalled\" = USR1 ]; then\n  say \"SIGUSR1 came before the step started");
  const size_t step = s.find("srun --mpi=pmix"), killed = s.find("[ \"$rc\" -eq $((128 + $(kill -l USR1))) ]");
  ASSERT_NE(before, std::string::npos) << s;
  ASSERT_NE(killed, std::string::npos) << s;
  EXPECT_LT(setup, before);
  EXPECT_LT(before, step);
  EXPECT_LT(step, killed);
  EXPECT_LT(killed, s.find("if [ \"$signalled\" = USR1 ] && [ \"$rc\" -eq 130 ]; then"));
  EXPECT_NE(s.find("a rank was still starting when SIGUSR1 came", killed), std::string::npos);
}
