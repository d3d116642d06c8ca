// `vexp report` of vexp eval's results: the page of an eval folder (eval.json and its
// provenance.jsonl) and the table of a run's evaluations on the run's page.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <tuple>

#include "page.hpp"
#include "vexp/rundir/eval_file.hpp"
#include "vexp/rundir/provenance.hpp"

namespace vexp::report::html {

namespace fs = std::filesystem;

namespace {

std::string text_of(const json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return "-";
  return it->is_string() ? it->get<std::string>() : it->dump();
}

std::string figure(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number() ? fmt("%.4f", it->get<double>()) : std::string("-");
}

std::string count(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number_integer() ? std::to_string(it->get<int64_t>()) : std::string("-");
}

const json& object(const json& j, const char* key) {
  static const json empty = json::object();
  const auto it = j.find(key);
  return it != j.end() && it->is_object() ? *it : empty;
}

const json& array(const json& j, const char* key) {
  static const json empty = json::array();
  const auto it = j.find(key);
  return it != j.end() && it->is_array() ? *it : empty;
}

// The class's name where eval.json has it, else its number.
std::string class_label(const json& e, int64_t k) {
  const json& pc = array(e, "per_class");
  if (k >= 0 && static_cast<size_t>(k) < pc.size() && pc[static_cast<size_t>(k)].is_object()) {
    const auto n = pc[static_cast<size_t>(k)].find("name");
    if (n != pc[static_cast<size_t>(k)].end() && n->is_string()) return std::to_string(k) + " " + n->get<std::string>();
  }
  return std::to_string(k);
}

void result_table(Page& p, const json& e, const std::string& dir) {
  const json& w = object(e, "weights");
  auto row = [&](const std::string& k, const std::string& v) {
    p.body += "<tr><th>" + esc(k) + "</th><td>" + v + "</td></tr>\n";
  };
  p.body += "<div class=\"scroll\"><table id=\"eval-result\">\n";
  row("protocol", "<code>" + esc(text_of(object(e, "protocol"), "name")) + "</code>, " +
                      esc(text_of(object(e, "protocol"), "views")) + " views per video");
  row("top-1 / top-" + text_of(e, "topk") + " / mean class accuracy",
      esc(figure(e, "top1") + " / " + figure(e, "top5") + " / " + figure(e, "mean_class_accuracy")));
  row("videos", esc(count(e, "evaluated") + " evaluated of " + count(e, "videos") + " listed, " + count(e, "failed") +
                    " failed"));
  row("denominator", esc(text_of(e, "denominator")));
  row("counting failures as wrong",
      esc(figure(e, "top1_all") + " / " + figure(e, "top5_all") + " / " + figure(e, "mean_class_accuracy_all")));
  row("weights",
      "<code>" + esc(text_of(w, "path")) + "</code> (SHA-256 <code>" + esc(text_of(w, "sha256")) + "</code>)");
  row("recipe", "<code>" + esc(text_of(e, "recipe")) + "</code>, recipe hash " + esc(text_of(e, "recipe_hash")));
  std::string sets;
  for (const auto& o : array(e, "overrides"))
    sets += (sets.empty() ? "" : " ") + (o.is_string() ? o.get<std::string>() : o.dump());
  row("--set", sets.empty() ? std::string("(none)") : "<code>" + esc(sets) + "</code>");
  row("ranks, device, precision, views per pass", esc(text_of(e, "ranks") + ", " + text_of(e, "device") + ", " +
                                                      text_of(e, "precision") + ", " + text_of(e, "batch")));
  row("time", esc(figure(e, "wall_s") + " s in all, " + figure(e, "videos_per_s") + " videos/s"));
  row("started", esc(text_of(e, "start")));
  row("directory", esc(dir));
  p.body += "</table></div>\n";
}

void protocol_table(Page& p, const json& e) {
  p.h2("Protocol");
  p.body += "<div class=\"scroll\"><table id=\"eval-protocol\">\n";
  for (const auto& [k, v] : object(e, "protocol").items())
    p.body += "<tr><th><code>" + esc(k) + "</code></th><td>" + esc(v.is_string() ? v.get<std::string>() : v.dump()) +
              "</td></tr>\n";
  p.body += "</table></div>\n";
}

void failures_table(Page& p, const json& e) {
  const json& f = array(e, "failures");
  p.h2("Failed videos");
  if (f.empty()) {
    p.body += "<p>None: every listed video decoded.</p>\n";
    return;
  }
  p.body += "<p>" + std::to_string(f.size()) +
            " video(s) could not be evaluated; they are left out of the figures' denominator (and counted as wrong "
            "in the figures over all videos).</p>\n<div class=\"scroll\"><table id=\"eval-failures\">\n"
            "<tr><th>video</th><th>label</th><th>file</th><th>error</th></tr>\n";
  for (const auto& x : f)
    p.body += "<tr><td>" + esc(text_of(x, "index")) + "</td><td>" + esc(text_of(x, "label")) + "</td><td><code>" +
              esc(text_of(x, "item")) + "</code></td><td>" + esc(text_of(x, "error")) + "</td></tr>\n";
  p.body += "</table></div>\n";
}

void per_class_table(Page& p, const json& e) {
  const json& pc = array(e, "per_class");
  p.h2("Per-class accuracy");
  p.body +=
      "<div class=\"scroll\"><table id=\"eval-per-class\">\n<tr><th>class</th><th>videos</th><th>evaluated</th>"
      "<th>top-1 right</th><th>accuracy</th></tr>\n";
  for (const auto& c : pc)
    p.body += "<tr><td>" + esc(class_label(e, c.value("class", int64_t(-1)))) + "</td><td>" + esc(count(c, "videos")) +
              "</td><td>" + esc(count(c, "evaluated")) + "</td><td>" + esc(count(c, "correct")) + "</td><td>" +
              esc(figure(c, "accuracy")) + "</td></tr>\n";
  p.body += "</table></div>\n";
}

// The whole matrix for a few classes; the most frequent confusions for many.
void confusion_section(Page& p, const json& e) {
  const json& m = array(e, "confusion");
  p.h2("Confusion");
  const size_t K = m.size();
  auto cell = [&](size_t a, size_t b) -> int64_t {
    return m[a].is_array() && b < m[a].size() && m[a][b].is_number_integer() ? m[a][b].get<int64_t>() : 0;
  };
  if (K == 0) {
    p.body += "<p>Not recorded.</p>\n";
    return;
  }
  if (K <= 30) {
    p.body +=
        "<p>Rows: the true class; columns: the top-1 class (evaluated videos).</p>\n"
        "<div class=\"scroll\"><table id=\"eval-confusion\">\n<tr><th></th>";
    for (size_t b = 0; b < K; ++b) p.body += "<th>" + std::to_string(b) + "</th>";
    p.body += "</tr>\n";
    for (size_t a = 0; a < K; ++a) {
      p.body += "<tr><th>" + esc(class_label(e, static_cast<int64_t>(a))) + "</th>";
      for (size_t b = 0; b < K; ++b) {
        const int64_t v = cell(a, b);
        p.body +=
            std::string(a == b ? "<td><b>" : "<td>") + (v ? std::to_string(v) : "") + (a == b ? "</b></td>" : "</td>");
      }
      p.body += "</tr>\n";
    }
    p.body += "</table></div>\n";
    return;
  }
  std::vector<std::tuple<int64_t, size_t, size_t>> off;
  for (size_t a = 0; a < K; ++a)
    for (size_t b = 0; b < K; ++b)
      if (a != b && cell(a, b) > 0) off.emplace_back(-cell(a, b), a, b);
  std::sort(off.begin(), off.end());
  if (off.size() > 25) off.resize(25);
  p.body += "<p>The most frequent confusions (of " + std::to_string(K) +
            " classes; eval.json holds the whole matrix):</p>\n"
            "<div class=\"scroll\"><table id=\"eval-confusion\">\n<tr><th>true class</th><th>top-1 "
            "class</th><th>videos</th></tr>\n";
  for (const auto& [n, a, b] : off)
    p.body += "<tr><td>" + esc(class_label(e, static_cast<int64_t>(a))) + "</td><td>" +
              esc(class_label(e, static_cast<int64_t>(b))) + "</td><td>" + std::to_string(-n) + "</td></tr>\n";
  p.body += "</table></div>\n";
}

}  // namespace

void eval_table(Page& p, const std::vector<RunData::EvalFolder>& evals, const fs::path& run_dir) {
  p.h2("Evaluations (vexp eval)");
  p.body +=
      "<div class=\"scroll\"><table id=\"evals\">\n<tr><th>folder</th><th>protocol</th><th>views</th>"
      "<th>top-1</th><th>top-5</th><th>mean class</th><th>videos</th><th>failed</th><th>weights</th></tr>\n";
  for (const auto& f : evals) {
    std::error_code ec;
    const std::string name = fs::relative(f.dir, run_dir, ec).string();
    if (!f.problem.empty()) {
      p.body += "<tr><td>" + esc(name) + "</td><td colspan=\"8\">" + esc(f.problem) + "</td></tr>\n";
      continue;
    }
    const json& e = f.eval;
    p.body += "<tr><td>" + esc(name) + "</td><td><code>" + esc(text_of(object(e, "protocol"), "name")) +
              "</code></td><td>" + esc(text_of(object(e, "protocol"), "views")) + "</td><td>" + esc(figure(e, "top1")) +
              "</td><td>" + esc(figure(e, "top5")) + "</td><td>" + esc(figure(e, "mean_class_accuracy")) + "</td><td>" +
              esc(count(e, "evaluated") + " of " + count(e, "videos")) + "</td><td>" + esc(count(e, "failed")) +
              "</td><td><code>" + esc(fs::path(text_of(object(e, "weights"), "path")).filename().string()) +
              "</code></td></tr>\n";
  }
  p.body += "</table></div>\n<p>Each evaluation's own page: <code>vexp report RUN_DIR/FOLDER</code>.</p>\n";
}

void eval_report(Page& p, const std::string& dir, std::string& title, std::string& subtitle) {
  const json e = rundir::read_eval(dir);
  const std::string recipe = fs::path(text_of(e, "recipe")).stem().string();
  title = "eval " + text_of(object(e, "protocol"), "name") + " of " + recipe;
  subtitle = esc(text_of(e, "summary"));
  p.h2("Result");
  result_table(p, e, dir);
  protocol_table(p, e);
  failures_table(p, e);
  per_class_table(p, e);
  confusion_section(p, e);
  const rundir::Provenance prov = rundir::read_provenance(dir);
  provenance_section(p, prov.records);
}

}  // namespace vexp::report::html
