// What the sweep pictures are made of, shared by the HTML report and the gnuplot
// PNGs: the batch x lr cells with the mean and spread of the metric over the trials
// of a cell (seeds, or any other axis), the best cell, the best lr per batch, and
// how many trials shared the machine with each trial.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sweep/report.hpp"

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
  std::optional<size_t> best;              // index into cells (best mean)
  std::vector<std::string> within_cell;    // parameter keys that vary inside a cell ("run.seed")
  // Per batch (index into batches): the cell with the best mean, if any.
  std::vector<std::optional<size_t>> best_per_batch;
};

Grid sweep_grid(const sweep::Opened& o);

// For each row: the most other trials that ran at the same time as it (from the
// store's start and end times; 0: it had the machine to itself).
std::vector<int> sharing(const std::vector<sweep::Row>& rows);

// Whether values from `lo` to `hi` (> 0) are drawn on a log axis: when they span
// more than a factor 30 (the loss curves of a run that learned).
bool wants_log_axis(double lo, double hi);

}  // namespace vexp::report
