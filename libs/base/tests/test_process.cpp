#include <gtest/gtest.h>

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
