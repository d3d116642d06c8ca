#include "vexp/report/html_report.hpp"

#include "page.hpp"

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
#include "vexp/rundir/eval_file.hpp"
#include "vexp/rundir/provenance.hpp"

namespace vexp::report {
namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace html;  // page.hpp

namespace {
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
  row("parameters, MACs per clip", esc(count_text(s, "params") + ", " + count_text(s, "flops_per_clip")));
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
  if (!r.eval_folders.empty()) eval_table(p, r.eval_folders, r.dir);
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
  provenance_section(p, r.provenance);
}

// ---- comparison -------------------------------------------------------------

// The rows of the runs' last provenance records that are not the same in all
// (start and end times left out: they always differ).
void provenance_differences(Page& p, const std::vector<RunData>& runs, const std::vector<std::string>& names) {
  p.h2("Provenance that differs");
  std::vector<nlohmann::json> last;
  for (const auto& r : runs) last.push_back(r.provenance.empty() ? nlohmann::json() : r.provenance.back());
  const rundir::RunsDifferences d = rundir::differences_between(last);
  if (d.recorded == 0) {
    p.body += "<p>Not recorded: none of these run directories has a provenance.jsonl.</p>\n";
    return;
  }
  if (d.rows.empty()) {
    p.body += "<p>None: the last invocations' records agree in all " + std::to_string(d.keys) + " rows.</p>\n";
    return;
  }
  std::string body;
  for (const auto& row : d.rows) {
    body += "<tr><td><code>" + esc(row.key) + "</code></td>";
    for (const auto& v : row.values) body += "<td><code>" + esc(v) + "</code></td>";
    body += "</tr>\n";
  }
  p.body += "<p>" + std::to_string(d.rows.size()) + " of " + std::to_string(d.keys) +
            " rows of the last invocations' records (<code>provenance.jsonl</code>).</p>\n"
            "<div class=\"scroll\"><table id=\"provenance-differences\">\n<tr><th>key</th>";
  for (const auto& nm : names) p.body += "<th>" + esc(nm) + "</th>";
  p.body += "</tr>\n" + body + "</table></div>\n";
}

// Labels that tell the runs apart, as `vexp compare` names them (rundir::run_labels).
std::vector<std::string> run_labels(const std::vector<RunData>& runs) {
  std::vector<std::string> names, dirs;
  for (const auto& r : runs) {
    names.push_back(r.name);
    dirs.push_back(r.dir.string());
  }
  return rundir::run_labels(names, dirs);
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
  // Recipe keys whose values differ between the runs (the rows `vexp compare` prints).
  std::vector<std::optional<rundir::FlatRows>> recipes;
  for (const auto& r : runs) recipes.push_back(r.keys.empty() ? std::nullopt : std::optional(r.keys));
  const rundir::RunsDifferences d = rundir::differences_between(recipes);
  p.h2("Recipe keys that differ");
  std::string rows;
  for (const auto& row : d.rows) {
    rows += "<tr><td><code>" + esc(row.key) + "</code></td>";
    for (const auto& v : row.values) rows += "<td><code>" + esc(v) + "</code></td>";
    rows += "</tr>\n";
  }
  if (d.rows.empty()) {
    p.body += "<p>None: the resolved recipes are the same (" + std::to_string(d.keys) + " keys).</p>\n";
  } else {
    p.body += "<p>" + std::to_string(d.rows.size()) + " of " + std::to_string(d.keys) +
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

// The report's folder is made first; the file is written atomically.
void write_atomic(const std::string& path, const std::string& text) {
  const fs::path target(path);
  std::error_code ec;
  if (target.has_parent_path()) fs::create_directories(target.parent_path(), ec);
  base::write_file_atomic(path, text);
}

}  // namespace

// Where the run came from (provenance.jsonl): each invocation in a line, then the
// last one's record whole, and what an earlier invocation had otherwise.
void html::provenance_section(Page& p, const std::vector<json>& provenance) {
  p.h2("Provenance");
  if (provenance.empty()) {
    p.body += "<p>Not recorded in the run directory: it has no provenance.jsonl (a run of a vexp before 0.1's "
              "provenance records).</p>\n";
    return;
  }
  p.body += "<div class=\"scroll\"><table id=\"provenance-invocations\">\n<tr><th>invocation</th><th>start</th>"
            "<th>end</th><th>outcome</th><th>command line</th></tr>\n";
  for (const auto& rec : provenance) {
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
  const json& last = provenance.back();
  p.body += "<p>The " + std::string(provenance.size() > 1 ? "last invocation's" : "invocation's") +
            " record (<code>provenance.jsonl</code>):</p>\n<div class=\"scroll\"><table id=\"provenance\">\n";
  for (const auto& [k, v] : rundir::flatten_record(last))
    p.body += "<tr><th><code>" + esc(k) + "</code></th><td><code>" + esc(v) + "</code></td></tr>\n";
  p.body += "</table></div>\n";
  for (size_t i = 0; i + 1 < provenance.size(); ++i) {
    const auto diff = rundir::differences(provenance[i], last);
    if (diff.empty()) continue;
    p.body += "<p>Invocation " + esc(provenance[i].value("invocation", json()).dump()) + " differed in:</p>\n"
              "<div class=\"scroll\"><table>\n<tr><th>key</th><th>then</th><th>last</th></tr>\n";
    for (const auto& d : diff)
      p.body += "<tr><td><code>" + esc(d.key) + "</code></td><td><code>" + esc(d.a) + "</code></td><td><code>" +
                esc(d.b) + "</code></td></tr>\n";
    p.body += "</table></div>\n";
  }
}

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
    if (dirs.size() == 1 && rundir::is_eval_dir(dirs[0]) && !rundir::RunDir(dirs[0]).is_run_dir(true)) {
      w.kind = "eval";
      eval_report(p, dirs[0], title, subtitle);
      const std::string html = p.html(title, subtitle);
      write_atomic(out, html);
      w.bytes = html.size();
      return w;
    }
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
