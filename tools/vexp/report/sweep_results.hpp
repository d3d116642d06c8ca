// What a sweep directory reports: the results table (text, JSON, CSV), the best
// trial's recipe and gnuplot plots. Read from DIR/sweep.db (vexp::sweep's store)
// and the trial folders; the CLI side of the sweep, so errors are cli::Exit.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "vexp/sweep/store.hpp"

namespace vexp::sweep {


// One number printf-formatted ("%.4g"), for tables, labels and plot scripts.
std::string fmt_number(const char* f, double v);

// DIR/sweep.db opened for reading, with the sweep's metric and direction.
struct Opened {
  std::vector<Row> rows;
  std::string metric, direction, name;
};
Opened open_results(const std::string& dir);

// The results table of DIR: "table" (aligned text), "json" or "csv"; sorted by
// `sort` (a metric, "id", "lr" or "global_batch"; empty: the sweep's metric).
std::string results_text(const std::string& dir, const std::string& format, const std::string& sort);
// Copies the best finished trial's resolved recipe to `out`; returns the trial id.
int64_t write_best_recipe(const std::string& dir, const std::string& out);
// Writes REPORT_DIR/*.png with gnuplot; returns the files written.
std::vector<std::string> write_report(const std::string& dir, const std::string& report_dir);

}  // namespace vexp::sweep
