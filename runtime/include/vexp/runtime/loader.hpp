// The loader engine: a pool of decode threads filling a bounded queue of ready
// batches, and the distributed sampler that decides which samples a rank sees.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <ATen/core/Tensor.h>

#include "vexp/dataset.hpp"

namespace vexp {

struct Batch {
  at::Tensor clips;   // [N, T, C, H, W]
  at::Tensor labels;  // [N] int64
};

// Shards a split over ranks: every epoch a shuffle seeded by (seed, epoch), then
// rank r takes micro-batch m of step s at position ((s * ranks + r) * micro + m) *
// batch of the shuffled order. Every rank gets the same number of steps; the tail
// that does not fill a global batch is dropped (and, shuffled, differs per epoch).
class DistributedSampler {
 public:
  DistributedSampler(int64_t size, int64_t rank, int64_t ranks, int64_t batch, int64_t micro, uint64_t seed,
                     bool shuffle = true);
  int64_t steps_per_epoch() const { return steps_; }
  // The micro-batches of this rank for `epoch`, in order (steps x micro of `batch` indices).
  std::vector<std::vector<int64_t>> epoch_batches(int64_t epoch) const;

 private:
  int64_t size_, rank_, ranks_, batch_, micro_, steps_;
  uint64_t seed_;
  bool shuffle_;
};

struct LoaderOptions {
  Split split = Split::Train;
  uint64_t seed = 0;      // passed to Dataset::get_view (augmentation)
  int64_t view = 0;       // test view
  int64_t workers = 2;    // decode threads; 0: decode in the caller's thread
  int64_t prefetch = 4;   // ready or in-progress batches ahead of the consumer
  // Batches in page-locked (pinned) host memory when CUDA is present, so a
  // `to(cuda, non_blocking = true)` copy overlaps compute; no effect without CUDA.
  bool pin_memory = true;
};

// Produces the batches in the given order; samples are decoded in parallel
// (sample granularity, so small batches still use every thread). Errors from the
// dataset are rethrown by next().
class Loader {
 public:
  Loader(const Dataset& data, std::vector<std::vector<int64_t>> batches, LoaderOptions opt);
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;
  // The next batch; false when all were delivered.
  bool next(Batch& out);
  // Seconds next() spent waiting for data so far.
  double wait_s() const { return wait_s_; }
  // Whether batches come in pinned host memory (pin_memory and CUDA present).
  bool pinned() const { return pinned_; }

 private:
  struct Slot;
  void work();
  bool claim(std::shared_ptr<Slot>& slot, size_t& item);
  void fail_locked(std::exception_ptr err);  // first error wins; wakes everyone (mu_ held)

  const Dataset& data_;
  std::vector<std::vector<int64_t>> batches_;
  LoaderOptions opt_;
  std::mutex mu_;
  std::condition_variable ready_, room_;
  std::deque<std::shared_ptr<Slot>> open_;  // batches in progress or ready, in order
  size_t next_batch_ = 0;                   // first batch not opened yet
  size_t delivered_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
  std::vector<std::thread> threads_;
  double wait_s_ = 0;
  bool pinned_ = false;  // pin_memory and CUDA present
};

// Stacks samples into a batch (every clip must have the first one's shape), in
// pinned host memory when `pinned` (needs CUDA).
Batch stack_samples(std::vector<Sample>& samples, bool pinned = false);

}  // namespace vexp
