// A trial's steps, clips and wall-clock time to the sweep's target ([sweep] target;
// docs/sweeps.md, "Steps, clips and time to a target"), read from its run folder's
// metrics.jsonl: the first evaluation whose metric reaches the target.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>

#include "vexp/sweep/definition.hpp"

namespace vexp::sweep {

struct ToTarget {
  // The evaluation that first reached the target: its epoch and global step (optimizer
  // steps done), the training clips seen by then (the record's clips_trained, which is
  // global_step x the global batch, accumulation and emulated GPUs included; the
  // trial's planned global batch for a record of an earlier vexp that lacks it).
  // All empty when no evaluation reached it ("not reached": never 0).
  std::optional<int64_t> epoch, steps, clips;
  // The run's wall-clock seconds and its seconds in training steps at that record,
  // over every invocation of the run (a resumed trial counts the attempts' training,
  // not the time between them nor the work after a checkpoint that a resume redid;
  // rundir::EvalRecord). Empty when not reached, or when the record predates them.
  std::optional<double> wall_s, train_s;
  bool reached() const { return steps.has_value(); }
};

// From RUN_DIR/metrics.jsonl (nothing reached when it has none). `global_batch`: the
// trial's planned global batch, for records that do not say their clips.
ToTarget to_target(const std::filesystem::path& run_dir, const Target& target, int64_t global_batch);

}  // namespace vexp::sweep
