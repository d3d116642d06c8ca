// `vexp run`: trains the recipe's model on its dataset, evaluates, checkpoints.
#pragma once

#include "vexp/base/error.hpp"
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "vexp/runtime/session.hpp"

namespace vexp {

struct TrainOptions {
  std::string out_dir;        // empty: run.out, else runs/<name>
  bool resume = false;
  // --resume auto: resume when the run directory holds a run (what refuses a
  // plain start: a summary, metrics or a checkpoint), start it otherwise.
  bool resume_auto = false;
  std::string resume_from;    // a checkpoint file to continue from (implies resume)
  int64_t stop_after_epochs = 0;  // >0: stop this invocation after that many epochs
  std::string recipe_path;    // for the default run name
  // For provenance.jsonl: the --set KEY=VALUE texts as given (kept apart from the
  // recipe files) and the command line (empty: this process's, /proc/self/cmdline).
  std::vector<std::string> overrides;
  std::vector<std::string> argv;
};

struct TrainResult {
  std::string run_dir;
  double top1 = 0, top5 = 0, val_loss = 0;
  int64_t epochs = 0, steps = 0;
  double clips_per_s = 0, wall_s = 0;
  int64_t params = 0;
  double flops_per_clip = 0;
  bool finished = false;      // false when stopped early by stop_after_epochs
  bool already_finished = false;  // --resume of a run that had finished: nothing was trained or written
  int rank = 0;               // this process's rank (only rank 0 prints the result)
};

// The run diverged: a non-finite training loss or reported metric, or a training
// loss grown past run.divergence_factor. The run stops, the last good checkpoint stays.
// what(): "training diverged: " and why.
struct DivergedError : base::Error {
  explicit DivergedError(const std::string& why) : base::Error("training diverged: " + why, base::ErrorKind::diverged) {}
};

// SIGINT / SIGTERM (or SIGUSR1, which `vexp run --nproc` forwards through mpirun)
// asked the run to stop: it finished its current step and wrote a checkpoint
// (`checkpoint`; empty when nothing new had been trained).
struct InterruptedError : base::Error {
  InterruptedError(const std::string& what, std::string ckpt)
      : base::Error(what, base::ErrorKind::interrupted), checkpoint(std::move(ckpt)) {}
  std::string checkpoint;
};

// Installs the handlers of SIGINT, SIGTERM and SIGUSR1: the first one asks the
// training loop to stop after its current step; a second one ends the process at
// once with exit code 130, as does the first one before the training loop begins
// (while the recipe, the data, the thread pools, the model and a checkpoint are
// opened: nothing new to save). Called by `vexp run` before anything else, and by
// train() (idempotent).
void install_stop_handlers();
// Whether a stop was asked for (by a signal, or by request_stop()).
bool stop_requested();
void request_stop();

TrainResult train(Session& session, const TrainOptions& options);

}  // namespace vexp
