// The epochs of a run: each step's micro-batches (forward, backward, gradient
// reduction, optimizer), the logged metrics and the divergence checks, the
// evaluation and the checkpoint after an epoch, and stopping on a signal.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <chrono>
#include <limits>
#include <map>
#include <string>
#include <thread>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "trainer_parts.hpp"
#include "vexp/base/files.hpp"
#include "vexp/log.hpp"
#include "vexp/runtime/noise_scale.hpp"
#include "vexp/runtime/tensorboard.hpp"
#include "vexp/runtime/train_step.hpp"

namespace vexp::trainer {

using json = nlohmann::json;

namespace {

// metrics.jsonl and the TensorBoard scalars next to it (rank 0 only). A line that
// cannot be written (a full disk, a quota) is said once, with the file and the
// reason; the run goes on, the file is cut back to its last whole line (so a later
// line never continues a torn one) and the lines lost are counted for summary.json.
class MetricsLog {
 public:
  MetricsLog(const fs::path& out, bool writer, int64_t& lost)
      : writer_(writer), path_(rundir::RunDir(out).metrics().string()), lost_(lost) {
    if (!writer_) return;
    open_file();
    if (!tb_.open(out.string())) log_warn("cannot write TensorBoard events in '" + out.string() + "'");
  }
  ~MetricsLog() {
    if (fd_ >= 0) ::close(fd_);
  }
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

  void emit(const json& j) {
    if (!writer_) return;
    write_line(j.dump() + "\n");
    if (tb_.is_open() && !tb_failed_) {
      tb_.metrics(j);
      if (tb_.failed()) {
        tb_failed_ = true;
        log_warn("cannot write TensorBoard events to '" + tb_.path() + "': " + std::strerror(errno) +
                 "; no more TensorBoard events are written by this invocation (metrics.jsonl goes on)");
      }
    }
  }

 private:
  bool open_file() {
    // No link followed and one name only: a received run folder's metrics.jsonl may be
    // a link to another file (vexp::base::open_append_fd).
    fd_ = base::open_append_fd(path_.c_str());
    if (fd_ < 0) return false;
    struct stat st {};
    good_size_ = ::fstat(fd_, &st) == 0 ? st.st_size : 0;
    return true;
  }

  void write_line(const std::string& text) {
    int err = 0;
    if (fd_ < 0 && !open_file()) err = errno;
    size_t done = 0;
    while (err == 0 && done < text.size()) {
      const ssize_t w = ::write(fd_, text.data() + done, text.size() - done);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) err = w < 0 ? errno : ENOSPC;
      else done += static_cast<size_t>(w);
    }
    if (err == 0) {
      good_size_ += static_cast<off_t>(text.size());
      return;
    }
    if (fd_ >= 0 && done > 0) (void)!::ftruncate(fd_, good_size_);
    if (++lost_ == 1)
      log_warn("cannot write '" + path_ + "': " + base::append_problem(err) +
               "; the run goes on, and the metrics lines lost are counted in summary.json (metrics_lines_lost)");
  }

  bool writer_;
  std::string path_;
  int64_t& lost_;
  int fd_ = -1;
  off_t good_size_ = 0;
  EventWriter tb_;
  bool tb_failed_ = false;
};

// "ema_top1 0.9988 ema_top5 1.0000 ema_loss 0.0123": the hooks' metrics of a record.
std::string hook_metrics_text(const std::map<std::string, double>& m) {
  std::string out;
  for (const auto& [k, v] : m) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.4f", v);
    out += (out.empty() ? "" : " ") + k + " " + buf;
  }
  return out;
}

class EpochLoop {
 public:
  explicit EpochLoop(Run& r)
      : r_(r),
        dp_(r.dp),
        st_(r.state),
        seed_(static_cast<uint64_t>(r.plan.run.seed)),
        step_(r.rig->step()),
        metrics_(r.out, r.writer, r.metrics_lines_lost),
        // The growth rule: a logged training-loss window mean above divergence_factor
        // times max(the first step's loss, ln(classes)) is divergence.
        chance_loss_(std::log(static_cast<double>(std::max<int64_t>(2, r.plan.data_facts.classes)))) {
    end_epoch_ = dp_.epochs;
    if (r.opt.stop_after_epochs > 0) end_epoch_ = std::min(dp_.epochs, st_.start_epoch + r.opt.stop_after_epochs);
  }

  LoopResult run() {
    // Stopping on a signal: every rank stops after the same step. Before the first
    // step nothing new exists to save.
    steps_begin();
    if (agree_stop(*r_.comm, stop_requested())) {
      clear_stop_request();
      const std::string last = latest_checkpoint(r_.ckpt_dir);
      throw InterruptedError("interrupted before the first step of this invocation: nothing new to save" +
                                 (last.empty() ? std::string() : "; the last checkpoint is " + last),
                             last);
    }
    for (int64_t epoch = st_.start_epoch; epoch < end_epoch_; ++epoch) run_epoch(epoch);
    return {end_epoch_, last_eval_};
  }

 private:
  // The loader of an epoch's steps from `first` on (a resumed epoch starts where
  // the interruption was). It starts when the previous epoch's last batch was
  // taken, so its first batches decode during that step, evaluation and
  // checkpointing. A clip's augmentation seed is (run seed, the epoch whose
  // shuffle it came from): a pure function of its stream position, so resumed
  // and emulated runs draw alike, and a clip of the next epoch's shuffle taken
  // by a boundary step is not augmented as it was in this epoch.
  std::unique_ptr<Loader> epoch_loader(int64_t epoch, int64_t first) {
    return stream_loader(*r_.data, dp_, r_.rank, r_.ranks, seed_, first, dp_.stream.first_step(epoch + 1),
                         r_.loader_opts);
  }

  // One batch ahead: on a GPU its host->device copy overlaps the step before it.
  void fetch_next() {
    const auto t = Clock::now();
    Batch nb;
    if (loader_->next(nb)) feeder_->put(std::move(nb));
    fetch_s_ = seconds_since(t);
  }

  // Epoch `epoch` (from 0): its steps are [stream.first_step(epoch), first_step(epoch + 1)).
  void run_epoch(int64_t epoch) {
    epoch_first_ = dp_.stream.first_step(epoch);
    epoch_end_ = dp_.stream.first_step(epoch + 1);
    first_step_ = epoch_first_ + (epoch == st_.start_epoch ? st_.start_step : 0);
    if (st_.global_step != first_step_)
      throw std::logic_error("epoch " + std::to_string(epoch + 1) + " starts at step " + std::to_string(first_step_) +
                             ", but " + std::to_string(st_.global_step) + " steps are done");
    loader_ = upcoming_ ? std::move(upcoming_) : epoch_loader(epoch, first_step_);
    feeder_ = std::make_unique<DeviceFeeder>(r_.exec.device);
    fetch_next();
    pending_data_s_ = fetch_s_;
    epoch_start_ = Clock::now();
    epoch_data_ = epoch_compute_ = epoch_comm_ = 0;
    for (int64_t step = first_step_; step < epoch_end_; ++step) run_step(epoch, step);
    end_epoch_work(epoch);
    feeder_.reset();
    loader_.reset();
  }

  // The micro-batches of global step `step` (from 0), forward and backward
  // (train_step.hpp); returns the sum of their losses.
  double forward_backward(int64_t epoch, int64_t step, double& data_s, double& compute_s) {
    const int64_t micro = dp_.micro;
    auto next = [&](int64_t m) {
      if (feeder_->empty()) throw std::logic_error("loader ran out of batches");
      Batch b = feeder_->take();
      fetch_next();  // the next micro-batch is on its way while this one computes
      data_s += pending_data_s_;
      pending_data_s_ = fetch_s_;
      if (step + 1 == epoch_end_ && m + 1 == micro && epoch + 1 < end_epoch_) upcoming_ = epoch_loader(epoch + 1, epoch_end_);
      return b;
    };
    auto check = [&](int64_t, double lv) {
      if (r_.faults.hit("nan_loss", st_.global_step + 1, r_.rank)) lv = std::numeric_limits<double>::quiet_NaN();
      if (r_.faults.hit("grow_loss", st_.global_step + 1, r_.rank)) lv *= 1e6;
      if (!std::isfinite(lv)) {
        r_.progress->end_bar();
        throw DivergedError("loss became " + std::string(std::isnan(lv) ? "NaN" : "infinite") + " at epoch " +
                            std::to_string(epoch + 1) + ", step " + std::to_string(st_.global_step + 1) +
                            last_good_checkpoint(r_.ckpt_dir) + kDivergenceAdvice);
      }
      return lv;
    };
    const double loss_sum = step_.forward_backward(st_.global_step, next, check);
    compute_s += step_.times().forward + step_.times().backward;
    return loss_sum;
  }

  // Global step `step` (from 0) of epoch `epoch`.
  void run_step(int64_t epoch, int64_t step) {
    const auto step_start = Clock::now();
    double data_s = 0, compute_s = 0, comm_s = 0;
    double loss_sum = forward_backward(epoch, step, data_s, compute_s);
    if (const int64_t ms = r_.faults.step_sleep_ms(); ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    if (r_.faults.hit("sigint", st_.global_step + 1, r_.rank)) ::raise(SIGINT);
    bool stop = stop_requested();
    int64_t buckets = 0, overlapped = 0;
    // The gradients' exchange (the reducer's, or the exact sum's, also on one rank);
    // the logged loss becomes the mean over all GPUs; the stop flag rides along.
    step_.reduce(loss_sum, stop);
    const Reducer* reducer = r_.rig->reducer();
    if (reducer || dp_.exact) comm_s = step_.times().comm;
    if (reducer) {
      buckets = reducer->last_step().buckets;
      overlapped = reducer->last_step().launched_in_backward;
    }
    // The gradient noise scale (docs/batch-size.md), from this step's norms before the
    // update clips and zeroes the gradients.
    json noise_keys;
    if (step_.noise().measured) noise_keys = measure_noise(step_.noise());
    const double lr = dp_.schedule.at(st_.global_step);
    step_.update(lr);
    compute_s += step_.times().optimizer;
    ++st_.global_step;
    // Steps of this epoch done, of how many (epochs differ by one step when N/G is not whole).
    const int64_t done = step + 1 - epoch_first_, steps = epoch_end_ - epoch_first_;
    const bool logged = done % r_.plan.run.log_every == 0 || done == steps || !noise_keys.is_null();
    // The hooks after the step (an EMA of the weights ...): their time is the step's,
    // their metrics join its record.
    std::map<std::string, double> added;
    double hooks_s = 0;
    if (r_.hooks) {
      const auto t = Clock::now();
      added = r_.hooks->after_step(r_, epoch + 1, done, step_.mean_loss(), lr, logged);
      hooks_s = seconds_since(t);
    }
    const double step_s = seconds_since(step_start);
    st_.train_time += step_s;
    st_.train_clips += dp_.global_batch;
    epoch_data_ += data_s;
    epoch_compute_ += compute_s;
    epoch_comm_ += comm_s;
    const double loss_mean = step_.mean_loss();
    if (st_.reference_loss < 0) st_.reference_loss = loss_mean;
    st_.window_sum += loss_mean;
    ++st_.window_n;
    const double clips_per_s = static_cast<double>(dp_.global_batch) * static_cast<double>(step + 1 - first_step_) /
                               std::max(1e-9, seconds_since(epoch_start_));
    const int64_t steps_left = dp_.stream.first_step(end_epoch_) - (step + 1);
    const double eta = static_cast<double>(steps_left) * seconds_since(epoch_start_) /
                       static_cast<double>(step + 1 - first_step_);
    r_.progress->step(epoch + 1, dp_.epochs, done, steps, st_.window_sum / static_cast<double>(st_.window_n), lr,
                      clips_per_s, eta);
    if (logged) {
      json line{{"type", "step"}, {"epoch", epoch + 1}, {"step", done}, {"global_step", st_.global_step},
                {"epochs_trained", dp_.stream.epochs_before(st_.global_step)},
                {"loss", st_.window_sum / static_cast<double>(st_.window_n)}, {"lr", lr}, {"clips_per_s", clips_per_s},
                {"step_s", step_s}, {"data_s", data_s}, {"compute_s", compute_s}, {"comm_s", comm_s},
                {"ranks", r_.ranks}, {"buckets", buckets}, {"buckets_in_backward", overlapped}};
      if (const GradScaler& scaler = r_.rig->scaler(); scaler.enabled()) {
        line["loss_scale"] = scaler.scale();
        line["skipped_steps"] = scaler.skipped_steps();
      }
      if (r_.hooks) line["hooks_s"] = hooks_s;
      if (noise_keys.is_object())
        for (auto it = noise_keys.begin(); it != noise_keys.end(); ++it) line[it.key()] = it.value();
      for (const auto& [k, v] : added) line[k] = v;
      metrics_.emit(line);
      close_window(epoch);
    }
    if (stop) stop_after(epoch, step);
  }

  // A measured step's estimates into the moving averages (kept in the train state,
  // checkpointed); its record's noise_* keys (docs/recipes.md, metrics.jsonl). A step
  // whose fp16 gradients overflowed (skipped by the scaler) adds nothing.
  json measure_noise(const NoiseSample& s) {
    const double b_small = static_cast<double>(dp_.per_gpu * dp_.accum);
    const double b_big = static_cast<double>(dp_.global_batch);
    json k{{"noise_small_batch", dp_.per_gpu * dp_.accum}, {"noise_big_batch", dp_.global_batch}};
    if (!s.finite) {
      k["noise_skipped"] = true;
      return k;
    }
    const NoiseEstimate e = noise_estimate(s.gpu_sq, s.global_sq, b_small, b_big);
    NoiseScale ns(r_.plan.run.noise_scale_ema);
    ns.restore(st_.noise_g2, st_.noise_trace, st_.noise_n);
    ns.add(e);
    st_.noise_g2 = ns.raw_g2();
    st_.noise_trace = ns.raw_trace();
    st_.noise_n = ns.count();
    k["noise_small_sq"] = s.gpu_sq;
    k["noise_big_sq"] = s.global_sq;
    k["noise_g2_step"] = e.g2;
    k["noise_trace_step"] = e.trace;
    k["noise_g2"] = ns.g2();
    k["noise_trace"] = ns.trace();
    k["noise_scale"] = ns.scale();  // NaN (null) while the smoothed |G|^2 is not positive
    return k;
  }

  // Ends the logged window of step losses; a mean grown past the limit is divergence.
  void close_window(int64_t epoch) {
    const double window_mean = st_.window_sum / static_cast<double>(st_.window_n);
    const int64_t window_first = st_.global_step - st_.window_n + 1;
    st_.window_sum = 0;
    st_.window_n = 0;
    const double factor = r_.plan.run.divergence_factor;
    const double limit = factor * std::max(st_.reference_loss, chance_loss_);
    if (factor <= 0 || window_mean <= limit) return;
    r_.progress->end_bar();
    char buf[400];
    std::snprintf(buf, sizeof buf,
                  "training loss grew to %.4g (mean of steps %lld-%lld, epoch %lld), more than "
                  "run.divergence_factor = %g times max(the first step's loss %.4g, ln(classes) %.4g)",
                  window_mean, static_cast<long long>(window_first), static_cast<long long>(st_.global_step),
                  static_cast<long long>(epoch + 1), factor, st_.reference_loss, chance_loss_);
    throw DivergedError(buf + last_good_checkpoint(r_.ckpt_dir) + kDivergenceAdvice +
                        "; run.divergence_factor = 0 turns this check off");
  }

  // A stop was asked for: checkpoint after this step, then InterruptedError.
  [[noreturn]] void stop_after(int64_t epoch, int64_t step) {
    r_.progress->end_bar();
    const int64_t done = step + 1 - epoch_first_;
    const std::string path = save_state(r_, epoch, done);
    if (r_.ranks > 1) r_.comm->barrier();  // the checkpoint exists before any rank reports
    clear_stop_request();                  // honoured: a later run in this process starts afresh
    throw InterruptedError("interrupted: stopped after step " + std::to_string(done) + "/" +
                               std::to_string(epoch_end_ - epoch_first_) + " of epoch " + std::to_string(epoch + 1) + "/" +
                               std::to_string(dp_.epochs) + " (global step " + std::to_string(st_.global_step) +
                               "); checkpoint written: " + path,
                           path);
  }

  // After an epoch: evaluation (every eval_every epochs and after the last) and
  // a checkpoint (every checkpoint_every epochs, after the last, and where
  // --stop-after stops).
  void end_epoch_work(int64_t epoch) {
    const dsl::RunConfig& run = r_.plan.run;
    const int64_t done_epochs = epoch + 1;
    const bool last_epoch = done_epochs == dp_.epochs;
    if ((run.eval_every > 0 && done_epochs % run.eval_every == 0) || last_epoch) {
      EvalResult e = evaluate_after(r_, done_epochs);
      // The hooks after the evaluation (the EMA's weights evaluated ...): their metrics join its record.
      if (r_.hooks) r_.hooks->after_eval(r_, done_epochs, e);
      last_eval_ = e;
      json record{{"type", "eval"}, {"epoch", done_epochs}, {"global_step", st_.global_step}, {"top1", e.top1},
                  {"top5", e.top5}, {"val_loss", e.loss}};
      for (const auto& [k, v] : e.extra) record[k] = v;
      // Where the run stands at this evaluation, for the steps, clips and time to a
      // target (a sweep's [sweep] target): the training clips seen (global steps x
      // global batch), the seconds spent in training steps and the run's wall clock,
      // both over every invocation as summary.json counts them (an invocation's time
      // after its last checkpoint, which a resume trains again, is not counted).
      record["clips_trained"] = st_.global_step * dp_.global_batch;
      record["train_s"] = st_.train_time;
      record["wall_s"] = st_.prior_wall + seconds_since(r_.wall_start);
      metrics_.emit(record);
      char buf[200];
      std::snprintf(buf, sizeof buf, "epoch %lld/%lld: val top-1 %.4f top-5 %.4f loss %.4f (data %.1fs compute %.1fs comm %.1fs)",
                    (long long)done_epochs, (long long)dp_.epochs, e.top1, e.top5, e.loss, epoch_data_,
                    epoch_compute_, epoch_comm_);
      r_.progress->line(buf);
      if (!e.extra.empty()) r_.progress->line("epoch " + std::to_string(done_epochs) + "/" +
                                              std::to_string(dp_.epochs) + ": " + hook_metrics_text(e.extra));
      check_eval(r_, e, done_epochs);
    } else {
      r_.progress->end_bar();
    }
    const bool stop_here = done_epochs == end_epoch_;
    if ((run.checkpoint_every > 0 && done_epochs % run.checkpoint_every == 0) || last_epoch || stop_here)
      save_state(r_, done_epochs, 0);
  }

  Run& r_;
  const DistPlan& dp_;
  TrainState& st_;
  const uint64_t seed_;
  TrainStep& step_;  // the one training step (train_step.hpp), the rig's
  MetricsLog metrics_;
  const double chance_loss_;
  int64_t end_epoch_ = 0;
  std::optional<EvalResult> last_eval_;
  // The epoch under way: its global steps [epoch_first_, epoch_end_), the first
  // one this invocation trains.
  int64_t epoch_first_ = 0, epoch_end_ = 0, first_step_ = 0;
  std::unique_ptr<Loader> loader_, upcoming_;
  std::unique_ptr<DeviceFeeder> feeder_;
  double fetch_s_ = 0, pending_data_s_ = 0;
  Clock::time_point epoch_start_;
  double epoch_data_ = 0, epoch_compute_ = 0, epoch_comm_ = 0;
};

}  // namespace

LoopResult train_epochs(Run& r) { return EpochLoop(r).run(); }

}  // namespace vexp::trainer
