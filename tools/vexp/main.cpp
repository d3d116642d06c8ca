// vexp: video training experiments from declarative recipes.
#include <exception>
#include <iostream>

#include <c10/util/Exception.h>

#include "common.hpp"
#include "vexp/build_tag.hpp"
#include "vexp/plugin_abi.h"
#include "vexp/runtime/plugin_host.hpp"

namespace vexp::cli {
// cmd_submit.cpp: `vexp submit` and `vexp status` (declared here rather than in
// common.hpp, which every command includes).
void add_submit(CLI::App& app);
}  // namespace vexp::cli

int main(int argc, char** argv) {
  using namespace vexp::cli;
  // A plugin that dies of SIGSEGV/SIGBUS/SIGILL/SIGFPE/SIGABRT (loading, registering,
  // in a factory or a node's forward) gets one line naming it and exit 4.
  vexp::install_plugin_crash_handler();
  CLI::App app{"vexp: distributed video training experiments from TOML recipes"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("vexp ") + VEXP_VERSION + " (" + vexp::host_build_tag() +
                                        "; plugin ABI " + std::to_string(VEXP_PLUGIN_ABI_VERSION) + ")");
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
  add_export(app);
  add_sweep(app);
  add_results(app);
  add_report(app);
  add_trust(app);
  add_plan(app);
  add_submit(app);
  try {
    try {
      app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
      int rc = app.exit(e);
      return rc == 0 ? 0 : kExitInvalid;
    }
  } catch (const Exit& e) {
    if (!e.message.empty()) std::cerr << "vexp: " << (e.code == 0 ? "" : "error: ") << e.message << "\n";
    return e.code;
  } catch (const c10::Error& e) {
    std::cerr << "vexp: error: " << e.what_without_backtrace() << "\n";
    return kExitFailure;
  } catch (const std::exception& e) {
    std::cerr << "vexp: error: " << e.what() << "\n";
    return kExitFailure;
  } catch (...) {
    std::cerr << "vexp: error: unknown failure\n";
    return kExitFailure;
  }
  return 0;
}
