// What a run tells: the progress display, the summary, and the test-only fault
// injection that makes the reports of a diverged or interrupted run testable.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "trainer_parts.hpp"
#include "vexp/base/error.hpp"
#include "vexp/runtime/noise_scale.hpp"
#include "vexp/base/files.hpp"
#include "vexp/log.hpp"

namespace vexp::trainer {

namespace {

std::string format_duration(double s) {
  int total = static_cast<int>(s + 0.5);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%d:%02d", total / 60, total % 60);
  return buf;
}

}  // namespace

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

Progress::Progress(const std::string& mode, int64_t log_every) : log_every_(log_every) {
  bool tty = ::isatty(STDERR_FILENO) != 0;
  bar_ = mode == "bar" || (mode == "auto" && tty);
  quiet_ = mode == "none";
}

void Progress::step(int64_t epoch, int64_t epochs, int64_t step, int64_t steps, double loss, double lr,
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

void Progress::line(const std::string& text) {
  if (quiet_) return;
  end_bar();
  log_info(text);
}

void Progress::end_bar() {
  if (dirty_) {
    std::fprintf(stderr, "\n");
    dirty_ = false;
  }
}

// A comma-separated list of KIND@KEY=N[@rank=R]:
//   nan_loss@step=N   the training loss of global step N is NaN
//   grow_loss@step=N  from global step N on, the training loss is observed 1e6 times larger
//   nan_val@epoch=N   the validation loss of the evaluation after epoch N is NaN
//   sigint@step=N     SIGINT is raised during global step N (the run stops after it)
//   slow_step@ms=N    each step takes N ms longer
//   slow_start@ms=N   the start takes N ms longer (just before the training loop)
//   slow_launch@ms=N  `vexp run` sleeps N ms first, before it catches any signal
//                     (tools/vexp/main.cpp: a rank still loading from a slow filesystem)
Faults Faults::from_env() {
  Faults f;
  const char* env = std::getenv("VEXP_TEST_FAULT");
  if (!env || !*env) return f;
  std::stringstream ss(env);
  for (std::string item; std::getline(ss, item, ',');) {
    if (item.empty()) continue;
    static const std::map<std::string, std::string> keys{
        {"nan_loss", "step"}, {"grow_loss", "step"}, {"nan_val", "epoch"}, {"sigint", "step"}, {"slow_step", "ms"},
        {"slow_start", "ms"}, {"slow_launch", "ms"}};
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
      throw base::failure("VEXP_TEST_FAULT: cannot read '" + item +
                               "' (test-only; expected nan_loss@step=N, grow_loss@step=N, nan_val@epoch=N or "
                               "sigint@step=N, each optionally followed by @rank=R, or slow_step@ms=N, "
                               "slow_start@ms=N or slow_launch@ms=N)");
    x.at = n;
    x.rank = static_cast<int>(r);
    f.list.push_back(x);
  }
  if (!f.list.empty()) log_warn("VEXP_TEST_FAULT is set: faults are injected into this run (tests only)");
  return f;
}

bool Faults::hit(const std::string& kind, int64_t at, int rank) const {
  for (const auto& x : list)
    if (x.kind == kind && (x.rank < 0 || x.rank == rank) && (kind == "grow_loss" ? at >= x.at : at == x.at)) return true;
  return false;
}

TrainResult finish(Run& r, LoopResult loop) {
  const dsl::RecipePlan& plan = r.plan;
  const DistPlan& dp = r.dp;
  const TrainState& st = r.state;
  TrainResult res;
  res.run_dir = r.out.string();
  res.rank = r.rank;
  res.finished = loop.end_epoch == dp.epochs;
  if (res.finished && !loop.last_eval) {
    loop.last_eval = evaluate_after(r, dp.epochs);
    if (r.hooks) r.hooks->after_eval(r, dp.epochs, *loop.last_eval);
    check_eval(r, *loop.last_eval, dp.epochs);
  }
  // The hooks at the end of a finished run: their metrics join the last evaluation's in summary.json.
  std::map<std::string, double> hook_metrics = loop.last_eval ? loop.last_eval->extra : std::map<std::string, double>{};
  if (res.finished && r.hooks) {
    std::set<std::string> taken;
    for (const auto& [k, v] : hook_metrics) taken.insert(k);
    for (const auto& [k, v] : r.hooks->at_end(r, taken)) hook_metrics[k] = v;
  }
  const EvalResult last_eval = loop.last_eval.value_or(EvalResult{});
  res.top1 = last_eval.top1;
  res.top5 = last_eval.top5;
  res.val_loss = last_eval.loss;
  res.epochs = loop.end_epoch;
  res.steps = st.global_step;
  res.clips_per_s = st.train_time > 0 ? static_cast<double>(st.train_clips) / st.train_time : 0;
  res.wall_s = st.prior_wall + seconds_since(r.wall_start);
  res.params = r.params_count;
  res.flops_per_clip = r.macs;
  if (!res.finished) return res;
  const std::set<std::string> bad = all_bad_items(*r.data, *r.comm, st.bad_saved);
  if (!r.writer) return res;
  const Execution& x = r.exec;
  nlohmann::json summary{
      {"name", run_name_of(plan, r.opt)}, {"status", "done"}, {"top1", res.top1}, {"top5", res.top5},
      {"val_loss", res.val_loss}, {"epochs", res.epochs}, {"steps", res.steps}, {"clips_per_s", res.clips_per_s},
      {"wall_s", res.wall_s}, {"train_s", st.train_time}, {"params", res.params},
      {"flops_per_clip", res.flops_per_clip}, {"frames", plan.data_facts.clip.empty() ? 0 : plan.data_facts.clip[0]},
      {"global_batch", dp.global_batch}, {"threads", x.threads}, {"recipe_hash", r.recipe_hash},
      {"device", x.device.str()}, {"precision", precision_name(x.precision)},
      {"memory_format", memory_format_name(x.memory_format)}, {"skipped_steps", r.rig->scaler().skipped_steps()},
      {"skipped_samples", static_cast<int64_t>(bad.size())}};
  if (r.metrics_lines_lost > 0) {
    summary["metrics_lines_lost"] = r.metrics_lines_lost;
    log_warn(std::to_string(r.metrics_lines_lost) + " line(s) of '" + rundir::RunDir(r.out).metrics().string() +
             "' could not be written: its curves lack them (summary.json: metrics_lines_lost)");
  }
  // The reports place chance (1/classes for top-1) from it.
  if (plan.data_facts.classes > 0) summary["classes"] = plan.data_facts.classes;
  // The gradient noise scale's last smoothed figures (run.noise_scale_every; docs/batch-size.md).
  if (st.noise_n > 0) {
    NoiseScale ns(plan.run.noise_scale_ema);
    ns.restore(st.noise_g2, st.noise_trace, st.noise_n);
    summary["noise_scale"] = ns.scale();
    summary["noise_g2"] = ns.g2();
    summary["noise_trace"] = ns.trace();
    summary["noise_measurements"] = st.noise_n;
  }
  // The hooks' metrics (ema_top1, ...) and weights files (tag -> checkpoints/epoch_NNNN.TAG.pt).
  for (const auto& [k, v] : hook_metrics) summary[k] = v;
  if (r.hooks && !r.hooks->weights_files().empty()) summary["hook_weights"] = r.hooks->weights_files();
  rundir::write_summary(r.out, summary);
  return res;
}

}  // namespace vexp::trainer
