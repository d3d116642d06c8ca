#include "vexp/sweep/to_target.hpp"

#include <cmath>

#include "vexp/rundir/files.hpp"

namespace vexp::sweep {

ToTarget to_target(const std::filesystem::path& run_dir, const Target& target, int64_t global_batch) {
  ToTarget t;
  // The records in the order they were written; a resumed run's metrics.jsonl was cut
  // back to its checkpoint, so it reads as one uninterrupted run.
  for (const rundir::EvalRecord& e : rundir::read_metrics(run_dir).evals) {
    const std::optional<double> v = e.value(target.metric);
    if (!v || !std::isfinite(*v) || !target.reached_by(*v)) continue;
    t.epoch = e.epoch;
    t.steps = e.global_step;
    if (e.clips_trained) t.clips = *e.clips_trained;
    else if (int64_t c = 0; global_batch > 0 && !__builtin_mul_overflow(e.global_step, global_batch, &c)) t.clips = c;
    t.wall_s = e.wall_s;
    t.train_s = e.train_s;
    break;
  }
  return t;
}

}  // namespace vexp::sweep
