// The noise scale's estimator (noise_scale.hpp) on squared norms read from stdin, for
// tests/runtime/noise_truth.py: each line "small_sq big_sq b_small b_big" prints
// "g2 trace smoothed_g2 smoothed_trace smoothed_scale" (NoiseScale with decay argv[1]).
#include <cstdio>
#include <cstdlib>
#include <exception>

#include "vexp/runtime/noise_scale.hpp"

int main(int argc, char** argv) {
  vexp::NoiseScale ns(argc > 1 ? std::atof(argv[1]) : 0.95);
  double small = 0, big = 0, bs = 0, bb = 0;
  try {
    while (std::scanf("%lf %lf %lf %lf", &small, &big, &bs, &bb) == 4) {
      const vexp::NoiseEstimate e = vexp::noise_estimate(small, big, bs, bb);
      ns.add(e);
      std::printf("%.17g %.17g %.17g %.17g %.17g\n", e.g2, e.trace, ns.g2(), ns.trace(), ns.scale());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
