// Private to vexp::report's sources: the HTML page (Page) and the pieces the run,
// comparison and sweep pages share (escaping, rounding, the line charts of runs).
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "vexp/report/run_data.hpp"

namespace vexp::report::html {
using json = nlohmann::json;

std::string esc(const std::string& s);
std::string fmt(const char* f, double v);
json rounded(double v, int digits = 6);
json rounded(const std::optional<double>& v, int digits = 6);
std::string num_cell(const json& v, const char* f = "%.4f");

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

  // The whole page: the markup, the data, the embedded chart.js and CSS.
  std::string html(const std::string& title, const std::string& subtitle) const;

};

json line_spec(const std::string& title, const std::string& ylabel);
json step_series(Page& p, const RunData& r, size_t i, const std::string& name, const std::string& colour, bool dashed,
                 double (*get)(const StepLine&), int digits);
json eval_series(const RunData& r, const std::string& name, const std::string& colour, bool dashed,
                 std::optional<double> EvalLine::*field);
bool wide_range(const std::vector<const RunData*>& runs);
double get_loss(const StepLine& s);
double get_lr(const StepLine& s);
double get_cps(const StepLine& s);
double get_data(const StepLine& s);
double get_compute(const StepLine& s);
double get_comm(const StepLine& s);
double get_other(const StepLine& s);
void run_charts(Page& p, const std::vector<const RunData*>& runs, const std::vector<std::string>& names,
                const std::string& prefix);
std::string status_span(const std::string& status);
// A count (parameters, MACs) in k / M / G / T with 4 digits ("71.59 M"); below 10,000
// or not a number: summary_text.
std::string count_text(const json& s, const char* key);
std::string summary_text(const json& s, const char* key);

// Where a run (or an eval folder) came from: its provenance.jsonl records, each
// invocation in a line, then the last one's record whole (html_report.cpp).
void provenance_section(Page& p, const std::vector<json>& provenance);

// vexp eval's results (eval_page.cpp): the table of a run's evaluations (its
// eval-*/eval.json), and the page of one eval folder (title and subtitle set).
void eval_table(Page& p, const std::vector<RunData::EvalFolder>& evals, const std::filesystem::path& run_dir);
void eval_report(Page& p, const std::string& dir, std::string& title, std::string& subtitle);

// The sweep page (sweep_page.cpp): its title is set from the sweep's name.
void sweep_report(Page& p, const std::string& dir, std::string& title);

}  // namespace vexp::report::html
