// comm/local, created through the real plugin host.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "plugin_testing.hpp"
#include "vexp/comm.hpp"

namespace {

std::shared_ptr<vexp::Comm> local() { return vexp::testing::make<vexp::Comm>("comm", "local"); }

TEST(CommLocal, IsRankZeroOfOne) {
  auto c = local();
  EXPECT_EQ(c->name(), "local");
  EXPECT_EQ(c->rank(), 0);
  EXPECT_EQ(c->size(), 1);
  const vexp::PluginDecl* decl = vexp::testing::host().find("comm", "local");
  ASSERT_NE(decl, nullptr);
  EXPECT_TRUE(decl->schema.params().empty());
}

TEST(CommLocal, AllreduceOverOneRankLeavesTheTensorInPlace) {
  auto c = local();
  for (vexp::ReduceOp op : {vexp::ReduceOp::Sum, vexp::ReduceOp::Avg, vexp::ReduceOp::Max}) {
    at::Tensor t = at::arange(6, at::kFloat).reshape({2, 3}) - 2;
    at::Tensor expected = t.clone();
    const void* storage = t.data_ptr();
    c->allreduce(t, op);
    EXPECT_TRUE(at::equal(t, expected)) << static_cast<int>(op);
    EXPECT_EQ(t.data_ptr(), storage);
  }
}

TEST(CommLocal, AsyncAllreduceIsFinishedAndUnchanged) {
  auto c = local();
  at::Tensor t = at::full({4}, 2.5);
  auto work = c->allreduce_async(t, vexp::ReduceOp::Avg);
  ASSERT_NE(work, nullptr);
  work->wait();
  EXPECT_TRUE(work->done());
  EXPECT_TRUE(at::equal(t, at::full({4}, 2.5)));
}

TEST(CommLocal, BroadcastFromRankZeroOnly) {
  auto c = local();
  at::Tensor t = at::ones({3}, at::kInt);
  c->broadcast(t, 0);
  EXPECT_TRUE(at::equal(t, at::ones({3}, at::kInt)));
  try {
    c->broadcast(t, 1);
    FAIL() << "expected an error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("root 1"), std::string::npos) << e.what();
  }
  EXPECT_THROW(c->broadcast(t, -1), std::exception);
}

TEST(CommLocal, AllgatherAddsAWorldDimensionAndCopies) {
  auto c = local();
  at::Tensor t = at::arange(12, at::kFloat).reshape({3, 4});
  at::Tensor g = c->allgather(t);
  EXPECT_EQ(g.sizes(), (std::vector<int64_t>{1, 3, 4}));
  EXPECT_TRUE(at::equal(g[0], t));
  g.fill_(-1);  // a copy, not a view of the input
  EXPECT_TRUE(at::equal(t, at::arange(12, at::kFloat).reshape({3, 4})));
}

TEST(CommLocal, BarrierReturnsAndUndefinedTensorsAreRefused) {
  auto c = local();
  c->barrier();
  at::Tensor undefined;
  EXPECT_THROW(c->allreduce(undefined, vexp::ReduceOp::Sum), std::invalid_argument);
  EXPECT_THROW(c->allgather(undefined), std::invalid_argument);
}

}  // namespace
