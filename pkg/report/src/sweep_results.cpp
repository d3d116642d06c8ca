#include "vexp/report/sweep_results.hpp"
#include "vexp/base/attempt.hpp"
#include "vexp/base/files.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string_view>

#include "vexp/report/batch_size.hpp"
#include "vexp/report/gnuplot.hpp"
#include "vexp/report/palette.hpp"
#include "vexp/report/sweep_grid.hpp"
#include "vexp/dsl/recipe.hpp"
#include "vexp/rundir/files.hpp"
#include "vexp/sweep/directory.hpp"
#include "vexp/base/files.hpp"
#include "vexp/base/text.hpp"

namespace vexp::report {
using namespace vexp::sweep;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

std::string fmt(const char* f, double v) { return fmt_number(f, v); }

std::string param_text(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_float()) return fmt("%.6g", v.get<double>());
  return v.dump();
}

std::vector<std::string> param_keys(const std::vector<Row>& rows) {
  std::vector<std::string> keys;
  for (const auto& r : rows)
    for (const auto& [k, v] : r.params.items())
      if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
  return keys;
}

// The figures to the target, by the names of the store's columns and of --sort.
const char* const kTargetKeys[] = {"steps_to_target", "clips_to_target", "time_to_target_s", "train_s_to_target"};
bool target_key(const std::string& key) {
  for (const char* k : kTargetKeys)
    if (key == k) return true;
  return false;
}

std::optional<double> value_of(const Row& r, const std::string& key) {
  if (target_key(key)) {
    if (r.target.empty()) return std::nullopt;
    const ToTarget& t = r.to_target;
    if (key == "steps_to_target") return t.steps ? std::optional<double>(static_cast<double>(*t.steps)) : std::nullopt;
    if (key == "clips_to_target") return t.clips ? std::optional<double>(static_cast<double>(*t.clips)) : std::nullopt;
    if (key == "time_to_target_s") return t.wall_s;
    return t.train_s;
  }
  if (key == "id") return static_cast<double>(r.id);
  if (key == "lr") return r.lr;
  if (key == "global_batch") return static_cast<double>(r.global_batch);
  if (r.status != "done") return std::nullopt;
  if (r.metrics.contains(key) && r.metrics[key].is_number()) return r.metrics[key].get<double>();
  return std::nullopt;
}

std::string csv_field(std::string s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string o = "\"";
  for (char c : s) o += c == '"' ? std::string("\"\"") : std::string(1, c);
  return o + "\"";
}

// A text cell from data (a received sweep.db's keys, values, statuses, messages): one
// that a spreadsheet would take for a formula (starting with = + - @, TAB or CR) gets a
// leading ' (OWASP, CSV injection), which spreadsheets show as text and do not
// display. Numbers vexp writes itself go through csv_field alone, so -0.5 stays a number.
std::string csv_text(std::string s) {
  if (!s.empty() && std::string_view("=+-@\t\r").find(s[0]) != std::string_view::npos) s.insert(0, 1, '\'');
  return csv_field(std::move(s));
}

bool better(double a, double b, bool higher) { return higher ? a > b : a < b; }

// The finite values a plot panel holds.
struct Extent {
  double lo = INFINITY, hi = -INFINITY;
  void add(double v) {
    if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
  }
  bool any() const { return lo <= hi; }
};

// "[a:b]", a gnuplot range around [lo, hi] that always spans something: 5 % of the span
// on each side, or, for one value (or values printed alike), `half` (default: 5 % of
// the value, at least 0.001) on each side; on a log axis a factor 1.1 (1.5 for one
// value). Written with 10 significant digits, so that the two ends differ as written.
std::string gp_range(double lo, double hi, bool log, double half = -1) {
  double a = lo, b = hi;
  const double mag = std::max({std::fabs(lo), std::fabs(hi), 1e-300});
  const bool one = !(hi - lo > 1e-7 * mag);
  if (log) {
    const double f = one ? 1.5 : 1.1;
    a = lo / f, b = hi * f;
  } else if (one) {
    const double h = half > 0 ? half : std::max(0.05 * mag, 1e-3);
    a = lo - h, b = hi + h;
  } else {
    a = lo - 0.05 * (hi - lo), b = hi + 0.05 * (hi - lo);
  }
  return "[" + fmt("%.10g", a) + ":" + fmt("%.10g", b) + "]";
}

// An integer of the trial's trained figures ("" when unknown, or a store of an earlier vexp).
std::string figure_text(const Row& r, const char* key) {
  auto it = r.figures.find(key);
  return it != r.figures.end() && it->is_number_integer() ? std::to_string(it->get<int64_t>()) : "";
}

}  // namespace

std::string fmt_number(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

Opened open_results(const std::string& dir) {
  const fs::path db = fs::path(dir) / "sweep.db";
  if (!fs::exists(db)) throw base::failure("'" + dir + "' is not a sweep directory (it has no sweep.db)");
  Store st;
  if (auto opened = base::attempt<CorruptDatabase>([&] { st.open(db.string(), false); }); !opened)
    throw base::failure("'" + db.string() + "' is damaged (" + opened.message() + "); the trial directories in '" +
                        (fs::path(dir) / "trials").string() + "' hold every result: run `vexp sweep SWEEP.toml --out " +
                        dir + "` again with the same sweep file to rebuild it from them (the damaged file is kept)");
  Opened o;
  o.rows = st.rows();  // each trial's folder is DIR/trials/NNN (Store::rows), wherever DIR was moved or copied
  o.metric = st.meta("metric");
  o.direction = st.meta("direction");
  o.name = st.meta("name");
  o.sweep_file = st.meta("sweep_file");
  o.base = st.meta("base");
  if (o.metric.empty()) o.metric = "top1";
  if (o.direction.empty()) o.direction = metric_higher_is_better(o.metric) ? "max" : "min";
  o.target = parse_target_text(st.meta("target"));
  return o;
}

std::string results_text(const std::string& dir, const std::string& format, const std::string& sort_key) {
  Opened o = open_results(dir);
  std::string key = sort_key.empty() ? o.metric : sort_key;
  if (!known_metric(key) && key != "id" && key != "lr" && key != "global_batch" && !target_key(key))
    throw base::invalid("--sort '" + key + "': expected one of " + metric_list() +
                        ", id, lr, global_batch, or with a [sweep] target steps_to_target, clips_to_target, "
                        "time_to_target_s, train_s_to_target");
  if (target_key(key) && !o.target)
    throw base::invalid("--sort '" + key + "': the sweep in '" + base::printable(dir, 200) +
                        "' has no [sweep] target (add target = { metric = \"top1\", value = 0.9 } to its file and "
                        "run vexp sweep again: the trials that ended are measured from their folders)");
  // Fewer steps, clips or seconds to the target is better; a trial that never reached it sorts last.
  const bool higher = key == o.metric                                                         ? o.direction == "max"
                      : key == "id" || key == "lr" || key == "global_batch" || target_key(key) ? false
                                                                                               : metric_higher_is_better(key);
  std::vector<Row> rows = o.rows;
  std::stable_sort(rows.begin(), rows.end(), [&](const Row& a, const Row& b) {
    auto va = value_of(a, key), vb = value_of(b, key);
    if (va && vb) return *va != *vb ? better(*va, *vb, higher) : a.id < b.id;
    if (va || vb) return va.has_value();
    return a.id < b.id;
  });
  const auto keys = param_keys(rows);
  std::ostringstream out;
  const char* mcols[] = {"top1", "top5", "val_loss", "clips_per_s", "wall_s"};
  // With a target: each trial's figures to it ("reached": null while the trial has
  // not ended; false, the figures null, when it ended without reaching it).
  auto target_json = [&](const Row& r, json& j) {
    const bool measured = o.measured(r);
    const ToTarget& t = r.to_target;
    auto num = [&](const auto& v) { return measured && v ? json(*v) : json(nullptr); };
    j["target_reached"] = measured ? json(t.reached()) : json(nullptr);
    j["steps_to_target"] = num(t.steps);
    j["clips_to_target"] = num(t.clips);
    j["time_to_target_s"] = num(t.wall_s);
    j["train_s_to_target"] = num(t.train_s);
    j["epoch_to_target"] = num(t.epoch);
  };
  if (format == "json") {
    json a = json::array();
    for (const auto& r : rows) {
      json t = row_json(r);
      if (o.target) target_json(r, t);
      a.push_back(std::move(t));
    }
    json j{{"sweep", o.name}, {"metric", o.metric}, {"direction", o.direction}, {"trials", a}};
    {
      const Grid g = sweep_grid(o);
      j["verdict"] = g.verdict;
      auto cell_json = [&](size_t i) {
        const Cell& c = g.cells[i];
        json ids = json::array();
        for (const Row* r : c.trials) ids.push_back(r->id);
        return json{{"global_batch", g.batches[c.bi]}, {"lr", g.lrs[c.li]}, {"mean", c.mean},
                    {"sd", c.n > 1 ? json(c.sd) : json(nullptr)}, {"n", c.n}, {"trials", ids}};
      };
      j["best_cell"] = g.best ? cell_json(*g.best) : json(nullptr);
      j["leading_cell"] = g.leader ? cell_json(*g.leader) : json(nullptr);
    }
    if (o.target)
      j["target"] = {{"metric", o.target->metric},
                     {"value", o.target->value},
                     {"direction", o.target->higher_is_better() ? "max" : "min"},
                     {"text", o.target->text()}};
    return j.dump(2) + "\n";
  }
  if (format == "csv") {
    out << "trial,status";
    for (const auto& k : keys) out << "," << csv_text(k);
    out << ",global_batch,lr,warmup_steps,total_steps,top1,top5,val_loss,clips_per_s,wall_s";
    if (o.target) out << ",target_reached,steps_to_target,clips_to_target,time_to_target_s,train_s_to_target";
    out << ",attempts,run_dir,message\n";
    for (const auto& r : rows) {
      out << r.id << "," << csv_text(r.status);
      for (const auto& k : keys) {
        out << ",";
        if (!r.params.contains(k)) continue;
        const json& v = r.params[k];
        out << (v.is_number() ? csv_field(param_text(v)) : csv_text(param_text(v)));
      }
      out << "," << r.global_batch << "," << fmt("%.10g", r.lr) << "," << figure_text(r, "warmup_steps") << ","
          << figure_text(r, "total_steps");
      for (const char* m : mcols) {
        auto v = value_of(r, m);
        out << "," << (v ? fmt("%.10g", *v) : "");
      }
      if (o.target) {
        const ToTarget& t = r.to_target;
        const bool measured = o.measured(r);
        out << "," << (measured ? (t.reached() ? "true" : "false") : "");
        out << "," << (measured && t.steps ? std::to_string(*t.steps) : "");
        out << "," << (measured && t.clips ? std::to_string(*t.clips) : "");
        out << "," << (measured && t.wall_s ? fmt("%.10g", *t.wall_s) : "");
        out << "," << (measured && t.train_s ? fmt("%.10g", *t.train_s) : "");
      }
      out << "," << r.attempts << "," << csv_text(r.run_dir) << "," << csv_text(r.message) << "\n";
    }
    return out.str();
  }
  // Aligned table, for a terminal: what comes from sweep.db (keys, values, statuses,
  // the metric's name) is shown with control characters escaped and long values cut.
  auto shown = [](const std::string& t) { return base::printable(t, 60); };
  std::vector<size_t> w;
  for (const auto& k : keys) {
    size_t width = shown(k).size();
    for (const auto& r : rows)
      if (r.params.contains(k)) width = std::max(width, shown(param_text(r.params[k])).size());
    w.push_back(width);
  }
  char buf[256];
  std::snprintf(buf, sizeof buf, "%-5s %-9s", "trial", "status");
  out << buf;
  for (size_t i = 0; i < keys.size(); ++i) out << " " << shown(keys[i]) << std::string(w[i] - shown(keys[i]).size(), ' ');
  std::snprintf(buf, sizeof buf, " %6s %9s %7s %7s %8s %8s %7s", "batch", "lr", "top-1", "top-5", "val_loss",
                "clips/s", "wall s");
  out << buf;
  if (o.target) {
    std::snprintf(buf, sizeof buf, " %11s %12s %9s", "T steps", "T clips", "T wall s");
    out << buf;
  }
  out << "\n";
  for (const auto& r : rows) {
    std::snprintf(buf, sizeof buf, "%-5s %-9s", trial_name(r.id).c_str(), shown(r.status).c_str());
    out << buf;
    for (size_t i = 0; i < keys.size(); ++i) {
      std::string t = r.params.contains(keys[i]) ? shown(param_text(r.params[keys[i]])) : "-";
      out << " " << t << std::string(w[i] - std::min(w[i], t.size()), ' ');
    }
    auto cell = [&](const char* m, const char* f, int width) {
      auto v = value_of(r, m);
      std::string t = v ? fmt(f, *v) : "-";
      return std::string(static_cast<size_t>(std::max<int>(0, width - static_cast<int>(t.size()))), ' ') + t;
    };
    out << " " << cell("global_batch", "%.0f", 6) << " " << cell("lr", "%.4g", 9) << " " << cell("top1", "%.4f", 7)
        << " " << cell("top5", "%.4f", 7) << " " << cell("val_loss", "%.4f", 8) << " " << cell("clips_per_s", "%.1f", 8)
        << " " << cell("wall_s", "%.1f", 7);
    if (o.target) {
      // "-": not measured (the trial has not ended); "not reached": it ended without reaching the target.
      const ToTarget& t = r.to_target;
      const bool measured = o.measured(r);
      auto right = [](const std::string& text, int width) {
        return std::string(static_cast<size_t>(std::max<int>(0, width - static_cast<int>(text.size()))), ' ') + text;
      };
      if (measured && !t.reached()) {
        out << " " << right("not reached", 11) << " " << right("-", 12) << " " << right("-", 9);
      } else {
        out << " " << right(measured && t.steps ? std::to_string(*t.steps) : "-", 11) << " "
            << right(measured && t.clips ? std::to_string(*t.clips) : "-", 12) << " "
            << right(measured && t.wall_s ? fmt("%.1f", *t.wall_s) : "-", 9);
      }
    }
    out << "\n";
  }
  int counts[7] = {0, 0, 0, 0, 0, 0, 0};
  const char* names[7] = {"done", "diverged", "pruned", "cancelled", "failed", "running", "pending"};
  for (const auto& r : rows)
    for (int i = 0; i < 7; ++i)
      if (r.status == names[i]) ++counts[i];
  out << rows.size() << " trials:";
  bool first = true;
  for (int i = 0; i < 7; ++i)
    if (counts[i]) {
      out << (first ? " " : ", ") << counts[i] << " " << names[i];
      first = false;
    }
  out << "; metric " << shown(o.metric) << " (" << shown(o.direction) << ")\n";
  // The same verdict as the report's and --best-recipe's (report::sweep_grid).
  out << cell_verdict(o, sweep_grid(o)) << "\n";
  if (o.target) {
    size_t reached = 0, measured = 0;
    for (const auto& r : rows)
      if (o.measured(r)) ++measured, reached += r.to_target.reached() ? 1 : 0;
    out << "T: target " << o.target->text() << ", reached by " << reached << " of " << measured
        << " ended trials: optimizer steps, training clips and the run's wall-clock seconds to its first "
           "evaluation that reached it\n";
  }
  return out.str();
}

void refuse_best_recipe_output(const std::string& dir, const Opened& o, const std::string& out_path) {
  // The recipe must not replace what the sweep is made of: its store and any file of
  // a trial (managed files, refuse_output), the sweep file and its base recipe with
  // every recipe that base extends (as the store names them: refusing more is safe),
  // nor any other file of the sweep folder (a previous best recipe, which starts so,
  // may be replaced).
  std::vector<std::pair<std::string, std::string>> inputs;
  inputs.emplace_back(o.sweep_file, "the sweep file");
  inputs.emplace_back(o.base, "the base recipe");
  if (std::error_code ec; !o.base.empty() && fs::is_regular_file(o.base, ec)) {
    dsl::Diagnostics d;
    if (auto r = dsl::load_recipe(o.base, {}, d))
      for (size_t i = 1; i < r->files.size(); ++i) inputs.emplace_back(r->files[i], "a recipe the base extends");
  }
  rundir::refuse_output(out_path, "--best-recipe", inputs);
  if (std::error_code ec; base::is_within(dir, out_path) && fs::exists(out_path, ec)) {
    // (its first line only, and only of a regular file: a FIFO is not waited on, and
    // this read is not one of the command's inputs)
    std::string first;
    if (fs::is_regular_file(out_path, ec)) {
      std::ifstream old(out_path);
      std::getline(old, first);
    }
    if (first.rfind("# best trial ", 0) != 0 && first.rfind("# best cell ", 0) != 0 &&
        first.rfind("# leading cell ", 0) != 0)
      throw base::invalid("--best-recipe '" + base::printable(out_path) + "' is a file of the sweep '" +
                                        base::printable(dir) + "'; write it elsewhere");
  }
}

void refuse_best_recipe_output(const std::string& dir, const std::string& out_path) {
  refuse_best_recipe_output(dir, open_results(dir), out_path);
}

std::string cell_verdict(const Opened& o, const Grid& g) {
  if (!g.leader) return "no best cell: no finished trial";
  const Cell& c = g.cells[*g.leader];
  std::string figures = "global batch " + std::to_string(g.batches[c.bi]) + ", lr " + fmt("%.4g", g.lrs[c.li]) + ": " +
                        base::printable(o.metric, 60) + " " + fmt("%.4f", c.mean) +
                        (c.n > 1 ? " \u00b1 " + fmt("%.4f", c.sd) + " (mean \u00b1 sd of " + std::to_string(c.n) + " trials)"
                                 : std::string(" (1 trial)"));
  if (g.best) return "best cell: " + figures + "; " + g.verdict;
  return "no best cell: " + g.verdict + "; the leading cell: " + figures;
}

BestRecipe write_best_recipe(const std::string& dir, const std::string& out_path) {
  Opened o = open_results(dir);
  const Grid g = sweep_grid(o);
  if (!g.leader) throw base::failure("'" + dir + "' has no finished trial yet: there is no best recipe");
  refuse_best_recipe_output(dir, o, out_path);
  const bool higher = o.direction == "max";
  // The recipe of the cell (its global batch and lr, the parameters all its trials
  // share): the resolved recipe of its best finished trial, without what a trial
  // alone had: its seed when the seeds vary inside the cell, and the thread count
  // of the sweep's slot (run.threads) -- both are left to the recipe's defaults.
  const Cell& c = g.cells[*g.leader];
  const Row* best = nullptr;
  for (const Row* r : c.trials)
    if (r->status == "done" && r->metric && (!best || better(*r->metric, *best->metric, higher))) best = r;
  const fs::path resolved = fs::path(best->run_dir) / "resolved.toml";
  std::error_code ec;
  if (!fs::exists(resolved, ec)) throw base::failure("'" + resolved.string() + "' is missing");
  dsl::Diagnostics diags;
  std::optional<dsl::Recipe> recipe = dsl::load_recipe(resolved.string(), {}, diags);
  if (!recipe || diags.has_errors())
    throw base::failure("'" + base::printable(resolved.string()) + "' does not read as a recipe: " +
                        (diags.items().empty() ? std::string("?") : diags.items().front().str()));
  std::vector<std::string> dropped;
  auto drop = [&](const std::string& path) {
    const size_t dot = path.rfind('.');
    schema::Value* table = &recipe->root;
    for (size_t from = 0; table && dot != std::string::npos && from < dot;) {
      const size_t next = std::min(path.find('.', from), dot);
      table = table->is_table() ? table->find(path.substr(from, next - from)) : nullptr;
      from = next + 1;
    }
    if (table && table->is_table() && table->erase(path.substr(dot == std::string::npos ? 0 : dot + 1)))
      dropped.push_back(path);
  };
  drop("run.threads");
  json shared = json::object();
  for (const auto& [k, v] : best->params.items()) {
    const bool varies = std::find(g.within_cell.begin(), g.within_cell.end(), k) != g.within_cell.end();
    if (varies && k == "run.seed") drop(k);
    else shared[k] = v;
  }
  std::ostringstream o2;
  o2 << "# " << (g.best ? "best" : "leading") << " cell of sweep '" << base::printable(o.name, 60)
     << "': " << cell_verdict(o, g) << "\n# parameters: " << shared.dump() << "\n"
     << "# from trial " << trial_name(best->id) << " (the cell's best: " << base::printable(o.metric, 60) << " "
     << fmt("%.6g", *best->metric) << ")";
  if (!dropped.empty()) {
    o2 << "; left to the recipe's defaults:";
    for (const auto& d : dropped) o2 << " " << d;
  }
  o2 << "\n# trained: global_batch " << best->global_batch << ", lr " << fmt("%.10g", best->lr);
  for (const char* k : {"warmup_steps", "total_steps"})
    if (const std::string t = figure_text(*best, k); !t.empty()) o2 << ", " << k << " " << t;
  o2 << "\n" << dsl::to_toml(recipe->root);
  base::write_file_atomic(out_path, o2.str());
  return {best->id, g.best.has_value(), cell_verdict(o, g), dropped};
}

std::string best_recipe_line(const BestRecipe& b, const std::string& out) {
  std::string keys;
  for (const auto& d : b.dropped) keys += (keys.empty() ? "" : " ") + d;
  return std::string(b.stands_out ? "the best cell's" : "the leading cell's") + " recipe (trial " +
         trial_name(b.trial) + "'s" + (keys.empty() ? std::string() : "; " + keys + " left to the recipe's defaults") +
         ") written to " + base::printable(out);
}

namespace {

using report::gp_data_string;
using report::gp_string;

// The gnuplot script of a sweep's PNGs and the data files beside it: each panel
// below adds its plot to `gp` and its data to the report folder.
struct PngScript {
  fs::path rd;             // the report folder
  std::ostringstream gp;   // report.gp
  std::vector<std::string> files;  // the PNGs it draws
  std::string sweep_name;
  // The next plot goes to REPORT_DIR/name.
  void out_png(const std::string& name) {
    files.push_back((rd / name).string());
    gp << "set output dir.'/" << name << "'\n";
  }
  // A data file of the report (written whole; a planted link is replaced, not followed).
  void put(const std::string& name, const std::string& text) const { base::write_file_atomic((rd / name).string(), text); }
  static std::string file(const std::string& name) { return "dir.'/" + name + "'"; }
  // A panel that has nothing to draw: its axes and one sentence, no error.
  void empty_panel(const std::string& text) {
    gp << "set xrange [0:1]\nset yrange [0:1]\nset label 1 " << report::gp_string(text)
       << " at graph 0.5,0.5 center\nplot -1 notitle\nunset label 1\n";
  }
};

// 1. batch x lr heatmap of the metric: the mean over a cell's finished trials
// (seeds), with the spread where there are several; a best cell is framed only
// when it stands out of the seeds' spread and of chance (report::stands_out).
void heatmap_panel(PngScript& ps, const Opened& o, const Grid& grid) {
  std::ostringstream& gp = ps.gp;
  const std::string& sweep_name = ps.sweep_name;
  const bool higher = o.direction == "max";
  const std::vector<int64_t>& bv = grid.batches;
  const std::vector<double>& lv = grid.lrs;
  const std::vector<std::string> lr_ticks = report::tick_labels(lv, 2);
  const std::string chance_text =
      grid.chance ? "chance " + fmt("%.4g", *grid.chance) + " (" + std::to_string(grid.classes) + " classes)"
                  : std::string("chance unknown (the trials record no class count)");
  std::ostringstream good, bad;
  good << "# batch_index lr_index mean label colour\n";
  bad << "# batch_index lr_index statuses\n";
  bool any_good = false, any_bad = false;
  double lo = INFINITY, hi = -INFINITY;
  for (const auto& c : grid.cells)
    if (c.has_value()) lo = std::min(lo, c.mean), hi = std::max(hi, c.mean);
  for (const auto& c : grid.cells) {
    if (c.has_value()) {
      std::string label = fmt("%.3f", c.mean);
      if (c.n > 1) label += " ± " + fmt("%.3f", c.sd) + " (n=" + std::to_string(c.n) + ")";
      // White text on the dark (good) end of the palette.
      const double t = hi > lo ? (c.mean - lo) / (hi - lo) : 1;
      const bool dark = (higher ? t : 1 - t) > 0.55;
      good << c.bi << " " << c.li << " " << c.mean << " " << gp_data_string(label) << " "
           << (dark ? 0xffffff : 0x222222) << "\n";
      any_good = true;
    } else {
      bad << c.bi << " " << c.li << " " << gp_data_string(c.statuses()) << "\n";
      any_bad = true;
    }
  }
  if (!any_good) good << "-10 -10 0 \"\" 0\n";
  if (!any_bad) bad << "-10 -10 \"\"\n";
  ps.put("heatmap.dat", good.str());
  ps.put("heatmap_other.dat", bad.str());
  ps.out_png("heatmap.png");
  std::string within;
  for (const auto& k : grid.within_cell) within += (within.empty() ? "" : ", ") + k;
  gp << "set title "
     << report::gp_lines({sweep_name + ": " + o.metric + " over global batch x learning rate" +
                              (within.empty() ? std::string(" (one trial per cell)")
                                              : " (mean ± sd over " + within + ")"),
                          chance_text + (grid.noise ? "; seeds' spread (pooled sd) " + fmt("%.3g", *grid.noise)
                                                    : std::string()),
                          (grid.best ? std::string("best cell framed: ") : std::string("no best cell: ")) +
                              grid.verdict})
     << "\nset tmargin 5\n";
  gp << "set xlabel 'global batch'\nset ylabel 'learning rate'\nunset grid\n"
     << "set xrange [-0.5:" << std::max<double>(0.5, static_cast<double>(bv.size()) - 0.5) << "]\nset yrange [-0.5:"
     << std::max<double>(0.5, static_cast<double>(lv.size()) - 0.5) << "]\n";
  gp << "set xtics (";
  for (size_t i = 0; i < bv.size(); ++i) gp << (i ? ", " : "") << gp_string(std::to_string(bv[i])) << " " << i;
  gp << ")\nset ytics (";
  for (size_t i = 0; i < lv.size(); ++i) gp << (i ? ", " : "") << gp_string(lr_ticks[i]) << " " << i;
  gp << ")\nset palette defined (0 '#fff7ec', 0.5 '#41b6c4', 1 '#08306b')\nset cblabel " << gp_string(o.metric) << "\n"
     << "set style fill solid 1.0 noborder\n";
  if (!higher) gp << "set cbrange [*:*] reverse\n";
  if (!any_good) gp << "unset colorbox\n";  // no value to give a scale
  if (grid.best) {
    const auto& b = grid.cells[*grid.best];
    gp << "set object 1 rect from " << b.bi - 0.47 << "," << b.li - 0.47 << " to " << b.bi + 0.47 << ","
       << b.li + 0.47 << " front fillstyle empty border rgb '#d7301f' lw 4\n"
       << "set label 2 'best' at " << b.bi - 0.42 << "," << b.li + 0.36 << " front textcolor rgb '#d7301f' font 'sans,10'\n";
  }
  gp << "plot " << ps.file("heatmap.dat") << " using 1:2:(0.5):(0.5):3 with boxxyerror fillcolor palette notitle, \\\n"
     << "     " << ps.file("heatmap_other.dat") << " using 1:2:(0.5):(0.5) with boxxyerror fillcolor rgb '#d9d9d9' notitle, \\\n"
     << "     " << ps.file("heatmap.dat") << " using 1:2:4:5 with labels font 'sans,11' tc rgb variable notitle, \\\n"
     << "     " << ps.file("heatmap_other.dat") << " using 1:2:3 with labels font 'sans,10' notitle\n";
  gp << "unset object 1; unset label 2; set cbrange [*:*] noreverse; set tmargin; set colorbox\n"
     << "unset xtics; set xtics autofreq; unset ytics; set ytics autofreq; set grid\n"
     << "set autoscale x; set autoscale y; unset xrange; unset yrange\n";
}

// 2. training curves of all trials: loss (left) and the metric per epoch (right),
// one colour (and dash) per trial, the legend under both panels.
void curves_panel(PngScript& ps, const Opened& o, const Grid& grid) {
  std::ostringstream& gp = ps.gp;
  const std::string& sweep_name = ps.sweep_name;
  struct Line {
    std::string file, title, style;
    std::string with;  // "" : the panel's; one point is drawn as a point (a line of one point is invisible)
  };
  std::vector<Line> train_files, eval_files;
  double lo = INFINITY, hi = 0;
  Extent loss_x, eval_x, eval_y;  // what the panels hold (a 1-epoch sweep: one point each)
  for (size_t i = 0; i < o.rows.size(); ++i) {
    const Row& r = o.rows[i];
    Curves c = read_curves(r.run_dir, o.metric);
    const std::string title = trial_name(r.id) + " b" + std::to_string(r.global_batch) + " lr " +
                              fmt("%.3g", r.lr) + (r.status == "done" ? "" : " (" + r.status + ")");
    const std::string style = "lc rgb '" + report::series_colour(i) + "' dt " + (report::series_dashed(i) ? "2" : "1");
    if (!c.loss.empty()) {
      const std::string f = "curve_" + trial_name(r.id) + "_loss.dat";
      std::ostringstream s;
      for (auto& [x, y] : c.loss) {
        s << x << " " << y << "\n";
        if (std::isfinite(y) && y > 0) lo = std::min(lo, y), hi = std::max(hi, y);
        loss_x.add(x);
      }
      ps.put(f, s.str());
      train_files.push_back({f, title, style, c.loss.size() == 1 ? "points pt 7 ps 0.8" : ""});
    }
    if (!c.eval.empty()) {
      const std::string f = "curve_" + trial_name(r.id) + "_eval.dat";
      std::ostringstream s;
      for (auto& [x, y] : c.eval) {
        s << x << " " << y << "\n";
        eval_x.add(static_cast<double>(x));
        eval_y.add(y);
      }
      ps.put(f, s.str());
      eval_files.push_back({f, title, style, ""});
    }
  }
  // One plot of every listed curve, or a note where there is none.
  auto plot_curves = [&](const std::vector<Line>& lines, const char* with, const std::string& none) {
    if (lines.empty()) {
      ps.empty_panel(none);
      return;
    }
    gp << "plot ";
    for (size_t i = 0; i < lines.size(); ++i)
      gp << (i ? ", \\\n     " : "") << ps.file(lines[i].file) << " using 1:2 with "
         << (lines[i].with.empty() ? with : lines[i].with.c_str()) << " " << lines[i].style
         << " title " << gp_string(lines[i].title);
    gp << "\n";
  };
  const size_t entries = std::max(train_files.size(), eval_files.size());
  const int rows_of_key = static_cast<int>((entries + 3) / 4);
  const int height = 560 + 18 * rows_of_key;
  const double key_frac = (18.0 * rows_of_key + 70.0) / height;
  const bool none_finished = !grid.leader;
  ps.out_png("curves.png");
  gp << "set terminal pngcairo noenhanced size 1100," << height << " font 'sans,10'\n"
     << "set multiplot layout 1,2 title " << gp_string(sweep_name + ": training curves of all trials") << "\n"
     << "set bmargin at screen " << key_frac << "\n"
     << "set title 'training loss'\nset xlabel 'epoch'\nset ylabel 'loss'\n";
  // Explicit ranges that always span something: gnuplot refuses to plot with an
  // empty y range, which one loss value (a 1-epoch sweep) gave ([1.47941:1.47941]).
  if (hi > 0 && report::wants_log_axis(lo, hi))
    gp << "set ylabel 'loss (log scale)'\nset logscale y\nset yrange " << gp_range(lo, hi, true) << "\n";
  else if (hi > 0)
    gp << "set ylabel 'loss'\nset yrange " << gp_range(lo, hi, false) << "\n";
  if (loss_x.any()) gp << "set xrange " << gp_range(loss_x.lo, loss_x.hi, false, 0.5) << "\n";
  gp << "set key at screen 0.5,0.01 center bottom horizontal maxcols 4 font 'sans,8'\n";
  plot_curves(train_files, "lines lw 1.5",
              none_finished ? "no finished trial: no training steps recorded" : "no training steps recorded");
  gp << "unset logscale y\nunset xrange\nset autoscale x\nunset yrange\nset autoscale y\nset title "
     << gp_string("validation " + o.metric) << "\nset ylabel " << gp_string(o.metric) << "\nunset key\n";
  if (eval_x.any())
    gp << "set xrange " << gp_range(eval_x.lo, eval_x.hi, false, 0.5) << "\nset yrange "
       << gp_range(eval_y.lo, eval_y.hi, false) << "\n";
  plot_curves(eval_files, "linespoints lw 1.5 pt 7 ps 0.6",
              none_finished ? "no finished trial: no evaluation recorded" : "no evaluation recorded");
  gp << "unset multiplot\nset key default\nset bmargin\nunset xrange\nset autoscale\n"
     << "set terminal pngcairo noenhanced size 1000,650 font 'sans,10'\n";
}

// 3. throughput per trial, coloured by how many trials shared the machine; the
// note says what the measured overlap and load allow (report::throughput_note).
void throughput_panel(PngScript& ps, const Opened& o) {
  std::ostringstream& gp = ps.gp;
  const std::string& sweep_name = ps.sweep_name;
  const std::vector<int> shared = report::sharing(o.rows);
  std::ostringstream s;
  s << "# index trial clips_per_s label sharing_group\n";
  std::map<int, int> group;
  for (int k : shared) group[k] = 0;
  int gi = 0;
  for (auto& [k, g] : group) g = gi++;
  double top = 0;
  for (size_t i = 0; i < o.rows.size(); ++i) {
    const Row& r = o.rows[i];
    const auto stored = value_of(r, "clips_per_s");
    double cps = stored ? *stored : read_curves(r.run_dir, o.metric).mean_clips_per_s;
    if (!std::isfinite(cps)) cps = 0;
    top = std::max(top, cps);
    s << i << " " << trial_name(r.id) << " " << cps << " "
      << gp_data_string("b" + std::to_string(r.global_batch) + " " + r.status) << " " << group[shared[i]] << "\n";
  }
  ps.put("throughput.dat", s.str());
  ps.out_png("throughput.png");
  // The note under the title, a sentence a line.
  std::vector<std::string> title{sweep_name + ": training throughput per trial (clips/s)"};
  std::string note = report::throughput_note(o.rows, shared);
  for (size_t at; (at = note.find(". ")) != std::string::npos; note = note.substr(at + 2))
    title.push_back(note.substr(0, at + 1));
  if (!note.empty()) title.push_back(note);
  gp << "set title " << report::gp_lines(title) << "\n";
  gp << "set tmargin " << title.size() + 2 << "\nset xlabel 'trial (global batch, status)'\n"
     << "set ylabel 'clips / s'\nset yrange [0:" << std::max(1.0, top * 1.12) << "]\nset xrange [-0.6:"
     << static_cast<double>(o.rows.size()) - 0.4 << "]\n"
     << "set style fill solid 0.8 border -1\nset boxwidth 0.7\nset bmargin 7\nset xlabel offset 0,-1.5\n"
     << "set key outside bottom center horizontal\nplot ";
  bool first = true;
  for (const auto& [k, g] : group) {
    gp << (first ? "" : ", \\\n     ") << ps.file("throughput.dat") << " using ($5 == " << g
       << " ? $1 : 1/0):3:xtic(stringcolumn(2).\"\\n\".stringcolumn(4)) with boxes lc rgb '"
       << report::series_colour(static_cast<size_t>(g)) << "' title "
       << gp_string(k == 0 ? std::string("ran alone") : "ran with up to " + std::to_string(k) + " other trial(s)");
    first = false;
  }
  gp << ", \\\n     " << ps.file("throughput.dat") << " using 1:3:(sprintf('%.0f',$3)) with labels offset 0,0.7 notitle\n"
     << "set tmargin\n"
     << "unset xrange; unset yrange; set autoscale; set xtics autofreq\nset bmargin\nset xlabel offset 0,0\nset key default\n";
}

// 4. linear scaling check: the best lr per global batch (by the cells' mean, where
// it stands out of that batch's other cells and of chance) against lr
// proportional to batch.
void scaling_panel(PngScript& ps, const Opened& o, const Grid& grid) {
  std::ostringstream& gp = ps.gp;
  const std::string& sweep_name = ps.sweep_name;
  const std::vector<int64_t>& bv = grid.batches;
  const std::vector<double>& lv = grid.lrs;
  const std::vector<std::string> lr_ticks = report::tick_labels(lv, 2);
  std::ostringstream all, bs;
  for (const auto& r : o.rows) all << r.global_batch << " " << r.lr << " " << gp_data_string(r.status) << "\n";
  std::optional<std::pair<double, double>> anchor;
  for (size_t bi = 0; bi < bv.size(); ++bi) {
    if (!grid.best_per_batch[bi]) continue;
    const auto& c = grid.cells[*grid.best_per_batch[bi]];
    bs << bv[bi] << " " << lv[c.li] << " " << c.mean << "\n";
    if (!anchor) anchor = {static_cast<double>(bv[bi]), lv[c.li]};
  }
  if (!anchor) bs << "-1 -1 0\n";  // outside the axes: nothing stands out to draw
  ps.put("scaling_trials.dat", all.str());
  ps.put("scaling_best.dat", bs.str());
  ps.out_png("linear_scaling.png");
  const double xlo = bv.empty() ? 1 : static_cast<double>(bv.front()) * 0.7;
  const double xhi = bv.empty() ? 10 : static_cast<double>(bv.back()) * 1.4;
  const double ylo = lv.empty() || lv.front() <= 0 ? 1e-4 : lv.front() * 0.5;
  const double yhi = lv.empty() || lv.back() <= 0 ? 1 : lv.back() * 2;
  gp << "set title " << gp_string(sweep_name + ": linear scaling rule check (best lr per global batch)") << "\n"
     << "set xlabel 'global batch (log scale)'\nset ylabel 'learning rate (log scale)'\nset logscale xy\n"
     << "set key top left\nset xrange [" << xlo << ":" << xhi << "]\n"
     << "set yrange [" << ylo << ":" << yhi << "]\n";
  gp << "set xtics (";
  for (size_t i = 0; i < bv.size(); ++i) gp << (i ? ", " : "") << gp_string(std::to_string(bv[i])) << " " << bv[i];
  gp << ")\nset ytics (";
  for (size_t i = 0; i < lv.size(); ++i) gp << (i ? ", " : "") << gp_string(lr_ticks[i]) << " " << lv[i];
  gp << ")\n";
  if (!anchor)
    gp << "set label 5 " << gp_string("no batch has a best lr that stands out: " + grid.verdict, 400)
       << " at graph 0.5,0.5 center\n";
  gp << "plot " << ps.file("scaling_trials.dat") << " using 1:2 with points pt 6 ps 1.5 lc rgb '#999999' title 'trials'";
  if (anchor) {
    const double b0 = anchor->first, l0 = anchor->second;
    gp << ", \\\n     " << l0 << "*x/" << b0 << " with lines lw 2 dt 2 lc rgb '#d62728' title "
       << gp_string("linear rule: lr = " + fmt("%.3g", l0) + " x batch / " + std::to_string(static_cast<long long>(b0)))
       << ", \\\n     " << ps.file("scaling_best.dat")
       << " using 1:2 with linespoints pt 7 ps 2 lw 2 lc rgb '#1f77b4' title "
       << gp_string("best lr (by mean " + o.metric + ", where it stands out)");
  }
  gp << "\nunset label 5; unset logscale; unset xrange; unset yrange; set xtics autofreq; set ytics autofreq\n";
}

// 5. steps and clips to the target against the global batch (a sweep with a target
// and 2 or more batches): the best trial of each batch, the fit S = S_min + E_min / B
// and E = E_min + S_min B through them, B_crit, and each trial's B_noise.
void target_panels(PngScript& ps, const Opened& o, const BatchSizeStudy& study) {
  std::ostringstream& gp = ps.gp;
  const std::string& sweep_name = ps.sweep_name;
  const BatchSizeStudy* st = &study;
  std::ostringstream all, best;
  all << "# global_batch steps clips trial\n";
  best << "# global_batch steps clips trial (the fewest steps of its batch)\n";
  Extent bx, sy, ey;
  for (const auto& t : st->trials) {
    const Row& r = *t.row;
    bx.add(static_cast<double>(r.global_batch));
    if (const auto v = t.noise_at_target ? t.noise_at_target : t.noise_end; v && *v > 0) bx.add(*v);
    if (!o.measured(r) || !r.to_target.steps || !r.to_target.clips || *r.to_target.steps <= 0) continue;
    all << r.global_batch << " " << *r.to_target.steps << " " << *r.to_target.clips << " " << r.id << "\n";
    sy.add(static_cast<double>(*r.to_target.steps));
    ey.add(static_cast<double>(*r.to_target.clips));
  }
  for (const auto& b : st->best)
    if (b) {
      const Row& r = *st->trials[*b].row;
      best << r.global_batch << " " << *r.to_target.steps << " " << r.to_target.clips.value_or(0) << " " << r.id
           << "\n";
    }
  ps.put("target_trials.dat", all.str());
  ps.put("target_best.dat", best.str());
  const report::CriticalBatchFit* fit = st->fit.fit ? &*st->fit.fit : nullptr;
  // Long sentences as title lines of at most ~110 characters, cut after "; ", ": " or ", ".
  auto lines_of = [](const std::string& text) {
    std::vector<std::string> out;
    std::string rest = text;
    while (rest.size() > 110) {
      size_t at = std::string::npos;
      for (const char* cut : {"; ", ": ", ", "}) {
        at = rest.rfind(cut, 110);
        if (at != std::string::npos && at >= 40) break;
      }
      if (at == std::string::npos || at < 40) break;
      out.push_back(rest.substr(0, at + 1));
      rest = rest.substr(at + 2);
    }
    out.push_back(rest);
    return out;
  };
  for (const bool steps : {true, false}) {
    ps.out_png(steps ? "steps_to_target.png" : "clips_to_target.png");
    std::vector<std::string> title{sweep_name + ": " + (steps ? "steps" : "clips") + " to " + st->target.text() +
                                   " against the global batch"};
    for (const auto& l : lines_of(st->fit_text)) title.push_back(l);
    if (!steps)
      for (const auto& l : lines_of(st->noise_text)) title.push_back(l);
    gp << "set title " << report::gp_lines(title, 1200) << "\nset tmargin " << title.size() + 2 << "\n";
    const Extent& y = steps ? sy : ey;
    if (!y.any()) {
      ps.empty_panel("no trial reached the target " + st->target.text());
      gp << "set tmargin\nunset xrange; unset yrange; set autoscale\n";
      continue;
    }
    gp << "set xlabel 'global batch (log scale)'\nset ylabel "
       << gp_string(std::string(steps ? "optimizer steps" : "training clips") + " to the target (log scale)")
       << "\nset logscale x\nset logscale y 2\nset format y '%g'\nset xrange [" << fmt("%.10g", bx.lo / 1.5) << ":" << fmt("%.10g", bx.hi * 1.5)
       << "]\nset yrange [" << fmt("%.10g", y.lo / 2) << ":" << fmt("%.10g", y.hi * 2) << "]\nset key top "
       << (steps ? "right" : "left") << " opaque\nset xtics (";
    for (size_t i = 0; i < st->batches.size(); ++i)
      gp << (i ? ", " : "") << gp_string(std::to_string(st->batches[i])) << " " << st->batches[i];
    gp << ")\nset samples 400\n";
    int arrow = 20;
    if (fit && std::isfinite(fit->b_crit) && fit->b_crit > 0)
      gp << "set arrow " << arrow++ << " from first " << fmt("%.10g", fit->b_crit) << ", graph 0 to first "
         << fmt("%.10g", fit->b_crit) << ", graph 1 nohead dt 2 lw 2 lc rgb '#d62728'\n";
    size_t noise_lines = 0;
    if (!steps)
      for (const auto& t : st->trials)
        if (const auto v = t.noise_at_target ? t.noise_at_target : t.noise_end; v && *v > 0) {
          gp << "set arrow " << arrow++ << " from first " << fmt("%.10g", *v) << ", graph 0 to first "
             << fmt("%.10g", *v) << ", graph 1 nohead dt 3 lw 1.5 lc rgb '#2ca02c'\n";
          ++noise_lines;
        }
    gp << "plot " << ps.file("target_trials.dat") << " using 1:" << (steps ? 2 : 3)
       << " with points pt 6 ps 1.5 lc rgb '#999999' title 'trials that reached it', \\\n     "
       << ps.file("target_best.dat") << " using 1:" << (steps ? 2 : 3)
       << " with points pt 7 ps 2 lc rgb '#1f77b4' title 'fewest steps of its batch'";
    if (fit) {
      const std::string smin = fmt("%.10g", fit->s_min), emin = fmt("%.10g", fit->e_min);
      gp << ", \\\n     " << (steps ? smin + " + " + emin + " / x" : emin + " + " + smin + " * x")
         << " with lines lw 2 lc rgb '#d62728' title "
         << gp_string(steps ? "fit: S = " + fmt("%.4g", fit->s_min) + " + " + fmt("%.4g", fit->e_min) + " / B"
                            : "fit: E = " + fmt("%.4g", fit->e_min) + " + " + fmt("%.4g", fit->s_min) + " B");
      if (std::isfinite(fit->b_crit) && fit->b_crit > 0)
        gp << ", \\\n     NaN with lines dt 2 lw 2 lc rgb '#d62728' title "
           << gp_string("B_crit = E_min / S_min = " + fmt("%.4g", fit->b_crit));
    }
    if (noise_lines > 0)
      gp << ", \\\n     NaN with lines dt 3 lw 1.5 lc rgb '#2ca02c' title "
         << gp_string("B_noise of a trial (" + std::to_string(noise_lines) + "; at the target, else at its end)");
    gp << "\nunset arrow; unset logscale; set format y '% h'; unset xrange; unset yrange; set xtics autofreq; "
          "set ytics autofreq\n"
       << "set tmargin\nset key default\nset samples 100\n";
  }
}

}  // namespace

std::vector<std::string> write_report(const std::string& dir, const std::string& report_dir) {
  Opened o = open_results(dir);
  if (!report::gnuplot_program())
    throw base::failure("gnuplot is not installed (Debian: apt-get install gnuplot-nox); no plots written");
  PngScript ps;
  ps.rd = fs::path(report_dir);
  fs::create_directories(ps.rd);
  ps.sweep_name = o.name.empty() ? std::string("sweep") : o.name;
  // Paths reach gnuplot as ARG1 (`gnuplot -c report.gp REPORT_DIR`), a string
  // variable it never parses: a folder named with quotes, $(...) or newlines stays a
  // name. Names from the sweep (its name, metric, trial statuses) are gp_string'ed.
  ps.gp << "# Written by vexp report; redraw with: gnuplot -c report.gp REPORT_DIR\n"
        << "dir = ARG1\n"
        << "set terminal pngcairo noenhanced size 1000,650 font 'sans,10'\nset encoding utf8\nset grid\n";
  const report::Grid grid = report::sweep_grid(o);
  heatmap_panel(ps, o, grid);
  curves_panel(ps, o, grid);
  throughput_panel(ps, o);
  scaling_panel(ps, o, grid);
  if (const std::optional<BatchSizeStudy> st = report::batch_size_study(o)) target_panels(ps, o, *st);
  const fs::path& rd = ps.rd;
  const std::vector<std::string>& files = ps.files;
  const fs::path script = rd / "report.gp";
  ps.put("report.gp", ps.gp.str());
  const std::string log = (rd / "gnuplot.log").string();
  const std::string why = report::run_gnuplot(script.string(), {rd.string()}, log);
  if (!why.empty())
    throw base::failure("gnuplot failed on '" + script.string() + "' (" + why + "; see " + log + ")");
  for (const auto& f : files)
    if (!fs::exists(f) || fs::file_size(f) == 0) throw base::failure("gnuplot wrote no '" + f + "'");
  return files;
}

}  // namespace vexp::report
