// A cluster's Slurm settings (a cluster file's [scheduler] table, docs/clusters.md)
// and the checks of what they hold: Slurm's name and time syntax, lines that a batch
// script can hold, and a time limit longer than the stop signal's lead. pkg/plan's
// cluster file parser reads the table into Settings and reports these problems at
// their FILE:LINE:COL; `vexp submit` checks its --time, --partition and --account with
// the same function once it has put them into the settings (apply_choices, which
// `vexp sweep --cluster` shares).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace vexp::slurm {

struct Settings {
  std::string partition, account;     // "": the cluster's default
  std::string time;                   // time limit (Slurm syntax), "": none
  int64_t gpus_per_node = 0;          // GPUs asked for per node (--gpus-per-node); 0: none (CPU ranks)
  int64_t cpus_per_node = 0;          // CPUs per node shared by its tasks (--cpus-per-task); 0: Slurm's default
  std::vector<std::string> launcher{"srun", "--mpi=pmix"};  // argv words before `vexp run`
  std::string backend;                // dist.backend for a recipe whose is "local" ("": refuse such a recipe)
  std::vector<std::string> sbatch;    // extra #SBATCH options, one each
  std::vector<std::string> setup;     // shell lines run before vexp (module load ...)
  int64_t signal_lead_s = 120;        // the stop signal comes this long before the time limit
  int64_t max_requeues = 3;           // requeues at the time limit before the run ends
};

// Why `v` cannot be a Slurm partition, account (or backend) name (letters, digits,
// ._-), or "". The message follows the value's name: "'partition' ... " + message.
std::string name_problem(const std::string& v);
// Why `v` is not a Slurm time limit (sbatch --time), or "".
std::string time_problem(const std::string& v);
// A Slurm time limit in seconds (MINUTES, MINUTES:SECONDS, HH:MM:SS, D-HH, D-HH:MM,
// D-HH:MM:SS), or nullopt when it is none of these.
std::optional<int64_t> time_seconds(const std::string& v);
// Why a job limited to `time` cannot tell its run to stop `signal_lead_s` before the
// limit, or "" (also for no limit and for a time that is not one: time_problem says
// so). It follows the time's name: "'time' in [scheduler] " + "is 60 s, not longer
// than signal_lead_s = 120 (...)"; `lead_of` names where the lead was read ("C.toml":
// "C.toml's signal_lead_s").
std::string time_lead_problem(const std::string& time, int64_t signal_lead_s, const std::string& lead_of = "");

// One problem of a setting: `why` follows its name ("'partition' in [scheduler] " +
// why, or "--partition 'x' " + why).
struct SettingProblem {
  std::string key;  // partition, account, time, backend, launcher, sbatch, setup
  std::string why;
};
// Every problem of `s`, in the order of the keys above: names (when not empty), the
// time's syntax and its lead over signal_lead_s (time_lead_problem, `lead_of` as
// there), a launcher, sbatch or setup line with a newline or another control
// character, an empty launcher or launcher word, an sbatch element that is no option.
std::vector<SettingProblem> settings_problems(const Settings& s, const std::string& lead_of = "");

// The choices a command line makes over a cluster's settings: --time, --partition and
// --account of `vexp submit` and `vexp sweep --cluster` ("": the cluster file's).
struct Choices {
  std::string time, partition, account;
  bool empty() const { return time.empty() && partition.empty() && account.empty(); }
};
// Each choice's option name, value and the setting it replaces, in the order above.
struct ChoiceField {
  const char* key;                   // time, partition, account (the settings_problems key)
  std::string Choices::*choice;
  std::string Settings::*setting;
};
extern const ChoiceField kChoiceFields[3];

// Puts every choice that is given into `s` and checks them as a cluster file's values
// are checked (settings_problems, `lead_of` as there: a time limit longer than the
// cluster file's signal_lead_s). Returns the first problem of a given choice, "--KEY
// 'VALUE' " + why ("--time '0:30' is 30 s, not longer than C's signal_lead_s = 45 (...)"),
// or "" when they are all good; the caller says what it did not do.
std::string apply_choices(Settings& s, const Choices& c, const std::string& lead_of = "");

// The choices as command-line words ("--time '5' --partition 'gpu'"; "" when none),
// each value quoted for a shell.
std::string choices_words(const Choices& c);

}  // namespace vexp::slurm
