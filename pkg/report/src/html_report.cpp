#include "vexp/report/html_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "vexp/report/gnuplot.hpp"
#include "vexp/slurm/job.hpp"
#include "vexp/report/palette.hpp"
#include "vexp/report/run_data.hpp"
#include "vexp/report/sweep_grid.hpp"
#include "vexp/sweep/expansion.hpp"
#include "vexp/report/sweep_results.hpp"
#include "vexp/base/files.hpp"
#include "vexp/build_tag.hpp"
#include "vexp/rundir/provenance.hpp"

namespace vexp::report {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

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
json rounded(double v, int digits = 6) {
  if (!std::isfinite(v)) return nullptr;
  char b[48];
  std::snprintf(b, sizeof b, "%.*g", digits, v);
  return std::strtod(b, nullptr);
}
json rounded(const std::optional<double>& v, int digits = 6) { return v ? rounded(*v, digits) : json(nullptr); }

std::string num_cell(const json& v, const char* f = "%.4f") {
  if (!v.is_number()) return "<td class=\"num\">-</td>";
  return "<td class=\"num\">" + fmt(f, v.get<double>()) + "</td>";
}

// The HTML page: sections of markup with chart placeholders, and the JSON the
// charts are drawn from.
class Page {
 public:
  json charts = json::object();
  json xs = json::object();  // shared x arrays, referred to by series' "xref"
  std::string body;

  void chart(const std::string& id, json spec) {
    charts[id] = std::move(spec);
    body += "<div class=\"chart\" data-chart=\"" + id + "\"></div>\n";
  }
  void open_grid() { body += "<div class=\"grid\">\n"; }
  void close_grid() { body += "</div>\n"; }
  void h2(const std::string& t) { body += "<h2>" + esc(t) + "</h2>\n"; }

  std::string html(const std::string& title, const std::string& subtitle) const {
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
};

// ---- runs -------------------------------------------------------------------

const char* kXLabels = R"({"step": "global step", "epoch": "epoch"})";

json line_spec(const std::string& title, const std::string& ylabel) {
  return json{{"type", "line"},     {"title", title},
              {"ylabel", ylabel},   {"xmodes", {"step", "epoch"}},
              {"xlabels", json::parse(kXLabels)}, {"series", json::array()}};
}

// The shared x of a run's step lines (global steps); returns its id.
std::string step_xref(Page& p, const RunData& r, size_t i) {
  const std::string id = "steps" + std::to_string(i);
  if (!p.xs.contains(id)) {
    json a = json::array();
    for (const auto& s : r.steps) a.push_back(s.global_step);
    p.xs[id] = std::move(a);
  }
  return id;
}

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

struct TimeSplit {
  double data = 0, compute = 0, comm = 0, other = 0, total = 0;
};
TimeSplit time_split(const RunData& r) {
  TimeSplit t;
  for (const auto& s : r.steps) {
    t.data += s.data_s;
    t.compute += s.compute_s;
    t.comm += s.comm_s;
    t.other += get_other(s);
  }
  t.total = t.data + t.compute + t.comm + t.other;
  return t;
}

std::string status_span(const std::string& status) {
  return "<span class=\"status-" + esc(status) + "\">" + esc(status) + "</span>";
}

std::string summary_text(const json& s, const char* key) {
  if (!s.is_object() || !s.contains(key)) return "-";
  const json& v = s[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
  if (v.is_number()) return fmt("%.6g", v.get<double>());
  return v.dump();
}

int64_t ranks_of(const RunData& r) {
  int64_t n = 0;
  for (const auto& s : r.steps) n = std::max(n, s.ranks);
  return n;
}

void message_box(Page& p, const RunData& r) {
  if (r.status == "done") return;
  p.body += "<div class=\"warn\"><b>" + esc(r.status) + "</b>: " + esc(r.message) + "</div>\n";
}

// The run's Slurm jobs (vexp submit's record, RUN_DIR/jobs.jsonl), when it has any.
void jobs_section(Page& p, const RunData& r) {
  slurm::JobRecord rec;
  try {
    rec = slurm::read_jobs(r.dir.string());
  } catch (const std::exception& e) {
    p.h2("Slurm jobs");
    p.body += "<p>" + esc(e.what()) + "</p>\n";
    return;
  }
  if (rec.jobs.empty()) return;
  p.h2("Slurm jobs");
  p.body += "<div class=\"scroll\"><table>\n<tr><th>job</th><th>submitted</th><th>starts</th><th>requeues</th>"
            "<th>nodes</th><th>last state</th><th>at</th></tr>\n";
  for (const auto& j : rec.jobs)
    p.body += "<tr><td>" + esc(j.job) + "</td><td>" + esc(j.submitted) + "</td><td>" + std::to_string(j.starts) +
              "</td><td>" + std::to_string(j.requeues) +
              (j.max_requeues >= 0 ? " of at most " + std::to_string(j.max_requeues) : std::string()) + "</td><td>" +
              esc(j.nodes) + "</td><td>" + esc(slurm::state_text(j)) + "</td><td>" + esc(j.last_time) +
              "</td></tr>\n";
  p.body += "</table></div>\n";
  if (rec.bad_lines > 0)
    p.body += "<p>" + std::to_string(rec.bad_lines) + " line(s) of jobs.jsonl are not job events (skipped).</p>\n";
}

// Where the run came from (provenance.jsonl): each invocation in a line, then the
// last one's record whole, and what an earlier invocation had otherwise.
void provenance_section(Page& p, const RunData& r) {
  p.h2("Provenance");
  if (r.provenance.empty()) {
    p.body += "<p>Not recorded in the run directory: it has no provenance.jsonl (a run of a vexp before 0.1's "
              "provenance records).</p>\n";
    return;
  }
  p.body += "<div class=\"scroll\"><table id=\"provenance-invocations\">\n<tr><th>invocation</th><th>start</th>"
            "<th>end</th><th>outcome</th><th>command line</th></tr>\n";
  for (const auto& rec : r.provenance) {
    std::string argv;
    for (const auto& [k, v] : rundir::flatten_record(rec))
      if (k == "argv") argv = v;
    auto text = [&](const char* key) {
      const auto it = rec.find(key);
      return it == rec.end() ? std::string() : it->is_string() ? it->get<std::string>() : it->dump();
    };
    const std::string outcome = text("outcome");
    p.body += "<tr><td>" + esc(text("invocation")) + "</td><td>" + esc(text("start")) + "</td><td>" +
              esc(text("end").empty() ? "(not recorded)" : text("end")) + "</td><td>" +
              esc(outcome.empty() ? "(running, or ended without a word)" : outcome) + "</td><td><code>" + esc(argv) +
              "</code></td></tr>\n";
  }
  p.body += "</table></div>\n";
  const json& last = r.provenance.back();
  p.body += "<p>The " + std::string(r.provenance.size() > 1 ? "last invocation's" : "invocation's") +
            " record (<code>provenance.jsonl</code>):</p>\n<div class=\"scroll\"><table id=\"provenance\">\n";
  for (const auto& [k, v] : rundir::flatten_record(last))
    p.body += "<tr><th><code>" + esc(k) + "</code></th><td><code>" + esc(v) + "</code></td></tr>\n";
  p.body += "</table></div>\n";
  for (size_t i = 0; i + 1 < r.provenance.size(); ++i) {
    const auto diff = rundir::differences(r.provenance[i], last);
    if (diff.empty()) continue;
    p.body += "<p>Invocation " + esc(r.provenance[i].value("invocation", json()).dump()) + " differed in:</p>\n"
              "<div class=\"scroll\"><table>\n<tr><th>key</th><th>then</th><th>last</th></tr>\n";
    for (const auto& d : diff)
      p.body += "<tr><td><code>" + esc(d.key) + "</code></td><td><code>" + esc(d.a) + "</code></td><td><code>" +
                esc(d.b) + "</code></td></tr>\n";
    p.body += "</table></div>\n";
  }
}

void run_report(Page& p, const RunData& r) {
  message_box(p, r);
  const json& s = r.summary;
  const TimeSplit t = time_split(r);
  auto row = [&](const std::string& k, const std::string& v) {
    p.body += "<tr><th>" + esc(k) + "</th><td>" + v + "</td></tr>\n";
  };
  p.h2("Result and what ran");
  p.body += "<div class=\"scroll\"><table>\n";
  row("status", status_span(r.status));
  row("top-1 / top-5 / val loss", esc(summary_text(s, "top1") + " / " + summary_text(s, "top5") + " / " +
                                      summary_text(s, "val_loss")));
  row("epochs, steps", esc(summary_text(s, "epochs") + ", " + summary_text(s, "steps")) +
                           (s.is_object() ? "" : " (logged: " + std::to_string(r.steps.size()) + " step lines, " +
                                                     std::to_string(r.evals.size()) + " evaluations)"));
  row("throughput", esc(summary_text(s, "clips_per_s")) + " clips/s over the training steps");
  row("train / wall seconds", esc(summary_text(s, "train_s") + " / " + summary_text(s, "wall_s")));
  row("global batch, frames", esc(summary_text(s, "global_batch") + ", " + summary_text(s, "frames")));
  row("threads, ranks", esc(summary_text(s, "threads") + ", " + std::to_string(ranks_of(r))));
  row("device, precision, memory format", esc(summary_text(s, "device") + ", " + summary_text(s, "precision") + ", " +
                                              summary_text(s, "memory_format")));
  row("parameters, MACs per clip", esc(summary_text(s, "params") + ", " + summary_text(s, "flops_per_clip")));
  row("skipped samples (bad files)", esc(summary_text(s, "skipped_samples")));
  row("skipped fp16 steps", esc(summary_text(s, "skipped_steps")));
  row("recipe hash", esc(summary_text(s, "recipe_hash")));
  if (t.total > 0)
    row("step time (logged steps)",
        esc(fmt("data %.1f %%", 100 * t.data / t.total) + fmt(", compute %.1f %%", 100 * t.compute / t.total) +
            fmt(", communication %.1f %%", 100 * t.comm / t.total) + fmt(", other %.1f %%", 100 * t.other / t.total)));
  if (r.provenance.empty()) {
    row("vexp version, build tag",
        "not recorded in the run directory (no provenance.jsonl: a run of an earlier vexp); this report was written by "
        "vexp " + std::string(rundir::vexp_version()) + " (" + esc(host_build_tag()) + ")");
  } else {
    const json& last = r.provenance.back();
    const json v = last.value("vexp", json::object());
    row("vexp version, build tag",
        esc(v.value("version", "?") + " (commit " + v.value("commit", "?") + "), " + v.value("build_tag", "?")) +
            (r.provenance.size() > 1 ? " (the last of " + std::to_string(r.provenance.size()) + " invocations)" : ""));
  }
  if (r.unreadable_lines) row("skipped metrics.jsonl lines (not JSON, or of the wrong types)", std::to_string(r.unreadable_lines));
  row("directory", esc(r.dir.string()));
  p.body += "</table></div>\n";
  jobs_section(p, r);
  p.h2("Curves");
  run_charts(p, {&r}, {r.name}, "");
  p.h2("Recipe");
  if (!r.overrides.empty()) {
    p.body += "<p>What differs from " + esc(r.base) + ":</p>\n<table><tr><th>key = value</th></tr>\n";
    for (const auto& o : r.overrides) p.body += "<tr><td><code>" + esc(o) + "</code></td></tr>\n";
    p.body += "</table>\n";
  } else if (!r.provenance.empty()) {
    const json& last = r.provenance.back();
    const json rec = last.value("recipe", json::object());
    const json ov = last.value("overrides", json::array());
    p.body += "<p>Recipe <code>" + esc(rec.value("path", "?")) + "</code> (its files and their SHA-256: Provenance, below), ";
    if (!ov.is_array() || ov.empty()) {
      p.body += "no <code>--set</code> overrides.</p>\n";
    } else {
      p.body += "with these <code>--set</code> overrides:</p>\n<table><tr><th>key = value</th></tr>\n";
      for (const auto& o : ov)
        p.body += "<tr><td><code>" + esc(o.is_string() ? o.get<std::string>() : o.dump()) + "</code></td></tr>\n";
      p.body += "</table>\n";
    }
  } else {
    p.body += "<p>The run directory keeps the resolved recipe only (no provenance.jsonl: a run of an earlier vexp), so "
              "what differs from its base is shown for sweep trials and between the runs of a comparison "
              "(<code>vexp report RUN_DIR OTHER_RUN_DIR</code>).</p>\n";
  }
  if (!r.resolved.empty())
    p.body += "<details><summary>resolved.toml (" + std::to_string(r.keys.size()) + " keys)</summary><pre>" +
              esc(r.resolved) + "</pre></details>\n";
  provenance_section(p, r);
}

// ---- comparison -------------------------------------------------------------

// The rows of the runs' last provenance records that are not the same in all
// (start and end times left out: they always differ).
void provenance_differences(Page& p, const std::vector<RunData>& runs, const std::vector<std::string>& names) {
  p.h2("Provenance that differs");
  std::vector<std::string> keys;
  std::vector<std::map<std::string, std::string>> rows(runs.size());
  std::set<std::string> seen;
  size_t recorded = 0;
  for (size_t i = 0; i < runs.size(); ++i) {
    if (runs[i].provenance.empty()) continue;
    ++recorded;
    for (const auto& [k, v] : rundir::flatten_record(runs[i].provenance.back())) {
      if (k == "invocation" || k == "start" || k == "end") continue;
      rows[i][k] = v;
      if (seen.insert(k).second) keys.push_back(k);
    }
  }
  if (recorded == 0) {
    p.body += "<p>Not recorded: none of these run directories has a provenance.jsonl.</p>\n";
    return;
  }
  std::string body;
  size_t n = 0;
  for (const auto& k : keys) {
    std::vector<std::string> vals;
    for (size_t i = 0; i < runs.size(); ++i) {
      const auto it = rows[i].find(k);
      vals.push_back(runs[i].provenance.empty() ? "(not recorded)" : it == rows[i].end() ? "(absent)" : it->second);
    }
    if (std::all_of(vals.begin(), vals.end(), [&](const std::string& v) { return v == vals[0]; })) continue;
    ++n;
    body += "<tr><td><code>" + esc(k) + "</code></td>";
    for (const auto& v : vals) body += "<td><code>" + esc(v) + "</code></td>";
    body += "</tr>\n";
  }
  if (n == 0) {
    p.body += "<p>None: the last invocations' records agree in all " + std::to_string(keys.size()) + " rows.</p>\n";
    return;
  }
  p.body += "<p>" + std::to_string(n) + " of " + std::to_string(keys.size()) +
            " rows of the last invocations' records (<code>provenance.jsonl</code>).</p>\n"
            "<div class=\"scroll\"><table id=\"provenance-differences\">\n<tr><th>key</th>";
  for (const auto& nm : names) p.body += "<th>" + esc(nm) + "</th>";
  p.body += "</tr>\n" + body + "</table></div>\n";
}

// Labels that tell the runs apart: the run name, with the folder where names repeat.
std::vector<std::string> run_labels(const std::vector<RunData>& runs) {
  std::vector<std::string> out;
  for (const auto& r : runs) {
    int same = 0;
    for (const auto& o : runs) same += o.name == r.name ? 1 : 0;
    out.push_back(same > 1 ? r.name + " (" + r.dir.parent_path().filename().string() + "/" + r.dir.filename().string() + ")"
                           : r.name);
  }
  for (size_t i = 0; i < out.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (out[i] == out[j]) out[i] = runs[i].dir.string();
  return out;
}

void comparison_report(Page& p, const std::vector<RunData>& runs) {
  const std::vector<std::string> names = run_labels(runs);
  p.h2("Final metrics");
  p.body += "<div class=\"scroll\"><table>\n<tr><th>run</th><th>status</th><th>top-1</th><th>top-5</th>"
            "<th>val loss</th><th>clips/s</th><th>steps</th><th>train s</th><th>wall s</th><th>threads</th>"
            "<th>ranks</th><th>device</th><th>precision</th><th>skipped samples</th><th>data / compute / comm</th></tr>\n";
  for (size_t i = 0; i < runs.size(); ++i) {
    const RunData& r = runs[i];
    const json& s = r.summary;
    const EvalLine* last = r.evals.empty() ? nullptr : &r.evals.back();
    auto metric = [&](const char* k, std::optional<double> EvalLine::*f) {
      if (s.is_object() && s.contains(k)) return num_cell(s[k]);
      return last ? num_cell(rounded(last->*f)) : num_cell(nullptr);
    };
    const TimeSplit t = time_split(r);
    p.body += "<tr><td><span style=\"color:" + series_colour(i) + "\">&#9632;</span> " + esc(names[i]) + "</td><td>" +
              status_span(r.status) + "</td>" + metric("top1", &EvalLine::top1) + metric("top5", &EvalLine::top5) +
              metric("val_loss", &EvalLine::val_loss) + num_cell(s.is_object() ? s.value("clips_per_s", json()) : json(), "%.1f") +
              num_cell(json(r.steps.empty() ? 0 : r.steps.back().global_step), "%.0f") +
              num_cell(s.is_object() ? s.value("train_s", json()) : json(), "%.1f") +
              num_cell(s.is_object() ? s.value("wall_s", json()) : json(), "%.1f") + "<td>" +
              esc(summary_text(s, "threads")) + "</td><td>" + std::to_string(ranks_of(r)) + "</td><td>" +
              esc(summary_text(s, "device")) + "</td><td>" + esc(summary_text(s, "precision")) + "</td><td>" +
              esc(summary_text(s, "skipped_samples")) + "</td><td>" +
              (t.total > 0 ? fmt("%.0f", 100 * t.data / t.total) + " / " + fmt("%.0f", 100 * t.compute / t.total) +
                                 " / " + fmt("%.0f %%", 100 * t.comm / t.total)
                           : std::string("-")) +
              "</td></tr>\n";
  }
  p.body += "</table></div>\n";
  for (size_t i = 0; i < runs.size(); ++i)
    if (runs[i].status != "done")
      p.body += "<div class=\"warn\"><b>" + esc(names[i]) + ": " + esc(runs[i].status) + "</b>: " +
                esc(runs[i].message) + "</div>\n";
  // Recipe keys whose values differ between the runs.
  std::vector<std::string> keys;
  std::set<std::string> seen;
  for (const auto& r : runs)
    for (const auto& [k, v] : r.keys)
      if (seen.insert(k).second) keys.push_back(k);
  p.h2("Recipe keys that differ");
  std::string rows;
  size_t n = 0;
  for (const auto& k : keys) {
    std::vector<std::string> vals;
    for (const auto& r : runs) vals.push_back(key_value(r, k));
    if (std::all_of(vals.begin(), vals.end(), [&](const std::string& v) { return v == vals[0]; })) continue;
    ++n;
    rows += "<tr><td><code>" + esc(k) + "</code></td>";
    for (const auto& v : vals) rows += "<td><code>" + (v.empty() ? std::string("(absent)") : esc(v)) + "</code></td>";
    rows += "</tr>\n";
  }
  if (n == 0) {
    p.body += "<p>None: the resolved recipes are the same (" + std::to_string(keys.size()) + " keys).</p>\n";
  } else {
    p.body += "<p>" + std::to_string(n) + " of " + std::to_string(keys.size()) +
              " keys of the resolved recipes.</p>\n<div class=\"scroll\"><table>\n<tr><th>key</th>";
    for (const auto& nm : names) p.body += "<th>" + esc(nm) + "</th>";
    p.body += "</tr>\n" + rows + "</table></div>\n";
  }
  provenance_differences(p, runs, names);
  p.h2("Curves");
  std::vector<const RunData*> ptrs;
  for (const auto& r : runs) ptrs.push_back(&r);
  run_charts(p, ptrs, names, "");
}

// ---- sweep --------------------------------------------------------------------

std::string lr_text(double lr) { return fmt("%.4g", lr); }

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
            "<th>wall s</th><th>attempts</th><th>message</th></tr>\n";
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
              "<td class=\"num\">" + std::to_string(shared[i]) + "</td>" + num_cell(m("wall_s"), "%.1f") +
              "<td class=\"num\">" + std::to_string(r.attempts) + "</td><td class=\"msg\">" + esc(msg) + "</td></tr>\n";
  }
  p.body += "</table></div>\n";
}

// The report's folder is made first; the file is written atomically.
void write_atomic(const std::string& path, const std::string& text) {
  const fs::path target(path);
  std::error_code ec;
  if (target.has_parent_path()) fs::create_directories(target.parent_path(), ec);
  base::write_file_atomic(path, text);
}

}  // namespace

std::string default_html_path(const std::vector<std::string>& dirs) {
  if (dirs.size() == 1) return (fs::path(dirs[0]) / "report.html").string();
  return "comparison.html";
}

Written write_html_report(const std::vector<std::string>& dirs, const std::string& out) {
  Page p;
  Written w;
  w.path = out;
  std::string title, subtitle;
  const bool sweep_dir = dirs.size() == 1 && fs::exists(fs::path(dirs[0]) / "sweep.db");
  if (sweep_dir) {
    w.kind = "sweep";
    sweep_report(p, dirs[0], title);
    subtitle = "batch-size x learning-rate study";
  } else {
    std::vector<RunData> runs;
    for (const auto& d : dirs) {
      if (dirs.size() > 1 && fs::exists(fs::path(d) / "sweep.db"))
        throw base::invalid("'" + d + "' is a sweep directory: report it alone (vexp report " + d +
                                                 "), or compare its trials (" + d + "/trials/NNN)");
      runs.push_back(read_run(d));
    }
    if (runs.size() == 1) {
      w.kind = "run";
      title = "run " + runs[0].name;
      subtitle = "status: " + status_span(runs[0].status) + " &middot; " + esc(runs[0].dir.string());
      run_report(p, runs[0]);
    } else {
      w.kind = "comparison";
      title = "comparison of " + std::to_string(runs.size()) + " runs";
      for (const auto& r : runs) subtitle += (subtitle.empty() ? "" : " &middot; ") + esc(r.name);
      comparison_report(p, runs);
    }
  }
  const std::string html = p.html(title, subtitle);
  write_atomic(out, html);
  w.bytes = html.size();
  return w;
}

}  // namespace vexp::report
