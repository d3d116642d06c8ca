// What the sweep pictures are made of, shared by the HTML report and the gnuplot
// PNGs: the batch x lr cells with the mean and spread of the metric over the trials
// of a cell (seeds, or any other axis), where chance lies, the best cell and the best
// lr per batch when they stand out of the noise (stands_out), how many trials shared
// the machine with each trial, and what their throughputs can be compared with.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "vexp/report/sweep_results.hpp"

namespace vexp::report {

struct Cell {
  size_t bi = 0, li = 0;                  // index into Grid::batches / Grid::lrs
  std::vector<const sweep::Row*> trials;  // every trial of the cell
  size_t n = 0;                           // finished trials with a metric
  double mean = 0, sd = 0, min = 0, max = 0;
  bool has_value() const { return n > 0; }
  std::string statuses() const;  // "2 done, 1 diverged"
};

struct Grid {
  std::vector<int64_t> batches;
  std::vector<double> lrs;
  std::vector<Cell> cells;
  std::optional<size_t> leader;            // index into cells: the best mean, however close the others
  std::optional<size_t> best;              // the leader, only when it stands out (stands_out)
  std::vector<std::string> within_cell;    // parameter keys that vary inside a cell ("run.seed")
  // Per batch (index into batches): the cell with the best mean of that batch, when
  // it stands out of that batch's other cells and of chance.
  std::vector<std::optional<size_t>> best_per_batch;
  // The pooled sample standard deviation of the cells with several finished trials
  // (the seeds' spread); nullopt when no cell has two.
  std::optional<double> noise;
  // The metric's value at chance (chance_level), when the trials record their classes.
  std::optional<double> chance;
  int64_t classes = -1;
  // One sentence: why a best cell is named or not.
  std::string verdict;
};

Grid sweep_grid(const report::Opened& o);

// The sweep's verdict in one line, as the CLI, the results table and --best-recipe
// say it: "best cell: global batch B, lr L: METRIC M ± SD (mean ± sd of N trials);
// WHY" when the leading cell stands out, else "no best cell: WHY; the leading cell:
// ..." ("no best cell: no finished trial" without one).
std::string cell_verdict(const report::Opened& o, const Grid& g);

// The metric of a model that guesses: top-1 1/classes, top-k min(k, classes)/classes,
// val_loss ln(classes) (the cross-entropy of a uniform guess); nullopt for other
// metrics or unknown classes (<= 0).
std::optional<double> chance_level(const std::string& metric, int64_t classes);

// Whether a leading mean is a finding rather than noise. With `noise` the pooled
// spread of seeds: the leader must beat the runner-up (when there is one) by more
// than `noise`, and beat chance (when known) by more than `noise`. Without a measured
// spread (nullopt) nothing stands out. Returns "" when it stands out, else why not.
std::string stands_out(double leader, std::optional<double> runner_up, std::optional<double> chance,
                       std::optional<double> noise, bool higher_is_better);

// What the clips/s of the trials can be compared with, from the measured overlap of
// the trials (sharing) and what each trial recorded of the machine (cpu_s, threads,
// load1_start / load1_end in its stored metrics). One or two sentences; it says
// "compare directly" only when the data shows it.
std::string throughput_note(const std::vector<sweep::Row>& rows, const std::vector<int>& shared);

// For each row: the most other trials that ran at the same time as it (from the
// store's start and end times; 0: it had the machine to itself).
std::vector<int> sharing(const std::vector<sweep::Row>& rows);

// Whether values from `lo` to `hi` (> 0) are drawn on a log axis: when they span
// more than a factor 30 (the loss curves of a run that learned).
bool wants_log_axis(double lo, double hi);

}  // namespace vexp::report
