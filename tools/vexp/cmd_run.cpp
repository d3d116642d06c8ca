// vexp run RECIPE [--set k=v]... [--out DIR] [--resume] [--stop-after N]
#include <cstdio>
#include <iostream>

#include "common.hpp"
#include "trainer.hpp"

namespace vexp::cli {

void add_run(CLI::App& app) {
  auto* cmd = app.add_subcommand("run", "Train and evaluate a recipe");
  auto args = std::make_shared<RecipeArgs>();
  auto opt = std::make_shared<TrainOptions>();
  args->add_to(cmd);
  cmd->add_option("--out", opt->out_dir, "Run directory (default: run.out, else runs/<name>)");
  cmd->add_flag("--resume", opt->resume, "Continue the run in the run directory from its last checkpoint");
  cmd->add_option("--stop-after", opt->stop_after_epochs,
                  "Stop after this many epochs in this invocation (continue later with --resume)")
      ->check(CLI::PositiveNumber);
  cmd->callback([args, opt] {
    Session s;
    if (!open_session(s, *args)) throw Exit{kExitInvalid, ""};
    opt->recipe_path = args->path;
    TrainResult r;
    try {
      r = train(s, *opt);
    } catch (const DivergedError& e) {
      throw Exit{kExitDiverged, std::string("training diverged: ") + e.what()};
    }
    char buf[256];
    if (r.finished) {
      std::snprintf(buf, sizeof buf, "%s: top-1 %.4f  top-5 %.4f  %.1f clips/s  %lld steps  %.1f s\n", r.run_dir.c_str(),
                    r.top1, r.top5, r.clips_per_s, static_cast<long long>(r.steps), r.wall_s);
    } else {
      std::snprintf(buf, sizeof buf, "%s: stopped after epoch %lld (continue with --resume)\n", r.run_dir.c_str(),
                    static_cast<long long>(r.epochs));
    }
    std::cout << buf;
  });
}

}  // namespace vexp::cli
