// Data-parallel gradient reducer (what DistributedDataParallel does, on vexp's
// Comm): gradients are packed into buckets of ~bucket_mb in reverse registration
// order (the order backward produces them); a hook on every parameter copies its
// gradient into its bucket, and the bucket's allreduce is launched as soon as all
// of its gradients are in — while backward goes on computing earlier layers.
// Buckets are launched in index order on every rank (collectives must match).
// After backward, finish() waits and writes the averaged gradients back.
//
// Accumulation (no_sync semantics): prepare(false) before the backward of every
// micro-batch but the last; its hooks do nothing and gradients accumulate in
// .grad as usual. prepare(true) before the last: each hook packs .grad + the
// incoming gradient, i.e. the full accumulated gradient.
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

namespace vexp {

struct ReducerOptions {
  double bucket_mb = 25;
  std::string compression = "none";  // none | fp16 | bf16: wire format
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
  };

  // `params`: trainable parameters in registration order.
  Reducer(std::vector<at::Tensor> params, std::shared_ptr<Comm> comm, ReducerOptions options);
  ~Reducer();
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;

  void prepare(bool sync);
  void finish();
  const StepStats& last_step() const { return stats_; }
  // Parameter indices (registration order) of each bucket.
  std::vector<std::vector<size_t>> bucket_members() const;

 private:
  struct Bucket {
    std::vector<size_t> members;
    std::vector<int64_t> offsets;
    at::Tensor buffer;  // flat, wire dtype
    size_t pending = 0;
    bool launched = false;
    std::shared_ptr<Work> work;
  };
  void on_grad(size_t index, const at::Tensor& grad);
  void launch_ready(bool from_hook);

  std::vector<at::Tensor> params_;
  std::vector<unsigned> hook_ids_;
  std::vector<std::pair<size_t, size_t>> where_;  // param -> (bucket, slot)
  std::vector<bool> seen_;
  std::vector<Bucket> buckets_;
  std::shared_ptr<Comm> comm_;
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
