#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include <fstream>
#include <sstream>

#include "vexp/base/files.hpp"
#include "vexp/base/process.hpp"

using namespace vexp::base;

TEST(Process, ArgumentsReachTheProgramAsTheyAreNeverThroughAShell) {
  TempDir t("vexp_test");
  const std::string victim = (t.path() / "victim").string();
  // Were this a shell string, the quote would close and `touch` would run.
  const std::string evil = "x'; touch '" + victim + "'; echo '";
  const Captured c = run_capture({"printf", "%s", evil});
  EXPECT_TRUE(c.status.ok());
  EXPECT_EQ(c.out, evil);
  EXPECT_FALSE(std::filesystem::exists(victim));
}

TEST(Process, RedirectsToFilesWhoseNamesHoldQuotes) {
  TempDir t("vexp_test");
  const std::string out = (t.path() / "it's a 'log'").string();
  SpawnOptions o;
  o.stdout_path = out;
  o.stderr_path = "=stdout";
  const ProcessStatus s = run_program({"sh", "-c", "echo out; echo err >&2"}, o);
  EXPECT_TRUE(s.ok());
  std::stringstream text;
  text << std::ifstream(out).rdbuf();
  EXPECT_EQ(text.str(), "out\nerr\n");
}

TEST(Process, ReportsExitCodesSignalsAndMissingPrograms) {
  EXPECT_EQ(run_program({"sh", "-c", "exit 7"}).exit_code, 7);
  const ProcessStatus k = run_program({"sh", "-c", "kill -TERM $$"});
  EXPECT_EQ(k.signal, 15);
  EXPECT_NE(k.describe().find("signal 15"), std::string::npos);
  try {
    run_program({"vexp-no-such-program-here"});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'vexp-no-such-program-here': not found on PATH"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(find_program("vexp-no-such-program-here"));
  EXPECT_TRUE(find_program("sh"));
}

TEST(Process, CaptureIsBoundedAndFeedsInput) {
  const Captured big = run_capture({"head", "-c", "100000", "/dev/zero"}, false, 1000);
  EXPECT_EQ(big.out.size(), 1000u);
  EXPECT_TRUE(big.truncated);
  const std::string input(300000, 'a');
  const Captured echo = run_capture({"cat"}, false, 1 << 20, input);
  EXPECT_EQ(echo.out, input);
  EXPECT_TRUE(echo.status.ok());
}

TEST(Process, EnvironmentEntriesAreSetForTheChild) {
  SpawnOptions o;
  const Captured c = run_capture({"sh", "-c", "printf %s \"$VEXP_BASE_TEST\""});
  EXPECT_EQ(c.out, "");
  TempDir t("vexp_test");
  o.stdout_path = (t.path() / "env").string();
  o.env_set = {"VEXP_BASE_TEST=a b;c"};
  EXPECT_TRUE(run_program({"sh", "-c", "printf %s \"$VEXP_BASE_TEST\""}, o).ok());
  EXPECT_EQ(read_file_bounded(o.stdout_path), "a b;c");
}

namespace {
// "PGRP PID" of a child shell (field 5 of /proc/PID/stat is its process group).
std::pair<std::string, std::string> child_group_and_pid(bool own_group, const std::string& out) {
  SpawnOptions o;
  o.stdout_path = out;
  o.own_process_group = own_group;
  EXPECT_TRUE(run_program({"sh", "-c", "cut -d' ' -f5 /proc/$$/stat; echo $$"}, o).ok());
  std::ifstream in(out);
  std::string group, pid;
  in >> group >> pid;
  return {group, pid};
}
}  // namespace

TEST(Process, OwnProcessGroupOnlyWhenAsked) {
  TempDir t("vexp_test");
  const auto [own, own_pid] = child_group_and_pid(true, (t.path() / "own").string());
  EXPECT_FALSE(own_pid.empty());
  EXPECT_EQ(own, own_pid);  // the leader of a group of its own
  const auto [shared, shared_pid] = child_group_and_pid(false, (t.path() / "shared").string());
  EXPECT_EQ(shared, std::to_string(::getpgrp()));  // ours
  EXPECT_NE(shared, shared_pid);
}

TEST(Process, MpirunArgvIsBuiltInOnePlace) {
  const std::vector<std::string> prog{"/opt/vexp bin/vexp", "run", "a b.toml"};
  std::vector<std::string> want{"mpirun"};
  if (::geteuid() == 0) want.push_back("--allow-run-as-root");
  for (const char* w : {"--oversubscribe", "--bind-to", "none", "-np", "3"}) want.push_back(w);
  std::vector<std::string> plain = want;
  plain.insert(plain.end(), prog.begin(), prog.end());
  EXPECT_EQ(mpirun_argv(3, prog), plain);

  // Per-rank output: the tail after `-np N` is what each rank runs. Run it as rank 2
  // would (Open MPI sets OMPI_COMM_WORLD_RANK) with a program whose arguments hold
  // shell syntax: they reach it as they are, and its output lands in DIR/rank.2.out.
  TempDir t("vexp_test");
  const std::string dir = (t.path() / "it's out").string();
  std::filesystem::create_directories(dir);
  const std::string evil = "$(touch x); `y` \"z\"";
  const std::vector<std::string> m = mpirun_argv(2, {"printf", "%s", evil}, dir);
  ASSERT_GT(m.size(), want.size());
  EXPECT_TRUE(std::equal(want.begin(), want.end() - 1, m.begin()));
  const std::vector<std::string> rank(m.begin() + static_cast<std::ptrdiff_t>(want.size()), m.end());
  ASSERT_EQ(rank.front(), "/bin/sh");
  SpawnOptions o;
  o.env_set = {"OMPI_COMM_WORLD_RANK=2"};
  EXPECT_TRUE(run_program(rank, o).ok());
  EXPECT_EQ(read_file_bounded(dir + "/rank.2.out"), evil);
  // Not started by Open MPI: the rank script refuses instead of writing rank..out.
  SpawnOptions none;
  none.env_set = {"OMPI_COMM_WORLD_RANK="};
  none.stderr_path = (t.path() / "err").string();
  EXPECT_FALSE(run_program(rank, none).ok());
  EXPECT_FALSE(std::filesystem::exists(dir + "/rank..out"));
}
