// The loader engine: distributed sampler coverage, order and determinism across
// thread counts, bounded prefetch, error propagation, multi-view access.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <atomic>
#include <set>
#include <stdexcept>
#include <thread>

#include "vexp/runtime/loader.hpp"

namespace {

using vexp::Split;

// A clip is a function of (index, seed, view); sample 13 throws when asked to.
class FakeData : public vexp::Dataset {
 public:
  explicit FakeData(int64_t n, bool poison = false) : n_(n), poison_(poison) {}
  int64_t size(Split) const override { return n_; }
  int64_t num_classes() const override { return 10; }
  int64_t views(Split s) const override { return s == Split::Val ? 3 : 1; }
  vexp::Sample get(Split s, int64_t i, uint64_t seed) const override { return get_view(s, i, 0, seed); }
  vexp::Sample get_view(Split, int64_t i, int64_t view, uint64_t seed) const override {
    calls++;
    if (poison_ && i == 13) throw std::runtime_error("sample 13 is broken");
    // Uneven work so threads finish out of order.
    if (i % 3 == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
    at::Tensor c = at::full({2, 1, 2, 2}, static_cast<double>(i) + 1000.0 * view + static_cast<double>(seed % 7));
    return {c, i % 10};
  }
  mutable std::atomic<int64_t> calls{0};

 private:
  int64_t n_;
  bool poison_;
};

TEST(DistributedSampler, CoversEverySampleExactlyOnceAcrossRanks) {
  for (int64_t ranks : {1, 2, 3, 4}) {
    const int64_t n = 96, batch = 4, micro = 2;
    std::multiset<int64_t> seen;
    int64_t steps = -1;
    for (int64_t r = 0; r < ranks; ++r) {
      vexp::DistributedSampler s(n, r, ranks, batch, micro, 7);
      if (steps < 0) steps = s.steps_per_epoch();
      EXPECT_EQ(s.steps_per_epoch(), steps) << "equal steps on every rank";
      auto b = s.epoch_batches(3);
      EXPECT_EQ(static_cast<int64_t>(b.size()), steps * micro);
      for (auto& v : b) {
        EXPECT_EQ(static_cast<int64_t>(v.size()), batch);
        seen.insert(v.begin(), v.end());
      }
    }
    const int64_t used = steps * ranks * micro * batch;
    EXPECT_EQ(static_cast<int64_t>(seen.size()), used);
    std::set<int64_t> unique(seen.begin(), seen.end());
    EXPECT_EQ(unique.size(), seen.size()) << "no sample twice (ranks " << ranks << ")";
    if (n % (ranks * micro * batch) == 0) {
      EXPECT_EQ(used, n) << "every sample (ranks " << ranks << ")";
    }
  }
}

TEST(DistributedSampler, ShuffleDependsOnEpochAndSeedOnly) {
  vexp::DistributedSampler a(64, 0, 2, 4, 1, 1), b(64, 0, 2, 4, 1, 1), c(64, 0, 2, 4, 1, 2);
  EXPECT_EQ(a.epoch_batches(0), b.epoch_batches(0));
  EXPECT_NE(a.epoch_batches(0), a.epoch_batches(1));
  EXPECT_NE(a.epoch_batches(0), c.epoch_batches(0));
  vexp::DistributedSampler ordered(8, 0, 1, 4, 1, 1, false);
  EXPECT_EQ(ordered.epoch_batches(5), (std::vector<std::vector<int64_t>>{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  EXPECT_THROW(vexp::DistributedSampler(8, 2, 2, 4, 1, 0), std::invalid_argument);
}

std::vector<at::Tensor> drain(const vexp::Dataset& d, const std::vector<std::vector<int64_t>>& batches, int workers,
                              int prefetch, int64_t view = 0, Split split = Split::Train) {
  vexp::LoaderOptions o;
  o.split = split;
  o.seed = 5;
  o.view = view;
  o.workers = workers;
  o.prefetch = prefetch;
  vexp::Loader l(d, batches, o);
  std::vector<at::Tensor> out;
  vexp::Batch b;
  while (l.next(b)) {
    EXPECT_EQ(b.labels.size(0), b.clips.size(0));
    out.push_back(b.clips.clone());
  }
  EXPECT_GE(l.wait_s(), 0.0);
  return out;
}

TEST(Loader, SameBatchesInTheSameOrderForAnyThreadCount) {
  FakeData d(200);
  vexp::DistributedSampler s(200, 0, 1, 6, 1, 3);
  auto batches = s.epoch_batches(0);
  auto serial = drain(d, batches, 0, 1);
  ASSERT_EQ(serial.size(), batches.size());
  for (size_t i = 0; i < batches.size(); ++i)
    EXPECT_EQ(serial[i][0].flatten()[0].item<double>(), static_cast<double>(batches[i][0]) + 5);
  for (int w : {1, 2, 5})
    for (int p : {1, 3}) {
      auto par = drain(d, batches, w, p);
      ASSERT_EQ(par.size(), serial.size());
      for (size_t i = 0; i < par.size(); ++i) ASSERT_TRUE(at::equal(par[i], serial[i])) << w << "/" << p << " batch " << i;
    }
}

TEST(Loader, ViewsReachTheDataset) {
  FakeData d(10);
  auto v2 = drain(d, {{1, 2}}, 2, 2, 2, Split::Val);
  ASSERT_EQ(v2.size(), 1u);
  EXPECT_EQ(v2[0][1].flatten()[0].item<double>(), 2 + 2000 + 5);
}

TEST(Loader, DatasetErrorsReachTheConsumer) {
  FakeData d(40, true);
  std::vector<std::vector<int64_t>> batches;
  for (int64_t i = 0; i < 40; i += 4) batches.push_back({i, i + 1, i + 2, i + 3});
  for (int w : {0, 3}) {
    vexp::LoaderOptions o;
    o.workers = w;
    vexp::Loader l(d, batches, o);
    vexp::Batch b;
    try {
      while (l.next(b)) {
      }
      FAIL() << "expected the error of sample 13";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("sample 13"), std::string::npos);
    }
  }
}

TEST(Loader, PrefetchIsBoundedAndDestructionMidEpochIsClean) {
  FakeData d(400);
  std::vector<std::vector<int64_t>> batches;
  for (int64_t i = 0; i < 400; i += 4) batches.push_back({i, i + 1, i + 2, i + 3});
  {
    vexp::LoaderOptions o;
    o.workers = 3;
    o.prefetch = 2;
    vexp::Loader l(d, batches, o);
    vexp::Batch b;
    ASSERT_TRUE(l.next(b));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    // One batch consumed, at most `prefetch` more opened.
    EXPECT_LE(d.calls.load(), 4 * (1 + 2));
  }  // destroyed with work pending: threads stop, nothing hangs
  SUCCEED();
}

TEST(Loader, BatchesArePinnedExactlyWhenCudaIsPresentAndAsked) {
  FakeData d(12);
  std::vector<std::vector<int64_t>> batches{{0, 1, 2}, {3, 4, 5}};
  for (bool pin : {false, true})
    for (int w : {0, 2}) {
      vexp::LoaderOptions o;
      o.workers = w;
      o.pin_memory = pin;
      vexp::Loader l(d, batches, o);
      EXPECT_EQ(l.pinned(), pin && at::globalContext().hasCUDA());
      vexp::Batch b;
      int n = 0;
      while (l.next(b)) {
        EXPECT_EQ(b.clips.is_pinned(), l.pinned());
        EXPECT_EQ(b.labels.is_pinned(), l.pinned());
        EXPECT_EQ(b.clips.size(0), 3);
        EXPECT_EQ(b.labels[2].item<int64_t>(), batches[n][2] % 10);
        ++n;
      }
      EXPECT_EQ(n, 2);
    }
}

}  // namespace
