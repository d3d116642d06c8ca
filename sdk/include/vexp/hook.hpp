// Training hooks (kind "hook", since plugin ABI 5): code the trainer calls at
// named points of a run, with read access to the model, the metrics and the run
// folder, and a way to add metrics (they land in metrics.jsonl and TensorBoard
// like the trainer's own). A hook's state() is kept in checkpoints, so a resumed
// run continues it.
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
  torch::nn::Module* model = nullptr;   // the model being trained (named_parameters, named_buffers)
  std::string run_dir;                  // the run folder
  int64_t step = 0;                     // optimizer steps done
  int64_t epoch = 0;                    // epochs done
  int rank = 0, ranks = 1;
  const std::map<std::string, double>* metrics = nullptr;  // the point's metrics (loss, lr, top1 ...)
  std::function<void(const std::string& name, double value)> add_metric;
  // Evaluates a model with the run's validation protocol; returns top1, top5, loss.
  std::function<std::map<std::string, double>(torch::nn::Module& model)> evaluate;
};

class Hook {
 public:
  virtual ~Hook() = default;
  virtual void after_step(HookContext& ctx) { (void)ctx; }
  virtual void after_eval(HookContext& ctx) { (void)ctx; }
  // At every checkpoint: tensors returned by state() are saved with it.
  virtual void at_checkpoint(HookContext& ctx) { (void)ctx; }
  virtual std::map<std::string, at::Tensor> state() const { return {}; }
  virtual void load_state(const std::map<std::string, at::Tensor>& state) { (void)state; }
};

}  // namespace vexp
