// vexp: video training experiments from declarative recipes.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iostream>
#include <string>
#include <thread>

#include <c10/util/Exception.h>

#include "commands/common.hpp"
#include "vexp/base/text.hpp"
#include "vexp/build_tag.hpp"
#include "vexp/schema/schema.hpp"
#include "vexp/plugin_abi.h"
#include "vexp/rundir/provenance.hpp"
#include "vexp/runtime/plugin_host.hpp"

namespace {

// Every error ends here as one line: names, paths and messages quoted from files
// may hold control characters (ESC sequences, newlines) and may be huge; shown
// escaped and cut, they cannot drive the terminal or flood it.
std::string one_line(const std::string& message) { return vexp::base::printable(message, 4096); }

}  // namespace
namespace vexp::cli {
// cmd_submit.cpp: `vexp submit` (and `vexp job-record`); cmd_jobs.cpp: `vexp status`
// and `vexp cancel` (declared here rather than in common.hpp, which every command includes).
void add_submit(CLI::App& app);
void add_jobs(CLI::App& app);
}  // namespace vexp::cli

// Test-only (VEXP_TEST_FAULT=slow_launch@ms=N, docs/recipes.md): `vexp run` sleeps
// before anything, no signal caught yet, as a rank still loading from a slow
// filesystem (tests/slurm/slurm_tests.sh usr1_while_starting). The trainer reads
// and checks the whole list.
static void slow_launch_fault(int argc, char** argv) {
  const char* env = std::getenv("VEXP_TEST_FAULT");
  if (!env || argc < 2 || std::string(argv[1]) != "run") return;
  const char* at = std::strstr(env, "slow_launch@ms=");
  if (!at) return;
  const long ms = std::strtol(at + std::strlen("slow_launch@ms="), nullptr, 10);
  if (ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

int main(int argc, char** argv) {
  using namespace vexp::cli;
  slow_launch_fault(argc, argv);
  // A plugin that dies of SIGSEGV/SIGBUS/SIGILL/SIGFPE/SIGABRT (loading, registering,
  // in a factory or a node's forward) gets one line naming it and exit 4.
  vexp::install_plugin_crash_handler();
  CLI::App app{"vexp: distributed video training experiments from TOML recipes"};
  app.require_subcommand(1);
  // The commit and the source tree's state at build time, as provenance.jsonl records them.
  const std::string tree = vexp::rundir::vexp_tree();
  app.set_version_flag("--version", std::string("vexp ") + VEXP_VERSION + " (" + vexp::host_build_tag() +
                                        "; plugin ABI " + std::to_string(VEXP_PLUGIN_ABI_VERSION) + "; commit " +
                                        vexp::rundir::vexp_commit() + (tree == "unknown" ? "" : ", " + tree + " tree") +
                                        ")");
  add_check(app);
  add_plugins(app);
  add_graph(app);
  add_run(app);
  add_compare(app);
  add_data(app);
  add_bench(app);
  add_bench_comm(app);
  add_info(app);
  add_predict(app);
  add_eval(app);
  add_export(app);
  add_sweep(app);
  add_results(app);
  add_report(app);
  add_trust(app);
  add_plan(app);
  add_submit(app);
  add_jobs(app);
  // CLI11 would print the main help for `vexp submitt --help` and exit 0, so a
  // typo in a script's command would pass: the first word must be a command.
  if (argc > 1 && argv[1][0] != '-') {
    const std::string word = argv[1];
    std::vector<std::string> names;
    for (const CLI::App* sub : app.get_subcommands({})) names.push_back(sub->get_name());
    if (std::find(names.begin(), names.end(), word) == names.end()) {
      const std::string dym = vexp::dsl::did_you_mean(word, names);
      std::cerr << "vexp: error: unknown command '" << vexp::base::printable(word, 64) << "'"
                << (dym.empty() ? "" : " (did you mean '" + dym + "'?)") << "; `vexp --help` lists the commands\n";
      return kExitInvalid;
    }
  }
  try {
    try {
      app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
      int rc = app.exit(e);
      return rc == 0 ? 0 : kExitInvalid;
    }
  } catch (const vexp::base::Error& e) {
    // Where a kind becomes the exit code (vexp::cli::exit_code, the one mapping).
    if (*e.what()) std::cerr << "vexp: error: " << one_line(e.what()) << "\n";
    return exit_code(e);
  } catch (const c10::Error& e) {
    std::cerr << "vexp: error: " << one_line(e.what_without_backtrace()) << "\n";
    return kExitFailure;
  } catch (const std::exception& e) {
    std::cerr << "vexp: error: " << one_line(e.what()) << "\n";
    return kExitFailure;
  } catch (...) {
    std::cerr << "vexp: error: unknown failure\n";
    return kExitFailure;
  }
  return 0;
}
