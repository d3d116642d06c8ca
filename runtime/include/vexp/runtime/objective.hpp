// The training objective of a run (since plugin ABI 5): the recipe's loss plugin
// ([loss], vexp/loss.hpp; none: "cross_entropy") and its batch transforms
// ([[data.batch_transforms]], vexp/transform.hpp's BatchTransform: mixup, cutmix),
// made once by the rig (rig.hpp) and called by TrainStep on every micro-batch:
//   transform  before the forward pass: the labels one-hot ([N, classes] float32
//              on the batch's device), then each batch transform in the recipe's
//              order, each with its own vexp::Rng keyed by (run.seed, global step,
//              micro-batch of the step, its place in the list): the same draws on
//              any rank count (GPU g of an emulated world is rank g of a real one)
//              and after a resume; Batch::targets holds the result. Nothing
//              without batch transforms (the loss then gets the labels).
//   loss       the loss plugin on the float32 logits and Batch::targets when set,
//              else Batch::labels.
// The trainer's validation loss is not this: plain cross-entropy over the labels
// (trainer_eval.cpp), comparable between recipes whatever they train with.
// Torch-light header: ATen's tensor type only.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

namespace vexp {

class BatchTransform;
class Loss;
class PluginHost;
struct Batch;
namespace dsl {
struct RecipePlan;
class Diagnostics;
}  // namespace dsl

// The loss a recipe without [loss] trains with.
inline constexpr const char* kDefaultLoss = "cross_entropy";

class Objective {
 public:
  // Makes the loss and the batch transforms from `host`. Throws base::Error
  // (invalid) with the recipe's file:line:col when the recipe's batch transforms
  // make soft targets its loss cannot take, or when they need a class count the
  // recipe does not give; PluginError when a plugin cannot be made.
  Objective(const dsl::RecipePlan& plan, const PluginHost& host);
  ~Objective();
  Objective(const Objective&) = delete;
  Objective& operator=(const Objective&) = delete;

  // What batch transforms see of the run (BatchContext): its optimizer steps and
  // the epoch a step starts in (step x global_batch / train_size; 0 when
  // train_size is 0). Rig::start sets it from the run's DistPlan.
  void set_schedule(int64_t total_steps, int64_t global_batch, int64_t train_size);
  // Micro-batch `micro_batch` (GPU g's accumulation step a: g x accum + a) of global
  // step `step`: the batch transforms, Batch::targets set. Nothing without them.
  void transform(Batch& b, int64_t step, int64_t micro_batch) const;
  // The micro-batch's loss (a scalar): the loss plugin on `logits` and
  // Batch::targets when set, else Batch::labels.
  at::Tensor loss(const at::Tensor& logits, const Batch& b) const;

  const std::string& loss_name() const { return loss_name_; }
  bool has_batch_transforms() const { return !batch_.empty(); }
  // Width of the soft targets (the dataset's classes; 0 when unknown and unused).
  int64_t classes() const { return classes_; }

 private:
  struct Use {
    std::string name;
    std::shared_ptr<BatchTransform> transform;
  };
  uint64_t seed_ = 0;
  std::string loss_name_;
  std::shared_ptr<Loss> loss_;
  std::vector<Use> batch_;
  int64_t classes_ = 0;
  int64_t total_steps_ = 0, global_batch_ = 0, train_size_ = 0;
};

// What only the plugins' objects know, as diagnostics at the recipe's lines (vexp
// check, run, sweep and plan refuse before anything starts): no [loss] and the
// default loss not installed; the batch transforms make soft targets and the loss's
// soft_targets() is false; a batch transform with no class count.
void check_objective(const dsl::RecipePlan& plan, const PluginHost& host, dsl::Diagnostics& diags);

}  // namespace vexp
