#include "vexp/report/palette.hpp"

#include <cmath>
#include <cstdio>

namespace vexp::report {

std::string series_colour(size_t i) {
  static const char* const first[10] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                        "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"};
  if (i < 10) return first[i];
  const double h = std::fmod(static_cast<double>(i) * 137.508, 360.0) / 60.0;
  const double l = (i / 10) % 3 == 0 ? 0.40 : (i / 10) % 3 == 1 ? 0.55 : 0.30, s = 0.70;
  const double c = (1 - std::fabs(2 * l - 1)) * s, x = c * (1 - std::fabs(std::fmod(h, 2.0) - 1)), m = l - c / 2;
  double r = 0, g = 0, b = 0;
  switch (static_cast<int>(h)) {
    case 0: r = c, g = x; break;
    case 1: r = x, g = c; break;
    case 2: g = c, b = x; break;
    case 3: g = x, b = c; break;
    case 4: r = x, b = c; break;
    default: r = c, b = x; break;
  }
  auto byte = [&](double v) { return static_cast<int>(std::lround((v + m) * 255)); };
  char buf[8];
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", byte(r), byte(g), byte(b));
  return buf;
}

bool series_dashed(size_t i) { return (i / 10) % 2 == 1; }

}  // namespace vexp::report
