// A cluster's Slurm settings and their checks (vexp/slurm/settings.hpp): Slurm's name
// and time syntax, and a time limit longer than the stop signal's lead.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "vexp/slurm/settings.hpp"

using namespace vexp::slurm;

namespace {
// "key: why" of every problem of `s`, one per line.
std::string problems(const Settings& s, const std::string& lead_of = "") {
  std::string out;
  for (const auto& p : settings_problems(s, lead_of)) out += p.key + ": " + p.why + "\n";
  return out;
}
}  // namespace

TEST(SlurmSettings, Times) {
  EXPECT_EQ(time_seconds("1"), 60);
  EXPECT_EQ(time_seconds("2:30"), 150);
  EXPECT_EQ(time_seconds("01:00:05"), 3605);
  EXPECT_EQ(time_seconds("1-2"), 26 * 3600);
  EXPECT_EQ(time_seconds("1-0:30"), 24 * 3600 + 1800);
  EXPECT_EQ(time_seconds("1-0:0:1"), 24 * 3600 + 1);
  for (const char* bad : {"", "1:", ":1", "1-", "a", "1:2:3:4", "1-2-3", "-1", "1 h", "1-1:1:1:1", "1234567890"}) {
    EXPECT_FALSE(time_seconds(bad).has_value()) << bad;
    EXPECT_NE(time_problem(bad).find("is not a Slurm time limit"), std::string::npos) << bad;
  }
  EXPECT_EQ(time_problem("04:00:00"), "");
}

TEST(SlurmSettings, Names) {
  EXPECT_EQ(name_problem("debug"), "");
  EXPECT_EQ(name_problem("gpu-a100.x_1"), "");
  EXPECT_EQ(name_problem("a b"), "holds ' ' (a name has only letters, digits and ._-)");
  EXPECT_EQ(name_problem("debug;reboot"), "holds ';' (a name has only letters, digits and ._-)");
  EXPECT_EQ(name_problem("a\nb"), "holds '\\n' (a name has only letters, digits and ._-)");
  EXPECT_EQ(name_problem(""), "is empty");
}

TEST(SlurmSettings, TimeLimitLongerThanTheSignalLead) {
  EXPECT_EQ(time_lead_problem("1", 45), "");   // 60 s > 45 s
  EXPECT_EQ(time_lead_problem("0:46", 45), "");
  EXPECT_EQ(time_lead_problem("", 45), "");    // no limit
  EXPECT_EQ(time_lead_problem("soon", 45), "");  // not a time: time_problem says so
  EXPECT_EQ(time_lead_problem("0:45", 45),
            "is 45 s, not longer than signal_lead_s = 45 (the run is told to stop that long before the limit)");
  EXPECT_EQ(time_lead_problem("1", 120, "c.toml"),
            "is 60 s, not longer than c.toml's signal_lead_s = 120 (the run is told to stop that long before the limit)");
}

TEST(SlurmSettings, DefaultsHaveNoProblem) {
  const Settings s;
  EXPECT_EQ(problems(s), "");
  EXPECT_EQ(s.launcher, (std::vector<std::string>{"srun", "--mpi=pmix"}));
  EXPECT_EQ(s.signal_lead_s, 120);
  EXPECT_EQ(s.max_requeues, 3);
}

TEST(SlurmSettings, EveryProblemNamesItsKey) {
  Settings s;
  s.partition = "gpu;x";
  s.account = "";  // not given: the cluster's default
  s.time = "1";    // 60 s, the default lead is 120 s
  s.backend = "nc cl";
  s.launcher = {"srun", ""};
  s.sbatch = {"qos=high"};
  s.setup = {"module load a\nrm -rf ~"};
  EXPECT_EQ(problems(s),
            "partition: holds ';' (a name has only letters, digits and ._-)\n"
            "time: is 60 s, not longer than signal_lead_s = 120 (the run is told to stop that long before the limit)\n"
            "backend: holds ' ' (a name has only letters, digits and ._-)\n"
            "setup: holds a newline or control character (\"module load a\\nrm -rf ~\")\n"
            "launcher: has an empty word\n"
            "sbatch: holds \"qos=high\", not an sbatch option (\"--qos=high\")\n");
  Settings t;
  t.time = "two hours";
  t.launcher.clear();
  EXPECT_EQ(problems(t),
            "time: is not a Slurm time limit (MINUTES, MINUTES:SECONDS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS)\n"
            "launcher: is empty (default: [\"srun\", \"--mpi=pmix\"])\n");
}

TEST(SlurmSettings, TheLeadIsCheckedWhateverSetTheTime) {
  // A cluster file's time, or one a command line put in its place (vexp submit --time):
  // the same check, naming where the lead was read.
  Settings s;
  s.signal_lead_s = 45;
  s.time = "1";
  EXPECT_EQ(problems(s), "");
  s.time = "0:45";
  EXPECT_EQ(problems(s, "c.toml"),
            "time: is 45 s, not longer than c.toml's signal_lead_s = 45 (the run is told to stop that long before "
            "the limit)\n");
  s.signal_lead_s = 30;
  EXPECT_EQ(problems(s), "");
}

// --time, --partition and --account (#36): vexp submit and vexp sweep --cluster put them
// into the cluster's settings through one function, checked as the cluster file's are.
TEST(SlurmSettings, CommandLineChoicesAreCheckedAsTheClusterFilesValues) {
  Settings s;
  s.signal_lead_s = 45;
  s.time = "10";
  s.partition = "debug";
  EXPECT_EQ(apply_choices(s, {}, "c.toml"), "");
  EXPECT_EQ(s.time, "10");  // nothing given: the cluster file's
  EXPECT_EQ(apply_choices(s, {"0:30", "", ""}, "c.toml"),
            "--time '0:30' is 30 s, not longer than c.toml's signal_lead_s = 45 (the run is told to stop that long "
            "before the limit)");
  EXPECT_EQ(apply_choices(s, {"soon", "", ""}), "--time 'soon' is not a Slurm time limit (MINUTES, MINUTES:SECONDS, "
                                                "HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS)");
  EXPECT_EQ(apply_choices(s, {"", "gpu;reboot", ""}),
            "--partition 'gpu;reboot' holds ';' (a name has only letters, digits and ._-)");
  EXPECT_EQ(apply_choices(s, {"", "", "a b"}), "--account 'a b' holds ' ' (a name has only letters, digits and ._-)");
  Settings ok;
  ok.signal_lead_s = 45;
  EXPECT_EQ(apply_choices(ok, {"5", "gpu", "proj.1"}), "");
  EXPECT_EQ(ok.time, "5");
  EXPECT_EQ(ok.partition, "gpu");
  EXPECT_EQ(ok.account, "proj.1");
  EXPECT_EQ(choices_words({"5", "gpu", "it's"}), "--time 5 --partition gpu --account 'it'\\''s'");
  EXPECT_EQ(choices_words({}), "");
  EXPECT_TRUE(Choices{}.empty());
  EXPECT_FALSE((Choices{"", "", "a"}.empty()));
}
