// `vexp run`: trains the recipe's model on its dataset, evaluates, checkpoints.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>

#include "session.hpp"

namespace vexp {

struct TrainOptions {
  std::string out_dir;        // empty: run.out, else runs/<name>
  bool resume = false;
  int64_t stop_after_epochs = 0;  // >0: stop this invocation after that many epochs
  std::string recipe_path;    // for the default run name
};

struct TrainResult {
  std::string run_dir;
  double top1 = 0, top5 = 0, val_loss = 0;
  int64_t epochs = 0, steps = 0;
  double clips_per_s = 0, wall_s = 0;
  int64_t params = 0;
  double flops_per_clip = 0;
  bool finished = false;      // false when stopped early by stop_after_epochs
  int rank = 0;               // this process's rank (only rank 0 prints the result)
};

// A non-finite loss: the run stops, the last good checkpoint stays.
struct DivergedError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

TrainResult train(Session& session, const TrainOptions& options);

}  // namespace vexp
