// dist.reduction = "exact": the sum of the GPUs' gradients in an order that belongs
// to the GPUs, not to the ranks, so that training on any rank count that divides
// dist.world_size (and a requeue onto any such count) is bit-identical
// (docs/distributed.md, "Exact on any rank count").
//
// Float addition is not associative: today's reducer sums a rank's emulated GPUs one
// after another (autograd accumulating into .grad), then the backend sums the ranks
// in a tree of its own, so 1, 2, 4 and 8 ranks of one world round differently. Here
// every GPU's gradient is rounded once onto a fixed-point grid and summed as 64-bit
// integers, whose addition is exact in any order:
//   1. after a GPU's last micro-batch its gradient (exactly what that GPU computes on
//      any rank count) is set aside and .grad zeroed (take);
//   2. per parameter, the largest magnitude over every GPU of the world: an
//      all-reduce of one float per parameter with max, which is exact;
//   3. the grid of a parameter is the power of two q with W x max / q < 2^62 (W:
//      dist.world_size), so each GPU's value is round(g / q) with 62 - ceil(log2 W)
//      bits below the largest (2^-51 of it for W = 2048) and the sum of W of them
//      cannot overflow; the integers are summed locally and all-reduced (int64);
//   4. .grad = the integer sum x q, rounded once to float32.
// Every step of it depends on the GPUs' values and W only. A non-finite gradient
// (fp16 overflow) makes its parameter's gradient non-finite, as the fast reduction
// would, so the GradScaler skips the step on every rank alike.
// Cost: 8 bytes per gradient element on the wire (fp32: 4), no overlap with the
// backward pass, and one float copy of the gradients per GPU a rank computes
// (`vexp bench allreduce` measures it against the fast reduction).
// Torch-light header: ATen's tensor type only.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <ATen/core/Tensor.h>

namespace vexp {

class Comm;

class ExactGradSum {
 public:
  // `params`: the trainable parameters (their .grad is read and written); `comm`:
  // null or one rank for a single process; `world`: dist.world_size; `gpus`: the GPUs
  // this rank computes (world / ranks); `bucket_mb`: the largest message sent at once.
  ExactGradSum(std::vector<at::Tensor> params, Comm* comm, int64_t world, int64_t gpus, double bucket_mb);

  // After the last backward pass of this rank's GPU `gpu` (0 .. gpus-1): its gradient
  // is kept aside and .grad zeroed for the next GPU.
  void take(int64_t gpu);
  // Every GPU taken: .grad becomes the sum over every GPU of the world.
  void finish();

  // The grid exponent of a parameter whose largest magnitude over the world is `max`
  // (finite, > 0): q = 2^exponent (exposed for tests).
  static int grid_exponent(float max, int64_t world);

 private:
  std::vector<at::Tensor> params_;
  Comm* comm_ = nullptr;
  int64_t world_ = 1, gpus_ = 1;
  int64_t chunk_ = 0;                 // elements per message
  std::vector<int64_t> offsets_;      // each parameter's place in the flat buffers
  int64_t numel_ = 0;
  std::vector<at::Tensor> taken_;     // per GPU: its gradients, flat float32
  std::vector<bool> have_;
};

}  // namespace vexp
