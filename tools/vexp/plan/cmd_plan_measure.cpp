// TEMPORARY registration of `vexp plan --measure-local [RECIPE...] --out FILE` until
// `vexp plan` itself (cmd_plan.cpp: --cluster, --gpus, --json, ...) is merged. Then
// cmd_plan.cpp calls add_measure_local_options(cmd, args) on its command, hands its
// positional recipes to args.recipes and calls run_measure_local(args) when
// args.enabled; this file and its line in main.cpp go.
#include "common.hpp"
#include "plan/measure_local.hpp"

namespace vexp::cli {

void add_plan_measure_local(CLI::App& app) {
  auto* cmd = app.add_subcommand("plan", "Predict a recipe's speed and scaling on a cluster; --measure-local measures "
                                         "this machine into a cluster file");
  auto a = std::make_shared<MeasureLocalArgs>();
  cmd->add_option("recipes", a->recipes, "Recipes whose compute profiles are measured");
  add_plugin_path_option(cmd, a->plugin_paths);
  add_measure_local_options(cmd, *a);
  cmd->callback([a] {
    if (!a->enabled) throw Exit{kExitInvalid, "vexp plan: this build only has --measure-local"};
    run_measure_local(*a);
  });
}

}  // namespace vexp::cli
