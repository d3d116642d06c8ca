#include "page.hpp"

#include "vexp/rundir/noise.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <set>
#include <string>
#include <vector>

#include "vexp/base/text.hpp"
#include "vexp/build_tag.hpp"
#include "vexp/report/html_report.hpp"
#include "vexp/report/palette.hpp"
#include "vexp/report/sweep_grid.hpp"
#include "vexp/report/sweep_results.hpp"
#include "vexp/rundir/provenance.hpp"

namespace vexp::report::html {

std::string esc(const std::string& s) {
  std::string o;
  o.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      default: o += c;
    }
  }
  return o;
}

std::string fmt(const char* f, double v) { return report::fmt_number(f, v); }

// A value rounded to `digits` significant digits (JSON prints it short); null
// when not finite. The report keeps 6 digits of losses, rates and accuracies and
// 4 of timings and throughput: what the tables and tooltips show.
json rounded(double v, int digits) {
  if (!std::isfinite(v)) return nullptr;
  char b[48];
  std::snprintf(b, sizeof b, "%.*g", digits, v);
  return std::strtod(b, nullptr);
}
json rounded(const std::optional<double>& v, int digits) { return v ? rounded(*v, digits) : json(nullptr); }

std::string num_cell(const json& v, const char* f) {
  if (!v.is_number()) return "<td class=\"num\">-</td>";
  return "<td class=\"num\">" + fmt(f, v.get<double>()) + "</td>";
}


// ---- runs -------------------------------------------------------------------

const char* kXLabels = R"({"step": "global step", "epoch": "epoch"})";

json line_spec(const std::string& title, const std::string& ylabel) {
  return json{{"type", "line"},     {"title", title},
              {"ylabel", ylabel},   {"xmodes", {"step", "epoch"}},
              {"xlabels", json::parse(kXLabels)}, {"series", json::array()}};
}

// The shared x of a run's step lines (global steps); returns its id.
namespace {
std::string step_xref(Page& p, const RunData& r, size_t i) {
  const std::string id = "steps" + std::to_string(i);
  if (!p.xs.contains(id)) {
    json a = json::array();
    for (const auto& s : r.steps) a.push_back(s.global_step);
    p.xs[id] = std::move(a);
  }
  return id;
}
}  // namespace

json step_series(Page& p, const RunData& r, size_t i, const std::string& name, const std::string& colour, bool dashed,
                 double (*get)(const StepLine&), int digits) {
  json y = json::array();
  for (const auto& s : r.steps) y.push_back(rounded(get(s), digits));
  json s{{"name", name}, {"color", colour}, {"xref", step_xref(p, r, i)}, {"y", std::move(y)}};
  // The epoch axis: the clips seen in epochs (epochs_trained, exact when steps per
  // epoch are N/G, not whole), else global step / steps per epoch for older runs.
  const bool logged = !r.steps.empty() && std::all_of(r.steps.begin(), r.steps.end(),
                                                       [](const StepLine& l) { return l.epochs_trained >= 0; });
  if (logged) {
    const std::string id = "epochs" + std::to_string(i);
    if (!p.xs.contains(id)) {
      json a = json::array();
      for (const auto& l : r.steps) a.push_back(rounded(l.epochs_trained, 6));
      p.xs[id] = std::move(a);
    }
    s["xref_epoch"] = id;
  } else if (r.steps_per_epoch > 0) {
    s["spe"] = r.steps_per_epoch;
  }
  if (dashed) s["dash"] = true;
  return s;
}

json eval_series(const RunData& r, const std::string& name, const std::string& colour, bool dashed,
                 std::optional<double> EvalLine::*field) {
  json xs = json::array(), xe = json::array(), y = json::array();
  for (const auto& e : r.evals) {
    xs.push_back(e.global_step);
    xe.push_back(e.epoch);
    y.push_back(rounded(e.*field));
  }
  json s{{"name", name}, {"color", colour}, {"points", true}, {"x", {{"step", xs}, {"epoch", xe}}}, {"y", y}};
  if (dashed) s["dash"] = true;
  return s;
}

// A hook's metric of the evaluations (ema_top1, ...), by name.
json hook_eval_series(const RunData& r, const std::string& key, const std::string& colour) {
  json xs = json::array(), xe = json::array(), y = json::array();
  for (const auto& e : r.evals) {
    xs.push_back(e.global_step);
    xe.push_back(e.epoch);
    y.push_back(rounded(e.value(key)));
  }
  return json{{"name", key}, {"color", colour}, {"points", true}, {"dash", true}, {"x", {{"step", xs}, {"epoch", xe}}},
              {"y", y}};
}

// The hooks' metrics of a run's evaluations whose names end in `suffix` ("_top1").
std::vector<std::string> hook_eval_keys(const RunData& r, const std::string& suffix) {
  std::set<std::string> keys;
  for (const auto& e : r.evals)
    for (const auto& [k, v] : e.hooks)
      if (k.size() > suffix.size() && k.compare(k.size() - suffix.size(), suffix.size(), suffix) == 0) keys.insert(k);
  return {keys.begin(), keys.end()};
}

bool wide_range(const std::vector<const RunData*>& runs) {
  double lo = INFINITY, hi = 0;
  for (const auto* r : runs)
    for (const auto& s : r->steps)
      if (std::isfinite(s.loss) && s.loss > 0) {
        lo = std::min(lo, s.loss);
        hi = std::max(hi, s.loss);
      }
  return wants_log_axis(lo, hi);
}

double get_loss(const StepLine& s) { return s.loss; }
double get_lr(const StepLine& s) { return s.lr; }
double get_cps(const StepLine& s) { return s.clips_per_s; }
double get_data(const StepLine& s) { return s.data_s; }
double get_compute(const StepLine& s) { return s.compute_s; }
double get_comm(const StepLine& s) { return s.comm_s; }
double get_other(const StepLine& s) { return std::max(0.0, s.step_s - s.data_s - s.compute_s - s.comm_s); }

// The gradient noise scale a run measured (run.noise_scale_every; docs/batch-size.md):
// the smoothed B_noise at each measured step, and the run's global batch as a line
// across the same span. Null when the run measured none.
namespace {
json noise_series(const RunData& r, const std::string& name, const std::string& colour, bool dashed, json* batch) {
  std::vector<rundir::NoiseRecord> rec;
  try {
    rec = rundir::read_noise(r.dir);
  } catch (const std::exception&) {
    return nullptr;  // read_run has said what is wrong with metrics.jsonl
  }
  json xs = json::array(), xe = json::array(), y = json::array();
  bool epochs = true;
  for (const auto& n : rec) {
    if (n.skipped) continue;
    xs.push_back(n.global_step);
    xe.push_back(rounded(n.epochs_trained, 6));
    epochs = epochs && n.epochs_trained >= 0;
    y.push_back(n.scale ? rounded(*n.scale, 5) : json());
  }
  if (y.empty()) return nullptr;
  json s{{"name", name}, {"color", colour}, {"points", true}, {"y", y}};
  s["x"] = epochs ? json{{"step", xs}, {"epoch", xe}} : json{{"step", xs}, {"epoch", xs}};
  if (dashed) s["dash"] = true;
  if (batch) {
    const int64_t b = rec.back().big_batch;
    *batch = json{{"name", "global batch " + std::to_string(b)},
                  {"color", "#888888"},
                  {"dash", true},
                  {"x", {{"step", {xs.front(), xs.back()}}, {"epoch", {s["x"]["epoch"].front(), s["x"]["epoch"].back()}}}},
                  {"y", {b, b}}};
  }
  return s;
}
}  // namespace

// The curves of one run or of several overlaid (one colour per run).
void run_charts(Page& p, const std::vector<const RunData*>& runs, const std::vector<std::string>& names,
                const std::string& prefix) {
  const bool one = runs.size() == 1;
  json loss = line_spec("training loss", "loss (mean of the logged window)");
  if (wide_range(runs)) loss["ylog"] = true;
  json lr = line_spec("learning rate", "lr");
  json cps = line_spec("training throughput", "clips / s (epoch so far)");
  json top1 = line_spec(one ? "validation accuracy" : "validation top-1", one ? "accuracy" : "top-1");
  json top5 = line_spec("validation top-5", "top-5");
  json vloss = line_spec("validation loss", "val_loss");
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunData& r = *runs[i];
    const std::string c = series_colour(i);
    const bool d = series_dashed(i);
    loss["series"].push_back(step_series(p, r, i, names[i], c, d, get_loss, 6));
    lr["series"].push_back(step_series(p, r, i, names[i], c, d, get_lr, 6));
    cps["series"].push_back(step_series(p, r, i, names[i], c, d, get_cps, 4));
    if (one) {
      top1["series"].push_back(eval_series(r, "top-1", series_colour(0), false, &EvalLine::top1));
      top1["series"].push_back(eval_series(r, "top-5", series_colour(1), true, &EvalLine::top5));
      vloss["series"].push_back(eval_series(r, "val_loss", series_colour(0), false, &EvalLine::val_loss));
      // The hooks' evaluations beside them (the ema hook's averaged weights: ema_top1, ema_loss).
      size_t c2 = 2;
      for (const auto& k : hook_eval_keys(r, "_top1")) top1["series"].push_back(hook_eval_series(r, k, series_colour(c2++)));
      for (const auto& k : hook_eval_keys(r, "_loss")) vloss["series"].push_back(hook_eval_series(r, k, series_colour(c2++)));
    } else {
      top1["series"].push_back(eval_series(r, names[i], c, d, &EvalLine::top1));
      top5["series"].push_back(eval_series(r, names[i], c, d, &EvalLine::top5));
      vloss["series"].push_back(eval_series(r, names[i], c, d, &EvalLine::val_loss));
    }
  }
  p.open_grid();
  p.chart(prefix + "loss", loss);
  p.chart(prefix + "top1", top1);
  if (!one) p.chart(prefix + "top5", top5);
  p.chart(prefix + "val_loss", vloss);
  p.chart(prefix + "lr", lr);
  p.chart(prefix + "throughput", cps);
  // The gradient noise scale, where a run measured it: B_noise against progress, with
  // the global batch (one run) beside it: a batch far above B_noise no longer pays.
  json noise = line_spec("gradient noise scale B_noise (smoothed)", "clips");
  for (size_t i = 0; i < runs.size(); ++i) {
    json batch;
    json s = noise_series(*runs[i], one ? "B_noise" : names[i], series_colour(i), series_dashed(i), one ? &batch : nullptr);
    if (s.is_null()) continue;
    noise["series"].push_back(std::move(s));
    if (!batch.is_null()) noise["series"].push_back(std::move(batch));
  }
  if (!noise["series"].empty()) {
    noise["ylog"] = true;
    noise["note"] = "B_noise = tr(Sigma) / |G|^2 from each GPU's gradient against the global one (docs/batch-size.md); "
                    "steps to a target fall as 1 + B_noise / B, clips grow as 1 + B / B_noise.";
    p.chart(prefix + "noise_scale", noise);
  }
  if (one) {
    const RunData& r = *runs[0];
    json split = line_spec("step time split (the logged step)", "seconds per step");
    split["stacked"] = true;
    split["series"].push_back(step_series(p, r, 0, "data wait", "#9ecae1", false, get_data, 4));
    split["series"].push_back(step_series(p, r, 0, "compute (forward + backward)", "#3182bd", false, get_compute, 4));
    split["series"].push_back(step_series(p, r, 0, "communication", "#e6550d", false, get_comm, 4));
    split["series"].push_back(step_series(p, r, 0, "other (optimizer, ...)", "#a1d99b", false, get_other, 4));
    split["note"] = "Stacked: the top edge is the whole step. Each point is the step that closed a logged window.";
    p.chart(prefix + "split", split);
  }
  p.close_grid();
}

std::string Page::html(const std::string& title, const std::string& subtitle) const {
  std::string data = json{{"charts", charts}, {"xs", xs}}.dump();
  // Nothing in the data may end or confuse the <script> element ("</script>",
  // "<!--"): '<' only occurs inside JSON strings, where "\u003c" reads back the same.
  for (size_t p = 0; (p = data.find('<', p)) != std::string::npos; p += 6) data.replace(p, 1, "\\u003c");
  std::string o;
  o.reserve(data.size() + body.size() + 40000);
  o += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
       "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
       "<meta name=\"generator\" content=\"vexp " + std::string(rundir::vexp_version()) + "\">\n<title>" +
       esc(title) + "</title>\n<style>\n" + kReportCss + "</style>\n</head>\n<body>\n<h1>" + esc(title) +
       "</h1>\n<p class=\"sub\">" + subtitle + "</p>\n" + body;
  std::time_t t = std::time(nullptr);
  char when[64];
  std::strftime(when, sizeof when, "%Y-%m-%d %H:%M", std::localtime(&t));
  o += std::string("<footer>Written by vexp ") + rundir::vexp_version() + " (" + esc(host_build_tag()) + ") on " + when +
       ". One file: the data and the charts are in it; it needs no network. Hover a chart for exact values, "
       "click a legend entry to hide or show its series.</footer>\n"
       "<script type=\"application/json\" id=\"vexp-data\">" +
       data + "</script>\n<script>\n" + kChartJs + "</script>\n</body>\n</html>\n";
  return o;
}

std::string status_span(const std::string& status) {
  return "<span class=\"status-" + esc(status) + "\">" + esc(status) + "</span>";
}

std::string count_text(const json& s, const char* key) {
  if (!s.is_object() || !s.contains(key) || !s[key].is_number()) return summary_text(s, key);
  const double v = s[key].get<double>();
  const double a = std::fabs(v);
  if (!std::isfinite(v) || a < 1e4) return summary_text(s, key);
  return base::count_text(v);  // 71,594,000 -> "71.59 M"; the exact count stays in summary.json
}

std::string summary_text(const json& s, const char* key) {
  if (!s.is_object() || !s.contains(key)) return "-";
  const json& v = s[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
  if (v.is_number()) return fmt("%.6g", v.get<double>());
  return v.dump();
}

}  // namespace vexp::report::html
