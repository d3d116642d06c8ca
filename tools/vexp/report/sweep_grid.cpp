#include "report/sweep_grid.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

namespace vexp::report {

std::string Cell::statuses() const {
  std::map<std::string, int> c;
  for (const auto* r : trials) ++c[r->status];
  std::string s;
  for (const auto& [k, v] : c) s += (s.empty() ? "" : ", ") + std::to_string(v) + " " + k;
  return s;
}

Grid sweep_grid(const sweep::Opened& o) {
  const bool higher = o.direction == "max";
  Grid g;
  std::set<int64_t> bs;
  std::set<double> ls;
  for (const auto& r : o.rows) {
    bs.insert(r.global_batch);
    ls.insert(r.lr);
  }
  g.batches.assign(bs.begin(), bs.end());
  g.lrs.assign(ls.begin(), ls.end());
  std::map<std::pair<size_t, size_t>, Cell> cells;
  for (const auto& r : o.rows) {
    const size_t bi = static_cast<size_t>(std::find(g.batches.begin(), g.batches.end(), r.global_batch) - g.batches.begin());
    const size_t li = static_cast<size_t>(std::find(g.lrs.begin(), g.lrs.end(), r.lr) - g.lrs.begin());
    Cell& c = cells[{bi, li}];
    c.bi = bi;
    c.li = li;
    c.trials.push_back(&r);
  }
  // Parameters that take more than one value inside some cell.
  std::set<std::string> varying;
  for (auto& [k, c] : cells) {
    std::vector<double> v;
    for (const auto* r : c.trials)
      if (r->status == "done" && r->metric) v.push_back(*r->metric);
    c.n = v.size();
    if (!v.empty()) {
      double s = 0;
      for (double x : v) s += x;
      c.mean = s / static_cast<double>(v.size());
      double q = 0;
      for (double x : v) q += (x - c.mean) * (x - c.mean);
      c.sd = v.size() > 1 ? std::sqrt(q / static_cast<double>(v.size() - 1)) : 0;
      c.min = *std::min_element(v.begin(), v.end());
      c.max = *std::max_element(v.begin(), v.end());
    }
    for (size_t i = 1; i < c.trials.size(); ++i)
      for (const auto& [key, val] : c.trials[i]->params.items())
        if (!c.trials[0]->params.contains(key) || c.trials[0]->params[key] != val) varying.insert(key);
    g.cells.push_back(c);
  }
  g.within_cell.assign(varying.begin(), varying.end());
  g.best_per_batch.assign(g.batches.size(), std::nullopt);
  auto better = [&](const Cell& a, const Cell& b) { return higher ? a.mean > b.mean : a.mean < b.mean; };
  for (size_t i = 0; i < g.cells.size(); ++i) {
    const Cell& c = g.cells[i];
    if (!c.has_value()) continue;
    if (!g.best || better(c, g.cells[*g.best])) g.best = i;
    auto& b = g.best_per_batch[c.bi];
    if (!b || better(c, g.cells[*b])) b = i;
  }
  return g;
}

std::vector<int> sharing(const std::vector<sweep::Row>& rows) {
  std::vector<int> out(rows.size(), 0);
  for (size_t i = 0; i < rows.size(); ++i) {
    const double s = rows[i].started_at, f = rows[i].finished_at;
    if (s <= 0 || f <= s) continue;
    // +1 where another trial starts inside this one's interval, -1 where it ends.
    std::vector<std::pair<double, int>> ev;
    for (size_t j = 0; j < rows.size(); ++j) {
      if (j == i || rows[j].started_at <= 0 || rows[j].finished_at <= rows[j].started_at) continue;
      const double a = std::max(s, rows[j].started_at), b = std::min(f, rows[j].finished_at);
      if (a >= b) continue;
      ev.emplace_back(a, 1);
      ev.emplace_back(b, -1);
    }
    std::sort(ev.begin(), ev.end());  // an end (-1) before a start (+1) at the same time
    int now = 0;
    for (const auto& e : ev) out[i] = std::max(out[i], now += e.second);
  }
  return out;
}

bool wants_log_axis(double lo, double hi) { return lo > 0 && hi > 0 && hi / lo > 30; }

}  // namespace vexp::report
