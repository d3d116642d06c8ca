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
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

#include "vexp/dataset.hpp"

namespace vexp {

struct Batch {
  Batch() = default;
  Batch(at::Tensor clips_, at::Tensor labels_, at::Tensor targets_ = {})
      : clips(std::move(clips_)), labels(std::move(labels_)), targets(std::move(targets_)) {}
  at::Tensor clips;   // [N, T, C, H, W]
  at::Tensor labels;  // [N] int64
  // [N, classes] float32 soft targets, rows summing to 1: set on the training device
  // by the recipe's batch transforms (objective.hpp, in TrainStep); undefined (the
  // loader's batches): the labels are the targets.
  at::Tensor targets;
};

// Shards the training stream (sample_stream.hpp) over ranks: the per-epoch
// shuffles, epoch e's seeded by (seed, e), one after another; rank r takes
// micro-batch m of global step s at stream position s*G + (r*micro + m)*batch,
// G = ranks*micro*batch, so the clips of GPU g = r*micro + m of a step do not
// depend on how many ranks share the world (exact emulation). Nothing is
// dropped: a micro-batch that passes an epoch's end continues in the next
// epoch's shuffle.
class DistributedSampler {
 public:
  DistributedSampler(int64_t size, int64_t rank, int64_t ranks, int64_t batch, int64_t micro, uint64_t seed,
                     bool shuffle = true);
  int64_t global_batch() const { return ranks_ * micro_ * batch_; }
  // This rank's micro-batches of steps [first, end), in order ((end - first) x
  // micro of `batch` indices), and for every index the epoch whose shuffle it
  // came from (its augmentation draws from that epoch's seed).
  struct Batches {
    std::vector<std::vector<int64_t>> indices;
    std::vector<std::vector<int64_t>> epochs;
  };
  Batches steps(int64_t first, int64_t end) const;
  // Epoch `epoch`'s order of the split: the shuffle seeded by (seed, epoch).
  std::vector<int64_t> order(int64_t epoch) const;

 private:
  int64_t size_, rank_, ranks_, batch_, micro_;
  uint64_t seed_;
  bool shuffle_;
};

struct LoaderOptions {
  Split split = Split::Train;
  uint64_t seed = 0;      // passed to Dataset::get_view (augmentation) unless seeds are given per sample
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
  // Sample batches[b][i] with augmentation seed seeds[b][i] (same shape as batches).
  Loader(const Dataset& data, std::vector<std::vector<int64_t>> batches, std::vector<std::vector<uint64_t>> seeds,
         LoaderOptions opt);
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
  // Tells the workers to stop and joins them (the destructor, and a failed start).
  void stop_workers();
  void fail_locked(std::exception_ptr err);  // first error wins; wakes everyone (mu_ held)

  uint64_t seed_of(size_t batch, size_t item) const;

  const Dataset& data_;
  std::vector<std::vector<int64_t>> batches_;
  std::vector<std::vector<uint64_t>> seeds_;  // empty: opt_.seed for every sample
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
