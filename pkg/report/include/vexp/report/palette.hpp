// The colours of a report's series, the same in the HTML charts and the gnuplot
// PNGs: ten well-separated colours first, then hues spaced by the golden angle at
// three lightnesses, every second block of ten dashed, so that 100 trials get 100
// distinguishable lines.
#pragma once

#include <cstddef>
#include <string>

namespace vexp::report {

std::string series_colour(size_t i);  // "#rrggbb"
bool series_dashed(size_t i);

}  // namespace vexp::report
