// vexp plan's performance model (pkg/plan: vexp/plan/model.hpp), on hand-computed cases.
#include <gtest/gtest.h>

#include "vexp/plan/model.hpp"
#include "vexp/runtime/buckets.hpp"

using namespace vexp::plan;
using vexp::plan::Cluster;
using vexp::DistPlan;

namespace {

// 2 nodes x 4 ranks; intra 10 GB/s = 1e7 B/ms, 10 us; inter 2 rails x 1 GB/s = 2e6 B/ms per node, 50 us.
Cluster two_nodes() {
  Cluster c;
  c.name = "t";
  c.nodes = 2;
  c.gpus_per_node = 4;
  c.intra = {true, 10.0, 10.0, 1, "s"};
  c.inter = {true, 1.0, 50.0, 2, "s"};
  c.cpu.cores_per_node = 8;
  c.cpu.frames_clips_per_s_per_core = 1000;
  return c;
}

// One node of 2 ranks, 1 GB/s = 1e6 B/ms, no latency: an allreduce of B bytes takes B / 1e6 ms.
Cluster pair() {
  Cluster c;
  c.name = "pair";
  c.nodes = 1;
  c.gpus_per_node = 2;
  c.intra = {true, 1.0, 0.0, 1, "s"};
  c.cpu.cores_per_node = 2;
  c.cpu.frames_clips_per_s_per_core = 1e6;  // data never binds unless a test says so
  return c;
}

Compute compute(double f, double b, double o) {
  Compute k;
  k.forward_ms = f;
  k.backward_ms = b;
  k.optimizer_ms = o;
  return k;
}

DistPlan shape(int64_t gpus, int64_t world, int64_t per_gpu, int64_t accum) {
  DistPlan s;
  s.ranks = gpus;
  s.world = world;
  s.per_gpu = per_gpu;
  s.accum = accum;
  s.micro = (world / gpus) * accum;
  s.global_batch = world * per_gpu * accum;
  s.train_size = 1000;
  s.total_steps = 100;
  return s;
}

}  // namespace

TEST(PlanModel, RingInOneNode) {
  // p = 4, B = 4e6: 2*3*0.01 + 2*3/4 * 4e6/1e7 = 0.06 + 0.6.
  std::string algo;
  EXPECT_NEAR(allreduce_ms(two_nodes(), 4, 4e6, &algo), 0.66, 1e-9);
  EXPECT_EQ(algo, "ring");
  EXPECT_EQ(allreduce_ms(two_nodes(), 1, 4e6), 0.0);
}

TEST(PlanModel, HierarchicalAcrossNodesForSmallMessages) {
  // p = 8 on 2 nodes of 4. Flat ring: 2*7*0.05 + 2*7/8 * 4e6/2e6 = 0.7 + 3.5 = 4.2.
  // Hierarchical: ring(4) intra 0.66 + ring(2) inter 2*0.05 + 4e6/2e6 = 2.1: 2.76.
  std::string algo;
  EXPECT_NEAR(allreduce_ms(two_nodes(), 8, 4e6, &algo), 2.76, 1e-9);
  EXPECT_EQ(algo, "hierarchical");
}

TEST(PlanModel, FlatRingWhenIntraIsSlowAndMessagesLarge) {
  Cluster c = two_nodes();
  c.intra.bandwidth_GBps = 3.0;  // 3e6 B/ms
  // B = 4e8: flat 0.7 + 1.75 * 4e8/2e6 = 350.7; hierarchical 0.06 + 1.5*4e8/3e6 + 0.1 + 4e8/2e6 = 400.16.
  std::string algo;
  EXPECT_NEAR(allreduce_ms(c, 8, 4e8, &algo), 350.7, 1e-6);
  EXPECT_EQ(algo, "ring");
}

TEST(PlanModel, BucketsFollowTheReducerLayoutAndBackwardMacs) {
  // Limit 200 bytes of fp32: reverse order 3 (160 B), 2 (+120 = 280 B: closed); 1, 0 (200 B: closed).
  const double mb = 200.0 / (1024.0 * 1024.0);
  EXPECT_EQ(vexp::bucket_layout({10, 20, 30, 40}, 4, mb), (std::vector<std::vector<size_t>>{{3, 2}, {1, 0}}));
  const auto b = model_buckets({10, 20, 30, 40}, {100, 0, 300, 600}, 4, mb);
  ASSERT_EQ(b.size(), 2u);
  EXPECT_DOUBLE_EQ(b[0].bytes, 280);
  EXPECT_DOUBLE_EQ(b[0].ready, 0.9);  // parameters 3 and 2: 900 of 1000 MACs of backward done
  EXPECT_DOUBLE_EQ(b[1].bytes, 120);
  EXPECT_DOUBLE_EQ(b[1].ready, 1.0);
  // fp16 wire: half the bytes, the buckets fill twice as many elements.
  const auto h = model_buckets({10, 20, 30, 40}, {100, 0, 300, 600}, 2, mb);
  ASSERT_EQ(h.size(), 1u);
  EXPECT_DOUBLE_EQ(h[0].bytes, 200);
}

TEST(PlanModel, OneBucketIsExposedWhole) {
  // Forward 10, backward 20: the one bucket is ready at the backward's end (30) and takes 5 ms.
  const Row r = predict(pair(), compute(10, 20, 1), {{5e6, 1.0}}, DataOptions{}, shape(2, 2, 8, 1));
  EXPECT_DOUBLE_EQ(r.compute_ms, 31);
  EXPECT_DOUBLE_EQ(r.comm_ms, 5);
  EXPECT_DOUBLE_EQ(r.exposed_comm_ms, 5);
  EXPECT_DOUBLE_EQ(r.step_ms, 36);
  EXPECT_DOUBLE_EQ(r.clips_per_s, 16 / 36e-3);
  EXPECT_EQ(r.bottleneck, "compute");
  EXPECT_EQ(r.nodes, 1);
}

TEST(PlanModel, EarlyBucketsHiddenOnlyTheLastExposed) {
  // Ready at 15, 20, 30 (backward from 10 to 30), 1 ms each: ends 16, 21, 31.
  const Row r = predict(pair(), compute(10, 20, 0), {{1e6, 0.25}, {1e6, 0.5}, {1e6, 1.0}}, DataOptions{},
                        shape(2, 2, 8, 1));
  EXPECT_DOUBLE_EQ(r.comm_ms, 3);
  EXPECT_DOUBLE_EQ(r.exposed_comm_ms, 1);
}

TEST(PlanModel, QueuedBucketsArePartlyExposed) {
  // 8 ms from 15 (ends 23), the next ready at 20 waits until 23 (ends 31), the last
  // ready at 30 waits until 31 (ends 32): 2 ms after the backward's end.
  const Row r = predict(pair(), compute(10, 20, 0), {{8e6, 0.25}, {8e6, 0.5}, {1e6, 1.0}}, DataOptions{},
                        shape(2, 2, 8, 1));
  EXPECT_DOUBLE_EQ(r.comm_ms, 17);
  EXPECT_DOUBLE_EQ(r.exposed_comm_ms, 2);
}

TEST(PlanModel, CommunicationBound) {
  const Row r = predict(pair(), compute(10, 20, 0), {{50e6, 1.0}}, DataOptions{}, shape(2, 2, 8, 1));
  EXPECT_DOUBLE_EQ(r.exposed_comm_ms, 50);
  EXPECT_EQ(r.bottleneck, "communication");
}

TEST(PlanModel, AccumulationOverlapsOnlyTheLastBackward) {
  // 3 micro-batches: the last backward runs 70..90; a bucket ready at 0.5 (80) of 20 ms ends at 100.
  const Row r = predict(pair(), compute(10, 20, 1), {{20e6, 0.5}}, DataOptions{}, shape(2, 2, 8, 3));
  EXPECT_EQ(r.micro_steps, 3);
  EXPECT_DOUBLE_EQ(r.forward_ms, 30);
  EXPECT_DOUBLE_EQ(r.backward_ms, 60);
  EXPECT_DOUBLE_EQ(r.compute_ms, 91);
  EXPECT_DOUBLE_EQ(r.exposed_comm_ms, 10);
  EXPECT_EQ(r.global_batch, 48);
}

TEST(PlanModel, EmulatedRanksRunTheirMicroBatchesInTurnAndCommunicateOnce) {
  // world 8 on 2 ranks: 4 micro-batches each, one allreduce per step.
  const Row r = predict(pair(), compute(10, 20, 0), {{5e6, 1.0}}, DataOptions{}, shape(2, 8, 8, 1));
  EXPECT_EQ(r.micro_steps, 4);
  EXPECT_DOUBLE_EQ(r.compute_ms, 120);
  EXPECT_DOUBLE_EQ(r.comm_ms, 5);
  EXPECT_DOUBLE_EQ(r.exposed_comm_ms, 5);
  EXPECT_EQ(r.global_batch, 64);
  // On one rank there is no reducer at all.
  const Row one = predict(pair(), compute(10, 20, 0), {{5e6, 1.0}}, DataOptions{}, shape(1, 8, 8, 1));
  EXPECT_EQ(one.micro_steps, 8);
  EXPECT_DOUBLE_EQ(one.comm_ms, 0);
  EXPECT_DOUBLE_EQ(one.step_ms, 240);
}

TEST(PlanModel, DataBound) {
  Cluster c = pair();
  c.cpu.frames_clips_per_s_per_core = 10;  // 1 thread per GPU (2 cores / 2): 10 clips/s
  const Row r = predict(c, compute(10, 20, 0), {{5e6, 1.0}}, DataOptions{}, shape(2, 2, 8, 1));
  EXPECT_DOUBLE_EQ(r.data_ms, 800);
  EXPECT_DOUBLE_EQ(r.exposed_data_ms, 800 - 35);
  EXPECT_DOUBLE_EQ(r.step_ms, 800);
  EXPECT_EQ(r.bottleneck, "data");
  DataOptions four;
  four.threads_per_gpu = 4;
  EXPECT_DOUBLE_EQ(predict(c, compute(10, 20, 0), {{5e6, 1.0}}, four, shape(2, 2, 8, 1)).data_ms, 200);
  // No rate for videos.
  DataOptions videos;
  videos.layout = "videos";
  EXPECT_THROW(predict(c, compute(10, 20, 0), {}, videos, shape(2, 2, 8, 1)), PlanError);
}

TEST(PlanModel, LoaderHandoffOnBusyCoresRecursAtEveryMicroBatch) {
  // The profile waited 2 ms per micro-batch for a loader that keeps up (its decode
  // threads first taking a core from the compute's): each of 3 micro-batches waits so.
  Compute k = compute(10, 20, 1);
  k.data_wait_ms = 2;
  const Row r = predict(pair(), k, {{5e6, 1.0}}, DataOptions{}, shape(1, 1, 8, 3));
  EXPECT_DOUBLE_EQ(r.throughput_data_ms, 0);
  EXPECT_DOUBLE_EQ(r.handoff_data_ms, 6);
  EXPECT_DOUBLE_EQ(r.exposed_data_ms, 6);
  EXPECT_DOUBLE_EQ(r.step_ms, 3 * 30 + 1 + 6);
  EXPECT_EQ(r.bottleneck, "compute");
  // A loader too slow for the compute explains the profile's wait: 1 decode thread at
  // 10 clips/s takes 800 ms for 8 clips, 770 beyond the compute, all of its wait.
  Cluster c = pair();
  c.cpu.frames_clips_per_s_per_core = 10;
  k.data_wait_ms = 770;
  k.data_threads = 1;
  const Row slow = predict(c, k, {{5e6, 1.0}}, DataOptions{}, shape(1, 1, 8, 1));
  EXPECT_DOUBLE_EQ(slow.handoff_data_ms, 0);
  EXPECT_DOUBLE_EQ(slow.throughput_data_ms, 800 - 31);
  EXPECT_DOUBLE_EQ(slow.step_ms, 800);
  // Planned with 4 decode threads (200 ms): the profile's loader (1 thread) explained
  // its wait, so none of it is carried over; the faster loader keeps up.
  DataOptions four;
  four.threads_per_gpu = 4;
  const Row fed = predict(c, k, {{5e6, 1.0}}, four, shape(1, 1, 8, 1));
  EXPECT_DOUBLE_EQ(fed.handoff_data_ms, 0);
  EXPECT_DOUBLE_EQ(fed.throughput_data_ms, 200 - 31);
  // The same wait from a profile whose loader had 100 threads (8 ms): 770 - 0 unexplained.
  k.data_threads = 100;
  EXPECT_DOUBLE_EQ(predict(c, k, {{5e6, 1.0}}, four, shape(1, 1, 8, 1)).handoff_data_ms, 770);
}

TEST(PlanModel, StorageCapsTheDecodeRate) {
  Cluster c = two_nodes();
  c.storage.given = true;
  c.storage.read_GBps = 0.008;        // 8e6 B/s shared by 2 nodes: 4e6 per node, 1e6 per rank
  c.storage.frames_clip_bytes = 1e5;  // 10 clips/s per rank
  DataOptions d;
  EXPECT_DOUBLE_EQ(data_clips_per_s(c, d, 8), 10);
  EXPECT_TRUE(storage_bound(c, d, 8));
  c.storage.node_read_GBps = 0.002;   // 2e6 per node: 5 clips/s per rank
  EXPECT_DOUBLE_EQ(data_clips_per_s(c, d, 8), 5);
  EXPECT_DOUBLE_EQ(data_clips_per_s(c, d, 1), 20);  // one rank on one node: the node cap
}

TEST(PlanModel, ComputeFromProfileOrDerived) {
  Cluster c = pair();
  vexp::plan::ClusterProfile p;
  p.model = "tsm_resnet50";
  p.frames = 8;
  p.size = 224;
  p.precision = "fp16";
  p.batch = 8;
  p.forward_ms = 80;
  p.backward_ms = 160;
  p.optimizer_ms = 3;
  p.source = "typed";
  c.profiles.push_back(p);
  Workload w{"tsm_resnet50", 8, 224, "fp16", 1e9, 25000000};
  const Compute k = compute_for(c, w, 4);
  EXPECT_DOUBLE_EQ(k.forward_ms, 40);
  EXPECT_DOUBLE_EQ(k.backward_ms, 80);
  EXPECT_DOUBLE_EQ(k.optimizer_ms, 3);
  EXPECT_EQ(k.profile, "measured");
  w.precision = "fp32";
  EXPECT_THROW(compute_for(c, w, 4), PlanError);
  c.derive = {true, 1e12, 0.02, "assumed"};
  // 3 x 1e9 MACs x 2 clips / 1e12 per s = 6 ms: forward 2, backward 4; optimizer 0.02 x 25.
  const Compute d = compute_for(c, w, 2);
  EXPECT_DOUBLE_EQ(d.forward_ms, 2);
  EXPECT_DOUBLE_EQ(d.backward_ms, 4);
  EXPECT_DOUBLE_EQ(d.optimizer_ms, 0.5);
  EXPECT_EQ(d.profile, "derived");
}

TEST(PlanModel, EfficiencyAndRefusals) {
  const Row one = predict(pair(), compute(10, 20, 0), {{5e6, 1.0}}, DataOptions{}, shape(1, 1, 8, 1));
  Row two = predict(pair(), compute(10, 20, 0), {{5e6, 1.0}}, DataOptions{}, shape(2, 2, 8, 1));
  set_efficiency(two, one);
  EXPECT_DOUBLE_EQ(two.efficiency, 30.0 / 35.0);
  EXPECT_THROW(predict(pair(), compute(10, 20, 0), {}, DataOptions{}, shape(4, 4, 8, 1)), PlanError);
}

namespace {
vexp::plan::ClusterProfile cpu_profile(int64_t threads, int64_t busy, double forward_ms) {
  vexp::plan::ClusterProfile p;
  p.model = "tsm_resnet18";
  p.frames = 8;
  p.size = 32;
  p.precision = "fp32";
  p.batch = 32;
  p.threads = threads;
  p.busy_ranks = busy;
  p.forward_ms = forward_ms;
  p.backward_ms = 2 * forward_ms;
  p.optimizer_ms = 1;
  p.source = "t" + std::to_string(threads) + "b" + std::to_string(busy);
  return p;
}
}  // namespace

TEST(PlanModel, ProfileByThreadsAndBusyRanks) {
  Cluster c = pair();  // 2 ranks per node
  c.cpu.cores_per_node = 2;
  c.profiles = {cpu_profile(1, 1, 100), cpu_profile(2, 1, 70), cpu_profile(1, 2, 210), cpu_profile(2, 2, 190)};
  Workload w{"tsm_resnet18", 8, 32, "fp32", 0, 0, 1};
  // Exact matches, whatever their order in the file.
  Compute k = compute_for(c, w, 32, 1);
  EXPECT_DOUBLE_EQ(k.forward_ms, 100);
  EXPECT_TRUE(k.exact);
  EXPECT_EQ(k.selection, "threads 1, busy_ranks 1");
  EXPECT_NE(k.source.find("t1b1 [threads 1, busy_ranks 1]"), std::string::npos) << k.source;
  k = compute_for(c, w, 32, 2);
  EXPECT_DOUBLE_EQ(k.forward_ms, 210);
  w.threads = 2;
  EXPECT_DOUBLE_EQ(compute_for(c, w, 32, 1).forward_ms, 70);
  EXPECT_DOUBLE_EQ(compute_for(c, w, 16, 2).forward_ms, 95);  // scaled to the batch
  // run.threads = 0: the node's cores per rank, as vexp run does.
  w.threads = 0;
  EXPECT_EQ(compute_threads(c, w), 2);
  EXPECT_DOUBLE_EQ(compute_for(c, w, 32, 2).forward_ms, 190);
  // The ranks busy at G GPUs: G up to a node's worth.
  EXPECT_EQ(busy_ranks_for(c, 1), 1);
  EXPECT_EQ(busy_ranks_for(c, 2), 2);
  Cluster big = two_nodes();
  EXPECT_EQ(busy_ranks_for(big, 3), 3);
  EXPECT_EQ(busy_ranks_for(big, 8), 4);
}

TEST(PlanModel, ProfileClosestWhenNoneMatches) {
  Cluster c = pair();
  c.cpu.cores_per_node = 2;
  c.profiles = {cpu_profile(2, 1, 70), cpu_profile(4, 2, 150), cpu_profile(1, 2, 210)};
  Workload w{"tsm_resnet18", 8, 32, "fp32", 0, 0, 3};
  // busy_ranks first: at 2 busy the 1- and 4-thread profiles; 4 is closer to 3, and
  // with the 1-thread one Amdahl's law gives 3 threads: 210 / 150 = s + (1 - s) 4, so
  // the serial share s = 13/15 and t(3) = 150 (s + (1 - s) 4/3) = 156.67, between them.
  Compute k = compute_for(c, w, 32, 2);
  EXPECT_DOUBLE_EQ(k.forward_ms, 150 * (13.0 / 15 + 2.0 / 15 * 4 / 3));
  EXPECT_FALSE(k.exact);
  EXPECT_EQ(k.selection, "closest: threads 4 (3 wanted), busy_ranks 2 (2 wanted), Amdahl's law with threads 1");
  // (between the two: the range is their times, 150 .. 210 (x3 for forward + backward))
  EXPECT_DOUBLE_EQ(k.low, 150 / k.forward_ms);
  EXPECT_DOUBLE_EQ(k.high, 210 / k.forward_ms);
  // 3 busy: no such profile; busy 2 is closest (then threads).
  EXPECT_DOUBLE_EQ(compute_for(c, w, 32, 3).forward_ms, k.forward_ms);
  // 1 busy: the only alone profile, whatever its threads.
  k = compute_for(c, w, 32, 1);
  EXPECT_DOUBLE_EQ(k.forward_ms, 70);
  EXPECT_EQ(k.selection, "closest: threads 2 (3 wanted), busy_ranks 1 (1 wanted)");
  // Equal distance: the first in the file, and through both: 40 / 70 = s + (1 - s) / 2,
  // s = 1/7, t(3) = 70 (1/7 + 6/7 x 2/3) = 50.
  w.threads = 3;
  c.profiles = {cpu_profile(2, 1, 70), cpu_profile(4, 1, 40)};
  k = compute_for(c, w, 32, 1);
  EXPECT_DOUBLE_EQ(k.forward_ms, 50);
  EXPECT_EQ(k.selection, "closest: threads 2 (3 wanted), busy_ranks 1 (1 wanted), Amdahl's law with threads 4");
  // Beyond both (8 threads): extrapolated, 70 (1/7 + 6/7 x 2/8) = 25, in a range from a
  // linear speed-up from the nearer (40 x 4/8 = 20) to none (40), each of forward + backward.
  w.threads = 8;
  k = compute_for(c, w, 32, 1);
  EXPECT_DOUBLE_EQ(k.forward_ms, 25);
  EXPECT_DOUBLE_EQ(k.low, 20.0 / 25);
  EXPECT_DOUBLE_EQ(k.high, 40.0 / 25);
  EXPECT_NE(k.unsure.at(0).find("Amdahl's law through the 4- and 2-thread ones, extrapolated"), std::string::npos);
  // More threads slower than fewer: the serial share is held to 1 (no speed-up assumed).
  c.profiles = {cpu_profile(2, 1, 70), cpu_profile(4, 1, 90)};
  w.threads = 3;
  EXPECT_DOUBLE_EQ(compute_for(c, w, 32, 1).forward_ms, 70);
  w.threads = 3;
  // A profile without threads (a GPU) counts as a match of any threads, after an exact one.
  c.profiles = {cpu_profile(0, 1, 30), cpu_profile(3, 1, 60)};
  EXPECT_DOUBLE_EQ(compute_for(c, w, 32, 1).forward_ms, 60);
  c.profiles = {cpu_profile(0, 1, 30), cpu_profile(1, 1, 60)};
  k = compute_for(c, w, 32, 1);
  EXPECT_DOUBLE_EQ(k.forward_ms, 30);
  EXPECT_TRUE(k.exact);
  EXPECT_EQ(k.selection, "threads not given, busy_ranks 1");
}

TEST(PlanModel, PredictCarriesTheProfile) {
  Compute k = compute(10, 20, 0);
  k.source = "bench.json [threads 1, busy_ranks 2]";
  const Row r = predict(pair(), k, {{5e6, 1.0}}, DataOptions{}, shape(2, 2, 8, 1));
  EXPECT_EQ(r.profile_source, k.source);
}

TEST(PlanModel, StepRangeIsTheValidatedToleranceOnAnExactProfile) {
  // Forward 10, backward 20, optimizer 1, one 5 ms bucket exposed whole: step 36.
  const Row r = predict(pair(), compute(10, 20, 1), {{5e6, 1.0}}, DataOptions{}, shape(2, 2, 8, 1));
  EXPECT_DOUBLE_EQ(r.step_low_ms, 36 * (1 - kValidatedTolerance));
  EXPECT_DOUBLE_EQ(r.step_high_ms, 36 * (1 + kValidatedTolerance));
  EXPECT_TRUE(r.unsure.empty());
}

TEST(PlanModel, StepRangeWidensByTheMeasuringMachinesDrift) {
  Cluster c = pair();
  vexp::plan::ClusterProfile p = cpu_profile(1, 1, 100);
  Workload w{"tsm_resnet18", 8, 32, "fp32", 0, 0, 1};
  // Rounds 3 % apart: noise, the range follows them but nothing is said.
  p.round_low = 0.99;
  p.round_high = 1.02;
  p.round_low_ms = 297;
  p.round_high_ms = 306;
  c.profiles = {p};
  Compute k = compute_for(c, w, 32, 1);
  EXPECT_DOUBLE_EQ(k.low, 0.99);
  EXPECT_DOUBLE_EQ(k.high, 1.02);
  EXPECT_TRUE(k.unsure.empty());
  // Rounds 33 % apart: the machine moved; the step's range is as wide, and says why.
  p.round_low = 0.9;
  p.round_high = 1.2;
  p.round_low_ms = 270;
  p.round_high_ms = 360;
  c.profiles = {p};
  k = compute_for(c, w, 32, 1);
  EXPECT_DOUBLE_EQ(k.low, 0.9);
  EXPECT_DOUBLE_EQ(k.high, 1.2);
  ASSERT_EQ(k.unsure.size(), 1u);
  EXPECT_EQ(k.unsure[0], "its profile's rounds gave 270.0 to 360.0 ms per step (33 % apart): the measuring "
                         "machine's speed moved while it measured");
  const Row r = predict(c, k, {}, DataOptions{}, shape(1, 1, 32, 1));
  EXPECT_DOUBLE_EQ(r.step_ms, 301);
  EXPECT_DOUBLE_EQ(r.step_low_ms, 301 * 0.9 * 0.9);
  EXPECT_DOUBLE_EQ(r.step_high_ms, 301 * 1.2 * 1.1);
}

TEST(PlanModel, StepRangeWidensWithWhatTheProfileCannotKnow) {
  Cluster c = pair();  // 2 cores
  c.profiles = {cpu_profile(2, 1, 100)};
  Workload w{"tsm_resnet18", 8, 32, "fp32", 0, 0, 1};
  // Measured at 2 threads, 1 planned: between no slow-down and twice as slow.
  Compute k = compute_for(c, w, 32, 1);
  EXPECT_DOUBLE_EQ(k.low, 1);
  EXPECT_DOUBLE_EQ(k.high, 2);
  ASSERT_EQ(k.unsure.size(), 1u);
  EXPECT_EQ(k.unsure[0], "measured at 2 compute thread(s), 1 planned: anywhere from no speed-up to a linear one");
  // One rank, no bucket: compute 100 + 200 + 1; the range is the step at 1x and 2x, +-10 %.
  Row r = predict(c, k, {}, DataOptions{}, shape(1, 1, 32, 1));
  EXPECT_DOUBLE_EQ(r.step_ms, 301);
  EXPECT_DOUBLE_EQ(r.step_low_ms, 301 * 0.9);
  EXPECT_DOUBLE_EQ(r.step_high_ms, 602 * 1.1);
  EXPECT_EQ(r.unsure, k.unsure);
  // 4 threads planned from the 2-thread profile: up to twice as fast. 2 ranks busy from a
  // profile measured alone: up to twice as slow.
  w.threads = 4;
  k = compute_for(c, w, 32, 2);
  EXPECT_DOUBLE_EQ(k.low, 0.5);
  EXPECT_DOUBLE_EQ(k.high, 2);
  ASSERT_EQ(k.unsure.size(), 2u);
  EXPECT_NE(k.unsure[1].find("measured with 1 rank(s) busy on the node, 2 planned"), std::string::npos) << k.unsure[1];
  // Measured as planned but under a load of 3 other threads on 2 cores: its 2 threads
  // had 2 / 5 of the cores instead of all of them, so idle it may take 0.4 x the time.
  w.threads = 2;
  c.profiles[0].background_load = 3;
  k = compute_for(c, w, 32, 1);
  EXPECT_TRUE(k.exact);
  EXPECT_DOUBLE_EQ(k.low, 0.4);
  EXPECT_DOUBLE_EQ(k.high, 1);
  ASSERT_EQ(k.unsure.size(), 1u);
  EXPECT_EQ(k.unsure[0], "measured under a load of 3.00 on 2 cores: on an idle node up to 60 % faster");
  // A load that left it all the cores it used (1 thread, load 0.5 on 2 cores) changes nothing.
  c.profiles = {cpu_profile(1, 1, 100)};
  c.profiles[0].background_load = 0.5;
  w.threads = 1;
  k = compute_for(c, w, 32, 1);
  EXPECT_DOUBLE_EQ(k.low, 1);
  EXPECT_TRUE(k.unsure.empty());
  // Cores of different speeds ([cpu] core_speed_min 0.8): the profile and a run each
  // hold whichever cores they ran on, from 0.8 x to 1 / 0.8 x.
  c.cpu.core_speed_min = 0.8;
  k = compute_for(c, w, 32, 1);
  EXPECT_DOUBLE_EQ(k.low, 0.8);
  EXPECT_DOUBLE_EQ(k.high, 1.25);
  ASSERT_EQ(k.unsure.size(), 1u);
  EXPECT_EQ(k.unsure[0], "this machine's cores differed in speed when measured, the slowest at 80 % of the fastest "
                         "([cpu] core_speed_min): a step depends on the cores its threads land on");
  // Within the tolerance (0.95): alike.
  c.cpu.core_speed_min = 0.95;
  k = compute_for(c, w, 32, 1);
  EXPECT_DOUBLE_EQ(k.high, 1);
  EXPECT_TRUE(k.unsure.empty());
  c.cpu.core_speed_min = 1;
  // Derived from MACs: a factor of 2 either way.
  c.profiles.clear();
  c.derive = {true, 1e12, 1, "ref"};
  w.macs_per_clip = 1e9;
  w.params = 1000000;
  k = compute_for(c, w, 32, 1);
  EXPECT_DOUBLE_EQ(k.low, 0.5);
  EXPECT_DOUBLE_EQ(k.high, 2);
  r = predict(c, k, {}, DataOptions{}, shape(1, 1, 32, 1));
  EXPECT_NEAR(r.step_low_ms, r.step_ms * 0.5 * 0.9, 1e-9);
  EXPECT_NEAR(r.step_high_ms, r.step_ms * 2 * 1.1, 1e-9);
}

TEST(PlanModel, EachBucketCostsTheLastBackwardOnMoreThanOneRank) {
  // [reducer] per_bucket_ms = 0.5: three buckets add 1.5 ms to the last micro-batch's
  // backward (forward 10, backward 20 -> 21.5), whose end moves the buckets' ready times
  // (at 0.25, 0.5, 1 of 21.5 ms from 10) and the exposed communication's reference.
  Cluster c = pair();
  c.reducer = {true, 0.5, "s"};
  const std::vector<Bucket> three{{1e6, 0.25}, {1e6, 0.5}, {1e6, 1.0}};
  Row r = predict(c, compute(10, 20, 0), three, DataOptions{}, shape(2, 2, 8, 1));
  EXPECT_DOUBLE_EQ(r.bucket_overhead_ms, 1.5);
  EXPECT_DOUBLE_EQ(r.backward_ms, 21.5);
  EXPECT_DOUBLE_EQ(r.compute_ms, 31.5);
  EXPECT_DOUBLE_EQ(r.exposed_comm_ms, 1);  // the last bucket, ready at the backward's end, 1 ms
  // Two micro-batches (accumulation): only the last backward pays.
  r = predict(c, compute(10, 20, 0), three, DataOptions{}, shape(2, 2, 8, 2));
  EXPECT_DOUBLE_EQ(r.backward_ms, 41.5);
  // One rank: no reducer, no cost.
  r = predict(c, compute(10, 20, 0), three, DataOptions{}, shape(1, 1, 8, 1));
  EXPECT_DOUBLE_EQ(r.bucket_overhead_ms, 0);
  EXPECT_DOUBLE_EQ(r.compute_ms, 30);
  // Without [reducer]: as before.
  c.reducer = {};
  r = predict(c, compute(10, 20, 0), three, DataOptions{}, shape(2, 2, 8, 1));
  EXPECT_DOUBLE_EQ(r.compute_ms, 30);
  EXPECT_DOUBLE_EQ(r.per_bucket_ms, 0);
  EXPECT_EQ(r.per_bucket_source, "");
}

TEST(PlanModel, AProfilesOwnBucketCostOverridesTheReducers) {
  // The profile's model has its own per_bucket_ms (2 ms: --measure-local measures each
  // recipe's), which compute_for carries and predict charges instead of [reducer]'s.
  Cluster c = pair();
  c.reducer = {true, 0.5, "tsm"};
  c.profiles = {cpu_profile(1, 2, 10)};
  c.profiles[0].per_bucket_ms = 2;
  c.profiles[0].per_bucket_source = "buckets_tsm.json";
  const Workload w{"tsm_resnet18", 8, 32, "fp32", 0, 0, 1};
  const Compute k = compute_for(c, w, 32, 2);
  EXPECT_DOUBLE_EQ(k.per_bucket_ms, 2);
  const std::vector<Bucket> three{{1e6, 0.25}, {1e6, 0.5}, {1e6, 1.0}};
  Row r = predict(c, k, three, DataOptions{}, shape(2, 2, 32, 1));
  EXPECT_DOUBLE_EQ(r.bucket_overhead_ms, 6);
  EXPECT_DOUBLE_EQ(r.per_bucket_ms, 2);
  EXPECT_EQ(r.per_bucket_source, "buckets_tsm.json");
  // A per_bucket_ms of 0 is a measurement too: no cost, [reducer]'s not taken.
  c.profiles[0].per_bucket_ms = 0;
  r = predict(c, compute_for(c, w, 32, 2), three, DataOptions{}, shape(2, 2, 32, 1));
  EXPECT_DOUBLE_EQ(r.bucket_overhead_ms, 0);
  // None given (negative): [reducer]'s, named as such.
  c.profiles[0].per_bucket_ms = -1;
  r = predict(c, compute_for(c, w, 32, 2), three, DataOptions{}, shape(2, 2, 32, 1));
  EXPECT_DOUBLE_EQ(r.bucket_overhead_ms, 1.5);
  EXPECT_EQ(r.per_bucket_source, "[reducer]: tsm");
  // One rank: none.
  r = predict(c, compute_for(c, w, 32, 1), three, DataOptions{}, shape(1, 1, 32, 1));
  EXPECT_DOUBLE_EQ(r.bucket_overhead_ms, 0);
  EXPECT_DOUBLE_EQ(r.per_bucket_ms, 0);
}
