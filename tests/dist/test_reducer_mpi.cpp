// Reducer and comm/mpi tests, run by ctest under `mpirun -np 2` (every rank runs
// every test; collectives pair up because the tests run in the same order).
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <ATen/ATen.h>

#include "vexp/runtime/reducer.hpp"
#include "vexp/comm.hpp"
#include "vexp/runtime/plugin_host.hpp"

namespace {

std::shared_ptr<vexp::Comm> g_comm;

// A chain of `layers` square layers: backward produces the last layer's
// gradient first, the first layer's last.
struct Chain {
  std::vector<at::Tensor> weights;
  Chain(int layers, int64_t d) {
    at::manual_seed(1);
    for (int i = 0; i < layers; ++i) weights.push_back((at::randn({d, d}) / std::sqrt(double(d))).set_requires_grad(true));
  }
  at::Tensor loss(int64_t seed) const {
    at::manual_seed(seed);
    at::Tensor h = at::randn({16, weights[0].size(0)});
    for (const auto& w : weights) h = at::tanh(at::matmul(h, w));
    return h.pow(2).mean();
  }
  void zero() {
    for (auto& w : weights)
      if (w.grad().defined()) w.mutable_grad().zero_();
  }
  std::vector<at::Tensor> grads() const {
    std::vector<at::Tensor> g;
    for (const auto& w : weights) g.push_back(w.grad().clone());
    return g;
  }
};

// The reference: local gradients averaged by one flat allreduce.
std::vector<at::Tensor> flat_average(const std::vector<at::Tensor>& local) {
  std::vector<at::Tensor> flat_parts;
  for (const auto& g : local) flat_parts.push_back(g.reshape({-1}));
  at::Tensor flat = at::cat(flat_parts);
  g_comm->allreduce(flat, vexp::ReduceOp::Avg);
  std::vector<at::Tensor> out;
  int64_t off = 0;
  for (const auto& g : local) {
    out.push_back(flat.narrow(0, off, g.numel()).view(g.sizes()));
    off += g.numel();
  }
  return out;
}

double max_diff(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, (a[i] - b[i]).abs().max().item<double>());
  return m;
}

TEST(CommMpi, RankAndSize) {
  EXPECT_EQ(g_comm->size(), 2);
  EXPECT_EQ(g_comm->name(), "mpi");
  at::Tensor r = at::full({3}, double(g_comm->rank() + 1), at::kDouble);
  g_comm->allreduce(r, vexp::ReduceOp::Sum);
  EXPECT_DOUBLE_EQ(r[0].item<double>(), 3.0);
  at::Tensor m = at::full({1}, int64_t(g_comm->rank() * 10), at::kLong);
  g_comm->allreduce(m, vexp::ReduceOp::Max);
  EXPECT_EQ(m.item<int64_t>(), 10);
  at::Tensor b = at::full({2}, float(g_comm->rank() + 5));
  g_comm->broadcast(b, 1);
  EXPECT_FLOAT_EQ(b[1].item<float>(), 6.f);
  at::Tensor all = g_comm->allgather(at::full({2}, float(g_comm->rank())));
  ASSERT_EQ(all.sizes(), (std::vector<int64_t>{2, 2}));
  EXPECT_FLOAT_EQ(all[1][0].item<float>(), 1.f);
  g_comm->barrier();
  at::Tensor h = at::full({4}, 1.5, at::kHalf);
  g_comm->allreduce(h, vexp::ReduceOp::Sum);
  EXPECT_FLOAT_EQ(h[0].item<float>(), 3.f);
}

TEST(Reducer, EqualsFlatAllreduceAndOverlapsBackward) {
  Chain net(8, 192);  // 8 x 144 KiB of gradients
  vexp::ReducerOptions o;
  o.bucket_mb = 0.2;  // one or two layers per bucket
  vexp::Reducer reducer(net.weights, g_comm, o);
  ASSERT_GE(reducer.bucket_members().size(), 4u);
  EXPECT_EQ(reducer.bucket_members().front().front(), 7u);  // reverse registration order
  // Reference.
  reducer.prepare(false);
  net.loss(100 + g_comm->rank()).backward();
  auto want = flat_average(net.grads());
  net.zero();
  // Reducer.
  reducer.prepare(true);
  net.loss(100 + g_comm->rank()).backward();
  reducer.finish();
  EXPECT_LE(max_diff(net.grads(), want), 1e-6);
  const auto& st = reducer.last_step();
  EXPECT_EQ(st.buckets, static_cast<int64_t>(reducer.bucket_members().size()));
  // Overlap: every bucket but the one holding the first layer was launched from a
  // hook, i.e. while backward was still computing earlier layers.
  EXPECT_GE(st.launched_in_backward, st.buckets - 1);
  ASSERT_FALSE(st.launch.empty());
  EXPECT_LT(st.launch.front(), st.backward_end);
  std::printf("rank %d: %lld buckets, %lld launched during backward, first launch %.3f ms before backward ended\n",
              g_comm->rank(), (long long)st.buckets, (long long)st.launched_in_backward,
              std::chrono::duration<double, std::milli>(st.backward_end - st.launch.front()).count());
}

TEST(Reducer, AccumulationCommunicatesOnlyOnTheLastMicroBatch) {
  Chain net(4, 64);
  vexp::ReducerOptions o;
  o.bucket_mb = 0.01;
  vexp::Reducer reducer(net.weights, g_comm, o);
  reducer.prepare(false);
  net.loss(7 + 10 * g_comm->rank()).backward();
  net.loss(8 + 10 * g_comm->rank()).backward();
  auto want = flat_average(net.grads());
  net.zero();
  reducer.prepare(false);
  net.loss(7 + 10 * g_comm->rank()).backward();
  reducer.prepare(true);
  net.loss(8 + 10 * g_comm->rank()).backward();
  reducer.finish();
  EXPECT_LE(max_diff(net.grads(), want), 1e-6);
}

TEST(Reducer, HalfPrecisionWire) {
  for (const char* wire : {"fp16", "bf16"}) {
    Chain net(3, 64);
    vexp::ReducerOptions o;
    o.bucket_mb = 0.01;
    o.compression = wire;
    vexp::Reducer reducer(net.weights, g_comm, o);
    reducer.prepare(false);
    net.loss(3 + g_comm->rank()).backward();
    auto want = flat_average(net.grads());
    net.zero();
    reducer.prepare(true);
    net.loss(3 + g_comm->rank()).backward();
    reducer.finish();
    double scale = 0;
    for (auto& g : want) scale = std::max(scale, g.abs().max().item<double>());
    const double tol = (std::string(wire) == "fp16" ? 2e-3 : 1.6e-2) * scale;
    EXPECT_LE(max_diff(net.grads(), want), tol) << wire;
    EXPECT_GT(max_diff(net.grads(), want), 0.0) << wire << ": the wire format was not used";
  }
}

TEST(Reducer, GradientsAreBucketViewsAndNothingIsCopied) {
  Chain net(4, 64);
  vexp::ReducerOptions o;
  o.bucket_mb = 0.02;  // one layer per bucket
  o.prescaled = true;  // the caller scales the loss by 1/size
  vexp::Reducer reducer(net.weights, g_comm, o);
  for (size_t k = 0; k < net.weights.size(); ++k) EXPECT_TRUE(reducer.grad_is_bucket_view(k)) << k;
  reducer.prepare(false);
  net.loss(21 + g_comm->rank()).backward();
  auto want = flat_average(net.grads());
  net.zero();  // in place: the views survive
  for (int step = 0; step < 2; ++step) {
    reducer.prepare(true);
    (net.loss(21 + g_comm->rank()) * (1.0 / g_comm->size())).backward();
    reducer.finish();
    EXPECT_LE(max_diff(net.grads(), want), 1e-6) << "step " << step;
    EXPECT_EQ(reducer.last_step().rebound, 0) << "autograd did not accumulate into the buckets";
    for (size_t k = 0; k < net.weights.size(); ++k) EXPECT_TRUE(reducer.grad_is_bucket_view(k)) << k;
    net.zero();
  }
  // A gradient set to none (or replaced) is copied back into its bucket and rebound.
  net.weights[1].mutable_grad().reset();
  reducer.prepare(true);
  (net.loss(21 + g_comm->rank()) * (1.0 / g_comm->size())).backward();
  reducer.finish();
  EXPECT_EQ(reducer.last_step().rebound, 1);
  EXPECT_TRUE(reducer.grad_is_bucket_view(1));
  EXPECT_LE(max_diff(net.grads(), want), 1e-6);
}

TEST(Reducer, ChannelsLastGradientsKeepTheirLayout) {
  at::manual_seed(5);
  at::Tensor w = at::randn({8, 4, 3, 3}).contiguous(at::MemoryFormat::ChannelsLast).set_requires_grad(true);
  at::Tensor b = at::randn({8}).set_requires_grad(true);
  vexp::Reducer reducer({w, b}, g_comm, vexp::ReducerOptions{});
  EXPECT_EQ(w.grad().strides(), w.strides());
  auto loss = [&] {
    at::manual_seed(40 + g_comm->rank());
    at::Tensor x = at::randn({2, 4, 6, 6});
    return at::conv2d(x, w, b).pow(2).mean();
  };
  reducer.prepare(false);
  loss().backward();
  auto want = flat_average({w.grad().clone(), b.grad().clone()});
  w.mutable_grad().zero_();
  b.mutable_grad().zero_();
  reducer.prepare(true);
  loss().backward();
  reducer.finish();
  EXPECT_LE(max_diff({w.grad(), b.grad()}, want), 1e-6);
  EXPECT_TRUE(reducer.grad_is_bucket_view(0));
  EXPECT_EQ(w.grad().strides(), w.strides());
}

TEST(Reducer, BroadcastAndModelCheck) {
  at::Tensor w = at::full({3}, float(g_comm->rank() + 1));
  vexp::broadcast_from_rank0(*g_comm, {w});
  EXPECT_FLOAT_EQ(w[2].item<float>(), 1.f);
  std::vector<std::pair<std::string, at::Tensor>> named{{"a", at::zeros({2, 3})}};
  EXPECT_NO_THROW(vexp::check_same_model(*g_comm, "abc", named));
  try {
    vexp::check_same_model(*g_comm, g_comm->rank() == 1 ? "abd" : "abc", named);
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 1 runs a different recipe"), std::string::npos) << e.what();
  }
  std::vector<std::pair<std::string, at::Tensor>> other{{"a", at::zeros({2, 3 + g_comm->rank()})}};
  try {
    vexp::check_same_model(*g_comm, "abc", other);
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 1 built a model"), std::string::npos) << e.what();
  }
}

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  int rc = 1;
  {
    vexp::PluginHost host;
    host.load_library(std::string(VEXP_TEST_PLUGIN_DIR) + "/comm_mpi.so");
    const auto* decl = host.find("comm", "mpi");
    g_comm = host.make<vexp::Comm>("comm", "mpi", vexp::dsl::make_params(decl->schema));
    rc = RUN_ALL_TESTS();
    at::Tensor any = at::full({1}, int64_t(rc), at::kLong);
    g_comm->allreduce(any, vexp::ReduceOp::Max);  // fail on every rank if one failed
    rc = static_cast<int>(any.item<int64_t>());
    g_comm.reset();
  }
  return rc;
}
