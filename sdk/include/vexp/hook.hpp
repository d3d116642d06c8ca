// Training hooks (kind "hook", since plugin ABI 5): code the trainer calls at
// named points of a run, with read access to the model, the point's metrics and
// the run folder, and a way to add metrics (they land in metrics.jsonl, TensorBoard
// and, for the last evaluation, summary.json, like the trainer's own). A hook's
// state() is kept in checkpoints, so a resumed run continues it bit for bit.
//
// The points, in the order a run meets them (docs/writing-a-plugin.md, "A hook"):
//   start          once per invocation, before its first step: the weights are
//                  final (a resume's checkpoint loaded, with load_state() before it;
//                  rank 0's weights broadcast to every rank)
//   after_step     after every optimizer step (ctx.step counts them from 1)
//   after_eval     after every evaluation of the trained weights (ctx.metrics:
//                  top1, top5, val_loss); ctx.evaluate evaluates other weights
//   at_checkpoint  after every checkpoint is written (ctx.checkpoint names it);
//                  ctx.save_weights writes weights beside it
//   at_end         once, when the run has trained its last epoch (after the last
//                  evaluation and checkpoint, before summary.json)
// Every rank calls every hook at every point, in the recipe's [[hooks]] order;
// after a step the weights are the same on every rank (exact emulation: one rank
// emulating N GPUs sees the weights N ranks see). Rank 0 writes the run folder.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include <ATen/core/Tensor.h>

namespace torch::nn {
class Module;
}

namespace vexp {

struct HookContext {
  // The model being trained: named_parameters(), named_buffers() (read only: a
  // hook never changes the weights the trainer trains).
  const torch::nn::Module* model = nullptr;
  std::string run_dir;  // the run folder (rank 0 writes it; the others see the same path)
  // Where the run is: the point comes after step `epoch_step` of epoch `epoch`
  // (from 1), `step` optimizer steps in all (the global step, from 1), of a run of
  // `epochs` epochs. At start: the position the invocation starts from (0 steps
  // and epoch 1 for a new run).
  int64_t step = 0;
  int64_t epoch = 0;
  int64_t epoch_step = 0;
  int64_t epochs = 0;
  int rank = 0, ranks = 1;  // this process and the processes of the run
  int64_t world = 1;        // GPUs of the run (dist.world_size; ranks may emulate several)
  // after_step: whether this step's record is written to metrics.jsonl (every
  // run.log_every steps and an epoch's last). Metrics added at a step whose record
  // is not written are dropped, so a hook can skip their work when false.
  bool logged = false;
  // The point's metrics: after_step loss (this step's, the mean over every GPU) and
  // lr; after_eval top1, top5, val_loss; empty elsewhere.
  std::map<std::string, double> metrics;
  // Adds a metric to the point's record: after_step to the step's record (when
  // logged), after_eval to the evaluation's record (and to summary.json when it is
  // the run's last), at_end to summary.json. A name is letters, digits and '_'
  // ("ema_top1"); one the record already has (the trainer's, or another hook's) is
  // an error. Every rank may call it; rank 0's values are written. Not set at
  // start and at_checkpoint.
  std::function<void(const std::string& name, double value)> add_metric;
  // after_eval and at_end: evaluates the model with `weights` in place of its own
  // tensors (named as named_parameters() / named_buffers(); any not given stay as
  // they are) under the run's validation protocol, and returns top1, top5 and
  // val_loss. The model's own tensors are back as they were afterwards. Call it on
  // every rank alike. Not set elsewhere.
  std::function<std::map<std::string, double>(const std::map<std::string, at::Tensor>& weights)> evaluate;
  // at_checkpoint: the checkpoint just written (its path; every rank sees it).
  std::string checkpoint;
  // at_checkpoint: writes `weights` beside the checkpoint, as
  // checkpoints/epoch_NNNN[_step_SSSSSS].TAG.pt, a torch.save state dict in the
  // model's names that `vexp predict --weights` (and torch.load) reads, deleted with
  // its checkpoint (run.keep_checkpoints); summary.json and provenance.jsonl name the
  // last one of each tag. TAG: letters, digits, '_' and '-'; one per hook. Rank 0
  // writes; every rank gets the path. Not set elsewhere.
  std::function<std::string(const std::string& tag, const std::map<std::string, at::Tensor>& weights)> save_weights;
};

class Hook {
 public:
  virtual ~Hook() = default;
  virtual void start(const HookContext& ctx) { (void)ctx; }
  virtual void after_step(const HookContext& ctx) { (void)ctx; }
  virtual void after_eval(const HookContext& ctx) { (void)ctx; }
  virtual void at_checkpoint(const HookContext& ctx) { (void)ctx; }
  virtual void at_end(const HookContext& ctx) { (void)ctx; }
  // What a checkpoint keeps of the hook (CPU copies are saved; names are the
  // hook's own); load_state gets back what state() gave, before start(), when a
  // run resumes. A hook whose state is empty starts afresh on resume.
  virtual std::map<std::string, at::Tensor> state() const { return {}; }
  virtual void load_state(const std::map<std::string, at::Tensor>& state) { (void)state; }
};

}  // namespace vexp
