#include "vexp/runtime/loader.hpp"

#include <algorithm>
#include <chrono>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <system_error>

#include <ATen/ATen.h>
#include <ATen/Context.h>

#include "seed.hpp"
#include "vexp/base/error.hpp"

namespace vexp {

DistributedSampler::DistributedSampler(int64_t size, int64_t rank, int64_t ranks, int64_t batch, int64_t micro,
                                       uint64_t seed, bool shuffle)
    : size_(size), rank_(rank), ranks_(ranks), batch_(batch), micro_(micro), seed_(seed), shuffle_(shuffle) {
  if (size < 1 || ranks < 1 || rank < 0 || rank >= ranks || batch < 1 || micro < 1)
    throw std::invalid_argument("sampler: bad rank/batch geometry");
}

std::vector<int64_t> DistributedSampler::order(int64_t epoch) const {
  std::vector<int64_t> order(static_cast<size_t>(size_));
  std::iota(order.begin(), order.end(), 0);
  if (shuffle_) {
    std::mt19937_64 rng(mix_seed(seed_, static_cast<uint64_t>(epoch)));
    std::shuffle(order.begin(), order.end(), rng);
  }
  return order;
}

DistributedSampler::Batches DistributedSampler::steps(int64_t first, int64_t end) const {
  Batches out;
  if (first < 0 || end < first) throw std::invalid_argument("sampler: bad step range");
  const size_t n = static_cast<size_t>((end - first) * micro_);
  out.indices.reserve(n);
  out.epochs.reserve(n);
  // Positions only grow, so one shuffle is held at a time.
  int64_t held = -1;
  std::vector<int64_t> shuffled;
  for (int64_t s = first; s < end; ++s)
    for (int64_t m = 0; m < micro_; ++m) {
      const int64_t base = ((s * ranks_ + rank_) * micro_ + m) * batch_;
      std::vector<int64_t>& idx = out.indices.emplace_back();
      std::vector<int64_t>& ep = out.epochs.emplace_back();
      idx.reserve(static_cast<size_t>(batch_));
      ep.reserve(static_cast<size_t>(batch_));
      for (int64_t pos = base; pos < base + batch_; ++pos) {
        const int64_t e = pos / size_;
        if (e != held) {
          shuffled = order(e);
          held = e;
        }
        idx.push_back(shuffled[static_cast<size_t>(pos % size_)]);
        ep.push_back(e);
      }
    }
  return out;
}

Batch stack_samples(std::vector<Sample>& samples, bool pinned) {
  const int64_t n = static_cast<int64_t>(samples.size());
  std::vector<int64_t> sizes{n};
  sizes.insert(sizes.end(), samples[0].clip.sizes().begin(), samples[0].clip.sizes().end());
  // Pinned: allocated by the CUDA host allocator (page-locked), so the trainer's
  // copy to the device can be asynchronous; one copy, not a stack and a pin.
  const at::TensorOptions clip_opts = samples[0].clip.options().device(at::kCPU).pinned_memory(pinned);
  Batch b{at::empty(sizes, clip_opts), at::empty({n}, at::TensorOptions().dtype(at::kLong).pinned_memory(pinned))};
  auto* labels = b.labels.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) {
    if (!samples[i].clip.sizes().equals(samples[0].clip.sizes()))
      throw base::failure("dataset returned clips of different shapes in one batch");
    b.clips[i].copy_(samples[i].clip);
    labels[i] = samples[i].label;
  }
  return b;
}

struct Loader::Slot {
  size_t number = 0;  // its place in batches_
  const std::vector<int64_t>* indices = nullptr;
  std::vector<Sample> samples;
  size_t claimed = 0, done = 0;
  bool ready = false;  // `batch` assembled
  Batch batch;
};

Loader::Loader(const Dataset& data, std::vector<std::vector<int64_t>> batches, LoaderOptions opt)
    : Loader(data, std::move(batches), {}, opt) {}

Loader::Loader(const Dataset& data, std::vector<std::vector<int64_t>> batches,
               std::vector<std::vector<uint64_t>> seeds, LoaderOptions opt)
    : data_(data), batches_(std::move(batches)), seeds_(std::move(seeds)), opt_(opt) {
  if (!seeds_.empty()) {
    bool same = seeds_.size() == batches_.size();
    for (size_t b = 0; same && b < batches_.size(); ++b) same = seeds_[b].size() == batches_[b].size();
    if (!same) throw std::invalid_argument("loader: the per-sample seeds do not match the batches");
  }
  opt_.prefetch = std::max<int64_t>(1, opt_.prefetch);
  pinned_ = opt_.pin_memory && at::globalContext().hasCUDA();
  try {
    for (int64_t i = 0; i < opt_.workers; ++i) threads_.emplace_back([this] { work(); });
  } catch (const std::system_error& e) {
    // The threads already started must be joined: a joinable std::thread destroyed
    // by the unwinding would call std::terminate.
    const size_t started = threads_.size();
    stop_workers();
    throw base::failure("cannot start " + std::to_string(opt_.workers) + " loader threads (" +
                             std::to_string(started) + " started: " + e.what() + "); use fewer (data.workers)");
  }
}

void Loader::stop_workers() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  room_.notify_all();
  ready_.notify_all();
  for (auto& t : threads_)
    if (t.joinable()) t.join();
  threads_.clear();
}

uint64_t Loader::seed_of(size_t batch, size_t item) const {
  return seeds_.empty() ? opt_.seed : seeds_[batch][item];
}

Loader::~Loader() { stop_workers(); }

// Picks the next sample to decode: the earliest open batch with work left, else
// a new batch when fewer than `prefetch` are open. Called with mu_ held.
bool Loader::claim(std::shared_ptr<Slot>& slot, size_t& item) {
  for (auto& s : open_) {
    if (s->claimed < s->indices->size()) {
      slot = s;
      item = s->claimed++;
      return true;
    }
  }
  if (next_batch_ < batches_.size() && static_cast<int64_t>(open_.size()) < opt_.prefetch) {
    auto s = std::make_shared<Slot>();
    s->number = next_batch_;
    s->indices = &batches_[next_batch_++];
    s->samples.resize(s->indices->size());
    open_.push_back(s);
    slot = s;
    item = s->claimed++;
    return true;
  }
  return false;
}

void Loader::fail_locked(std::exception_ptr err) {
  if (!error_) error_ = err;
  ready_.notify_all();
  room_.notify_all();
}

void Loader::work() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    std::shared_ptr<Slot> slot;
    size_t item = 0;
    room_.wait(lock, [&] { return stop_ || error_ || claim(slot, item); });
    if (stop_ || error_) return;
    lock.unlock();
    Sample s;
    std::exception_ptr err;
    try {
      s = data_.get_view(opt_.split, (*slot->indices)[item], opt_.view, seed_of(slot->number, item));
    } catch (...) {
      err = std::current_exception();
    }
    lock.lock();
    if (err) return fail_locked(err);
    slot->samples[item] = std::move(s);
    if (++slot->done < slot->indices->size()) continue;
    // The last sample of a batch: this thread stacks it (into pinned memory when
    // CUDA is present), so the consumer only takes it.
    lock.unlock();
    Batch b;
    try {
      b = stack_samples(slot->samples, pinned_);
    } catch (...) {
      err = std::current_exception();
    }
    lock.lock();
    if (err) return fail_locked(err);
    slot->batch = std::move(b);
    slot->samples.clear();
    slot->ready = true;
    ready_.notify_all();
  }
}

bool Loader::next(Batch& out) {
  if (delivered_ >= batches_.size()) return false;
  const auto t0 = std::chrono::steady_clock::now();
  if (threads_.empty()) {  // synchronous
    Slot s;
    s.number = delivered_;
    s.indices = &batches_[delivered_++];
    for (size_t i = 0; i < s.indices->size(); ++i)
      s.samples.push_back(data_.get_view(opt_.split, (*s.indices)[i], opt_.view, seed_of(s.number, i)));
    out = stack_samples(s.samples, pinned_);
    wait_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return true;
  }
  std::shared_ptr<Slot> s;
  {
    std::unique_lock<std::mutex> lock(mu_);
    ready_.wait(lock, [&] { return error_ || (!open_.empty() && open_.front()->ready); });
    if (error_) std::rethrow_exception(error_);
    s = open_.front();
    open_.pop_front();
    ++delivered_;
  }
  room_.notify_all();
  out = std::move(s->batch);
  wait_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return true;
}

}  // namespace vexp
