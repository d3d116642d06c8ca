// `vexp report DIR...`: one self-contained HTML file (charts drawn by the embedded
// assets/chart.js from data embedded as JSON; no network, no server) for a run
// directory, a sweep directory or several run directories (a comparison).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace vexp::report {

struct Written {
  std::string path;
  std::string kind;  // run | comparison | sweep
  uintmax_t bytes = 0;
};

// The file written when --out is not given: DIR/report.html for one directory,
// ./comparison.html for several.
std::string default_html_path(const std::vector<std::string>& dirs);

// Writes the report of `dirs` to `out` (atomically: a temporary file renamed);
// throws base::Error (failure) with one line naming the directory that cannot be reported.
Written write_html_report(const std::vector<std::string>& dirs, const std::string& out);

// The embedded assets (generated from assets/*.js, *.css at build time).
extern const char* const kChartJs;
extern const char* const kReportCss;

}  // namespace vexp::report
