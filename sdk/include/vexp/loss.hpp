// Loss plugins (kind "loss", since plugin ABI 5): the training objective of a
// micro-batch, `[loss] type = "NAME"` in a recipe (none: "cross_entropy").
//
// The host calls forward once per micro-batch, inside the step's autocast scope,
// with the logits cast to float32. It averages over the global batch itself (each
// micro-batch's loss is scaled by 1 / (micro-batches x ranks) before backward), so
// a loss returns the mean over its own micro-batch; and it reads the value back
// (divergence checks, the logged loss), so a loss returns a finite scalar for
// finite logits. The validation loss the trainer logs is not this: it is plain
// cross-entropy over the hard labels, whatever the recipe trains with.
#pragma once

#include <ATen/core/Tensor.h>

namespace vexp {

class Loss {
 public:
  virtual ~Loss() = default;
  // logits [N, classes] float32, on the training device. target: either
  //   [N] int64 class labels (no batch transform ran: what the dataset gave), or
  //   [N, classes] float32 probabilities, each row summing to 1 (soft targets:
  //   made by the recipe's batch transforms, [[data.batch_transforms]], such as
  //   mixup and cutmix; only when soft_targets() is true).
  // Returns a scalar (0-dim) tensor with a gradient path to `logits`: the mean
  // loss over the N clips.
  virtual at::Tensor forward(const at::Tensor& logits, const at::Tensor& target) = 0;
  // Whether forward accepts soft targets. A recipe whose batch transforms make
  // them with a loss that does not is refused before training (at the recipe
  // line of the first batch transform).
  virtual bool soft_targets() const { return false; }
};

}  // namespace vexp
