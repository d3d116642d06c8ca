// The gradient noise scale (McCandlish, Kaplan, Amodei et al., "An Empirical Model
// of Large-Batch Training", 2018, appendix A; docs/batch-size.md): from the squared
// norms of gradients over a small batch (one GPU's step) and a big batch (the global
// batch, the mean of the GPUs'), unbiased estimates of the true gradient's squared
// norm |G|^2 and of the per-clip gradient covariance's trace tr(Sigma):
//   |G|^2     = (B_big |G_big|^2 - B_small |G_small|^2) / (B_big - B_small)
//   tr(Sigma) = (|G_small|^2 - |G_big|^2) / (1 / B_small - 1 / B_big)
// since E|G_B|^2 = |G|^2 + tr(Sigma) / B for a batch of B clips. |G_small|^2 is the
// mean over the GPUs. The noise scale B_noise = tr(Sigma) / |G|^2 is the batch at
// which the gradient's noise equals its signal: the critical batch the paper
// predicts. Each step's two estimates are noisy (|G|^2 may come out negative) and
// their ratio is biased, so B_noise is the ratio of their moving averages.
// Torch-free: `vexp run` (TrainStep, trainer) and the planners share it.
#pragma once

#include <cstdint>

namespace vexp {

// One measurement: the unbiased estimates of a step.
struct NoiseEstimate {
  double g2 = 0;     // |G|^2
  double trace = 0;  // tr(Sigma), per clip
};

// The estimates from a step's squared norms. `small_sq`: the mean over the GPUs of
// their gradients' squared norms, each over `b_small` clips; `big_sq`: the squared
// norm of the global (averaged) gradient over `b_big` clips. Throws
// std::invalid_argument unless 0 < b_small < b_big.
NoiseEstimate noise_estimate(double small_sq, double big_sq, double b_small, double b_big);

// The ratio of exponential moving averages of the estimates (decay `ema` per
// measurement; 0: the last measurement alone). The averages are bias-corrected
// (divided by 1 - ema^n, as Adam's moments), which leaves their ratio unchanged.
class NoiseScale {
 public:
  explicit NoiseScale(double ema = 0.95) : ema_(ema) {}
  // One measurement (non-finite estimates are ignored; returns whether it was taken).
  bool add(const NoiseEstimate& e);
  int64_t count() const { return n_; }
  double g2() const;     // the smoothed |G|^2 (0 before any measurement)
  double trace() const;  // the smoothed tr(Sigma)
  // B_noise = trace() / g2(); NaN before any measurement or while the smoothed
  // |G|^2 is not positive (the gradient is not yet told apart from its noise).
  double scale() const;

  // The state a checkpoint keeps (the raw averages and the count), and back.
  double raw_g2() const { return g2_; }
  double raw_trace() const { return trace_; }
  void restore(double raw_g2, double raw_trace, int64_t count) {
    g2_ = raw_g2;
    trace_ = raw_trace;
    n_ = count;
  }
  double ema() const { return ema_; }

 private:
  double correction() const;
  double ema_;
  double g2_ = 0, trace_ = 0;
  int64_t n_ = 0;
};

}  // namespace vexp
