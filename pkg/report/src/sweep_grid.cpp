#include "vexp/report/sweep_grid.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>

namespace vexp::report {

namespace {

std::string num(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

double metric_number(const sweep::Row& r, const char* key, double otherwise) {
  return r.metrics.is_object() && r.metrics.contains(key) && r.metrics[key].is_number() ? r.metrics[key].get<double>()
                                                                                        : otherwise;
}

// The classes the finished trials record (summary.json "classes"); -1 when none
// does or they disagree.
int64_t classes_of(const std::vector<sweep::Row>& rows) {
  int64_t k = -1;
  for (const auto& r : rows) {
    if (r.status != "done") continue;
    const double c = metric_number(r, "classes", -1);
    if (c <= 0) continue;
    if (k > 0 && k != static_cast<int64_t>(c)) return -1;
    k = static_cast<int64_t>(c);
  }
  return k;
}

}  // namespace

std::optional<double> chance_level(const std::string& metric, int64_t classes) {
  if (classes <= 0) return std::nullopt;
  const double n = static_cast<double>(classes);
  if (metric == "val_loss") return std::log(n);
  if (metric.size() > 3 && metric.compare(0, 3, "top") == 0 &&
      metric.find_first_not_of("0123456789", 3) == std::string::npos) {
    const double k = std::atof(metric.c_str() + 3);
    if (k >= 1) return std::min(k, n) / n;
  }
  return std::nullopt;
}

std::string stands_out(double leader, std::optional<double> runner_up, std::optional<double> chance,
                       std::optional<double> noise, bool higher) {
  if (!noise)
    return "one finished trial per cell: the seeds' spread is unmeasured (add run.seed as an axis), so no cell is "
           "named best";
  const double margin = *noise;
  auto ahead = [&](double a, double b) { return higher ? a - b : b - a; };
  if (chance && ahead(leader, *chance) <= margin)
    return "the best mean " + num("%.4g", leader) + " is within the seeds' spread (" + num("%.3g", margin) +
           ") of chance (" + num("%.4g", *chance) + "): no trial learned more than guessing";
  if (runner_up && ahead(leader, *runner_up) <= margin)
    return "the best mean " + num("%.4g", leader) + " is within the seeds' spread (" + num("%.3g", margin) +
           ") of the runner-up " + num("%.4g", *runner_up) + ": no cell stands out";
  return "";
}

std::string Cell::statuses() const {
  std::map<std::string, int> c;
  for (const auto* r : trials) ++c[r->status];
  std::string s;
  for (const auto& [k, v] : c) s += (s.empty() ? "" : ", ") + std::to_string(v) + " " + k;
  return s;
}

Grid sweep_grid(const report::Opened& o) {
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
  // The seeds' spread: the sample variances of the cells with several finished
  // trials, pooled (weighted by their degrees of freedom).
  double ss = 0, dof = 0;
  for (const auto& c : g.cells)
    if (c.n > 1) {
      ss += c.sd * c.sd * static_cast<double>(c.n - 1);
      dof += static_cast<double>(c.n - 1);
    }
  if (dof > 0) g.noise = std::sqrt(ss / dof);
  g.classes = classes_of(o.rows);
  g.chance = chance_level(o.metric, g.classes);
  auto better = [&](const Cell& a, const Cell& b) { return higher ? a.mean > b.mean : a.mean < b.mean; };
  // The leading cell of those `in` selects, the runner-up's mean, and whether the
  // leader stands out of them.
  auto lead = [&](auto in, std::string* why) -> std::pair<std::optional<size_t>, bool> {
    std::optional<size_t> first, second;
    for (size_t i = 0; i < g.cells.size(); ++i) {
      const Cell& c = g.cells[i];
      if (!c.has_value() || !in(c)) continue;
      if (!first || better(c, g.cells[*first])) {
        second = first;
        first = i;
      } else if (!second || better(c, g.cells[*second])) {
        second = i;
      }
    }
    if (!first) return {std::nullopt, false};
    const std::optional<double> runner = second ? std::optional<double>(g.cells[*second].mean) : std::nullopt;
    const std::string w = stands_out(g.cells[*first].mean, runner, g.chance, g.noise, higher);
    if (why) *why = w;
    return {first, w.empty()};
  };
  std::string why;
  const auto [leader, clear] = lead([](const Cell&) { return true; }, &why);
  g.leader = leader;
  if (clear) g.best = leader;
  if (!leader)
    g.verdict = "no finished trial";
  else if (clear)
    g.verdict = "the best cell stands out: its mean beats every other cell" +
                std::string(g.chance ? " and chance (" + num("%.4g", *g.chance) + ")" : std::string()) +
                " by more than the seeds' spread (" + num("%.3g", *g.noise) + ")";
  else
    g.verdict = why;
  g.best_per_batch.assign(g.batches.size(), std::nullopt);
  for (size_t bi = 0; bi < g.batches.size(); ++bi) {
    const auto [b, ok] = lead([bi](const Cell& c) { return c.bi == bi; }, nullptr);
    if (ok) g.best_per_batch[bi] = b;
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

std::string throughput_note(const std::vector<sweep::Row>& rows, const std::vector<int>& shared) {
  const std::set<int> groups(shared.begin(), shared.end());
  std::string note;
  if (groups.size() > 1)
    note = "Trials that ran at the same time split the machine's cores (run.threads each): compare clips/s only "
           "between bars of the same colour.";
  else if (!groups.empty() && *groups.begin() > 0)
    note = "Every trial shared the machine with up to " + std::to_string(*groups.begin()) + " other trial(s).";
  else
    note = "The trials ran one at a time.";
  // What each finished trial got of the machine: its CPU seconds per wall second
  // (cores busy on average) and the 1-minute load average at its start and end.
  double lo = INFINITY, hi = 0, load_lo = INFINITY, load_hi = 0, cores = 0;
  size_t done = 0, measured = 0;
  for (const auto& r : rows) {
    if (r.status != "done") continue;
    ++done;
    const double cpu = metric_number(r, "cpu_s", -1);
    if (cpu < 0 || r.attempt_s <= 0) continue;
    ++measured;
    const double busy = cpu / r.attempt_s;  // both of the last attempt
    lo = std::min(lo, busy), hi = std::max(hi, busy);
    for (const char* k : {"load1_start", "load1_end"}) {
      const double l = metric_number(r, k, -1);
      if (l >= 0) load_lo = std::min(load_lo, l), load_hi = std::max(load_hi, l);
    }
    cores = std::max(cores, metric_number(r, "cores", 0));
  }
  if (done < 2) return note;
  if (measured < done)
    return note + " The trials did not record the CPU time they got (sweeps run before vexp recorded it): other "
                  "work on the machine may have slowed some of them, so compare clips/s with care.";
  const std::string load = load_hi > 0 ? " (1-minute load average " + num("%.1f", load_lo) + " to " +
                                             num("%.1f", load_hi) +
                                             (cores > 0 ? " on " + num("%.0f", cores) + " cores" : std::string()) + ")"
                                       : std::string();
  const std::string got = "the trials kept " + num("%.2g", lo) + " to " + num("%.2g", hi) + " cores busy on average" + load;
  // More runnable work than cores: every trial waited for the CPU, by however much
  // the rest of the machine asked for; alike shares do not make that a comparison.
  if (cores > 0 && load_hi > cores)
    return note + " Measured: " + got + ": more work than cores was running, so their clips/s do not compare "
                  "directly.";
  // 25%: more than thread scheduling jitter between equal trials, less than the
  // share a second equal job takes from them.
  if (hi <= lo * 1.25)
    return note + " Measured: " + got + (groups.size() > 1 ? "." : ", alike: their clips/s compare directly.");
  return note + " Measured: " + got + ": they did not get the machine alike (other work may have taken cores "
                "from some), so their clips/s do not compare directly.";
}

}  // namespace vexp::report
