// The loader engine: the distributed sampler's stream (every clip once per
// epoch, ranks vs emulation, resume), order and determinism across thread
// counts, per-sample seeds, bounded prefetch, error propagation, multi-view access.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <algorithm>
#include <atomic>
#include <set>
#include <stdexcept>
#include <thread>

#include "vexp/runtime/loader.hpp"
#include "vexp/runtime/sample_stream.hpp"

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

// The run's steps over every rank: for each global step, GPU g's micro-batch
// (indices and shuffle epochs), GPU g = rank * micro + m.
struct Layout {
  std::vector<std::vector<std::vector<int64_t>>> indices, epochs;  // [step][gpu][sample]
};
Layout layout(int64_t n, int64_t ranks, int64_t batch, int64_t micro, int64_t first, int64_t end, uint64_t seed = 7) {
  Layout l;
  l.indices.assign(static_cast<size_t>(end - first), std::vector<std::vector<int64_t>>(static_cast<size_t>(ranks * micro)));
  l.epochs = l.indices;
  for (int64_t r = 0; r < ranks; ++r) {
    vexp::DistributedSampler s(n, r, ranks, batch, micro, seed);
    const auto b = s.steps(first, end);
    EXPECT_EQ(static_cast<int64_t>(b.indices.size()), (end - first) * micro);
    for (int64_t k = 0; k < end - first; ++k)
      for (int64_t m = 0; m < micro; ++m) {
        const size_t i = static_cast<size_t>(k * micro + m), g = static_cast<size_t>(r * micro + m);
        EXPECT_EQ(static_cast<int64_t>(b.indices[i].size()), batch);
        l.indices[static_cast<size_t>(k)][g] = b.indices[i];
        l.epochs[static_cast<size_t>(k)][g] = b.epochs[i];
      }
  }
  return l;
}

// Awkward sizes: N/G not whole, so steps cross epoch boundaries.
TEST(DistributedSampler, EveryClipOncePerEpochAcrossBoundarySteps) {
  struct Geometry {
    int64_t n, ranks, batch, micro, epochs;
  };
  for (Geometry g : {Geometry{10, 1, 4, 1, 3}, Geometry{10, 2, 2, 1, 3}, Geometry{10, 1, 2, 2, 3},
                     Geometry{13, 3, 1, 2, 4}, Geometry{11, 2, 3, 1, 5}, Geometry{12, 2, 3, 1, 2}}) {
    const vexp::SampleStream stream{g.n, g.ranks * g.micro * g.batch};
    const int64_t total = stream.first_step(g.epochs);
    EXPECT_EQ(total, (g.epochs * g.n + stream.global_batch - 1) / stream.global_batch);
    const Layout l = layout(g.n, g.ranks, g.batch, g.micro, 0, total);
    std::vector<std::multiset<int64_t>> per_epoch(static_cast<size_t>(g.epochs + 1));
    for (int64_t s = 0; s < total; ++s) {
      const size_t k = static_cast<size_t>(s);
      // A step belongs to the epoch of its first clip (GPU 0's first sample) ...
      EXPECT_EQ(l.epochs[k][0][0], stream.epoch_of(s));
      EXPECT_GE(s, stream.first_step(stream.epoch_of(s)));
      EXPECT_LT(s, stream.first_step(stream.epoch_of(s) + 1));
      for (size_t gpu = 0; gpu < l.indices[k].size(); ++gpu)
        for (size_t i = 0; i < l.indices[k][gpu].size(); ++i) {
          const int64_t e = l.epochs[k][gpu][i];
          ASSERT_LE(e, g.epochs);
          per_epoch[static_cast<size_t>(e)].insert(l.indices[k][gpu][i]);
          // ... and every clip of an epoch is taken by that epoch's last step.
          if (e < g.epochs) {
            EXPECT_LT(s, stream.first_step(e + 1)) << "n " << g.n;
          }
        }
    }
    for (int64_t e = 0; e < g.epochs; ++e) {
      std::multiset<int64_t> all;
      for (int64_t i = 0; i < g.n; ++i) all.insert(i);
      EXPECT_EQ(per_epoch[static_cast<size_t>(e)], all) << "epoch " << e << ", n " << g.n << ": each clip exactly once";
    }
    // Only the last step fills up, from the shuffle after the last epoch, without repeats.
    const std::multiset<int64_t>& fill = per_epoch[static_cast<size_t>(g.epochs)];
    EXPECT_EQ(static_cast<int64_t>(fill.size()), total * stream.global_batch - g.epochs * g.n);
    EXPECT_EQ(std::set<int64_t>(fill.begin(), fill.end()).size(), fill.size());
  }
}

TEST(DistributedSampler, RanksAndEmulationTakeTheSameClipsPerGpu) {
  // 4 GPUs x accumulation 2 x 3 clips = G 24 on 100 clips (4.17 steps per epoch):
  // launched on 4, 2 and 1 rank(s), GPU g's micro-batches are the same.
  const int64_t n = 100, world = 4, accum = 2, batch = 3;
  const int64_t total = vexp::SampleStream{n, world * accum * batch}.first_step(3);
  const Layout real = layout(n, world, batch, accum, 0, total);
  for (int64_t ranks : {2, 1}) {
    const Layout emu = layout(n, ranks, batch, (world / ranks) * accum, 0, total);
    EXPECT_EQ(emu.indices, real.indices) << ranks << " rank(s)";
    EXPECT_EQ(emu.epochs, real.epochs) << ranks << " rank(s)";
  }
}

TEST(DistributedSampler, ResumingAtAnyStepContinuesTheSameStream) {
  const int64_t n = 10, ranks = 2, batch = 2, micro = 1, epochs = 3;
  const vexp::SampleStream stream{n, ranks * micro * batch};
  const int64_t total = stream.first_step(epochs);
  const Layout whole = layout(n, ranks, batch, micro, 0, total);
  for (int64_t k = 0; k <= total; ++k) {
    const Layout rest = layout(n, ranks, batch, micro, k, total);
    EXPECT_TRUE(std::equal(rest.indices.begin(), rest.indices.end(), whole.indices.begin() + k)) << "from step " << k;
    EXPECT_TRUE(std::equal(rest.epochs.begin(), rest.epochs.end(), whole.epochs.begin() + k)) << "from step " << k;
  }
  // The trainer's per-epoch loaders, one after another, are the whole stream.
  std::vector<std::vector<std::vector<int64_t>>> joined;
  for (int64_t e = 0; e < epochs; ++e) {
    const Layout l = layout(n, ranks, batch, micro, stream.first_step(e), stream.first_step(e + 1));
    joined.insert(joined.end(), l.indices.begin(), l.indices.end());
  }
  EXPECT_EQ(joined, whole.indices);
}

TEST(DistributedSampler, ShuffleDependsOnEpochAndSeedOnly) {
  vexp::DistributedSampler a(64, 0, 2, 4, 1, 1), b(64, 0, 2, 4, 1, 1), c(64, 0, 2, 4, 1, 2);
  EXPECT_EQ(a.steps(0, 8).indices, b.steps(0, 8).indices);
  EXPECT_EQ(a.order(0), b.order(0));
  EXPECT_NE(a.order(0), a.order(1));
  EXPECT_NE(a.order(0), c.order(0));
  // Epoch 1's steps are epoch 1's shuffle.
  const auto one = a.steps(8, 16);
  const std::vector<int64_t> order1 = a.order(1);
  EXPECT_EQ(one.indices[0], std::vector<int64_t>(order1.begin(), order1.begin() + 4));
  EXPECT_EQ(one.epochs[0], std::vector<int64_t>(4, 1));
  vexp::DistributedSampler ordered(8, 0, 1, 4, 1, 1, false);
  EXPECT_EQ(ordered.steps(10, 12).indices, (std::vector<std::vector<int64_t>>{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  // 6 clips, batch 4: step 1 ends epoch 0 and starts epoch 1.
  vexp::DistributedSampler crossing(6, 0, 1, 4, 1, 1, false);
  const auto x = crossing.steps(0, 3);
  EXPECT_EQ(x.indices, (std::vector<std::vector<int64_t>>{{0, 1, 2, 3}, {4, 5, 0, 1}, {2, 3, 4, 5}}));
  EXPECT_EQ(x.epochs, (std::vector<std::vector<int64_t>>{{0, 0, 0, 0}, {0, 0, 1, 1}, {1, 1, 1, 1}}));
  EXPECT_THROW(vexp::DistributedSampler(8, 2, 2, 4, 1, 0), std::invalid_argument);
  EXPECT_THROW(vexp::DistributedSampler(0, 0, 1, 4, 1, 0), std::invalid_argument);
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
  auto batches = s.steps(0, 33).indices;
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

TEST(Loader, PerSampleSeedsReachTheDataset) {
  FakeData d(20);
  const std::vector<std::vector<int64_t>> batches{{0, 1, 2}, {3, 4, 5}};
  const std::vector<std::vector<uint64_t>> seeds{{1, 2, 3}, {4, 5, 6}};
  for (int w : {0, 2}) {
    vexp::LoaderOptions o;
    o.workers = w;
    o.seed = 99;  // not used: every sample has its own
    vexp::Loader l(d, batches, seeds, o);
    vexp::Batch b;
    for (size_t i = 0; i < batches.size(); ++i) {
      ASSERT_TRUE(l.next(b));
      for (size_t j = 0; j < 3; ++j)
        EXPECT_EQ(b.clips[static_cast<int64_t>(j)].flatten()[0].item<double>(),
                  static_cast<double>(batches[i][j] + static_cast<int64_t>(seeds[i][j] % 7)));
    }
    EXPECT_FALSE(l.next(b));
  }
  vexp::LoaderOptions o;
  EXPECT_THROW(vexp::Loader(d, batches, {{1, 2, 3}}, o), std::invalid_argument);
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
