// Data-parallel gradient reducer (what DistributedDataParallel does, on vexp's
// Comm): gradients live in buckets of ~bucket_mb, laid out in reverse
// registration order (the order backward produces them). With the fp32 wire
// format every parameter's .grad *is* a view into its bucket (DDP's
// gradient_as_bucket_view): autograd accumulates straight into the bucket, a
// post-hook on each parameter's gradient accumulator counts it in, and the
// bucket's allreduce is launched as soon as all of its gradients are in — while
// backward goes on computing earlier layers. Nothing is copied in or out.
// With fp16/bf16 compression the hook casts the accumulated gradient into the
// bucket and finish() casts the result back.
// Buckets are launched in index order on every rank (collectives must match).
//
// Averaging: by default finish() divides the summed gradients by the world size
// (one pass over the buckets). A caller that already scaled its loss by
// 1/world_size (the trainer does: it folds 1/ranks into its 1/micro-batches
// loss scale) sets `prescaled` and saves that pass.
//
// Accumulation (no_sync semantics): prepare(false) before the backward of every
// micro-batch but the last; its hooks do nothing and gradients accumulate in
// .grad (the bucket views) as usual. prepare(true) before the last: each hook
// then sees the full accumulated gradient.
//
// .grad tensors stay bound to the buckets as long as callers zero them in place
// (the step zeroes them after the optimizer). A gradient that was replaced (set to none, or rebound by
// someone else) is copied back into its bucket and rebound when its hook runs.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "vexp/comm.hpp"

namespace torch::autograd {
struct Node;
}

namespace vexp {

struct ReducerOptions {
  double bucket_mb = 25;
  std::string compression = "none";  // none | fp16 | bf16: wire format
  bool prescaled = false;            // gradients already divided by the world size
};

class Reducer {
 public:
  using Clock = std::chrono::steady_clock;
  struct StepStats {
    int64_t buckets = 0;
    int64_t launched_in_backward = 0;       // buckets launched from hooks (overlapping backward)
    std::vector<Clock::time_point> launch;  // per bucket, in launch order
    Clock::time_point backward_end;         // when finish() was called
    double wait_s = 0;                      // time finish() waited for communication
    int64_t rebound = 0;                    // gradients found detached from their bucket (copied back)
  };

  // `params`: trainable parameters in registration order (leaves requiring grad).
  Reducer(std::vector<at::Tensor> params, std::shared_ptr<Comm> comm, ReducerOptions options);
  ~Reducer();
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;

  void prepare(bool sync);
  void finish();
  const StepStats& last_step() const { return stats_; }
  // The settings it was built with (bucket size, wire format, prescaled).
  const ReducerOptions& options() const { return options_; }
  // Parameter indices (registration order) of each bucket.
  std::vector<std::vector<size_t>> bucket_members() const;
  // True when parameter k's .grad is a view into its bucket (fp32 wire).
  bool grad_is_bucket_view(size_t k) const;

 private:
  struct Bucket {
    std::vector<size_t> members;
    std::vector<int64_t> offsets;
    at::Tensor buffer;  // flat, wire dtype
    bool views = false; // members' .grad are views of `buffer`
    size_t pending = 0;
    bool launched = false;
    std::shared_ptr<Work> work;
  };
  void on_ready(size_t index);
  void pack(size_t index);  // the gradient of parameter `index` into its bucket
  void launch_ready(bool from_hook);

  std::vector<at::Tensor> params_;
  std::vector<at::Tensor> views_;  // per parameter: its slice of its bucket, shaped and strided like it
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;
  std::vector<uintptr_t> hook_keys_;
  std::vector<std::pair<size_t, size_t>> where_;  // param -> (bucket, slot)
  std::vector<bool> seen_;
  std::vector<Bucket> buckets_;
  std::shared_ptr<Comm> comm_;
  ReducerOptions options_;
  size_t next_launch_ = 0;
  bool sync_ = false;
  std::mutex mu_;
  StepStats stats_;
};

// Copies rank 0's values of `tensors` into every rank's.
void broadcast_from_rank0(Comm& comm, const std::vector<at::Tensor>& tensors);

// Before step 1: every rank must run the same recipe (hash) and hold parameters of
// the same names and shapes. Throws std::runtime_error naming the first differing
// rank on every rank.
void check_same_model(Comm& comm, const std::string& recipe_hash,
                      const std::vector<std::pair<std::string, at::Tensor>>& named_params);

}  // namespace vexp
