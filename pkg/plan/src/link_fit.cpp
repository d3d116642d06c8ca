#include "vexp/plan/link_fit.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace vexp::plan {

LinkFit fit_ring(const std::vector<std::pair<double, double>>& bytes_s, int n) {
  if (n < 2) throw std::invalid_argument("a link is fitted over two or more ranks");
  for (auto [x, y] : bytes_s)
    if (!(x > 0) || !(y > 0) || !std::isfinite(x) || !std::isfinite(y))
      throw std::invalid_argument("allreduce sizes and times must be positive numbers");
  // Weights 1 / t^2: every size counts alike, whatever its time, and one slow
  // large size does not set the latency.
  double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (auto [x, y] : bytes_s) {
    const double w = 1.0 / (y * y);
    sw += w;
    sx += w * x;
    sy += w * y;
    sxx += w * x * x;
    sxy += w * x * y;
  }
  bool two_sizes = false;
  for (const auto& p : bytes_s) two_sizes = two_sizes || p.first != bytes_s.front().first;
  const double den = sw * sxx - sx * sx;
  if (!two_sizes || !(den > 0)) throw std::invalid_argument("give two or more different sizes");
  const double hops = 2.0 * (n - 1);
  double smallest = bytes_s.front().second;
  std::pair<double, double> largest = bytes_s.front();
  for (const auto& p : bytes_s) {
    smallest = std::min(smallest, p.second);
    if (p.first > largest.first) largest = p;
  }
  const double b = (sw * sxy - sx * sy) / den, a = (sy - b * sx) / sw;
  LinkFit f;
  if (b > 0 && std::isfinite(b)) {
    // A negative intercept is noise around a latency too small to resolve: the
    // smallest size's time bounds it from above; half of it is kept.
    f.latency_us = (a > 0 ? a : 0.5 * smallest) / hops * 1e6;
    f.bandwidth_GBps = hops / n / b / 1e9;
    f.how = "least squares on the relative error";
    return f;
  }
  // Times that do not grow with size are what other work on the machine makes of
  // a fast link. A cluster file is still written: the largest size's time, all
  // of it counted as transfer, bounds the bandwidth from below.
  f.fitted = false;
  f.latency_us = 0.5 * smallest / hops * 1e6;
  f.bandwidth_GBps = hops / n * largest.first / largest.second / 1e9;
  f.how = "times did not grow with size (a busy machine?): bandwidth from the largest size alone, latency half the "
          "smallest size's time; measure again on an idle machine";
  return f;
}

}  // namespace vexp::plan
