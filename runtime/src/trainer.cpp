#include "vexp/runtime/trainer.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <nlohmann/json.hpp>

#include "vexp/runtime/checkpoint.hpp"
#include "vexp/runtime/dist_plan.hpp"
#include "vexp/runtime/reducer.hpp"
#include "vexp/runtime/graph.hpp"
#include "vexp/runtime/loader.hpp"
#include "vexp/runtime/optimizer.hpp"
#include "vexp/runtime/precision.hpp"
#include "vexp/runtime/schedule.hpp"
#include "vexp/runtime/tensorboard.hpp"
#include "vexp/comm.hpp"
#include "vexp/dataset.hpp"
#include "vexp/log.hpp"

namespace vexp {
namespace fs = std::filesystem;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

uint64_t mix_seed(uint64_t a, uint64_t b) {
  uint64_t x = a * 0x9E3779B97F4A7C15ULL ^ (b + 0x632BE59BD9B4E019ULL + (a << 6) + (a >> 2));
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ULL;
  x ^= x >> 27;
  return x;
}

std::string format_duration(double s) {
  int total = static_cast<int>(s + 0.5);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%d:%02d", total / 60, total % 60);
  return buf;
}

struct EvalResult {
  double top1 = 0, top5 = 0, loss = 0;
  int64_t clips = 0;
};

EvalResult evaluate(ModelGraph& model, const Dataset& data, int64_t batch, int64_t classes, const LoaderOptions& lo,
                    const c10::Device& device, Precision precision) {
  model.eval();
  at::NoGradGuard no_grad;
  EvalResult r;
  const int64_t n = data.size(Split::Val);
  const int64_t k = std::min<int64_t>(5, classes > 0 ? classes : 5);
  double correct1 = 0, correct5 = 0, loss_sum = 0;
  std::vector<std::vector<int64_t>> batches;
  for (int64_t start = 0; start < n; start += batch) {
    batches.emplace_back();
    for (int64_t i = start; i < std::min(n, start + batch); ++i) batches.back().push_back(i);
  }
  // Multi-view testing: the logits of every view (clip x crop) are averaged.
  const int64_t views = data.views(Split::Val);
  std::vector<at::Tensor> logit_sum(batches.size());
  std::vector<at::Tensor> labels(batches.size());
  for (int64_t v = 0; v < views; ++v) {
    LoaderOptions o = lo;
    o.split = Split::Val;
    o.seed = 0;
    o.view = v;
    Loader loader(data, batches, o);
    DeviceFeeder feeder(device);
    Batch next;
    if (loader.next(next)) feeder.put(std::move(next));
    for (size_t i = 0; !feeder.empty(); ++i) {
      Batch b = feeder.take();
      if (loader.next(next)) feeder.put(std::move(next));  // its copy overlaps this forward
      at::Tensor logits;
      {
        AutocastScope autocast(device.type(), precision);
        logits = model.forward(b.clips).to(at::kFloat);
      }
      logit_sum[i] = v == 0 ? logits : logit_sum[i] + logits;
      labels[i] = b.labels;
    }
  }
  for (size_t i = 0; i < batches.size(); ++i) {
    at::Tensor logits = views > 1 ? logit_sum[i] / static_cast<double>(views) : logit_sum[i];
    const double count = static_cast<double>(batches[i].size());
    loss_sum += at::cross_entropy_loss(logits, labels[i]).item<double>() * count;
    at::Tensor topk = std::get<1>(logits.topk(std::min<int64_t>(k, logits.size(1)), 1));
    at::Tensor hit = topk.eq(labels[i].unsqueeze(1));
    correct1 += hit.select(1, 0).sum().item<double>();
    correct5 += hit.any(1).sum().item<double>();
  }
  model.train();
  r.clips = n;
  if (n > 0) {
    r.top1 = correct1 / static_cast<double>(n);
    r.top5 = correct5 / static_cast<double>(n);
    r.loss = loss_sum / static_cast<double>(n);
  }
  return r;
}

// Shows progress on a terminal (a bar redrawn in place) or as plain log lines.
class Progress {
 public:
  Progress(const std::string& mode, int64_t log_every) : log_every_(log_every) {
    bool tty = ::isatty(STDERR_FILENO) != 0;
    bar_ = mode == "bar" || (mode == "auto" && tty);
    quiet_ = mode == "none";
  }
  void step(int64_t epoch, int64_t epochs, int64_t step, int64_t steps, double loss, double lr,
            double clips_per_s, double eta_s) {
    if (quiet_) return;
    if (bar_) {
      const int width = 24;
      int filled = static_cast<int>(width * static_cast<double>(step) / static_cast<double>(std::max<int64_t>(1, steps)));
      std::string bar(filled, '#');
      bar += std::string(width - filled, '.');
      std::fprintf(stderr, "\r\033[Kepoch %lld/%lld [%s] %lld/%lld loss %.4f lr %.4g %.0f clips/s ETA %s",
                   (long long)epoch, (long long)epochs, bar.c_str(), (long long)step, (long long)steps, loss, lr,
                   clips_per_s, format_duration(eta_s).c_str());
      std::fflush(stderr);
      dirty_ = true;
    } else if (step % log_every_ == 0 || step == steps) {
      char buf[256];
      std::snprintf(buf, sizeof buf, "epoch %lld/%lld step %lld/%lld loss %.4f lr %.4g %.1f clips/s ETA %s",
                    (long long)epoch, (long long)epochs, (long long)step, (long long)steps, loss, lr, clips_per_s,
                    format_duration(eta_s).c_str());
      log_info(buf);
    }
  }
  void line(const std::string& text) {
    if (quiet_) return;
    end_bar();
    log_info(text);
  }
  void end_bar() {
    if (dirty_) {
      std::fprintf(stderr, "\n");
      dirty_ = false;
    }
  }

 private:
  int64_t log_every_;
  bool bar_ = false, quiet_ = false, dirty_ = false;
};

std::string shape_str(at::IntArrayRef sizes) {
  std::ostringstream s;
  s << sizes;
  return s.str();
}

// A checkpoint of another model (another recipe's architecture, a TSN run's
// checkpoint given to a TSM recipe): says which parameters do not match.
void check_same_architecture(const Checkpoint& c, ModelGraph& model, const std::string& path) {
  const auto params = model.named_parameters(true);
  const auto buffers = model.named_buffers(true);
  int64_t bad = 0, extra = 0;
  std::string first;
  for (const auto& p : params) {
    auto it = c.model.find(p.key());
    if (it == c.model.end()) {
      ++bad;
      if (first.empty()) first = "'" + p.key() + "' " + shape_str(p.value().sizes()) + " is not in the checkpoint";
    } else if (!it->second.sizes().equals(p.value().sizes())) {
      ++bad;
      if (first.empty())
        first = "'" + p.key() + "' is " + shape_str(p.value().sizes()) + " in the model, " +
                shape_str(it->second.sizes()) + " in the checkpoint";
    }
  }
  for (const auto& [k, v] : c.model)
    if (!params.contains(k) && !buffers.contains(k)) {
      ++extra;
      if (first.empty()) first = "the checkpoint's '" + k + "' " + shape_str(v.sizes()) + " is not in the model";
    }
  if (bad == 0 && extra == 0) return;
  throw std::runtime_error("checkpoint '" + path + "' belongs to another model than this recipe's: " +
                           std::to_string(bad) + " of the model's " + std::to_string(params.size()) +
                           " parameters are missing from it or have another shape, and " + std::to_string(extra) +
                           " of its " + std::to_string(c.model.size()) + " tensors are not in the model (first: " +
                           first + "); resume it with the recipe it was trained with (its run directory's resolved.toml)");
}

// Failure records (failures/rank_<r>.txt) older than this process belong to an
// earlier invocation on the run directory: they move to failures/previous/.
const fs::file_time_type g_process_start = fs::file_time_type::clock::now();

void set_aside_stale_failures(const fs::path& out) {
  const fs::path dir = out / "failures";
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return;
  int moved = 0;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    std::error_code tec;
    const auto t = fs::last_write_time(it->path(), tec);
    if (tec || t >= g_process_start) continue;
    fs::create_directories(dir / "previous", tec);
    const std::string stem = it->path().stem().string(), ext = it->path().extension().string();
    fs::path target = dir / "previous" / it->path().filename();
    for (int k = 1; fs::exists(target); ++k) target = dir / "previous" / (stem + "." + std::to_string(k) + ext);
    fs::rename(it->path(), target, tec);
    if (!tec) ++moved;
  }
  if (moved > 0)
    log_info("moved " + std::to_string(moved) + " failure record(s) of an earlier invocation to '" +
             (dir / "previous").string() + "'");
}

// ---- stopping on a signal ----
volatile std::sig_atomic_t g_stop = 0;
volatile std::sig_atomic_t g_quiet_signals = 0;  // ranks other than 0 say nothing

extern "C" void on_stop_signal(int) {
  if (g_stop) {
    static const char again[] = "\nvexp: interrupted again: exiting at once (checkpoints already written stay)\n";
    if (!g_quiet_signals) (void)!::write(STDERR_FILENO, again, sizeof again - 1);
    ::_exit(130);
  }
  g_stop = 1;
  static const char first[] =
      "\nvexp: interrupted: stopping after the current step and writing a checkpoint (interrupt again to exit at once)\n";
  if (!g_quiet_signals) (void)!::write(STDERR_FILENO, first, sizeof first - 1);
}

// ---- test-only fault injection (VEXP_TEST_FAULT; docs/recipes.md) ----
// A comma-separated list of KIND@KEY=N[@rank=R]:
//   nan_loss@step=N   the training loss of global step N is NaN
//   grow_loss@step=N  from global step N on, the training loss is observed 1e6 times larger
//   nan_val@epoch=N   the validation loss of the evaluation after epoch N is NaN
//   sigint@step=N     SIGINT is raised during global step N (the run stops after it)
struct Faults {
  struct Fault {
    std::string kind;
    int64_t at = 0;
    int rank = -1;
  };
  std::vector<Fault> list;

  static Faults from_env() {
    Faults f;
    const char* env = std::getenv("VEXP_TEST_FAULT");
    if (!env || !*env) return f;
    std::stringstream ss(env);
    for (std::string item; std::getline(ss, item, ',');) {
      if (item.empty()) continue;
      static const std::map<std::string, std::string> keys{
          {"nan_loss", "step"}, {"grow_loss", "step"}, {"nan_val", "epoch"}, {"sigint", "step"}};
      const size_t at = item.find('@');
      Fault x;
      x.kind = item.substr(0, at);
      auto k = keys.find(x.kind);
      long long n = 0, r = -1;
      int used = 0;
      const std::string rest = at == std::string::npos ? "" : item.substr(at + 1);
      const std::string want = k == keys.end() ? "" : k->second + "=%lld%n";
      bool ok = k != keys.end() && std::sscanf(rest.c_str(), want.c_str(), &n, &used) == 1;
      if (ok && used < static_cast<int>(rest.size())) {
        int used2 = 0;
        ok = std::sscanf(rest.c_str() + used, "@rank=%lld%n", &r, &used2) == 1 &&
             used + used2 == static_cast<int>(rest.size());
      }
      if (!ok)
        throw std::runtime_error("VEXP_TEST_FAULT: cannot read '" + item +
                                 "' (test-only; expected nan_loss@step=N, grow_loss@step=N, nan_val@epoch=N or "
                                 "sigint@step=N, each optionally followed by @rank=R)");
      x.at = n;
      x.rank = static_cast<int>(r);
      f.list.push_back(x);
    }
    if (!f.list.empty()) log_warn("VEXP_TEST_FAULT is set: faults are injected into this run (tests only)");
    return f;
  }
  // Whether fault `kind` fires at `at` (for grow_loss: at or after) on `rank`.
  bool hit(const std::string& kind, int64_t at, int rank) const {
    for (const auto& x : list)
      if (x.kind == kind && (x.rank < 0 || x.rank == rank) && (kind == "grow_loss" ? at >= x.at : at == x.at)) return true;
    return false;
  }
};

// Keeps the metrics lines up to (and including) `global_step`/`epoch`, so that a
// resumed run's log reads as if it had never stopped.
void truncate_metrics(const fs::path& path, int64_t global_step, int64_t epochs_done) {
  std::ifstream in(path);
  if (!in) return;
  std::string out, line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    try {
      json j = json::parse(line);
      std::string type = j.value("type", "");
      if (type == "step" && j.value("global_step", int64_t(0)) > global_step) continue;
      if (type == "eval" && j.value("epoch", int64_t(0)) > epochs_done) continue;
    } catch (const std::exception&) {
      continue;  // a torn last line from a crash
    }
    out += line + "\n";
  }
  write_file_atomic(path.string(), out);
}

}  // namespace

namespace {
fs::path run_dir_of(const dsl::RecipePlan& plan, const TrainOptions& opt) {
  const dsl::Params& run = plan.run;
  std::string name = run.str("name");
  if (name.empty()) name = fs::path(opt.recipe_path).stem().string();
  return !opt.out_dir.empty() ? fs::path(opt.out_dir)
         : !run.str("out").empty() ? fs::path(run.str("out"))
                                  : fs::path("runs") / name;
}

TrainResult train_body(Session& s, const TrainOptions& opt, const std::shared_ptr<Comm>& comm);
}  // namespace

void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // reads and waits in progress continue
  for (int sig : {SIGINT, SIGTERM, SIGUSR1}) ::sigaction(sig, &sa, nullptr);
}

bool stop_requested() { return g_stop != 0; }
void request_stop() { g_stop = 1; }

// With more than one rank, an error on any rank ends the whole job: the rank
// prints it, records it in <run>/failures/rank_<r>.txt and aborts every rank
// (the others would wait for it forever otherwise). An interruption is agreed by
// every rank (they stop after the same step) and ends each of them normally.
TrainResult train(Session& s, const TrainOptions& opt) {
  install_stop_handlers();
  const dsl::RecipePlan& plan = *s.plan;
  auto comm = s.host.make<Comm>("comm", plan.comm, plan.comm_params);
  // Rank 0 reports a stop signal; under `vexp run --nproc` the launcher already did.
  g_quiet_signals = comm->rank() != 0 || std::getenv("VEXP_RESUME_COMMAND") != nullptr;
  if (comm->size() == 1) return train_body(s, opt, comm);
  const fs::path out = run_dir_of(plan, opt);
  const int rank = comm->rank();
  auto report = [out, rank](const std::string& what) {
    std::fprintf(stderr, "vexp: error: rank %d: %s\n", rank, what.c_str());
    std::fflush(stderr);
    std::error_code ec;
    fs::create_directories(out / "failures", ec);
    std::ofstream f(out / "failures" / ("rank_" + std::to_string(rank) + ".txt"), std::ios::app);
    f << what << "\n";
  };
  comm->set_watchdog(plan.dist.f64("timeout_s"), report);
  try {
    return train_body(s, opt, comm);
  } catch (const InterruptedError&) {
    throw;
  } catch (const DivergedError& e) {
    report(std::string("training diverged: ") + e.what());
    comm->abort(3);
  } catch (const c10::Error& e) {
    report(e.what_without_backtrace());
    comm->abort(1);
  } catch (const std::exception& e) {
    report(e.what());
    comm->abort(1);
  }
  // Comm::abort does not return; a virtual [[noreturn]] is not trusted by every
  // compiler's flow analysis (-Wreturn-type), so say it.
  std::abort();
}

namespace {
// The distinct bad items (Dataset::bad_items) every rank has met, plus `saved`
// (from the checkpoint resumed from). A collective: every rank calls it.
std::set<std::string> all_bad_items(const Dataset& data, Comm& comm, const std::set<std::string>& saved) {
  std::set<std::string> items = saved;
  for (auto& b : data.bad_items()) items.insert(std::move(b));
  if (comm.size() == 1) return items;
  std::string joined;
  for (const auto& b : items) joined += b + '\n';
  at::Tensor len = at::full({1}, static_cast<int64_t>(joined.size()), at::kLong);
  comm.allreduce(len, ReduceOp::Max);
  const int64_t n = len.item<int64_t>();
  if (n == 0) return items;
  at::Tensor mine = at::zeros({n}, at::kByte);
  std::memcpy(mine.data_ptr<uint8_t>(), joined.data(), joined.size());
  at::Tensor all = comm.allgather(mine).contiguous();
  const char* p = reinterpret_cast<const char*>(all.data_ptr<uint8_t>());
  for (int64_t r = 0; r < comm.size(); ++r) {
    std::string text(p + r * n, static_cast<size_t>(n));
    std::stringstream ss(text.c_str());  // up to the zero padding
    for (std::string line; std::getline(ss, line);)
      if (!line.empty()) items.insert(line);
  }
  return items;
}

bool finite_eval(const EvalResult& e) { return std::isfinite(e.top1) && std::isfinite(e.top5) && std::isfinite(e.loss); }

TrainResult train_body(Session& s, const TrainOptions& opt, const std::shared_ptr<Comm>& comm) {
  const auto wall_start = Clock::now();
  const dsl::RecipePlan& plan = *s.plan;
  const dsl::Params& run = plan.run;
  const Faults faults = Faults::from_env();

  // Threads: Debian's libtorch starts with one; use the machine unless told.
  int64_t threads = run.i64("threads");
  if (threads <= 0) threads = std::max(1u, std::thread::hardware_concurrency());
  at::set_num_threads(static_cast<int>(threads));

  // Device and arithmetic: checked before the run directory is touched.
  const c10::Device device = resolve_device(run.str("device"), run_setting_where(run, "device", opt.recipe_path));
  const Precision precision = parse_precision(run.str("precision"));
  check_precision(precision, device, run_setting_where(run, "precision", opt.recipe_path));
  const MemoryFormat memory_format = parse_memory_format(run.str("memory_format"));
  GradScaler scaler(precision == Precision::Fp16);
  const double divergence_factor = run.f64("divergence_factor");

  std::string name = run.str("name");
  if (name.empty()) name = fs::path(opt.recipe_path).stem().string();
  fs::path out = run_dir_of(plan, opt);
  const std::string recipe_hash = dsl::recipe_hash(plan.resolved);

  const bool writer = comm->rank() == 0;
  const int rank = comm->rank();
  const int64_t ranks = comm->size();
  fs::path ckpt_dir = out / "checkpoints";
  // The checkpoint to continue from: --resume-from's, else (--resume) the newest
  // one that loads; a newer one that does not is kept aside as NAME.corrupt.
  std::string resume_from;
  std::optional<Checkpoint> resume_ckpt;
  if (!opt.resume_from.empty()) {
    if (!fs::is_regular_file(opt.resume_from))
      throw std::runtime_error("cannot resume from '" + opt.resume_from + "': no such checkpoint file");
    resume_from = opt.resume_from;
    resume_ckpt = load_checkpoint(resume_from);
  } else if (opt.resume) {
    if (!fs::exists(out)) throw std::runtime_error("cannot resume: run directory '" + out.string() + "' does not exist");
    const auto all = checkpoints_newest_first(ckpt_dir);
    std::string first_error;
    for (const auto& c : all) {
      try {
        resume_ckpt = load_checkpoint(c);
        resume_from = c;
        break;
      } catch (const std::exception& e) {
        if (first_error.empty()) first_error = e.what();
        std::string kept = c;
        if (writer) {
          fs::path aside = c + ".corrupt";
          for (int k = 1; fs::exists(aside); ++k) aside = c + ".corrupt." + std::to_string(k);
          std::error_code ec;
          fs::rename(c, aside, ec);
          if (!ec) kept = aside.string();
        }
        log_warn("checkpoint '" + c + "' does not load (" + e.what() + "); it is kept as '" + kept +
                 "' and the run resumes from the newest older checkpoint that loads");
      }
    }
    if (!all.empty() && !resume_ckpt)
      throw std::runtime_error("cannot resume '" + out.string() + "': none of its " + std::to_string(all.size()) +
                               " checkpoint(s) loads (newest: " + first_error +
                               "); start the run again in another directory (--out)");
    if (all.empty())
      log_warn("no checkpoint in '" + ckpt_dir.string() + "': starting '" + out.string() + "' from the beginning");
    else if (resume_from != all.front())
      log_warn("resuming from '" + resume_from + "', the newest checkpoint that loads; to choose another: --resume-from CHECKPOINT");
  } else if (fs::exists(out / "summary.json") || fs::exists(out / "metrics.jsonl") || !latest_checkpoint(ckpt_dir).empty()) {
    throw std::runtime_error("run directory '" + out.string() +
                             "' already holds a run; use --resume to continue it, or --out to choose another directory");
  }
  // Failure records of an earlier invocation (a failed --nproc start) are no
  // longer current: a run that succeeds now leaves none at failures/.
  if (writer) set_aside_stale_failures(out);
  if (ranks > 1) {
    // Every rank has looked at the run directory before rank 0 writes to it, and
    // agrees on the checkpoint to resume from.
    at::Tensor ckpt_epoch = at::full({1}, resume_from.empty() ? int64_t(-1) : int64_t(std::hash<std::string>{}(resume_from) >> 1), at::kLong);
    at::Tensor mine = ckpt_epoch.clone();
    comm->broadcast(ckpt_epoch, 0);
    if (!ckpt_epoch.equal(mine))
      throw std::runtime_error("rank " + std::to_string(comm->rank()) + " sees another checkpoint to resume from than rank 0 ('" +
                               resume_from + "'): the run directory must be on a file system every rank shares");
  }
  if (writer) {
    fs::create_directories(ckpt_dir);
    write_file_atomic((out / "resolved.toml").string(),
                      "# resolved recipe, hash " + recipe_hash + "\n" + dsl::to_toml(plan.resolved));
  }

  const uint64_t seed = static_cast<uint64_t>(run.i64("seed"));
  at::manual_seed(seed);
  auto data = s.host.make<Dataset>("dataset", plan.dataset, plan.dataset_params);
  auto model = std::make_shared<ModelGraph>(plan, s.host);
  for (const auto& r : model->pretrained_reports()) log_info(r);
  model->train();
  const int64_t params_count = model->parameter_count();
  const double macs = plan.data_facts.clip.empty() ? 0.0 : model->macs_per_clip(plan.data_facts.clip);
  // Parameters and buffers move in place (set_data), so tensors taken from the
  // model below are the device's; checkpoints hold CPU copies.
  if (!device.is_cpu()) model->to(device);
  apply_memory_format(model->parameters(true), memory_format);

  // Parameter groups: decay / no decay (biases, BatchNorm), TSN's fc_lr5 policy.
  const dsl::Params& o = plan.optim;
  std::vector<at::Tensor> all_params;
  std::vector<ParamGroup> groups = param_groups(*model, o, all_params);
  Sgd sgd(groups, o.f64("momentum"), o.flag("nesterov"));
  if (o.flag("lars")) sgd.set_lars(o.f64("lars_eta"));

  // Batch geometry (global batch = world_size x batch_per_gpu x accum_steps),
  // learning rate after large-batch scaling, schedule in steps: see dist_plan.hpp.
  int64_t grad_numel = 0;
  for (const auto& p : all_params) grad_numel += p.numel();
  const DistPlan dp = make_dist_plan(plan, ranks, data->size(Split::Train), grad_numel);
  const int64_t world = dp.world, per_gpu = dp.per_gpu;
  const int64_t micro = dp.micro;  // micro-batches per rank per step
  const int64_t global_batch = dp.global_batch;
  if (world > ranks) {
    log_info("emulating " + std::to_string(world) + " GPUs on " + std::to_string(ranks) + " rank(s): " +
             std::to_string(micro) + " micro-batches of " + std::to_string(per_gpu) + " clips per step");
  }
  const int64_t train_size = dp.train_size;
  const int64_t steps_per_epoch = dp.steps_per_epoch;
  const int64_t epochs = dp.epochs;
  const LrSchedule sched = dp.schedule;
  // The loader: decode threads, prefetch queue, this rank's shard of every epoch.
  DistributedSampler sampler(train_size, comm->rank(), ranks, per_gpu, micro, seed);
  LoaderOptions loader_opts;
  loader_opts.workers = plan.data.i64("workers");
  loader_opts.prefetch = plan.data.i64("prefetch");
  loader_opts.pin_memory = device.is_cuda();  // pinned host memory: asynchronous copies to the GPU

  // Resume. A checkpoint holds the state after `epoch` epochs and `epoch_step`
  // steps of the next one (non-zero when the run was interrupted mid-epoch).
  int64_t start_epoch = 0, start_step = 0, global_step = 0;
  double train_time = 0, prior_wall = 0;
  int64_t train_clips = 0;
  double reference_loss = -1;           // the first step's training loss
  double window_sum = 0;                // the logged window of step losses so far
  int64_t window_n = 0;
  std::set<std::string> bad_saved;      // distinct bad items of earlier invocations
  if (resume_ckpt) {
    const Checkpoint& c = *resume_ckpt;
    json meta = json::parse(c.meta_json);
    check_same_architecture(c, *model, resume_from);
    if (meta.value("recipe_hash", "") != recipe_hash) {
      throw std::runtime_error("cannot resume '" + out.string() + "' from '" + resume_from +
                               "': the recipe changed since the run started (hash " + meta.value("recipe_hash", "?") +
                               ", now " + recipe_hash + "); resume with the same recipe and --set values");
    }
    at::NoGradGuard no_grad;
    for (auto& p : model->named_parameters(true)) p.value().copy_(c.model.at(p.key()));
    for (auto& b : model->named_buffers(true)) {
      auto it = c.model.find(b.key());
      if (it != c.model.end()) b.value().copy_(it->second);
    }
    // Momentum buffers take their parameter's device and layout (checkpoints hold
    // contiguous CPU copies; a channels-last weight wants a channels-last buffer).
    const auto params = model->named_parameters(true);
    for (auto& [k, v] : c.optimizer) {
      const at::Tensor* p = params.find(k);
      sgd.state()[k] = p && p->sizes() == v.sizes() ? at::empty_like(*p).copy_(v)
                                                   : v.to(v.options().device(device), false, /*copy=*/true);
    }
    if (meta.contains("grad_scale"))
      scaler.restore(meta.at("grad_scale").get<double>(), meta.value("grad_scale_good_steps", int64_t(0)),
                     meta.value("skipped_steps", int64_t(0)));
    start_epoch = meta.at("epoch").get<int64_t>();
    start_step = meta.value("epoch_step", int64_t(0));
    global_step = meta.at("global_step").get<int64_t>();
    train_time = meta.value("train_time_s", 0.0);
    prior_wall = meta.value("wall_time_s", train_time);
    train_clips = meta.value("train_clips", int64_t(0));
    reference_loss = meta.value("reference_loss", -1.0);
    window_sum = meta.value("window_loss_sum", 0.0);
    window_n = meta.value("window_steps", int64_t(0));
    if (meta.contains("bad_items"))
      for (const auto& b : meta.at("bad_items")) bad_saved.insert(b.get<std::string>());
    if (start_step < 0 || start_step > steps_per_epoch)
      throw std::runtime_error("checkpoint '" + resume_from + "' stopped at step " + std::to_string(start_step) +
                               " of an epoch of " + std::to_string(steps_per_epoch) + " steps");
    if (writer) truncate_metrics(out / "metrics.jsonl", global_step, start_epoch);
    log_info("resuming '" + out.string() + "' from " + fs::path(resume_from).filename().string() + " (epoch " +
             std::to_string(start_epoch) + (start_step > 0 ? " and " + std::to_string(start_step) + " steps" : "") +
             ", step " + std::to_string(global_step) + ")");
    resume_ckpt.reset();
  }

  // Distributed: same recipe and model everywhere, rank 0's weights everywhere,
  // gradients averaged by the reducer.
  std::unique_ptr<Reducer> reducer;
  if (ranks > 1) {
    std::vector<std::pair<std::string, at::Tensor>> named;
    std::vector<at::Tensor> state;
    for (const auto& p : model->named_parameters(true)) {
      named.emplace_back(p.key(), p.value());
      state.push_back(p.value());
    }
    check_same_model(*comm, recipe_hash, named);
    for (const auto& b : model->named_buffers(true)) state.push_back(b.value());
    for (auto& [k, v] : sgd.state()) state.push_back(v);
    broadcast_from_rank0(*comm, state);
    ReducerOptions ro;
    ro.bucket_mb = plan.dist.f64("bucket_mb");
    ro.compression = plan.dist.str("compression");
    ro.prescaled = true;  // the loss below carries 1/ranks
    reducer = std::make_unique<Reducer>(all_params, comm, ro);
  }

  if (writer) log_info("run '" + out.string() + "': " + std::to_string(params_count) + " parameters, " +
           std::to_string(macs / 1e6) + " M MACs per clip, " +
           (device.is_cpu() ? std::to_string(threads) + " threads" : device.str()) +
           (precision == Precision::Fp32 ? std::string() : std::string(", ") + precision_name(precision) + " autocast") +
           ", " + memory_format_name(memory_format) + ", global batch " +
           std::to_string(global_batch) + ", " + std::to_string(steps_per_epoch) + " steps per epoch");

  std::ofstream metrics;
  if (writer) metrics.open(out / "metrics.jsonl", std::ios::app);
  EventWriter tb;  // TensorBoard scalars next to metrics.jsonl
  if (writer && !tb.open(out.string())) log_warn("cannot write TensorBoard events in '" + out.string() + "'");
  auto emit = [&](const json& j) {
    if (!writer) return;
    metrics << j.dump() << "\n";
    metrics.flush();
    tb.metrics(j);
  };

  // The state after `done_epochs` epochs and `epoch_step` steps of the next one.
  // Every rank calls it (the bad items are gathered); rank 0 writes the file.
  auto save = [&](int64_t done_epochs, int64_t epoch_step) {
    const std::set<std::string> bad = all_bad_items(*data, *comm, bad_saved);
    const std::string path = (ckpt_dir / checkpoint_file_name(done_epochs, epoch_step)).string();
    if (!writer) return path;
    Checkpoint c;
    for (const auto& p : model->named_parameters(true)) c.model[p.key()] = p.value();
    for (const auto& b : model->named_buffers(true)) c.model[b.key()] = b.value();
    c.optimizer = sgd.state();
    json meta{{"epoch", done_epochs},          {"epoch_step", epoch_step},
              {"global_step", global_step},    {"recipe_hash", recipe_hash},
              {"train_time_s", train_time},    {"wall_time_s", prior_wall + seconds_since(wall_start)},
              {"train_clips", train_clips},    {"reference_loss", reference_loss},
              {"window_loss_sum", window_sum}, {"window_steps", window_n},
              {"bad_items", std::vector<std::string>(bad.begin(), bad.end())}};
    if (scaler.enabled()) {
      meta["grad_scale"] = scaler.scale();
      meta["grad_scale_good_steps"] = scaler.good_steps();
      meta["skipped_steps"] = scaler.skipped_steps();
    }
    c.meta_json = meta.dump();
    save_checkpoint(path, c);
    return path;
  };
  auto last_good = [&] {
    std::string last = latest_checkpoint(ckpt_dir);
    return last.empty() ? std::string("; no checkpoint was written yet") : "; the last good checkpoint is " + last;
  };
  const std::string advice = " (lower optim.lr, add warmup, or set optim.clip_grad_norm)";

  Progress progress(writer ? run.str("progress") : "none", run.i64("log_every"));
  const int64_t eval_every = run.i64("eval_every"), ckpt_every = run.i64("checkpoint_every");
  const int64_t eval_batch = run.i64("eval_batch") > 0 ? run.i64("eval_batch") : per_gpu;
  EvalResult last_eval;
  bool have_eval = false;
  int64_t end_epoch = epochs;
  if (opt.stop_after_epochs > 0) end_epoch = std::min(epochs, start_epoch + opt.stop_after_epochs);
  // A non-finite reported metric ends the run as diverged.
  auto check_eval = [&](const EvalResult& e, int64_t done_epochs) {
    if (finite_eval(e)) return;
    progress.end_bar();
    const bool loss_bad = !std::isfinite(e.loss);
    const double v = loss_bad ? e.loss : !std::isfinite(e.top1) ? e.top1 : e.top5;
    throw DivergedError(std::string(loss_bad ? "the validation loss" : "validation top-1/top-5") + " became " +
                        (std::isnan(v) ? "NaN" : "infinite") + " after epoch " + std::to_string(done_epochs) +
                        last_good() + advice);
  };
  auto run_eval = [&](int64_t done_epochs) {
    EvalResult e = evaluate(*model, *data, eval_batch, plan.data_facts.classes, loader_opts, device, precision);
    if (faults.hit("nan_val", done_epochs, rank)) e.loss = std::numeric_limits<double>::quiet_NaN();
    return e;
  };
  // The growth rule: a logged training-loss window mean above divergence_factor
  // times max(the first step's loss, ln(classes)) is divergence.
  const double chance_loss = std::log(static_cast<double>(std::max<int64_t>(2, plan.data_facts.classes)));

  // Stopping on a signal: every rank stops after the same step. Before the first
  // step nothing new exists to save.
  auto agree_stop = [&](bool mine) {
    if (ranks == 1) return mine;
    at::Tensor t = at::full({1}, mine ? 1.0 : 0.0, at::kDouble);
    comm->allreduce(t, ReduceOp::Max);
    return t.item<double>() > 0;
  };
  if (agree_stop(stop_requested())) {
    g_stop = 0;  // honoured: a later run in this process starts afresh
    const std::string last = latest_checkpoint(ckpt_dir);
    throw InterruptedError("interrupted before the first step of this invocation: nothing new to save" +
                               (last.empty() ? std::string() : "; the last checkpoint is " + last),
                           last);
  }

  // An epoch's loader starts when the previous epoch's last batch was taken, so
  // its first batches decode during that step, evaluation and checkpointing.
  // A resumed epoch skips the steps done before the interruption.
  auto epoch_loader = [&](int64_t epoch, int64_t skip_steps) {
    LoaderOptions train_lo = loader_opts;
    train_lo.seed = mix_seed(seed, static_cast<uint64_t>(epoch));
    auto batches = sampler.epoch_batches(epoch);
    const size_t skip = std::min(batches.size(), static_cast<size_t>(skip_steps * micro));
    batches.erase(batches.begin(), batches.begin() + static_cast<std::ptrdiff_t>(skip));
    return std::make_unique<Loader>(*data, std::move(batches), train_lo);
  };
  std::unique_ptr<Loader> upcoming;
  for (int64_t epoch = start_epoch; epoch < end_epoch; ++epoch) {
    const int64_t first_step = epoch == start_epoch ? start_step : 0;
    std::unique_ptr<Loader> loader = upcoming ? std::move(upcoming) : epoch_loader(epoch, first_step);
    // One batch ahead: on a GPU its host->device copy overlaps the step before it.
    DeviceFeeder feeder(device);
    double fetch_s = 0;
    auto fetch_next = [&] {
      const auto t = Clock::now();
      Batch nb;
      if (loader->next(nb)) feeder.put(std::move(nb));
      fetch_s = seconds_since(t);
    };
    fetch_next();
    double pending_data_s = fetch_s;
    const auto epoch_start = Clock::now();
    double epoch_data = 0, epoch_compute = 0, epoch_comm = 0;
    for (int64_t step = first_step; step < steps_per_epoch; ++step) {
      const auto step_start = Clock::now();
      double data_s = 0, compute_s = 0, comm_s = 0, loss_sum = 0;
      for (int64_t m = 0; m < micro; ++m) {
        // Dropout and other randomness: a function of (seed, step, GPU) only, so a
        // resumed run draws exactly what an uninterrupted one would, and GPU g of
        // an emulated world draws what rank g of a real one does.
        const uint64_t gpu = static_cast<uint64_t>(comm->rank() * micro + m);
        at::manual_seed(mix_seed(mix_seed(seed ^ 0x5eedULL, static_cast<uint64_t>(global_step)), gpu));
        if (feeder.empty()) throw std::logic_error("loader ran out of batches");
        Batch b = feeder.take();
        fetch_next();  // the next micro-batch is on its way while this one computes
        data_s += pending_data_s;
        pending_data_s = fetch_s;
        if (step + 1 == steps_per_epoch && m + 1 == micro && epoch + 1 < end_epoch) upcoming = epoch_loader(epoch + 1, 0);
        auto t1 = Clock::now();
        at::Tensor loss;
        {
          AutocastScope autocast(device.type(), precision);
          at::Tensor logits = model->forward(b.clips);
          loss = at::cross_entropy_loss(logits.to(at::kFloat), b.labels);
        }
        double lv = loss.item<double>();
        if (faults.hit("nan_loss", global_step + 1, rank)) lv = std::numeric_limits<double>::quiet_NaN();
        if (faults.hit("grow_loss", global_step + 1, rank)) lv *= 1e6;
        if (!std::isfinite(lv)) {
          progress.end_bar();
          throw DivergedError("loss became " + std::string(std::isnan(lv) ? "NaN" : "infinite") + " at epoch " +
                              std::to_string(epoch + 1) + ", step " + std::to_string(global_step + 1) + last_good() +
                              advice);
        }
        loss_sum += lv;
        if (reducer) reducer->prepare(m == micro - 1);  // only the last backward communicates
        // The global batch's mean loss: 1/micro for accumulation, 1/ranks for the
        // allreduce (summed by the reducer, which then needs no averaging pass).
        const double loss_scale = 1.0 / static_cast<double>(micro * ranks);
        scaler.scale_loss(loss_scale != 1.0 ? loss * loss_scale : loss).backward();
        compute_s += seconds_since(t1);
      }
      if (faults.hit("sigint", global_step + 1, rank)) ::raise(SIGINT);
      bool stop = stop_requested();
      int64_t buckets = 0, overlapped = 0;
      if (reducer) {
        auto t2 = Clock::now();
        reducer->finish();
        comm_s = seconds_since(t2);
        buckets = reducer->last_step().buckets;
        overlapped = reducer->last_step().launched_in_backward;
        // The logged loss is the mean over all GPUs; the stop flag rides along
        // (non-zero when any rank was asked to stop).
        at::Tensor l = at::empty({2}, at::kDouble);
        l.data_ptr<double>()[0] = loss_sum;
        l.data_ptr<double>()[1] = stop ? 1.0 : 0.0;
        comm->allreduce(l, ReduceOp::Avg);
        loss_sum = l.data_ptr<double>()[0];
        stop = l.data_ptr<double>()[1] > 0;
      }
      auto t3 = Clock::now();
      // fp16: gradients back to their true size; a step with an inf / NaN among
      // them is skipped and the loss scale backs off (every rank sees the same
      // reduced gradients, so every rank decides alike).
      const bool finite = scaler.unscale(all_params);
      if (finite && o.f64("clip_grad_norm") > 0) clip_grad_norm(all_params, o.f64("clip_grad_norm"));
      const double lr = sched.at(global_step);
      if (finite) sgd.step(lr);
      scaler.update(finite);
      sgd.zero_grad();
      compute_s += seconds_since(t3);
      ++global_step;
      const double step_s = seconds_since(step_start);
      train_time += step_s;
      train_clips += global_batch;
      epoch_data += data_s;
      epoch_compute += compute_s;
      epoch_comm += comm_s;
      const double loss_mean = loss_sum / static_cast<double>(micro);
      if (reference_loss < 0) reference_loss = loss_mean;
      window_sum += loss_mean;
      ++window_n;
      const double clips_per_s = static_cast<double>(global_batch) * static_cast<double>(step + 1 - first_step) /
                                 std::max(1e-9, seconds_since(epoch_start));
      const int64_t steps_left = (end_epoch - epoch) * steps_per_epoch - (step + 1);
      const double eta = static_cast<double>(steps_left) * seconds_since(epoch_start) /
                         static_cast<double>(step + 1 - first_step);
      progress.step(epoch + 1, epochs, step + 1, steps_per_epoch, window_sum / static_cast<double>(window_n), lr,
                    clips_per_s, eta);
      if ((step + 1) % run.i64("log_every") == 0 || step + 1 == steps_per_epoch) {
        const double window_mean = window_sum / static_cast<double>(window_n);
        json line{{"type", "step"}, {"epoch", epoch + 1}, {"step", step + 1}, {"global_step", global_step},
                  {"loss", window_mean}, {"lr", lr}, {"clips_per_s", clips_per_s},
                  {"step_s", step_s}, {"data_s", data_s}, {"compute_s", compute_s}, {"comm_s", comm_s},
                  {"ranks", ranks}, {"buckets", buckets}, {"buckets_in_backward", overlapped}};
        if (scaler.enabled()) {
          line["loss_scale"] = scaler.scale();
          line["skipped_steps"] = scaler.skipped_steps();
        }
        emit(line);
        const int64_t window_first = global_step - window_n + 1;
        window_sum = 0;
        window_n = 0;
        const double limit = divergence_factor * std::max(reference_loss, chance_loss);
        if (divergence_factor > 0 && window_mean > limit) {
          progress.end_bar();
          char buf[400];
          std::snprintf(buf, sizeof buf,
                        "training loss grew to %.4g (mean of steps %lld-%lld, epoch %lld), more than "
                        "run.divergence_factor = %g times max(the first step's loss %.4g, ln(classes) %.4g)",
                        window_mean, static_cast<long long>(window_first), static_cast<long long>(global_step),
                        static_cast<long long>(epoch + 1), divergence_factor, reference_loss, chance_loss);
          throw DivergedError(buf + last_good() + advice + "; run.divergence_factor = 0 turns this check off");
        }
      }
      if (stop) {
        progress.end_bar();
        const std::string path = save(epoch, step + 1);
        if (ranks > 1) comm->barrier();  // the checkpoint exists before any rank reports
        g_stop = 0;                      // honoured: a later run in this process starts afresh
        throw InterruptedError("interrupted: stopped after step " + std::to_string(step + 1) + "/" +
                                   std::to_string(steps_per_epoch) + " of epoch " + std::to_string(epoch + 1) + "/" +
                                   std::to_string(epochs) + " (global step " + std::to_string(global_step) +
                                   "); checkpoint written: " + path,
                               path);
      }
    }
    const int64_t done_epochs = epoch + 1;
    const bool last_epoch = done_epochs == epochs;
    if ((eval_every > 0 && done_epochs % eval_every == 0) || last_epoch) {
      last_eval = run_eval(done_epochs);
      have_eval = true;
      emit({{"type", "eval"}, {"epoch", done_epochs}, {"global_step", global_step}, {"top1", last_eval.top1},
            {"top5", last_eval.top5}, {"val_loss", last_eval.loss}});
      char buf[200];
      std::snprintf(buf, sizeof buf, "epoch %lld/%lld: val top-1 %.4f top-5 %.4f loss %.4f (data %.1fs compute %.1fs comm %.1fs)",
                    (long long)done_epochs, (long long)epochs, last_eval.top1, last_eval.top5, last_eval.loss, epoch_data,
                    epoch_compute, epoch_comm);
      progress.line(buf);
      check_eval(last_eval, done_epochs);
    } else {
      progress.end_bar();
    }
    const bool stop_here = done_epochs == end_epoch;
    if ((ckpt_every > 0 && done_epochs % ckpt_every == 0) || last_epoch || stop_here) save(done_epochs, 0);
  }

  TrainResult r;
  r.run_dir = out.string();
  r.rank = comm->rank();
  r.finished = end_epoch == epochs;
  if (r.finished && !have_eval) {
    last_eval = run_eval(epochs);
    check_eval(last_eval, epochs);
  }
  r.top1 = last_eval.top1;
  r.top5 = last_eval.top5;
  r.val_loss = last_eval.loss;
  r.epochs = end_epoch;
  r.steps = global_step;
  r.clips_per_s = train_time > 0 ? static_cast<double>(train_clips) / train_time : 0;
  r.wall_s = prior_wall + seconds_since(wall_start);
  r.params = params_count;
  r.flops_per_clip = macs;
  if (r.finished) {
    const std::set<std::string> bad = all_bad_items(*data, *comm, bad_saved);
    if (writer) {
      json summary{{"name", name}, {"status", "done"}, {"top1", r.top1}, {"top5", r.top5}, {"val_loss", r.val_loss},
                   {"epochs", r.epochs}, {"steps", r.steps}, {"clips_per_s", r.clips_per_s}, {"wall_s", r.wall_s},
                   {"train_s", train_time}, {"params", r.params}, {"flops_per_clip", r.flops_per_clip},
                   {"frames", plan.data_facts.clip.empty() ? 0 : plan.data_facts.clip[0]},
                   {"global_batch", global_batch}, {"threads", threads}, {"recipe_hash", recipe_hash},
                   {"device", device.str()}, {"precision", precision_name(precision)},
                   {"memory_format", memory_format_name(memory_format)}, {"skipped_steps", scaler.skipped_steps()},
                   {"skipped_samples", static_cast<int64_t>(bad.size())}};
      write_file_atomic((out / "summary.json").string(), summary.dump(2) + "\n");
    }
  }
  return r;
}
}  // namespace

}  // namespace vexp
