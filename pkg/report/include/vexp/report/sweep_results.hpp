// What a sweep directory reports: the results table (text, JSON, CSV), the best
// trial's recipe and gnuplot plots. Read from DIR/sweep.db (vexp::sweep's store)
// and the trial folders (errors: vexp::base::Error).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "vexp/sweep/store.hpp"

namespace vexp::report {

using sweep::Row;

// One number printf-formatted ("%.4g"), for tables, labels and plot scripts.
std::string fmt_number(const char* f, double v);

// DIR/sweep.db opened for reading, with the sweep's metric and direction.
struct Opened {
  std::vector<Row> rows;
  std::string metric, direction, name;
  std::string sweep_file, base;  // as the store names them (labels: where the sweep came from)
  // [sweep] target, as the store records it (meta `target`); empty without one. Each
  // row's to_target holds its figures when its `target` column is this target's text.
  std::optional<sweep::Target> target;
  // Whether row `r`'s figures are against this target (computed: reached or not).
  bool measured(const Row& r) const { return target && r.target == target->text(); }
};
Opened open_results(const std::string& dir);

// The results table of DIR: "table" (aligned text), "json" or "csv"; sorted by
// `sort` (a metric, "id", "lr" or "global_batch"; empty: the sweep's metric).
std::string results_text(const std::string& dir, const std::string& format, const std::string& sort);
// base::Error (invalid) when `out` may not be the best recipe's file: a file the sweep is made
// of (its store, a trial's files, the sweep file, its base recipe and what that
// extends, refuse_output's rule) or another file of the sweep folder than a previous
// best recipe.
void refuse_best_recipe_output(const std::string& dir, const std::string& out);
// The recipe of the sweep's leading cell (report::sweep_grid: the best mean over the
// trials of a global batch x lr cell), written to `out` (refuse_best_recipe_output
// first): the resolved recipe of the cell's best trial without the seed (when seeds
// vary in the cell) and the slot's run.threads, headed by the verdict -- "best cell"
// only when it stands out of the seeds' spread and chance, as in the report.
struct BestRecipe {
  int64_t trial = 0;        // the cell's best trial, whose resolved recipe it is
  bool stands_out = false;  // a best cell (else the leading one, said so)
  std::string verdict;      // cell_verdict: one line for the terminal
  std::vector<std::string> dropped;  // keys left to the recipe's defaults ("run.threads", "run.seed")
};
BestRecipe write_best_recipe(const std::string& dir, const std::string& out);
// "the best cell's recipe (trial 007's; run.threads run.seed left to the recipe's
// defaults) written to OUT" (or "the leading cell's"): the CLI's line.
std::string best_recipe_line(const BestRecipe& b, const std::string& out);
// Writes REPORT_DIR/*.png with gnuplot; returns the files written.
std::vector<std::string> write_report(const std::string& dir, const std::string& report_dir);

}  // namespace vexp::report
