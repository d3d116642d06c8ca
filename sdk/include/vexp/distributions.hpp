// Draws from the usual distributions over vexp::Rng (vexp/rng.hpp): a pure
// function of the generator's key, the same on every platform, thread and rank
// count, for plugins that must not touch torch's global generator (batch and clip
// transforms: exact resume and exact emulation). Header-only, torch-free.
//   normal(rng)            N(0, 1), Box-Muller (two uniforms per draw)
//   gamma(rng, k)          Gamma(k, 1), Marsaglia & Tsang (2000); k < 1 by the
//                          boost Gamma(k) = Gamma(k + 1) x U^(1/k)
//   beta(rng, a, b)        Beta(a, b) = X / (X + Y), X ~ Gamma(a), Y ~ Gamma(b),
//                          computed from log X and log Y so that small shapes
//                          (mixup's alpha = 0.1) never divide 0 by 0
//   permutation(rng, n)    a uniform permutation of 0..n-1 (Fisher-Yates)
#pragma once

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <utility>
#include <vector>

#include "vexp/rng.hpp"

namespace vexp {

// Uniform in (0, 1]: safe under log().
inline double uniform_open0(Rng& rng) { return 1.0 - rng.uniform(); }

inline double normal(Rng& rng) {
  const double u1 = uniform_open0(rng), u2 = rng.uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586476925 * u2);
}

// log of a Gamma(k, 1) draw (k > 0). For k >= 1 the log of Marsaglia and Tsang's
// d*v; for k < 1 that of Gamma(k + 1) plus log(U) / k, which stays finite where
// the draw itself underflows to 0.
inline double log_gamma_draw(Rng& rng, double k) {
  if (!(k > 0) || !std::isfinite(k)) throw std::invalid_argument("gamma: the shape must be positive and finite");
  double boost = 0;
  if (k < 1) {
    boost = std::log(uniform_open0(rng)) / k;
    k += 1;
  }
  const double d = k - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
  for (;;) {
    double x, v;
    do {
      x = normal(rng);
      v = 1.0 + c * x;
    } while (v <= 0);
    v = v * v * v;
    const double u = uniform_open0(rng);
    // The squeeze, then the full test (Marsaglia & Tsang, "A simple method for
    // generating gamma variables", ACM TOMS 26(3), 2000).
    if (u < 1.0 - 0.0331 * (x * x) * (x * x) || std::log(u) < 0.5 * x * x + d * (1.0 - v + std::log(v)))
      return std::log(d) + std::log(v) + boost;
  }
}

inline double gamma(Rng& rng, double k) { return std::exp(log_gamma_draw(rng, k)); }

// In [0, 1]; a draw of X first, then Y.
inline double beta(Rng& rng, double a, double b) {
  const double lx = log_gamma_draw(rng, a);
  const double ly = log_gamma_draw(rng, b);
  // X / (X + Y) = 1 / (1 + exp(log Y - log X))
  return 1.0 / (1.0 + std::exp(ly - lx));
}

inline std::vector<int64_t> permutation(Rng& rng, int64_t n) {
  std::vector<int64_t> p(static_cast<size_t>(n > 0 ? n : 0));
  for (int64_t i = 0; i < n; ++i) p[static_cast<size_t>(i)] = i;
  for (int64_t i = n - 1; i > 0; --i) std::swap(p[static_cast<size_t>(i)], p[static_cast<size_t>(rng.below(i + 1))]);
  return p;
}

}  // namespace vexp
