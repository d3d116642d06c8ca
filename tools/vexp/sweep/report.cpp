#include "sweep/report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "common.hpp"
#include "sweep/directory.hpp"

namespace vexp::sweep {
namespace fs = std::filesystem;
using json = nlohmann::json;
using cli::Exit;

namespace {

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

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

std::optional<double> value_of(const Row& r, const std::string& key) {
  if (key == "id") return static_cast<double>(r.id);
  if (key == "lr") return r.lr;
  if (key == "global_batch") return static_cast<double>(r.global_batch);
  if (r.status != "done") return std::nullopt;
  if (r.metrics.contains(key) && r.metrics[key].is_number()) return r.metrics[key].get<double>();
  return std::nullopt;
}

std::string csv_field(std::string s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string o = "\"";
  for (char c : s) o += c == '"' ? std::string("\"\"") : std::string(1, c);
  return o + "\"";
}

bool better(double a, double b, bool higher) { return higher ? a > b : a < b; }

}  // namespace

Opened open_results(const std::string& dir) {
  const fs::path db = fs::path(dir) / "sweep.db";
  if (!fs::exists(db)) throw Exit{cli::kExitFailure, "'" + dir + "' is not a sweep directory (it has no sweep.db)"};
  Store st;
  try {
    st.open(db.string(), false);
  } catch (const CorruptDatabase& e) {
    throw Exit{cli::kExitFailure,
               "'" + db.string() + "' is damaged (" + e.what() + "); the trial directories in '" +
                   (fs::path(dir) / "trials").string() + "' hold every result: run `vexp sweep SWEEP.toml --out " + dir +
                   "` again with the same sweep file to rebuild it from them (the damaged file is kept)"};
  } catch (const std::exception& e) {
    throw Exit{cli::kExitFailure, e.what()};
  }
  Opened o;
  o.rows = st.rows();
  // A sweep directory that was moved or copied: its trials are still in DIR/trials/NNN.
  for (auto& r : o.rows) {
    const fs::path here = fs::path(dir) / "trials" / trial_name(r.id);
    if (!fs::exists(r.run_dir) && fs::exists(here)) r.run_dir = here.string();
  }
  o.metric = st.meta("metric");
  o.direction = st.meta("direction");
  o.name = st.meta("name");
  if (o.metric.empty()) o.metric = "top1";
  if (o.direction.empty()) o.direction = metric_higher_is_better(o.metric) ? "max" : "min";
  return o;
}

std::string results_text(const std::string& dir, const std::string& format, const std::string& sort_key) {
  Opened o = open_results(dir);
  std::string key = sort_key.empty() ? o.metric : sort_key;
  if (!known_metric(key) && key != "id" && key != "lr" && key != "global_batch")
    throw Exit{cli::kExitInvalid, "--sort '" + key + "': expected one of " + metric_list() + ", id, lr, global_batch"};
  const bool higher = key == o.metric ? o.direction == "max" : key == "id" || key == "lr" || key == "global_batch"
                                                                   ? false
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
  if (format == "json") {
    json a = json::array();
    for (const auto& r : rows) a.push_back(row_json(r));
    json j{{"sweep", o.name}, {"metric", o.metric}, {"direction", o.direction}, {"trials", a}};
    return j.dump(2) + "\n";
  }
  if (format == "csv") {
    out << "trial,status";
    for (const auto& k : keys) out << "," << csv_field(k);
    out << ",global_batch,lr,top1,top5,val_loss,clips_per_s,wall_s,attempts,run_dir,message\n";
    for (const auto& r : rows) {
      out << r.id << "," << r.status;
      for (const auto& k : keys) out << "," << (r.params.contains(k) ? csv_field(param_text(r.params[k])) : "");
      out << "," << r.global_batch << "," << fmt("%.10g", r.lr);
      for (const char* m : mcols) {
        auto v = value_of(r, m);
        out << "," << (v ? fmt("%.10g", *v) : "");
      }
      out << "," << r.attempts << "," << csv_field(r.run_dir) << "," << csv_field(r.message) << "\n";
    }
    return out.str();
  }
  // Aligned table.
  std::vector<size_t> w;
  for (const auto& k : keys) {
    size_t width = k.size();
    for (const auto& r : rows)
      if (r.params.contains(k)) width = std::max(width, param_text(r.params[k]).size());
    w.push_back(width);
  }
  char buf[256];
  std::snprintf(buf, sizeof buf, "%-5s %-9s", "trial", "status");
  out << buf;
  for (size_t i = 0; i < keys.size(); ++i) out << " " << keys[i] << std::string(w[i] - keys[i].size(), ' ');
  std::snprintf(buf, sizeof buf, " %6s %9s %7s %7s %8s %8s %7s\n", "batch", "lr", "top-1", "top-5", "val_loss",
                "clips/s", "wall s");
  out << buf;
  for (const auto& r : rows) {
    std::snprintf(buf, sizeof buf, "%-5s %-9s", trial_name(r.id).c_str(), r.status.c_str());
    out << buf;
    for (size_t i = 0; i < keys.size(); ++i) {
      std::string t = r.params.contains(keys[i]) ? param_text(r.params[keys[i]]) : "-";
      out << " " << t << std::string(w[i] - std::min(w[i], t.size()), ' ');
    }
    auto cell = [&](const char* m, const char* f, int width) {
      auto v = value_of(r, m);
      std::string t = v ? fmt(f, *v) : "-";
      return std::string(static_cast<size_t>(std::max<int>(0, width - static_cast<int>(t.size()))), ' ') + t;
    };
    out << " " << cell("global_batch", "%.0f", 6) << " " << cell("lr", "%.4g", 9) << " " << cell("top1", "%.4f", 7)
        << " " << cell("top5", "%.4f", 7) << " " << cell("val_loss", "%.4f", 8) << " " << cell("clips_per_s", "%.1f", 8)
        << " " << fmt("%7.1f", r.wall_s) << "\n";
  }
  int counts[6] = {0, 0, 0, 0, 0, 0};
  const char* names[6] = {"done", "diverged", "pruned", "failed", "running", "pending"};
  for (const auto& r : rows)
    for (int i = 0; i < 6; ++i)
      if (r.status == names[i]) ++counts[i];
  out << rows.size() << " trials:";
  bool first = true;
  for (int i = 0; i < 6; ++i)
    if (counts[i]) {
      out << (first ? " " : ", ") << counts[i] << " " << names[i];
      first = false;
    }
  out << "; metric " << o.metric << " (" << o.direction << ")\n";
  return out.str();
}

int64_t write_best_recipe(const std::string& dir, const std::string& out_path) {
  Opened o = open_results(dir);
  const bool higher = o.direction == "max";
  const Row* best = nullptr;
  for (const auto& r : o.rows)
    if (r.status == "done" && r.metric && (!best || better(*r.metric, *best->metric, higher))) best = &r;
  if (!best) throw Exit{cli::kExitFailure, "'" + dir + "' has no finished trial yet: there is no best recipe"};
  std::ifstream in(fs::path(best->run_dir) / "resolved.toml");
  if (!in) throw Exit{cli::kExitFailure, "'" + best->run_dir + "/resolved.toml' is missing"};
  std::stringstream text;
  text << in.rdbuf();
  std::string body = text.str();
  // Drop the run-local knobs the sweep added (threads): the recipe is for a fresh run.
  std::ostringstream o2;
  o2 << "# best trial " << trial_name(best->id) << " of sweep '" << o.name << "': " << o.metric << " = "
     << fmt("%.6g", *best->metric) << " (" << o.direction << ")\n# parameters: " << best->params.dump() << "\n"
     << body;
  const std::string tmp = out_path + ".tmp";
  {
    std::ofstream f(tmp);
    if (!f) throw Exit{cli::kExitFailure, "cannot write '" + out_path + "'"};
    f << o2.str();
  }
  fs::rename(tmp, out_path);
  return best->id;
}

std::vector<std::string> write_report(const std::string& dir, const std::string& report_dir) {
  Opened o = open_results(dir);
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0)
    throw Exit{cli::kExitFailure, "gnuplot is not installed (Debian: apt-get install gnuplot-nox); no plots written"};
  const fs::path rd(report_dir);
  fs::create_directories(rd);
  const bool higher = o.direction == "max";
  std::ostringstream gp;
  gp << "set terminal pngcairo noenhanced size 1000,650 font 'sans,10'\nset encoding utf8\nset grid\n";
  std::vector<std::string> files;
  auto out_png = [&](const std::string& name) {
    files.push_back((rd / name).string());
    gp << "set output '" << (rd / name).string() << "'\n";
  };
  auto q = [](const fs::path& p) { return "'" + p.string() + "'"; };

  // 1. batch x lr heatmap of the metric.
  std::set<int64_t> batches;
  std::set<double> lrs;
  for (const auto& r : o.rows) {
    batches.insert(r.global_batch);
    lrs.insert(r.lr);
  }
  std::vector<int64_t> bv(batches.begin(), batches.end());
  std::vector<double> lv(lrs.begin(), lrs.end());
  std::map<std::pair<size_t, size_t>, const Row*> cell;
  for (const auto& r : o.rows) {
    size_t bi = static_cast<size_t>(std::find(bv.begin(), bv.end(), r.global_batch) - bv.begin());
    size_t li = static_cast<size_t>(std::find(lv.begin(), lv.end(), r.lr) - lv.begin());
    auto& c = cell[{bi, li}];
    if (!c || (r.metric && (!c->metric || better(*r.metric, *c->metric, higher)))) c = &r;
  }
  {
    std::ofstream good(rd / "heatmap.dat"), bad(rd / "heatmap_other.dat");
    good << "# batch_index lr_index " << o.metric << "\n";
    bad << "# batch_index lr_index status\n";
    bool any_good = false, any_bad = false;
    for (const auto& [k, r] : cell) {
      if (r->status == "done" && r->metric) {
        good << k.first << " " << k.second << " " << *r->metric << "\n";
        any_good = true;
      } else {
        bad << k.first << " " << k.second << " " << r->status << "\n";
        any_bad = true;
      }
    }
    if (!any_good) good << "-10 -10 0\n";
    if (!any_bad) bad << "-10 -10 none\n";
    out_png("heatmap.png");
    gp << "set title '" << o.name << ": " << o.metric << " over global batch x learning rate (best trial per cell)'\n"
       << "set xlabel 'global batch'\nset ylabel 'learning rate'\nunset grid\n"
       << "set xrange [-0.5:" << bv.size() - 0.5 << "]\nset yrange [-0.5:" << lv.size() - 0.5 << "]\n";
    gp << "set xtics (";
    for (size_t i = 0; i < bv.size(); ++i) gp << (i ? ", " : "") << "'" << bv[i] << "' " << i;
    gp << ")\nset ytics (";
    for (size_t i = 0; i < lv.size(); ++i) gp << (i ? ", " : "") << "'" << fmt("%.4g", lv[i]) << "' " << i;
    gp << ")\nset palette defined (0 '#b2182b', 0.5 '#f7f7f7', 1 '#2166ac')\nset cblabel '" << o.metric << "'\n"
       << "set style fill solid 1.0 noborder\n"
       << "plot " << q(rd / "heatmap.dat")
       << " using 1:2:(0.5):(0.5):3 with boxxyerror fillcolor palette notitle, \\\n"
       << "     " << q(rd / "heatmap_other.dat") << " using 1:2:(0.5):(0.5) with boxxyerror fillcolor rgb '#999999' notitle, \\\n"
       << "     " << q(rd / "heatmap.dat") << " using 1:2:(sprintf('%.3f',$3)) with labels font 'sans,12' notitle, \\\n"
       << "     " << q(rd / "heatmap_other.dat") << " using 1:2:3 with labels font 'sans,11' notitle\n";
    gp << "unset xtics; set xtics autofreq; unset ytics; set ytics autofreq; set grid\n"
       << "set autoscale x; set autoscale y; unset xrange; unset yrange\n";
  }

  // 2. training curves of all trials: loss (left) and the metric per epoch (right).
  {
    std::vector<std::pair<std::string, std::string>> train_files, eval_files;  // file, title
    // Writes REPORT_DIR/curve_NNN_WHAT.dat and lists it with its title.
    auto write_curve = [&](const Row& r, const char* what, const auto& points, const std::string& title,
                           std::vector<std::pair<std::string, std::string>>& files) {
      if (points.empty()) return;
      fs::path f = rd / ("curve_" + trial_name(r.id) + "_" + what + ".dat");
      std::ofstream s(f);
      for (auto& [x, y] : points) s << x << " " << y << "\n";
      files.emplace_back(f.string(), title);
    };
    // One plot of every listed curve, or a note where there is none.
    auto plot_curves = [&](const std::vector<std::pair<std::string, std::string>>& files, const char* style,
                           const char* none) {
      if (files.empty()) {
        gp << "set label 1 '" << none << "' at graph 0.3,0.5\nplot 1/0 notitle\nunset label 1\n";
        return;
      }
      gp << "plot ";
      for (size_t i = 0; i < files.size(); ++i)
        gp << (i ? ", \\\n     " : "") << "'" << files[i].first << "' using 1:2 with " << style << " title '"
           << files[i].second << "'";
      gp << "\n";
    };
    for (const auto& r : o.rows) {
      Curves c = read_curves(r.run_dir, o.metric);
      std::string title = trial_name(r.id) + " b" + std::to_string(r.global_batch) + " lr " + fmt("%.3g", r.lr) +
                          (r.status == "done" ? "" : " (" + r.status + ")");
      write_curve(r, "loss", c.loss, title, train_files);
      write_curve(r, "eval", c.eval, title, eval_files);
    }
    out_png("curves.png");
    gp << "set multiplot layout 1,2 title '" << o.name << ": training curves of all trials'\n"
       << "set title 'training loss'\nset xlabel 'epoch'\nset ylabel 'loss (log scale)'\nset logscale y\n"
       << "set key top right font 'sans,8'\n";
    plot_curves(train_files, "lines lw 1.5", "no training steps recorded");
    gp << "unset logscale y\nset title 'validation " << o.metric << "'\nset ylabel '" << o.metric
       << "'\nset key bottom right font 'sans,8'\n";
    plot_curves(eval_files, "linespoints lw 1.5 pt 7 ps 0.6", "no evaluation recorded");
    gp << "unset multiplot\nset key default\n";
  }

  // 3. throughput per trial.
  {
    std::ofstream s(rd / "throughput.dat");
    s << "# index trial clips_per_s label\n";
    int i = 0;
    for (const auto& r : o.rows) {
      double cps = r.status == "done" && r.metrics.contains("clips_per_s") ? r.metrics["clips_per_s"].get<double>()
                                                                           : read_curves(r.run_dir, o.metric).mean_clips_per_s;
      s << i++ << " " << trial_name(r.id) << " " << cps << " \"b" << r.global_batch << "\\n" << r.status << "\"\n";
    }
    out_png("throughput.png");
    gp << "set title '" << o.name << ": training throughput per trial (clips/s)'\nset xlabel 'trial (global batch, status)'\n"
       << "set ylabel 'clips / s'\nset yrange [0:*]\nset xrange [-0.6:" << o.rows.size() - 0.4 << "]\n"
       << "set style fill solid 0.7 border -1\nset boxwidth 0.7\nset bmargin 7\nset xlabel offset 0,-1.5\n"
       << "plot " << q(rd / "throughput.dat") << " using 1:3:xtic(stringcolumn(2).\"\\n\".stringcolumn(4)) with boxes lc rgb '#2166ac' notitle, \\\n"
       << "     '' using 1:3:(sprintf('%.0f',$3)) with labels offset 0,0.7 notitle\n"
       << "unset xrange; unset yrange; set autoscale; set xtics autofreq\nset bmargin\nset xlabel offset 0,0\n";
  }

  // 4. linear scaling check: best lr per global batch against lr proportional to batch.
  {
    std::map<int64_t, const Row*> best;
    for (const auto& r : o.rows) {
      if (r.status != "done" || !r.metric) continue;
      auto& b = best[r.global_batch];
      if (!b || better(*r.metric, *b->metric, higher)) b = &r;
    }
    std::ofstream all(rd / "scaling_trials.dat"), bs(rd / "scaling_best.dat");
    for (const auto& r : o.rows) all << r.global_batch << " " << r.lr << " " << r.status << "\n";
    for (const auto& [b, r] : best) bs << b << " " << r->lr << " " << *r->metric << "\n";
    if (best.empty()) bs << "1 1 0\n";
    double b0 = best.empty() ? 1 : static_cast<double>(best.begin()->first);
    double l0 = best.empty() ? 1 : best.begin()->second->lr;
    out_png("linear_scaling.png");
    gp << "set title '" << o.name << ": linear scaling rule check (best lr per global batch)'\n"
       << "set xlabel 'global batch (log scale)'\nset ylabel 'learning rate (log scale)'\nset logscale xy\n"
       << "set key top left\nset xrange [" << bv.front() * 0.7 << ":" << bv.back() * 1.4 << "]\n"
       << "set yrange [" << lv.front() * 0.5 << ":" << lv.back() * 2 << "]\n";
    gp << "set xtics (";
    for (size_t i = 0; i < bv.size(); ++i) gp << (i ? ", " : "") << "'" << bv[i] << "' " << bv[i];
    gp << ")\nset ytics (";
    for (size_t i = 0; i < lv.size(); ++i) gp << (i ? ", " : "") << "'" << fmt("%.4g", lv[i]) << "' " << lv[i];
    gp << ")\n"
       << "plot " << q(rd / "scaling_trials.dat") << " using 1:2 with points pt 6 ps 1.5 lc rgb '#999999' title 'trials', \\\n"
       << "     " << l0 << "*x/" << b0 << " with lines lw 2 dt 2 lc rgb '#b2182b' title 'linear rule: lr = "
       << fmt("%.3g", l0) << " x batch / " << static_cast<long long>(b0) << "', \\\n"
       << "     " << q(rd / "scaling_best.dat") << " using 1:2 with linespoints pt 7 ps 2 lw 2 lc rgb '#2166ac' title 'best lr (by "
       << o.metric << ")'\n"
       << "unset logscale; unset xrange; unset yrange; set xtics autofreq; set ytics autofreq\n";
  }
  const fs::path script = rd / "report.gp";
  {
    std::ofstream f(script);
    f << gp.str();
  }
  const std::string cmd = "gnuplot '" + script.string() + "' > '" + (rd / "gnuplot.log").string() + "' 2>&1";
  if (std::system(cmd.c_str()) != 0)
    throw Exit{cli::kExitFailure, "gnuplot failed on '" + script.string() + "' (see " + (rd / "gnuplot.log").string() + ")"};
  for (const auto& f : files)
    if (!fs::exists(f) || fs::file_size(f) == 0) throw Exit{cli::kExitFailure, "gnuplot wrote no '" + f + "'"};
  return files;
}

}  // namespace vexp::sweep
