// vexp run RECIPE [--set k=v]... [--out DIR] [--resume [auto] | --resume-from CHECKPOINT] [--stop-after N] [--dry-run] [--nproc N]
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "commands/common.hpp"
#include "commands/param_groups_check.hpp"
#include "commands/run_dist.hpp"
#include "vexp/base/text.hpp"
#include "vexp/runtime/launcher.hpp"
#include "vexp/runtime/trainer.hpp"

namespace vexp::cli {

namespace {

}  // namespace

void add_run(CLI::App& app) {
  auto* cmd = app.add_subcommand("run", "Train and evaluate a recipe");
  auto args = std::make_shared<RecipeArgs>();
  auto opt = std::make_shared<TrainOptions>();
  auto dry_run = std::make_shared<bool>(false);
  auto nproc = std::make_shared<int>(0);
  auto resume_mode = std::make_shared<std::string>();
  args->add_to(cmd);
  cmd->add_option("--out", opt->out_dir, "Run directory (default: run.out, else runs/<name>)");
  // An optional value, "auto". CLI11 gives an option's optional value the next
  // argument whatever it is, so `vexp run --resume RECIPE --out DIR` hands it the
  // recipe: the callback gives it back (hence the recipe is checked there).
  auto* resume = cmd->add_option("--resume", *resume_mode,
                                 "Continue the run in the run directory from its newest checkpoint that loads; "
                                 "--resume auto: continue it when the directory holds a run, start it otherwise")
                     ->expected(0, 1);
  cmd->get_option("recipe")->required(false);
  cmd->add_option("--resume-from", opt->resume_from,
                  "Continue from this checkpoint file (of this recipe), in the run directory")
      ->excludes(resume);
  cmd->add_option("--stop-after", opt->stop_after_epochs,
                  "Stop after this many epochs in this invocation (continue later with --resume)")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--dry-run", *dry_run, "Print the plan (batch, lr, schedule, traffic) without data or training");
  cmd->add_option("--nproc", *nproc, "Start this many local ranks (through mpirun)")->check(CLI::PositiveNumber);
  cmd->callback([args, opt, dry_run, nproc, resume, resume_mode] {
    if (!resume_mode->empty() && *resume_mode != "auto") {
      if (!args->path.empty())
        throw base::invalid("--resume takes no value other than auto (got '" + vexp::base::printable(*resume_mode) + "')");
      args->path = *resume_mode;
      resume_mode->clear();
    }
    if (args->path.empty()) throw base::invalid("recipe is required");
    opt->resume_auto = *resume_mode == "auto";
    opt->resume = resume->count() > 0 && !opt->resume_auto;
    if (*dry_run) {
      print_dry_run(*args, *nproc);
      return;
    }
    if (*nproc > 1) {
      std::vector<std::string> pass;
      if (!opt->out_dir.empty()) pass.insert(pass.end(), {"--out", opt->out_dir});
      if (opt->resume) pass.push_back("--resume");
      if (opt->resume_auto) pass.insert(pass.end(), {"--resume", "auto"});
      if (!opt->resume_from.empty()) pass.insert(pass.end(), {"--resume-from", opt->resume_from});
      if (opt->stop_after_epochs > 0) pass.insert(pass.end(), {"--stop-after", std::to_string(opt->stop_after_epochs)});
      if (launch_local_ranks(*nproc, *args, pass)) return;  // the ranks ran (an Exit carries their failure)
    }
    // Ctrl-C from here on: the run stops after its current step, with a checkpoint.
    install_stop_handlers();
    Session s;
    args->require_data = true;  // a run reads its data: missing data stops it before anything starts
    if (!open_session(s, *args)) throw base::invalid("");
    refuse_backend_of_one(args->path, s.plan->comm);  // before anything is written
    check_recipe_param_groups(s, args->path, false);  // [[optim.groups]] globs, before the run directory
    opt->recipe_path = args->path;
    opt->overrides = args->sets;  // provenance.jsonl keeps them apart from the recipe files
    TrainResult r;
    try {
      r = train(s, *opt);
    } catch (const InterruptedError& e) {
      // Rank 0 says how to continue; under `--nproc` the launcher's command line.
      if (detect_launcher().rank <= 0) {
        const char* given = std::getenv("VEXP_RESUME_COMMAND");
        std::cerr << "vexp: " << e.what() << "\nvexp: to continue: "
                  << (given && *given ? std::string(given) : resume_command()) << "\n";
      }
      throw base::interrupted("");
    }
    char buf[256];
    if (r.already_finished) {
      std::snprintf(buf, sizeof buf, "%s: already finished: top-1 %.4f  top-5 %.4f  %lld steps (nothing trained)\n",
                    r.run_dir.c_str(), r.top1, r.top5, static_cast<long long>(r.steps));
    } else if (r.finished) {
      std::snprintf(buf, sizeof buf, "%s: top-1 %.4f  top-5 %.4f  %.1f clips/s  %lld steps  %.1f s\n", r.run_dir.c_str(),
                    r.top1, r.top5, r.clips_per_s, static_cast<long long>(r.steps), r.wall_s);
    } else {
      std::snprintf(buf, sizeof buf, "%s: stopped after epoch %lld (continue with --resume)\n", r.run_dir.c_str(),
                    static_cast<long long>(r.epochs));
    }
    if (r.rank == 0) std::cout << buf;
  });
}

}  // namespace vexp::cli
