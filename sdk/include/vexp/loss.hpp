// Loss plugins (kind "loss", since plugin ABI 5): the training objective of a
// micro-batch. The host averages over the global batch itself (each micro-batch's
// loss is scaled by 1 / (micro-batches x ranks)), so a loss returns the mean over
// its own micro-batch.
#pragma once

#include <ATen/core/Tensor.h>

namespace vexp {

class Loss {
 public:
  virtual ~Loss() = default;
  // logits [N, classes] (float32); target either [N] int64 labels or [N, classes]
  // float32 probabilities (soft targets, from a batch transform such as mixup).
  // Returns a scalar: the mean loss over the N clips.
  virtual at::Tensor forward(const at::Tensor& logits, const at::Tensor& target) = 0;
  // Whether forward accepts soft targets; a recipe with a batch transform that
  // makes them needs a loss that does.
  virtual bool soft_targets() const { return false; }
};

}  // namespace vexp
