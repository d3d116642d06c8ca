// The gradient noise scale's estimator (noise_scale.hpp). Torch-free.
#include "vexp/runtime/noise_scale.hpp"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace vexp {

NoiseEstimate noise_estimate(double small_sq, double big_sq, double b_small, double b_big) {
  if (!(b_small > 0) || !(b_big > b_small))
    throw std::invalid_argument("noise_estimate: needs 0 < small batch < big batch, got " + std::to_string(b_small) +
                                " and " + std::to_string(b_big));
  NoiseEstimate e;
  e.g2 = (b_big * big_sq - b_small * small_sq) / (b_big - b_small);
  e.trace = (small_sq - big_sq) / (1.0 / b_small - 1.0 / b_big);
  return e;
}

bool NoiseScale::add(const NoiseEstimate& e) {
  if (!std::isfinite(e.g2) || !std::isfinite(e.trace)) return false;
  g2_ = ema_ * g2_ + (1 - ema_) * e.g2;
  trace_ = ema_ * trace_ + (1 - ema_) * e.trace;
  ++n_;
  return true;
}

double NoiseScale::correction() const { return 1 - std::pow(ema_, static_cast<double>(n_)); }

double NoiseScale::g2() const { return n_ > 0 ? g2_ / correction() : 0; }
double NoiseScale::trace() const { return n_ > 0 ? trace_ / correction() : 0; }

double NoiseScale::scale() const {
  if (n_ == 0 || !(g2_ > 0)) return std::numeric_limits<double>::quiet_NaN();
  return trace_ / g2_;
}

}  // namespace vexp
