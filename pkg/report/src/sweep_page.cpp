// The sweep page of `vexp report SWEEP_DIR`: the heatmaps, the best learning rate per
// batch size, the trials' curves and table (the sweep's store and trial folders).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <type_traits>

#include "page.hpp"
#include "vexp/report/batch_size.hpp"
#include "vexp/report/gnuplot.hpp"
#include "vexp/report/palette.hpp"
#include "vexp/report/sweep_grid.hpp"
#include "vexp/report/sweep_results.hpp"
#include "vexp/slurm/job.hpp"
#include "vexp/sweep/expansion.hpp"

namespace vexp::report::html {
namespace fs = std::filesystem;
namespace {
// ---- sweep --------------------------------------------------------------------

std::string lr_text(double lr) { return fmt("%.4g", lr); }

// x from lo to hi in `n` steps equally spaced on a log axis (the fitted curves).
std::vector<double> log_space(double lo, double hi, int n) {
  std::vector<double> xs;
  for (int i = 0; i < n; ++i) xs.push_back(lo * std::pow(hi / lo, static_cast<double>(i) / (n - 1)));
  return xs;
}

// A JSON number, or null when absent.
template <class T>
json opt_json(const std::optional<T>& v, int digits = 6) {
  if (!v) return nullptr;
  if constexpr (std::is_integral_v<T>) return *v;
  else return rounded(*v, digits);
}

// The batch-size section (a sweep with a target and 2 or more global batches): steps
// and clips to the target against the global batch, the fit of S_min and E_min
// through the best trial of each batch, the trials' B_noise beside it, and the table.
void batch_size_section(Page& p, const report::Opened& o, const BatchSizeStudy& st) {
  p.h2("Steps and clips to the target " + st.target.text());
  size_t ended = 0, reached = 0;
  for (const auto& t : st.trials)
    if (o.measured(*t.row)) ++ended, reached += t.row->to_target.reached() ? 1 : 0;
  p.body += "<p>Target <b>" + esc(st.target.text()) + "</b>: reached by " + std::to_string(reached) + " of " +
            std::to_string(ended) + " ended trials (steps and clips to the first evaluation that reached it). Per "
            "global batch, the trial with the fewest steps (over the other axes: the tuned learning rate) is fitted "
            "with S = S_min + E_min / B and E = E_min + S_min B (McCandlish et al. 2018; B_crit = E_min / S_min).</p>\n"
            "<p class=\"fit\">" + esc(st.fit_text) + ".</p>\n<p class=\"noise\">" + esc(st.noise_text) + ".</p>\n";
  const CriticalBatchFit* fit = st.fit.fit ? &*st.fit.fit : nullptr;
  // The points and the curves.
  json all_b = json::array(), all_s = json::array(), all_e = json::array();
  json best_b = json::array(), best_s = json::array(), best_e = json::array();
  double lo = INFINITY, hi = 0, slo = INFINITY, shi = 0, elo = INFINITY, ehi = 0;
  auto extent = [](double v, double& a, double& b) {
    if (std::isfinite(v) && v > 0) a = std::min(a, v), b = std::max(b, v);
  };
  for (const auto& t : st.trials) {
    const sweep::Row& r = *t.row;
    extent(static_cast<double>(r.global_batch), lo, hi);
    if (!o.measured(r) || !r.to_target.steps || !r.to_target.clips) continue;
    all_b.push_back(r.global_batch);
    all_s.push_back(*r.to_target.steps);
    all_e.push_back(*r.to_target.clips);
    extent(static_cast<double>(*r.to_target.steps), slo, shi);
    extent(static_cast<double>(*r.to_target.clips), elo, ehi);
  }
  json points = json::array();
  for (size_t bi = 0; bi < st.batches.size(); ++bi) {
    if (!st.best[bi]) continue;
    const sweep::Row& r = *st.trials[*st.best[bi]].row;
    best_b.push_back(r.global_batch);
    best_s.push_back(*r.to_target.steps);
    best_e.push_back(r.to_target.clips ? json(*r.to_target.clips) : json(nullptr));
    points.push_back({{"batch", r.global_batch}, {"steps", *r.to_target.steps}, {"trial", r.id}});
  }
  for (const auto& t : st.trials)
    if (t.noise_end) extent(*t.noise_end, lo, hi);  // B_noise drawn on the batch axis
  const bool any = slo <= shi;
  json fit_json = nullptr;
  if (fit)
    fit_json = {{"s_min", rounded(fit->s_min, 8)},     {"e_min", rounded(fit->e_min, 8)},
                {"b_crit", rounded(fit->b_crit, 8)},   {"rel_rms", rounded(fit->rel_rms, 6)},
                {"batches", fit->batches},             {"s_min_at_zero", fit->s_min_at_zero},
                {"e_min_at_zero", fit->e_min_at_zero}};
  auto chart = [&](bool steps) {
    const std::string what = steps ? "steps" : "clips";
    json c{{"type", "line"},
           {"title", what + " to " + st.target.text() + " against the global batch"},
           {"xlabel", "global batch (log)"},
           {"ylabel", (steps ? "optimizer steps" : "training clips") + std::string(" to the target (log)")},
           {"xlog", true},
           {"ylog", true},
           {"xticks", st.batches},
           {"series", json::array()},
           {"fit_points", points},
           {"fit", fit_json}};
    c["series"].push_back({{"name", "trials that reached it"}, {"color", "#9a9a9a"}, {"points", true},
                           {"noline", true}, {"x", all_b}, {"y", steps ? all_s : all_e}});
    c["series"].push_back({{"name", "fewest steps per batch"}, {"color", "#1f77b4"}, {"points", true}, {"noline", true},
                           {"x", best_b}, {"y", steps ? best_s : best_e}});
    const double ylo = steps ? slo : elo, yhi = steps ? shi : ehi;
    if (fit && lo < hi) {
      json fx = json::array(), fy = json::array();
      for (double b : log_space(lo / 1.5, hi * 1.5, 60)) {
        fx.push_back(rounded(b));
        fy.push_back(rounded(steps ? fit->steps_at(b) : fit->clips_at(b)));
      }
      c["series"].push_back({{"name", steps ? "fit: S = " + fmt("%.4g", fit->s_min) + " + " + fmt("%.4g", fit->e_min) + " / B"
                                            : "fit: E = " + fmt("%.4g", fit->e_min) + " + " + fmt("%.4g", fit->s_min) + " B"},
                             {"color", "#d62728"},
                             {"x", fx},
                             {"y", fy}});
      if (std::isfinite(fit->b_crit) && fit->b_crit > 0 && any)
        c["series"].push_back({{"name", "B_crit = " + fmt("%.4g", fit->b_crit)},
                               {"color", "#d62728"},
                               {"dash", true},
                               {"x", {rounded(fit->b_crit), rounded(fit->b_crit)}},
                               {"y", {rounded(ylo / 1.3), rounded(yhi * 1.3)}}});
    }
    // Each trial's B_noise, a vertical segment at its value on the batch axis (the clips plot).
    if (!steps && any) {
      json nx = json::array(), ny = json::array();
      for (const auto& t : st.trials) {
        const std::optional<double> v = t.noise_at_target ? t.noise_at_target : t.noise_end;
        if (!v || !(*v > 0)) continue;
        for (double y : {ylo / 1.3, yhi * 1.3}) {
          nx.push_back(rounded(*v));
          ny.push_back(rounded(y));
        }
        nx.push_back(rounded(*v));
        ny.push_back(nullptr);  // a gap: one segment per trial
      }
      if (!nx.empty())
        c["series"].push_back({{"name", "B_noise of a trial (at the target, else at its end)"},
                               {"color", "#2ca02c"},
                               {"x", nx},
                               {"y", ny}});
    }
    c["note"] = steps ? st.fit_text : st.noise_text;
    return c;
  };
  if (any) {
    p.open_grid();
    p.chart("target_steps", chart(true));
    p.chart("target_clips", chart(false));
    p.close_grid();
  } else {
    p.body += "<p>No trial reached the target " + esc(st.target.text()) + ": nothing to plot.</p>\n";
  }
  // Every trial, by global batch then steps to the target.
  std::vector<size_t> order(st.trials.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const sweep::Row &ra = *st.trials[a].row, &rb = *st.trials[b].row;
    if (ra.global_batch != rb.global_batch) return ra.global_batch < rb.global_batch;
    const auto sa = o.measured(ra) ? ra.to_target.steps : std::nullopt;
    const auto sb = o.measured(rb) ? rb.to_target.steps : std::nullopt;
    if (sa && sb) return *sa < *sb;
    return sa.has_value() && !sb.has_value();
  });
  std::set<size_t> best;
  for (const auto& b : st.best)
    if (b) best.insert(*b);
  p.body += "<div class=\"scroll\"><table class=\"target\">\n<tr><th>global batch</th><th>trial</th><th>lr</th>"
            "<th>status</th><th>steps to target</th><th>clips to target</th><th>wall s to target</th>"
            "<th>train s to target</th><th>epoch</th><th>B_noise at target</th><th>B_noise at end</th>"
            "<th>fitted</th></tr>\n";
  for (size_t i : order) {
    const TargetTrial& t = st.trials[i];
    const sweep::Row& r = *t.row;
    const bool measured = o.measured(r);
    const sweep::ToTarget& tt = r.to_target;
    std::string cells;
    if (!measured) {
      cells = "<td class=\"num\" colspan=\"5\">- (not ended)</td>";
    } else if (!tt.reached()) {
      cells = "<td class=\"num\" colspan=\"5\">not reached</td>";
    } else {
      cells = num_cell(opt_json(tt.steps), "%.0f") + num_cell(opt_json(tt.clips), "%.0f") +
              num_cell(opt_json(tt.wall_s), "%.1f") + num_cell(opt_json(tt.train_s), "%.1f") +
              num_cell(opt_json(tt.epoch), "%.0f");
    }
    p.body += "<tr><td class=\"num\">" + std::to_string(r.global_batch) + "</td><td>" + sweep::trial_name(r.id) +
              "</td><td class=\"num\">" + lr_text(r.lr) + "</td><td>" + status_span(r.status) + "</td>" + cells +
              num_cell(opt_json(t.noise_at_target), "%.4g") + num_cell(opt_json(t.noise_end), "%.4g") + "<td>" +
              (best.count(i) ? std::string(fit ? "&#10003; fitted" : "&#10003; best") : std::string()) + "</td></tr>\n";
  }
  p.body += "</table></div>\n";
}
}  // namespace

void sweep_report(Page& p, const std::string& dir, std::string& title) {
  const report::Opened o = report::open_results(dir);
  title = "sweep " + o.name;
  const bool higher = o.direction == "max";
  const Grid g = sweep_grid(o);
  const std::vector<int> shared = sharing(o.rows);
  // Every trial's run directory (pending trials have none yet).
  std::vector<std::optional<RunData>> runs(o.rows.size());
  for (size_t i = 0; i < o.rows.size(); ++i) {
    const auto& r = o.rows[i];
    if (!r.run_dir.empty() && fs::exists(r.run_dir) && is_run_dir(r.run_dir)) runs[i] = read_run(r.run_dir);
  }
  std::map<std::string, int> counts;
  for (const auto& r : o.rows) ++counts[r.status];
  std::string sub;
  for (const auto& [k, v] : counts) sub += (sub.empty() ? "" : ", ") + std::to_string(v) + " " + k;
  p.body += "<p>" + std::to_string(o.rows.size()) + " trials (" + esc(sub) + "); metric <b>" + esc(o.metric) +
            "</b> (" + (higher ? "higher" : "lower") + " is better). Directory: " + esc(dir) + "</p>\n";
  // Where chance lies and how far the seeds spread, then a best cell only when it
  // stands out of both (report::stands_out; docs/reports.md).
  p.body += "<p>Chance: " +
            (g.chance ? esc(o.metric) + " " + fmt("%.4g", *g.chance) + " (" + std::to_string(g.classes) + " classes)"
                      : std::string("unknown (the trials record no class count)")) +
            "; seeds' spread (pooled sd of the cells' trials): " +
            (g.noise ? fmt("%.3g", *g.noise) : std::string("unmeasured (one finished trial per cell)")) + ".</p>\n";
  if (g.best) {
    const Cell& b = g.cells[*g.best];
    p.body += "<p>Best cell: global batch <b>" + std::to_string(g.batches[b.bi]) + "</b>, lr <b>" +
              lr_text(g.lrs[b.li]) + "</b>: " + esc(o.metric) + " " + fmt("%.4f", b.mean) +
              (b.n > 1 ? fmt(" &plusmn; %.4f", b.sd) + " (mean &plusmn; sd of " + std::to_string(b.n) + " trials)" : "") +
              "; " + esc(g.verdict) + ".</p>\n";
  } else {
    p.body += "<p>No best cell: " + esc(g.verdict) + ".</p>\n";
  }
  // 1. heatmap and linear scaling
  p.h2("Batch size and learning rate");
  json hm{{"type", "heatmap"},
          {"xlabel", "global batch"},
          {"ylabel", "learning rate"},
          {"vlabel", o.metric},
          {"higher", higher},
          {"xs", json::array()},
          {"ys", json::array()},
          {"cells", json::array()}};
  hm["title"] = o.metric + " over global batch x learning rate" +
                (g.within_cell.empty() ? std::string() : " (mean \u00b1 sd over the trials of a cell)");
  for (auto b : g.batches) hm["xs"].push_back(std::to_string(b));
  for (const auto& l : tick_labels(g.lrs)) hm["ys"].push_back(l);
  for (size_t i = 0; i < g.cells.size(); ++i) {
    const Cell& c = g.cells[i];
    std::string text = c.has_value() ? fmt("%.3f", c.mean) : c.statuses();
    if (c.n > 1) text += "\n\u00b1" + fmt("%.3f", c.sd) + " (n=" + std::to_string(c.n) + ")";
    std::string tip = c.has_value() ? o.metric + ": mean " + fmt("%.6g", c.mean) +
                                          (c.n > 1 ? ", sd " + fmt("%.4g", c.sd) + ", min " + fmt("%.6g", c.min) +
                                                         ", max " + fmt("%.6g", c.max)
                                                   : std::string()) +
                                          " over " + std::to_string(c.n) + " finished trial(s)"
                                    : "no finished trial";
    for (const auto* r : c.trials)
      tip += "\ntrial " + sweep::trial_name(r->id) + ": " + r->status +
             (r->metric && r->status == "done" ? " " + fmt("%.6g", *r->metric) : std::string());
    json cell{{"x", c.bi}, {"y", c.li}, {"v", c.has_value() ? rounded(c.mean) : json(nullptr)}, {"text", text}, {"tip", tip}};
    hm["cells"].push_back(cell);
  }
  if (g.best) hm["best"] = {g.cells[*g.best].bi, g.cells[*g.best].li};
  hm["verdict"] = g.verdict;
  if (g.chance) hm["chance"] = rounded(*g.chance);
  if (!g.within_cell.empty()) {
    std::string keys;
    for (const auto& k : g.within_cell) keys += (keys.empty() ? "" : ", ") + k;
    hm["note"] = "Several trials per cell (they differ in " + keys + "): each cell shows the mean and the sample "
                 "standard deviation of the finished ones; grey cells have none finished.";
  }
  // The best lr per batch (by cell mean) against lr proportional to batch.
  json sc{{"type", "line"},
          {"title", "best learning rate per global batch vs the linear scaling rule"},
          {"xlabel", "global batch (log)"},
          {"ylabel", "learning rate (log)"},
          {"xlog", true},
          {"ylog", true},
          {"series", json::array()}};
  {
    std::vector<const sweep::Row*> by_batch;
    for (const auto& r : o.rows) by_batch.push_back(&r);
    std::stable_sort(by_batch.begin(), by_batch.end(),
                     [](const sweep::Row* a, const sweep::Row* b) { return a->global_batch < b->global_batch; });
    json tx = json::array(), ty = json::array();
    for (const auto* r : by_batch) {
      tx.push_back(r->global_batch);
      ty.push_back(rounded(r->lr));
    }
    sc["series"].push_back({{"name", "trials"}, {"color", "#9a9a9a"}, {"points", true}, {"noline", true}, {"x", tx}, {"y", ty}});
    json bx = json::array(), by = json::array();
    std::optional<std::pair<double, double>> anchor;
    for (size_t bi = 0; bi < g.batches.size(); ++bi) {
      if (!g.best_per_batch[bi]) continue;
      const double lr = g.lrs[g.cells[*g.best_per_batch[bi]].li];
      bx.push_back(g.batches[bi]);
      by.push_back(rounded(lr));
      if (!anchor) anchor = {static_cast<double>(g.batches[bi]), lr};
    }
    sc["series"].push_back({{"name", "best lr (by mean " + o.metric + ", where it stands out)"}, {"color", "#1f77b4"}, {"points", true}, {"x", bx}, {"y", by}});
    if (anchor && g.batches.size() > 1) {
      const double b0 = static_cast<double>(g.batches.front()), b1 = static_cast<double>(g.batches.back());
      sc["series"].push_back({{"name", "linear rule: lr = " + fmt("%.3g", anchor->second) + " x batch / " +
                                           fmt("%.0f", anchor->first)},
                              {"color", "#d62728"},
                              {"dash", true},
                              {"x", {b0, b1}},
                              {"y", {rounded(anchor->second * b0 / anchor->first), rounded(anchor->second * b1 / anchor->first)}}});
    }
    sc["xticks"] = g.batches;
    sc["yticks"] = json::array();
    for (double l : g.lrs) sc["yticks"].push_back(rounded(l));
    sc["note"] = "The rule is anchored at the smallest batch's best lr; a best lr on the dashed line means the "
                 "linear scaling rule held.";
  }
  p.open_grid();
  p.chart("heatmap", hm);
  p.chart("scaling", sc);
  p.close_grid();
  // 1b. steps and clips to the target against the batch, and the critical batch
  if (const std::optional<BatchSizeStudy> st = batch_size_study(o)) batch_size_section(p, o, *st);
  // 2. every trial's curves
  p.h2("Curves of every trial");
  json loss = line_spec("training loss", "loss (mean of the logged window)");
  json ev = line_spec("validation " + o.metric, o.metric);
  std::vector<const RunData*> present;
  for (const auto& r : runs)
    if (r) present.push_back(&*r);
  if (wide_range(present)) loss["ylog"] = true;
  std::optional<double> EvalLine::*field = o.metric == "top5"       ? &EvalLine::top5
                                           : o.metric == "val_loss" ? &EvalLine::val_loss
                                                                    : &EvalLine::top1;
  for (size_t i = 0; i < o.rows.size(); ++i) {
    if (!runs[i]) continue;
    const auto& r = o.rows[i];
    const std::string name = sweep::trial_name(r.id) + " b" + std::to_string(r.global_batch) + " lr " + lr_text(r.lr) +
                             (r.status == "done" ? "" : " (" + r.status + ")");
    loss["series"].push_back(step_series(p, *runs[i], i, name, series_colour(i), series_dashed(i), get_loss, 6));
    ev["series"].push_back(eval_series(*runs[i], name, series_colour(i), series_dashed(i), field));
  }
  if (o.metric != "top1" && o.metric != "top5" && o.metric != "val_loss")
    ev["title"] = "validation top-1 (the sweep's metric " + o.metric + " is not logged per epoch)";
  p.open_grid();
  p.chart("loss", loss);
  p.chart("eval", ev);
  p.close_grid();
  // 3. throughput, grouped by how many trials shared the machine
  p.h2("Throughput");
  json th{{"type", "bars"}, {"title", "training throughput per trial"}, {"ylabel", "clips / s"}, {"groups", json::array()},
          {"bars", json::array()}};
  std::map<int, size_t> group_of;
  for (int s : shared) group_of[s] = 0;
  size_t gi = 0;
  for (auto& [s, idx] : group_of) {
    idx = gi;
    th["groups"].push_back({{"name", s == 0 ? std::string("ran alone")
                                            : "ran with up to " + std::to_string(s) + " other trial" + (s > 1 ? "s" : "")},
                            {"color", series_colour(gi++)}});
  }
  for (size_t i = 0; i < o.rows.size(); ++i) {
    const auto& r = o.rows[i];
    double cps = 0;
    if (r.metrics.is_object() && r.metrics.contains("clips_per_s") && r.metrics["clips_per_s"].is_number())
      cps = r.metrics["clips_per_s"].get<double>();
    else if (runs[i] && !runs[i]->steps.empty())
      cps = runs[i]->steps.back().clips_per_s;
    const std::string threads = runs[i] ? summary_text(runs[i]->summary, "threads") : "-";
    th["bars"].push_back({{"label", sweep::trial_name(r.id)},
                          {"v", rounded(cps, 4)},
                          {"group", group_of[shared[i]]},
                          {"text", fmt("%.0f", cps)},
                          {"tip", "global batch " + std::to_string(r.global_batch) + ", lr " + lr_text(r.lr) + "\n" +
                                      r.status + ", threads " + threads + "\nshared the machine with up to " +
                                      std::to_string(shared[i]) + " other trial(s)"}});
  }
  th["note"] = throughput_note(o.rows, shared);
  p.chart("throughput", th);
  // 4. status of every trial
  p.h2("Trials");
  std::vector<std::string> keys;
  for (const auto& r : o.rows)
    for (const auto& [k, v] : r.params.items())
      if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
  p.body += "<div class=\"scroll\"><table>\n<tr><th>trial</th><th>status</th>";
  for (const auto& k : keys) p.body += "<th>" + esc(k) + "</th>";
  p.body += "<th>batch</th><th>lr</th><th>top-1</th><th>top-5</th><th>val loss</th><th>clips/s</th><th>shared with</th>"
            "<th>wall s</th>";
  if (o.target) p.body += "<th>steps to target</th><th>clips to target</th><th>wall s to target</th>";
  p.body += "<th>attempts</th><th>message</th></tr>\n";
  for (size_t i = 0; i < o.rows.size(); ++i) {
    const auto& r = o.rows[i];
    p.body += "<tr><td><span style=\"color:" + series_colour(i) + "\">&#9632;</span> " + sweep::trial_name(r.id) +
              "</td><td>" + status_span(r.status) + "</td>";
    for (const auto& k : keys)
      p.body += "<td>" + (r.params.contains(k) ? esc(r.params[k].is_string() ? r.params[k].get<std::string>() : r.params[k].dump())
                                               : std::string("-")) +
                "</td>";
    auto m = [&](const char* k) { return r.metrics.is_object() && r.metrics.contains(k) ? r.metrics[k] : json(); };
    std::string msg = r.message;
    if (msg.empty() && runs[i] && runs[i]->status != "done" && r.status != "done") msg = runs[i]->message;
    p.body += "<td class=\"num\">" + std::to_string(r.global_batch) + "</td><td class=\"num\">" + lr_text(r.lr) + "</td>" +
              num_cell(m("top1")) + num_cell(m("top5")) + num_cell(m("val_loss")) + num_cell(m("clips_per_s"), "%.1f") +
              "<td class=\"num\">" + std::to_string(shared[i]) + "</td>" + num_cell(m("wall_s"), "%.1f");
    if (o.target) {
      if (o.measured(r) && !r.to_target.reached())
        p.body += "<td class=\"num\" colspan=\"3\">not reached</td>";
      else if (o.measured(r))
        p.body += num_cell(opt_json(r.to_target.steps), "%.0f") + num_cell(opt_json(r.to_target.clips), "%.0f") +
                  num_cell(opt_json(r.to_target.wall_s), "%.1f");
      else
        p.body += num_cell(json()) + num_cell(json()) + num_cell(json());
    }
    p.body += "<td class=\"num\">" + std::to_string(r.attempts) + "</td><td class=\"msg\">" + esc(msg) + "</td></tr>\n";
  }
  p.body += "</table></div>\n";
}

}  // namespace vexp::report::html
