// The trainer's jobs, one file each, shared through this private header:
//   trainer.cpp          train(): stop signals, the failure path of a rank, and
//                        train_body, which calls the jobs below in order
//   trainer_run_dir.cpp  the run directory: its path, the checkpoint to resume
//                        from, resolved.toml, metrics truncation, failure records
//   trainer_ranks.cpp    what every rank must agree on (resume point, stop, bad
//                        items) and the DDP setup (same model, rank 0's weights)
//   trainer_state.cpp    a checkpoint's contents: the state saved and restored
//   trainer_loop.cpp     the epochs: steps, divergence checks, evaluation, checkpoints
//   trainer_eval.cpp     evaluation on the validation split
//   trainer_hooks.cpp    the recipe's [[hooks]] and the calls at their points
//   trainer_report.cpp   progress display, test fault injection, the summary
//   trainer_provenance.cpp  provenance.jsonl: this invocation's record
// Every file of the run directory is named, written and read by vexp::rundir.
#pragma once

#include "vexp/base/error.hpp"
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include "vexp/base/lock.hpp"
#include "vexp/comm.hpp"
#include "vexp/dataset.hpp"
#include "vexp/runtime/checkpoint.hpp"
#include "vexp/runtime/dist_plan.hpp"
#include "vexp/runtime/graph.hpp"
#include "vexp/runtime/loader.hpp"
#include "vexp/runtime/optimizer.hpp"
#include "vexp/runtime/precision.hpp"
#include "vexp/runtime/provenance.hpp"
#include "vexp/runtime/reducer.hpp"
#include "vexp/runtime/rig.hpp"
#include "vexp/runtime/session.hpp"
#include "vexp/runtime/trainer.hpp"
#include "vexp/rundir/files.hpp"
#include "vexp/rundir/provenance.hpp"

namespace vexp::trainer {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t);

// A stop signal was honoured: a later run in this process starts afresh (trainer.cpp).
void clear_stop_request();
// The training loop begins: from now on a stop signal stops after the current step
// (with a checkpoint); before, it ended the process at once (trainer.cpp).
void steps_begin();

// ---- trainer_report.cpp ----

// Shows progress on a terminal (a bar redrawn in place) or as plain log lines.
class Progress {
 public:
  Progress(const std::string& mode, int64_t log_every);
  void step(int64_t epoch, int64_t epochs, int64_t step, int64_t steps, double loss, double lr, double clips_per_s,
            double eta_s);
  void line(const std::string& text);
  void end_bar();

 private:
  int64_t log_every_;
  bool bar_ = false, quiet_ = false, dirty_ = false;
};

// Test-only fault injection (VEXP_TEST_FAULT; docs/recipes.md).
struct Faults {
  struct Fault {
    std::string kind;
    int64_t at = 0;
    int rank = -1;
  };
  std::vector<Fault> list;

  static Faults from_env();
  // Whether fault `kind` fires at `at` (for grow_loss: at or after) on `rank`.
  bool hit(const std::string& kind, int64_t at, int rank) const;
  // slow_step@ms=N: every step sleeps N ms more, so that a run lasts long enough for a
  // test of a scheduler's time limit on a machine of any speed (values are unchanged).
  int64_t step_sleep_ms() const { return sleep_ms("slow_step"); }
  int64_t start_sleep_ms() const { return sleep_ms("slow_start"); }
  int64_t sleep_ms(const std::string& kind) const {
    for (const auto& f : list)
      if (f.kind == kind) return f.at;
    return 0;
  }
};

// ---- the run being trained ----

// Where and how the steps compute ([run] threads, device, precision, memory_format).
struct Execution {
  int64_t threads = 1;
  c10::Device device{c10::kCPU};
  Precision precision = Precision::Fp32;
  MemoryFormat memory_format = MemoryFormat::Contiguous;
};

// Everything a checkpoint holds besides the tensors: where the run stands.
struct TrainState {
  int64_t start_epoch = 0;      // epochs done
  int64_t start_step = 0;       // steps done of the next epoch (an interrupted epoch)
  int64_t global_step = 0;
  double train_time = 0;        // seconds in steps, over every invocation
  double prior_wall = 0;        // wall seconds of earlier invocations
  int64_t train_clips = 0;
  double reference_loss = -1;   // the first step's training loss
  double window_sum = 0;        // the logged window of step losses so far
  int64_t window_n = 0;
  // The gradient noise scale's moving averages (NoiseScale's raw state) and count.
  double noise_g2 = 0, noise_trace = 0;
  int64_t noise_n = 0;
  std::set<std::string> bad_saved;  // distinct bad items of earlier invocations
};

struct EvalResult {
  double top1 = 0, top5 = 0, loss = 0;
  int64_t clips = 0;
  std::map<std::string, double> extra;  // metrics the hooks added after it (ema_top1, ...)
};

class RunHooks;

struct Run {
  Run(const dsl::RecipePlan& plan, const TrainOptions& opt, std::shared_ptr<Comm> comm);

  const dsl::RecipePlan& plan;
  const TrainOptions& opt;
  const std::shared_ptr<Comm> comm;
  const int rank;
  const int64_t ranks;
  const bool writer;  // rank 0 writes the run directory
  const Clock::time_point wall_start = Clock::now();
  const Faults faults = Faults::from_env();
  Execution exec;
  fs::path out, ckpt_dir;
  std::string recipe_hash;

  std::shared_ptr<Dataset> data;
  std::shared_ptr<ModelGraph> model;
  int64_t params_count = 0;
  double macs = 0;              // multiply-adds per clip
  // The model's optimizer, scaler, reducer and step (rig.hpp), as the benchmarks build them.
  std::unique_ptr<Rig> rig;
  DistPlan dp;
  LoaderOptions loader_opts;
  TrainState state;
  std::unique_ptr<Progress> progress;
  int64_t metrics_lines_lost = 0;  // metrics.jsonl lines this invocation could not write
  std::shared_ptr<RunHooks> hooks;  // the recipe's [[hooks]]; null when it has none
};

// ---- trainer_run_dir.cpp ----

// run.name, or the recipe file's stem.
std::string run_name_of(const dsl::RecipePlan& plan, const TrainOptions& opt);
// --out, else run.out, else runs/<name>.
fs::path run_dir_of(const dsl::RecipePlan& plan, const TrainOptions& opt);

struct ResumePoint {
  std::string path;                     // "" : start from the beginning
  std::optional<Checkpoint> checkpoint;
};
// --resume-from's checkpoint, else (--resume) the newest one of `out` that loads
// (a newer one that does not is kept aside by the writer as NAME.corrupt); without
// either, refuses a directory that already holds a run.
ResumePoint choose_resume_point(const TrainOptions& opt, const fs::path& out, bool writer);
// The run directory refused to this run: another process works on it, or it is a
// sweep directory. Not recorded in the directory's failures/ (it is not this run's).
// Kind failure (exit 1): the run did not fail, but it could not start here.
struct RunDirRefused : base::Error {
  using base::Error::Error;
};
// Creates the run directory when needed and takes its lock (rank 0, the writer, only:
// the other ranks of the same run share it). Throws RunDirRefused when another
// process holds it or `out` is a sweep directory; returns an empty lock when the
// directory to resume does not exist (choose_resume_point says so).
base::DirLock lock_run_dir(const fs::path& out, const TrainOptions& opt);
// Failure records of an earlier invocation move to failures/previous/.
void set_aside_stale_failures(const fs::path& out);
// The checkpoints folder and resolved.toml (a resumed run's metrics are cut back
// with rundir::truncate_metrics).
void start_run_dir(const Run& r);
// "; the last good checkpoint is X" (or that none was written yet), for errors.
std::string last_good_checkpoint(const fs::path& ckpt_dir);

// ---- trainer_ranks.cpp ----

// Every rank resumes from the checkpoint rank 0 chose (a shared file system).
void agree_on_resume_point(Comm& comm, const std::string& resume_from);
// Whether any rank was asked to stop (every rank stops after the same step).
bool agree_stop(Comm& comm, bool mine);
// The distinct bad items every rank has met, plus `saved`. A collective.
std::set<std::string> all_bad_items(const Dataset& data, Comm& comm, const std::set<std::string>& saved);
// Same recipe and model on every rank, rank 0's weights and momentum everywhere
// (before the rig's reducer is made: Rig::start).
void set_up_ddp(Run& r);

// ---- trainer_state.cpp ----

// Loads model, momentum, loss scale and counters from `c` (written by `path`),
// after checking that it is this recipe's and this model's.
TrainState restore(Run& r, const Checkpoint& c, const std::string& path);
// Refuses a checkpoint of another recipe (its recipe hash): checked before the run
// directory is touched, so a refused resume leaves resolved.toml as it was.
void check_same_recipe(const Run& r, const Checkpoint& c, const std::string& path);
// Writes the state after `done_epochs` epochs and `epoch_step` steps of the next
// one (rank 0; every rank calls it, the bad items are gathered); returns its path.
std::string save_state(Run& r, int64_t done_epochs, int64_t epoch_step);

// ---- trainer_eval.cpp ----

EvalResult evaluate(ModelGraph& model, const Dataset& data, int64_t batch, int64_t classes, const LoaderOptions& lo,
                    const c10::Device& device, Precision precision);
// The evaluation after `done_epochs` epochs (faults injected).
EvalResult evaluate_after(Run& r, int64_t done_epochs);
// The same evaluation of the model with `weights` in place of its own tensors (a
// hook's, HookContext::evaluate); the model's own are put back. Throws
// std::invalid_argument naming a tensor the model has not, or of another shape.
EvalResult evaluate_weights(Run& r, const std::map<std::string, at::Tensor>& weights);
// A non-finite reported metric ends the run as diverged (DivergedError).
void check_eval(Run& r, const EvalResult& e, int64_t done_epochs);
// " (lower optim.lr, ...)": what a diverged run can change.
extern const char* const kDivergenceAdvice;

// ---- trainer_loop.cpp ----

struct LoopResult {
  int64_t end_epoch = 0;               // epochs done when the loop ended
  std::optional<EvalResult> last_eval;
};
// Trains from r.state to the last epoch (or --stop-after): throws
// InterruptedError when a stop was asked for, DivergedError when the loss diverges.
LoopResult train_epochs(Run& r);

// ---- trainer_hooks.cpp ----

// The recipe's [[hooks]] (plan.hooks), made once per invocation, and the calls at
// their points (vexp/hook.hpp) on every rank. A hook's error becomes a failure
// naming the hook, its recipe line and the point.
class RunHooks {
 public:
  // Makes every hook (a factory's error is invalid, at the hook's recipe line).
  RunHooks(const dsl::RecipePlan& plan, PluginHost& host);
  ~RunHooks();
  // Before the first step of this invocation (the weights final on every rank).
  void start(Run& r);
  // After global step r.state.global_step, step `epoch_step` of epoch `epoch` (from 1);
  // returns the metrics the hooks added (empty unless `logged`).
  std::map<std::string, double> after_step(Run& r, int64_t epoch, int64_t epoch_step, double loss, double lr,
                                           bool logged);
  // After the evaluation `e` after `done_epochs` epochs: the hooks' metrics go to e.extra.
  void after_eval(Run& r, int64_t done_epochs, EvalResult& e);
  // After the checkpoint `path` of `done_epochs` epochs and `epoch_step` steps was written.
  void at_checkpoint(Run& r, int64_t done_epochs, int64_t epoch_step, const std::string& path);
  // The run trained its last epoch: the metrics the hooks added (for summary.json,
  // which has `taken` already: the last evaluation's).
  std::map<std::string, double> at_end(Run& r, const std::set<std::string>& taken);
  // Every hook's state, named "I.TYPE/NAME" (Checkpoint::hooks), and back.
  std::map<std::string, at::Tensor> state() const;
  void load_state(const std::map<std::string, at::Tensor>& state, const std::string& path);
  // The weights files the hooks wrote (HookContext::save_weights): the last of each
  // tag, relative to the run directory, in tag order.
  const std::map<std::string, std::string>& weights_files() const { return weights_files_; }

 private:
  struct Entry;
  std::vector<Entry> hooks_;
  std::map<std::string, std::string> weights_files_;
  std::map<std::string, size_t> tag_owner_;  // a weights tag belongs to one hook
};

// ---- trainer_provenance.cpp ----

// This invocation as provenance.jsonl records it (hosts left empty: host_names is a
// collective); the record itself is a vexp::ProvenanceRecord (provenance.hpp).
rundir::Invocation describe_invocation(const Run& r, const Session& s);

// ---- trainer_report.cpp ----

// The result, and summary.json when the run finished (its final evaluation too
// when the loop did not evaluate).
TrainResult finish(Run& r, LoopResult loop);

}  // namespace vexp::trainer
