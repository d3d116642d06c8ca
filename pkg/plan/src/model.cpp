#include "vexp/plan/model.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "vexp/runtime/buckets.hpp"

namespace vexp::plan {

namespace {
constexpr double kBytesPerMsPerGBps = 1e6;  // 1 GB/s = 1e9 B/s = 1e6 B/ms
constexpr double kMsPerUs = 1e-3;
}  // namespace

std::vector<Bucket> model_buckets(const std::vector<int64_t>& numels, const std::vector<double>& macs,
                                  int64_t wire_bytes_per_element, double bucket_mb) {
  // Backward work per parameter: its MACs (its numel when no MAC is known at all).
  std::vector<double> work(numels.size(), 0.0);
  double total = 0;
  for (size_t k = 0; k < numels.size(); ++k) total += k < macs.size() ? macs[k] : 0.0;
  for (size_t k = 0; k < numels.size(); ++k)
    work[k] = total > 0 ? (k < macs.size() ? macs[k] : 0.0) : static_cast<double>(numels[k]);
  total = 0;
  for (double w : work) total += w;
  // done[k]: the backward's work up to and including parameter k (reverse order).
  std::vector<double> done(numels.size(), 0.0);
  double acc = 0;
  for (size_t k = numels.size(); k-- > 0;) {
    acc += work[k];
    done[k] = acc;
  }
  std::vector<Bucket> out;
  for (const auto& members : bucket_layout(numels, wire_bytes_per_element, bucket_mb)) {
    Bucket b;
    size_t first = members.front();
    for (size_t k : members) {
      b.bytes += static_cast<double>(numels[k] * wire_bytes_per_element);
      first = std::min(first, k);
    }
    b.ready = total > 0 ? done[first] / total : 1.0;
    out.push_back(b);
  }
  return out;
}

int64_t compute_threads(const Cluster& c, const Workload& w) {
  if (w.threads > 0) return w.threads;
  return std::max<int64_t>(1, static_cast<int64_t>(std::llround(c.cpu.cores_per_node)));
}

int64_t busy_ranks_for(const Cluster& c, int64_t gpus) { return std::max<int64_t>(1, std::min(gpus, c.gpus_per_node)); }

namespace {

// Another CPU profile of p's workload and busy ranks at another thread count, for a
// thread-scaling curve through both: the one on the other side of `wanted` from p
// when there is one, else the nearest to `wanted`; null when there is none.
const ClusterProfile* other_thread_count(const Cluster& c, const ClusterProfile& p, int64_t wanted) {
  const ClusterProfile* best = nullptr;
  auto score = [&](const ClusterProfile& q) {
    const bool across = (q.threads - wanted) * (p.threads - wanted) < 0;
    return std::make_pair(across ? 0 : 1, std::llabs(q.threads - wanted));
  };
  for (const auto& q : c.profiles) {
    if (&q == &p || q.model != p.model || q.frames != p.frames || q.size != p.size || q.precision != p.precision ||
        q.busy_ranks != p.busy_ranks || q.threads <= 0 || q.threads == p.threads)
      continue;
    if (!best || score(q) < score(*best)) best = &q;
  }
  return best;
}

}  // namespace

Compute compute_for(const Cluster& c, const Workload& w, int64_t per_gpu, int64_t busy_ranks) {
  const int64_t threads = compute_threads(c, w);
  const ClusterProfile* best = nullptr;
  double best_busy = 0, best_threads = 0;
  for (const auto& p : c.profiles) {
    if (p.model != w.model || p.frames != w.frames || p.size != w.size || p.precision != w.precision) continue;
    const double db = std::fabs(static_cast<double>(p.busy_ranks - busy_ranks));
    const double dt = p.threads > 0 ? std::fabs(static_cast<double>(p.threads - threads)) : 0.5;
    if (!best || db < best_busy || (db == best_busy && dt < best_threads)) {
      best = &p;
      best_busy = db;
      best_threads = dt;
    }
  }
  if (best) {
    const ClusterProfile& p = *best;
    const double scale = static_cast<double>(per_gpu) / p.batch;
    Compute r;
    r.forward_ms = p.forward_ms * scale;
    r.backward_ms = p.backward_ms * scale;
    r.optimizer_ms = p.optimizer_ms;
    r.data_wait_ms = p.data_wait_ms * scale;
    r.data_threads = p.data_threads;
    r.profile = "measured";
    r.threads = p.threads;
    r.busy_ranks = p.busy_ranks;
    r.per_bucket_ms = p.per_bucket_ms;
    r.per_bucket_source = p.per_bucket_source;
    r.exact = best_busy == 0 && (p.threads == 0 || best_threads == 0);  // no threads: not a CPU profile
    const std::string th = p.threads > 0 ? std::to_string(p.threads) : std::string("not given");
    r.selection = r.exact ? "threads " + th + ", busy_ranks " + std::to_string(p.busy_ranks)
                          : "closest: threads " + th + " (" + std::to_string(threads) + " wanted), busy_ranks " +
                                std::to_string(p.busy_ranks) + " (" + std::to_string(busy_ranks) + " wanted)";
    const ClusterProfile* q = p.threads > 0 && p.threads != threads ? other_thread_count(c, p, threads) : nullptr;
    if (q) {
      // Two thread counts of the same workload and busy ranks: Amdahl's law through
      // both, t(n) = t(n1) (s + (1 - s) n1 / n), s the serial share (held to 0..1),
      // per phase, each profile first scaled to per_gpu.
      const double n1 = static_cast<double>(p.threads), n2 = static_cast<double>(q->threads);
      const double n = static_cast<double>(threads), qscale = static_cast<double>(per_gpu) / q->batch;
      auto amdahl = [&](double t1, double t2) {
        if (t1 <= 0) return t1;
        const double s = std::clamp((t2 / t1 - n1 / n2) / (1 - n1 / n2), 0.0, 1.0);
        return t1 * (s + (1 - s) * n1 / n);
      };
      const double f1 = r.forward_ms, b1 = r.backward_ms;
      r.forward_ms = amdahl(f1, q->forward_ms * qscale);
      r.backward_ms = amdahl(b1, q->backward_ms * qscale);
      r.optimizer_ms = amdahl(p.optimizer_ms, q->optimizer_ms);
      r.selection += ", Amdahl's law with threads " + std::to_string(q->threads);
      // Between the two counts the truth lies between their times; beyond them, as
      // for one profile, between no further speed-up and a linear one from the nearer.
      const double at = r.forward_ms + r.backward_ms, t1 = f1 + b1, t2 = (q->forward_ms + q->backward_ms) * qscale;
      const bool between = (n - n1) * (n - n2) < 0;
      if (at > 0) {
        if (between) {
          r.low *= std::min(t1, t2) / at;
          r.high *= std::max(t1, t2) / at;
        } else {
          const double ratio = n1 / n;  // from the nearer profile (p), linear
          r.low *= std::min(1.0, std::min(t1 * ratio, t1) / at);
          r.high *= std::max(1.0, std::max(t1 * ratio, t1) / at);
        }
      }
      r.unsure.push_back("no profile at " + std::to_string(threads) + " compute thread(s): Amdahl's law through the " +
                         std::to_string(p.threads) + "- and " + std::to_string(q->threads) + "-thread ones" +
                         (between ? std::string(", between their times") : std::string(", extrapolated")));
    } else if (p.threads > 0 && p.threads != threads) {
      const double ratio = static_cast<double>(p.threads) / static_cast<double>(threads);
      (ratio < 1 ? r.low : r.high) *= ratio;
      r.unsure.push_back("measured at " + std::to_string(p.threads) + " compute thread(s), " + std::to_string(threads) +
                         " planned: anywhere from no speed-up to a linear one");
    }
    r.source = (p.from.empty() ? p.source : p.from) + " [" + r.selection + "]";
    // The measuring machine's own drift, as its rounds show it: the range is as wide.
    r.low *= p.round_low;
    r.high *= p.round_high;
    if (p.round_high / p.round_low > 1 + kValidatedTolerance) {
      char b[200];
      std::snprintf(b, sizeof b,
                    "its profile's rounds gave %.1f to %.1f ms per step (%.0f %% apart): the measuring machine's "
                    "speed moved while it measured",
                    p.round_low_ms, p.round_high_ms, 100 * (p.round_high_ms / p.round_low_ms - 1));
      r.unsure.push_back(b);
    }
    // (a GPU profile, without threads, is not slowed by the other GPUs of its node or by
    // programs on its cores)
    if (p.threads > 0 && p.busy_ranks != busy_ranks) {
      const double ratio = static_cast<double>(busy_ranks) / static_cast<double>(p.busy_ranks);
      (ratio < 1 ? r.low : r.high) *= ratio;
      r.unsure.push_back("measured with " + std::to_string(p.busy_ranks) + " rank(s) busy on the node, " +
                         std::to_string(busy_ranks) + " planned: ranks sharing a node's cores slow each other, up to "
                         "in proportion");
    }
    // Cores of different speeds: a profile holds whichever its threads ran on, and
    // a run lands on any of them.
    if (p.threads > 0 && c.cpu.core_speed_min < 1 - kValidatedTolerance) {
      r.low *= c.cpu.core_speed_min;
      r.high /= c.cpu.core_speed_min;
      char b[200];
      std::snprintf(b, sizeof b,
                    "this machine's cores differed in speed when measured, the slowest at %.0f %% of the fastest "
                    "([cpu] core_speed_min): a step depends on the cores its threads land on",
                    100 * c.cpu.core_speed_min);
      r.unsure.push_back(b);
    }
    const double own = static_cast<double>(p.threads * p.busy_ranks);
    const double cores = c.cpu.cores_per_node;
    if (p.threads > 0 && p.background_load > 0 && cores > 0 && own + p.background_load > cores) {
      const double share = cores / (own + p.background_load) / std::min(1.0, cores / own);
      if (share < 1) {
        r.low *= share;
        char b[160];
        std::snprintf(b, sizeof b, "measured under a load of %.2f on %g cores: on an idle node up to %.0f %% faster",
                      p.background_load, cores, 100 * (1 - share));
        r.unsure.push_back(b);
      }
    }
    return r;
  }
  if (c.derive.given) {
    if (w.macs_per_clip <= 0) throw PlanError("the model's MACs per clip are unknown: cannot derive its compute");
    // train_macs_per_s counts forward + backward = 3 x the forward's MACs.
    const double train_ms = 3.0 * w.macs_per_clip * static_cast<double>(per_gpu) / c.derive.train_macs_per_s * 1e3;
    Compute r;
    r.forward_ms = train_ms / 3.0;
    r.backward_ms = train_ms * 2.0 / 3.0;
    r.optimizer_ms = c.derive.optimizer_ms_per_mparam * static_cast<double>(w.params) / 1e6;
    r.profile = "derived";
    r.source = c.derive.source;
    r.low = 0.5;
    r.high = 2;
    r.unsure.push_back("derived from the model's MACs ([gpu.derive]), not measured: a factor of 2 either way");
    return r;
  }
  // Neither: name the table that would match, what the file has for the model, and the
  // other two ways out.
  std::string others;
  size_t n_others = 0;
  for (const auto& p : c.profiles)
    if (p.model == w.model && n_others++ < 3)
      others += std::string(others.empty() ? "" : "; ") + std::to_string(p.frames) + " frames, size " +
                std::to_string(p.size) + ", " + p.precision;
  const std::string file = c.path.empty() ? std::string("the cluster file") : "'" + c.path + "'";
  throw PlanError("cluster '" + c.name + "' has no [[gpu.profile]] for model '" + w.model + "' at " +
                  std::to_string(w.frames) + " frames, size " + std::to_string(w.size) + ", " + w.precision +
                  (others.empty() ? std::string(" (none for that model)")
                                  : " (its profiles of '" + w.model + "': " + others +
                                        (n_others > 3 ? "; ..." : "") + ")") +
                  " and no [gpu.derive] to derive one from the model's MACs; add to " + file +
                  " a [[gpu.profile]] with model = \"" + w.model + "\", frames = " + std::to_string(w.frames) +
                  ", size = " + std::to_string(w.size) + ", precision = \"" + w.precision +
                  "\" and its measured times (batch, forward_ms, backward_ms, optimizer_ms, source; or from = a "
                  "`vexp bench train RECIPE --json` output), or a [gpu.derive] table (train_macs_per_s, "
                  "optimizer_ms_per_mparam, source), or measure this machine into a cluster file with "
                  "`vexp plan --measure-local RECIPE --out FILE.toml` (docs/planning.md)");
}

std::string too_many_gpus(const Cluster& c, const GpuAsk& ask) {
  const int64_t max_gpus = c.nodes * c.gpus_per_node;
  // Counts that fit: 1, powers of two, the cluster's GPUs (1 and the four largest);
  // with --fixed-batch only those that divide the recipe's world.
  auto divides = [&](int64_t g) { return !ask.fixed_batch || (ask.world > 0 && ask.world % g == 0); };
  std::vector<int64_t> counts;
  for (int64_t p = 1; p < max_gpus; p *= 2)
    if (divides(p)) counts.push_back(p);
  if (divides(max_gpus)) counts.push_back(max_gpus);
  if (counts.size() > 5) counts.erase(counts.begin() + 1, counts.end() - 4);
  std::string list;
  for (int64_t g : counts) list += (list.empty() ? "" : ",") + std::to_string(g);
  int64_t fit = 1;  // the largest count that divides the recipe's world and fits the cluster
  for (int64_t d = 1; d * d <= ask.world; ++d)
    if (ask.world % d == 0)
      for (int64_t x : {d, ask.world / d})
        if (x <= max_gpus) fit = std::max(fit, x);
  std::string out = std::to_string(ask.gpus) + " GPUs" +
                    (ask.gpus_given ? std::string() : std::string(" (the recipe's dist.world_size; no --gpus given)")) +
                    ": cluster '" + c.name + "' has " + std::to_string(c.nodes) + " nodes x " +
                    std::to_string(c.gpus_per_node) + " = " + std::to_string(max_gpus) + "; give --gpus N,... up to " +
                    std::to_string(max_gpus);
  if (ask.fixed_batch)
    return out + " that divide the recipe's world of " + std::to_string(ask.world) + " (--fixed-batch), e.g. --gpus " +
           list;
  out += " (e.g. --gpus " + list + ")";
  if (ask.world > max_gpus)
    out += ", or --fixed-batch --gpus " + std::to_string(fit) + " to emulate the recipe's world of " +
           std::to_string(ask.world) + " GPUs (its global batch of " + std::to_string(ask.global_batch) +
           ") on fewer";
  return out;
}

int64_t nodes_for(const Cluster& c, int64_t gpus) { return (gpus + c.gpus_per_node - 1) / c.gpus_per_node; }

namespace {
// A ring over p members: 2(p-1) steps of latency alpha, 2(p-1)/p of the bytes
// through the slowest link.
double ring_ms(int64_t p, double bytes, double alpha_ms, double bytes_per_ms) {
  if (p <= 1) return 0;
  const double pd = static_cast<double>(p);
  return 2.0 * (pd - 1) * alpha_ms + 2.0 * (pd - 1) / pd * bytes / bytes_per_ms;
}
}  // namespace

double allreduce_ms(const Cluster& c, int64_t ranks, double bytes, std::string* algo) {
  if (algo) algo->clear();
  if (ranks <= 1) return 0;
  const int64_t n = nodes_for(c, ranks);
  const double a_intra = c.intra.latency_us * kMsPerUs, bw_intra = c.intra.bandwidth_GBps * kBytesPerMsPerGBps;
  if (n == 1) {
    if (algo) *algo = "ring";
    return ring_ms(ranks, bytes, a_intra, bw_intra);
  }
  const int64_t q = (ranks + n - 1) / n;  // ranks per node
  const double a_inter = c.inter.latency_us * kMsPerUs;
  const double bw_node = static_cast<double>(c.inter.rails) * c.inter.bandwidth_GBps * kBytesPerMsPerGBps;
  // Flat ring over every rank: each step waits for the slower hop; every node
  // boundary carries the ring's whole traffic through the node's rails.
  const double flat = ring_ms(ranks, bytes, q > 1 ? std::max(a_intra, a_inter) : a_inter,
                              q > 1 ? std::min(bw_intra, bw_node) : bw_node);
  // Hierarchical: reduce-scatter in the node (half a ring), a ring over the nodes
  // on each rank's 1/q shard with 1/q of the rails each (= the whole node's
  // bandwidth on the whole buffer), all-gather in the node.
  const double hier = (q > 1 ? ring_ms(q, bytes, a_intra, bw_intra) : 0.0) + ring_ms(n, bytes, a_inter, bw_node);
  if (algo) *algo = hier < flat ? "hierarchical" : "ring";
  return std::min(flat, hier);
}

double threads_per_gpu(const Cluster& c, const DataOptions& o) {
  return o.threads_per_gpu > 0 ? o.threads_per_gpu : c.cpu.cores_per_node / static_cast<double>(c.gpus_per_node);
}

namespace {
double per_core_rate(const Cluster& c, const std::string& layout) {
  const double r = layout == "videos" ? c.cpu.videos_clips_per_s_per_core : c.cpu.frames_clips_per_s_per_core;
  if (r <= 0)
    throw PlanError("cluster '" + c.name + "' has no decode rate for the " + layout + " layout ([cpu] " + layout +
                    "_clips_per_s_per_core or from_" + layout + ")");
  return r;
}

// Clips/s one rank may read from storage (infinite without a [storage] figure for the layout).
double storage_clips_per_s(const Cluster& c, const DataOptions& o, int64_t gpus) {
  const double clip_bytes = o.layout == "videos" ? c.storage.videos_clip_bytes : c.storage.frames_clip_bytes;
  if (!c.storage.given || clip_bytes <= 0) return INFINITY;
  const int64_t n = nodes_for(c, gpus);
  const double q = std::ceil(static_cast<double>(gpus) / static_cast<double>(n));
  double node_Bps = c.storage.read_GBps * 1e9 / static_cast<double>(n);
  if (c.storage.node_read_GBps > 0) node_Bps = std::min(node_Bps, c.storage.node_read_GBps * 1e9);
  return node_Bps / q / clip_bytes;
}
}  // namespace

double data_clips_per_s(const Cluster& c, const DataOptions& o, int64_t gpus) {
  const double decode = threads_per_gpu(c, o) * per_core_rate(c, o.layout);
  return std::min(decode, storage_clips_per_s(c, o, gpus));
}

bool storage_bound(const Cluster& c, const DataOptions& o, int64_t gpus) {
  return storage_clips_per_s(c, o, gpus) < threads_per_gpu(c, o) * per_core_rate(c, o.layout);
}

namespace {

Compute scaled(const Compute& k, double f) {
  Compute x = k;
  x.forward_ms *= f;
  x.backward_ms *= f;
  x.optimizer_ms *= f;
  x.low = x.high = 1;
  return x;
}

}  // namespace

Row predict(const Cluster& c, const Compute& k, const std::vector<Bucket>& buckets, const DataOptions& data,
            const DistPlan& s) {
  const int64_t max_gpus = c.nodes * c.gpus_per_node;
  // (the planner refuses such a count before it predicts, with the recipe's world: GpuAsk)
  if (s.ranks > max_gpus)
    throw PlanError(too_many_gpus(c, {s.ranks, s.world, s.global_batch, s.world != s.ranks, true}));
  const double steps_per_epoch = static_cast<double>(s.train_size) / static_cast<double>(s.global_batch);
  Row r;
  r.gpus = s.ranks;
  r.ranks = s.ranks;
  r.nodes = nodes_for(c, s.ranks);
  r.global_batch = s.global_batch;
  r.micro_steps = s.micro;
  r.steps_per_epoch = steps_per_epoch;
  const double micro = static_cast<double>(s.micro);
  // On more than one rank each bucket costs the last micro-batch's backward its own
  // time (the profile's per_bucket_ms, else [reducer]'s): the reducer works only in
  // that backward.
  if (s.ranks > 1 && k.per_bucket_ms >= 0) {
    r.per_bucket_ms = k.per_bucket_ms;
    r.per_bucket_source = k.per_bucket_source;
  } else if (s.ranks > 1 && c.reducer.given) {
    r.per_bucket_ms = c.reducer.per_bucket_ms;
    r.per_bucket_source = "[reducer]: " + c.reducer.source;
  }
  const double last_backward = k.backward_ms + static_cast<double>(buckets.size()) * r.per_bucket_ms;
  r.bucket_overhead_ms = last_backward - k.backward_ms;
  r.forward_ms = micro * k.forward_ms;
  r.backward_ms = (micro - 1) * k.backward_ms + last_backward;
  r.optimizer_ms = k.optimizer_ms;
  r.compute_ms = r.forward_ms + r.backward_ms + r.optimizer_ms;
  r.profile_source = k.source;

  // The reducer exists on more than one rank and communicates during the last
  // micro-batch's backward only (prepare(sync) before it).
  if (s.ranks > 1) {
    const double bw_start = (micro - 1) * (k.forward_ms + k.backward_ms) + k.forward_ms;
    const double bw_end = bw_start + last_backward;
    double end = 0, largest = -1;
    for (const Bucket& b : buckets) {
      std::string algo;
      const double t = allreduce_ms(c, s.ranks, b.bytes, &algo);
      const double start = std::max(bw_start + b.ready * last_backward, end);
      end = start + t;
      r.comm_ms += t;
      if (b.bytes > largest) {
        largest = b.bytes;
        r.algorithm = algo;
      }
    }
    r.exposed_comm_ms = std::max(0.0, end - bw_end);
  }

  const double clips = micro * static_cast<double>(s.per_gpu);
  r.data_ms = clips / data_clips_per_s(c, data, s.ranks) * 1e3;
  r.throughput_data_ms = std::max(0.0, r.data_ms - (r.compute_ms + r.exposed_comm_ms));
  // The profile's wait for its loader, less what its loader's throughput explains of it
  // (a micro-batch's decoding by the profile's decode threads beyond its compute: a
  // loader too slow for the compute, which throughput_data_ms counts at this plan's
  // threads), is its handoff: decode threads that first take a core from the compute
  // threads. It recurs at every micro-batch.
  DataOptions then = data;
  if (k.data_threads > 0) then.threads_per_gpu = k.data_threads;
  const double then_ms = static_cast<double>(s.per_gpu) / data_clips_per_s(c, then, s.ranks) * 1e3;
  const double explained = std::max(0.0, then_ms - (k.forward_ms + k.backward_ms));
  r.handoff_data_ms = micro * std::max(0.0, k.data_wait_ms - explained);
  r.exposed_data_ms = std::max(r.throughput_data_ms, r.handoff_data_ms);
  r.step_ms = r.compute_ms + r.exposed_comm_ms + r.exposed_data_ms;
  r.clips_per_s = static_cast<double>(s.global_batch) / r.step_ms * 1e3;
  r.epoch_s = steps_per_epoch * r.step_ms / 1e3;
  r.total_s = static_cast<double>(s.total_steps) * r.step_ms / 1e3;
  r.bottleneck = "compute";
  if (r.exposed_comm_ms > r.compute_ms && r.exposed_comm_ms >= r.exposed_data_ms) r.bottleneck = "communication";
  else if (r.exposed_data_ms > r.compute_ms && r.exposed_data_ms > r.exposed_comm_ms) r.bottleneck = "data";
  // The range: the same step with the compute at its bounds (communication and data
  // overlap it differently), widened by the validated tolerance.
  const double lo = k.low == 1 ? r.step_ms : predict(c, scaled(k, k.low), buckets, data, s).step_ms;
  const double hi = k.high == 1 ? r.step_ms : predict(c, scaled(k, k.high), buckets, data, s).step_ms;
  r.step_low_ms = lo * (1 - kValidatedTolerance);
  r.step_high_ms = hi * (1 + kValidatedTolerance);
  r.unsure = k.unsure;
  return r;
}

void set_efficiency(Row& r, const Row& one) {
  r.efficiency = one.clips_per_s > 0 ? r.clips_per_s / (static_cast<double>(r.gpus) * one.clips_per_s) : 0;
}

}  // namespace vexp::plan
