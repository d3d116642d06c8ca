#include "vexp/plan/planner.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>

#include "vexp/base/attempt.hpp"
#include "vexp/dsl/validate.hpp"
#include "vexp/runtime/buckets.hpp"
#include "vexp/runtime/dry_run.hpp"

namespace vexp::plan {

std::string model_key(const dsl::RecipePlan& plan) {
  std::string key;
  for (const auto& n : plan.nodes) {
    if (n.kind != "backbone") continue;
    key = n.op;
    if (n.params.has("depth") && n.params.get("depth").is_int()) key += std::to_string(n.params.i64("depth"));
    if (n.params.has("inflate_style") && n.params.get("inflate_style").is_string())
      key += "_" + n.params.str("inflate_style");
    break;
  }
  if (key.empty() && !plan.nodes.empty()) key = plan.nodes.front().op;
  std::set<std::string> seen;
  std::string prefix;
  for (const auto& in : plan.inserts) {
    if (!seen.insert(in.op).second) continue;
    prefix += (in.op == "temporal_shift" ? std::string("tsm") : in.op) + "_";
  }
  return prefix + key;
}

RecipeResult plan_recipe(const std::string& recipe, const Cluster& cluster, const PlanOptions& o,
                         const RecipeOpener& open) {
  std::vector<dsl::Override> base = o.overrides;
  if (o.bucket_mb > 0) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.17g", o.bucket_mb);
    base.push_back({"dist.bucket_mb", std::string(buf).find_first_of(".e") == std::string::npos
                                          ? std::string(buf) + ".0" : std::string(buf)});
  }
  Session s0;
  open(s0, recipe, base, false);
  const dsl::RecipePlan& plan = *s0.plan;
  RecipeResult r;
  r.recipe = recipe;
  r.model = model_key(plan);
  r.world = plan.dist.world_size;
  r.per_gpu = plan.dist.batch_per_gpu;
  r.accum = plan.dist.accum_steps;
  r.bucket_mb = plan.dist.bucket_mb;
  r.compression = plan.dist.compression;
  r.workers = plan.data.workers;
  r.fixed_batch = o.fixed_batch;
  GradientProfile prof;
  DistPlan p0;
  try {
    p0 = plan_run(s0, r.world, &prof);
  } catch (const std::exception& e) {
    throw PlanError(recipe + ": " + e.what());
  }
  r.grad_params = p0.grad_params;
  r.grad_bytes = p0.grad_bytes;
  r.buckets = p0.buckets;
  r.attributed = prof.attributed;
  const auto& clip = plan.data_facts.clip;
  Workload w;
  w.model = r.model;
  w.frames = clip[0];
  w.size = clip[2];
  w.precision = plan.run.precision;
  w.threads = plan.run.threads;
  w.macs_per_clip = prof.macs_per_clip;
  w.params = p0.grad_params;
  r.compute_threads = compute_threads(cluster, w);
  // Compute per GPU count: ranks sharing a node's cores (a CPU cluster) slow each other.
  auto compute_at = [&](int64_t g) {
    return base::attempt<PlanError>([&] { return compute_for(cluster, w, r.per_gpu, busy_ranks_for(cluster, g)); })
        .value_or_throw(recipe + ": ");
  };
  r.compute = compute_at(1);
  const int64_t wire = wire_bytes_per_element(r.compression);
  const std::vector<Bucket> buckets = model_buckets(prof.numels, prof.macs, wire, r.bucket_mb);
  r.layout = o.data.layout;
  r.threads_per_gpu = threads_per_gpu(cluster, o.data);

  // The plan at G GPUs: weak scaling re-plans with dist.world_size = G; fixed
  // batch keeps the recipe's world and launches G ranks (each emulates world / G).
  auto dist_plan_at = [&](int64_t g) -> DistPlan {
    auto at_g = [&](const std::exception& e) {
      return PlanError(recipe + " at " + std::to_string(g) + " GPU(s): " + e.what());
    };
    try {
      if (o.fixed_batch) return make_dist_plan(plan, g, p0.train_size, p0.grad_params);
      if (g == r.world) return p0;
    } catch (const std::exception& e) {
      throw at_g(e);
    }
    std::vector<dsl::Override> ov = base;
    ov.push_back({"dist.world_size", std::to_string(g)});
    Session sg;
    open(sg, recipe, ov, true);  // outside the try: what the opener throws is the caller's
    try {
      return make_dist_plan(*sg.plan, g, p0.train_size, p0.grad_params);
    } catch (const std::exception& e) {
      throw at_g(e);
    }
  };
  auto row_at = [&](const DistPlan& dp, const std::vector<Bucket>& bk, const DataOptions& d) {
    const Compute c = compute_at(dp.ranks);  // its PlanError already names the recipe
    return base::attempt<PlanError>([&] { return predict(cluster, c, bk, d, dp); }).value_or_throw(recipe + ": ");
  };
  std::vector<int64_t> gpus = o.gpus.empty() ? std::vector<int64_t>{r.world} : o.gpus;
  for (int64_t g : gpus)  // refused before anything is planned, naming the ways out
    if (g > cluster.nodes * cluster.gpus_per_node)
      throw PlanError(recipe + ": " +
                      too_many_gpus(cluster, {g, r.world, p0.global_batch, o.fixed_batch, !o.gpus.empty()}));
  const Row one = row_at(dist_plan_at(1), buckets, o.data);
  std::vector<DistPlan> plans;
  for (int64_t g : gpus) {
    plans.push_back(dist_plan_at(g));
    Row row = g == 1 ? one : row_at(plans.back(), buckets, o.data);
    set_efficiency(row, one);
    r.rows.push_back(row);
  }

  // Advice.
  Advice& a = r.advice;
  for (const Row& row : r.rows)
    if (row.efficiency >= a.knee_efficiency) a.knee_gpus = std::max(a.knee_gpus, row.gpus);
  size_t last = 0;
  for (size_t i = 0; i < r.rows.size(); ++i)
    if (r.rows[i].gpus >= r.rows[last].gpus) last = i;
  const DistPlan& at = plans[last];
  a.at_gpus = r.rows[last].gpus;
  a.current_bucket_exposed_ms = r.rows[last].exposed_comm_ms;
  a.bucket_mb = r.bucket_mb;
  a.bucket_exposed_ms = a.current_bucket_exposed_ms;
  std::set<double> sizes{1, 2, 5, 10, 25, 50, 100, 200};
  sizes.insert(r.bucket_mb);
  for (double mb : sizes) {
    const Row t = row_at(at, model_buckets(prof.numels, prof.macs, wire, mb), o.data);
    a.bucket_scan.emplace_back(mb, t.exposed_comm_ms);
    // Another size only when it hides at least 1% of a step more (ties keep the recipe's).
    if (t.exposed_comm_ms < a.bucket_exposed_ms - 0.01 * r.rows[last].step_ms) {
      a.bucket_mb = mb;
      a.bucket_exposed_ms = t.exposed_comm_ms;
    }
  }
  const Row& big = r.rows[last];
  const double busy_s = (big.compute_ms + big.exposed_comm_ms) / 1e3;
  const double clips = static_cast<double>(big.micro_steps * r.per_gpu);
  for (const char* layout : {"frames", "videos"}) {
    const double rate = std::string(layout) == "videos" ? cluster.cpu.videos_clips_per_s_per_core
                                                        : cluster.cpu.frames_clips_per_s_per_core;
    if (rate <= 0) continue;
    Advice::Layout l;
    l.layout = layout;
    DataOptions d = o.data;
    d.layout = layout;
    l.storage_bound = storage_bound(cluster, d, big.gpus);
    // Threads whose decoding keeps up with compute + exposed comm, unless storage caps it first.
    DataOptions many = d;
    many.threads_per_gpu = 1e9;
    const double cap = data_clips_per_s(cluster, many, big.gpus);
    l.threads_needed = clips / busy_s <= cap ? std::ceil(clips / busy_s / rate) : 0;
    // (the loader's throughput: its handoff on busy cores is there at any thread count)
    l.exposed_data_ms = row_at(at, buckets, d).throughput_data_ms;
    l.fed = l.exposed_data_ms <= 0;
    a.layouts.push_back(l);
  }
  a.workers = r.workers;
  for (const auto& l : a.layouts)
    if (l.layout == r.layout && l.threads_needed > 0) a.workers = std::max<int64_t>(1, static_cast<int64_t>(l.threads_needed));
  if (o.noise_scale > 0) {
    // The reference: the recipe as written (its global batch at dist.world_size) trains
    // run.epochs epochs; every row is asked to reach the same progress.
    r.target = plan_to_target(r.rows, o.noise_scale, p0.global_batch,
                              static_cast<double>(p0.epochs) * static_cast<double>(p0.train_size), p0.train_size);
    r.target->noise_from = o.noise_from;
  }
  return r;
}

}  // namespace vexp::plan
