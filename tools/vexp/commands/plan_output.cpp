#include "commands/plan_output.hpp"

#include <algorithm>
#include <cmath>
#include <iostream>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <optional>

#include "vexp/report/gnuplot.hpp"
#include "vexp/base/files.hpp"
#include "vexp/base/text.hpp"
#include "vexp/dsl/validate.hpp"

namespace vexp::cli {
namespace fs = std::filesystem;
using namespace vexp::plan;

namespace {

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// "42 s", "12.5 min", "3.2 h", "2.1 d".
std::string duration(double s) {
  if (s < 120) return fmt("%.1f s", s);
  if (s < 7200) return fmt("%.1f min", s / 60);
  if (s < 172800) return fmt("%.1f h", s / 3600);
  if (s < 86400 * 1e5) return fmt("%.1f d", s / 86400);
  return fmt("%.3g d", s / 86400);
}

// A string from the cluster file, a bench JSON it names, the recipe or the command line,
// as the terminal (or a recipe comment) shows it: control characters escaped, cut at 200 bytes.
std::string shown(const std::string& s) { return base::printable(s, 200); }

// A table cell right-aligned in `w` columns; one that does not fit keeps a space before
// it, so that two cells never run together.
std::string pad(const std::string& s, size_t w) { return s.size() >= w ? " " + s : std::string(w - s.size(), ' ') + s; }

// A figure of the table: one decimal when it fits its column (`w` less the space that
// separates it), else (or when it would read 0.0) three significant digits.
std::string num(double v, size_t w) {
  const std::string fixed = fmt("%.1f", v);
  const bool tiny = v != 0 && std::fabs(v) < 0.05;  // not "0.0" for a rate of 1e-6
  return pad(fixed.size() < w && !tiny ? fixed : fmt("%.3g", v), w);
}

// What the step times are worth: the tolerance validate.py holds the model to where
// a row's profile was measured as planned, else the row's range and why (Row::unsure).
std::string uncertainty_lines(const std::vector<Row>& rows) {
  std::ostringstream wide;
  std::string last;
  for (const Row& row : rows) {
    if (row.unsure.empty()) continue;
    std::string why;
    for (const auto& u : row.unsure) why += (why.empty() ? "" : "; ") + u;
    wide << "  " << row.gpus << " GPU(s): " << fmt("%.1f", row.step_low_ms) << " to " << fmt("%.1f", row.step_high_ms)
         << " ms: " << (why == last ? std::string("as above") : shown(why)) << "\n";
    last = why;
  }
  return "  step times \u00b1" + fmt("%.0f", 100 * kValidatedTolerance) +
         " % on a profile measured as planned (the tolerance tools/plan/validate.py checks, docs/planning.md)" +
         (wide.str().empty() ? std::string("; every row here is\n") : std::string("; wider where it was not:\n") + wide.str());
}

// "; each bucket adds X ms to the backward on more than one rank (SOURCE)": the first
// multi-rank row's per_bucket_ms and its source, or "" when no row has one.
std::string bucket_cost_text(const std::vector<Row>& rows) {
  for (const Row& row : rows)
    if (row.ranks > 1 && row.per_bucket_ms > 0)
      return "; each bucket adds " + fmt("%.3g", row.per_bucket_ms) + " ms to the backward on more than one rank (" +
             shown(row.per_bucket_source) + ")";
  return "";
}

std::string gpu_list(const std::vector<Row>& rows) {
  std::string out;
  for (const auto& r : rows) out += (out.empty() ? "" : ",") + std::to_string(r.gpus);
  return out;
}

// The integer range a built-in recipe key accepts (dsl/src/sections.cpp), when it has one.
std::optional<std::pair<int64_t, int64_t>> schema_range(const std::string& section, const std::string& key) {
  for (const auto& [name, schema] : dsl::builtin_sections()) {
    if (name != section) continue;
    const dsl::ParamSpec* spec = schema.find(key);
    if (!spec || !spec->min || !spec->max) return std::nullopt;
    const int64_t lo = static_cast<int64_t>(std::ceil(*spec->min)) + (spec->min_exclusive ? 1 : 0);
    const int64_t hi = static_cast<int64_t>(std::floor(*spec->max)) - (spec->max_exclusive ? 1 : 0);
    return std::make_pair(lo, hi);
  }
  return std::nullopt;
}

// "1,234,567" (a count of clips or steps).
std::string grouped(double v) {
  const std::string digits = fmt("%.0f", v);
  std::string out;
  const size_t n = digits.size();
  for (size_t i = 0; i < n; ++i) {
    out += digits[i];
    if (digits[0] != '-' && (n - 1 - i) % 3 == 0 && i + 1 < n) out += ',';
  }
  return out;
}

// A noise scale in clips: "41.18", "1,229" or "12,288" (never "1.229e+04").
std::string clips_text(double v) { return v < 1000 ? fmt("%.4g", v) : grouped(v); }

// The time-to-accuracy block under the plan's table (--noise-from; goodput.hpp).
std::string target_table(const TargetPlan& t, bool fixed_batch) {
  std::ostringstream out;
  out << "\ntime to accuracy: B_noise " << clips_text(t.b_noise) << " clips (" << shown(t.noise_from)
      << "); reference: the recipe's global batch " << grouped(static_cast<double>(t.ref_batch)) << " trained "
      << fmt("%g", t.budget_epochs) << " epochs (" << grouped(t.ref_clips) << " clips)\n";
  out << "  GPUs  global    stat.      steps to      clips to   epochs      time to     GPU-h     goodput  note\n"
      << "         batch   eff. %     reference     reference             reference                clips/s\n";
  for (const TargetRow& x : t.rows) {
    std::string note;
    auto add = [&note](const std::string& n) { note += (note.empty() ? "  " : ", ") + n; };
    if (x.gpus == t.critical_gpus) add("critical batch");
    if (x.gpus == t.fastest_gpus) add("fastest");
    if (!x.within_budget) add("over the epoch budget");
    out << pad(std::to_string(x.gpus), 6) << pad(std::to_string(x.global_batch), 8) << num(100 * x.efficiency, 9)
        << pad(grouped(x.steps), 14) << pad(grouped(x.clips), 14) << num(x.epochs, 9) << pad(duration(x.time_s), 13)
        << pad(x.gpu_hours < 100 ? fmt("%.3g", x.gpu_hours) : grouped(x.gpu_hours), 10) << num(x.goodput, 12) << note << "\n";
  }
  out << "  critical batch: B_noise = " << clips_text(t.b_noise)
      << " clips (steps to a target fall as 1 + B_noise/B, clips grow as 1 + B/B_noise); nearest planned: "
      << t.critical_gpus << " GPUs\n";
  for (const TargetRow& x : t.rows)
    if (x.gpus == t.fastest_gpus)
      out << "  fastest to the reference progress: " << x.gpus << " GPUs, " << duration(x.time_s) << " ("
          << grouped(x.steps) << " steps, " << fmt("%.3g", x.epochs) << " epochs)"
          << (t.best_goodput_gpus != x.gpus ? "; the most goodput: " + std::to_string(t.best_goodput_gpus) + " GPUs"
                                            : std::string())
          << "\n";
  out << "  epoch budget (" << fmt("%g", t.budget_epochs) << " epochs, +" << fmt("%.0f", 100 * t.budget_tolerance)
      << "%): ";
  if (t.budget_max_batch < 1)
    out << "no global batch reaches the reference progress within it\n";
  else
    out << "suffices up to a global batch of " << grouped(std::floor(t.budget_max_batch)) << " clips";
  if (t.budget_max_batch >= 1) {
    std::string over;
    for (const TargetRow& x : t.rows)
      if (!x.within_budget)
        over += (over.empty() ? "" : ", ") + std::to_string(x.gpus) + " GPUs (" + grouped(static_cast<double>(x.global_batch)) +
                ") need " + fmt("%.3g", x.epochs);
    out << (over.empty() ? std::string("; every planned row is within it") : "; over it: " + over + " epochs") << "\n";
  }
  if (fixed_batch) out << "  (--fixed-batch: every row trains the recipe's global batch; only the step time differs)\n";
  return out.str();
}

}  // namespace

void check_output_path(const std::string& path, const std::string& option) {
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(path, ec);
  if (fs::exists(st) && !fs::is_regular_file(st))
    throw base::invalid(option + " '" + path + "': exists and is not a regular file; refusing to replace it");
  const fs::path parent = fs::path(path).parent_path();
  if (!parent.empty() && !fs::is_directory(parent, ec))
    throw base::invalid(option + " '" + path + "': no such folder '" + parent.string() + "'");
}

std::string plan_table(const Cluster& c, const std::vector<RecipeResult>& results) {
  std::ostringstream out;
  for (size_t i = 0; i < results.size(); ++i) {
    const RecipeResult& r = results[i];
    if (i) out << "\n";
    out << "vexp plan: " << shown(r.recipe) << " on '" << shown(c.name) << "' (" << shown(c.path) << ", " << c.nodes
        << " nodes x " << c.gpus_per_node << " " << shown(c.gpu_name) << ")\n";
    out << "model " << shown(r.model) << ": compute " << shown(r.compute.profile) << " ("
        << (r.compute.source.empty() ? "no source" : shown(r.compute.source)) << "), per micro-step of " << r.per_gpu
        << " clips: forward " << fmt("%.1f", r.compute.forward_ms) << " ms, backward "
        << fmt("%.1f", r.compute.backward_ms) << " ms; optimizer " << fmt("%.1f", r.compute.optimizer_ms)
        << " ms (1 GPU, " << r.compute_threads << " compute thread(s) per rank)\n";
    // Rows whose ranks share a node's cores take another profile (busy_ranks).
    std::string seen = r.compute.source;
    for (const Row& row : r.rows)
      if (row.profile_source != seen) {
        seen = row.profile_source;
        out << "  from " << row.gpus << " GPU(s): " << shown(row.profile_source) << ": forward "
            << fmt("%.1f", row.forward_ms / static_cast<double>(row.micro_steps)) << " ms, backward "
            << fmt("%.1f", row.backward_ms / static_cast<double>(row.micro_steps)) << " ms per micro-step\n";
      }
    out << "gradients " << fmt("%.1f", r.grad_params / 1e6) << " M = " << fmt("%.1f", r.grad_bytes / 1e6) << " MB in "
        << r.buckets << " bucket(s) of " << fmt("%g", r.bucket_mb) << " MiB ("
        << (r.compression == "none" ? "fp32" : shown(r.compression)) << " wire)"
        << (r.attributed ? "" : "; backward spread by parameter size (no MACs tied to parameters)")
        << bucket_cost_text(r.rows)
        << "\n";
    out << "data: " << shown(r.layout) << ", " << fmt("%g", r.threads_per_gpu) << " decode thread(s) per GPU; scaling: "
        << (r.fixed_batch ? "fixed global batch (dist.world_size " + std::to_string(r.world) + " emulated on G GPUs)"
                          : "weak (dist.world_size = G, " + std::to_string(r.per_gpu) + " clips per GPU x " +
                                std::to_string(r.accum) + " accumulation)")
        << "\n\n";
    out << "  GPUs nodes  global  micro  compute   exposed   exposed      step     clips/s   eff.      epoch      total  bottleneck\n"
        << "             batch   steps       ms   comm ms   data ms        ms                 %\n";
    for (const Row& row : r.rows) {
      out << pad(std::to_string(row.gpus), 6) << pad(std::to_string(row.nodes), 6)
          << pad(std::to_string(row.global_batch), 8) << pad(std::to_string(row.micro_steps), 7)
          << num(row.compute_ms, 9) << num(row.exposed_comm_ms, 10) << num(row.exposed_data_ms, 10)
          << num(row.step_ms, 10) << num(row.clips_per_s, 12) << num(100 * row.efficiency, 7)
          << pad(duration(row.epoch_s), 11) << pad(duration(row.total_s), 11) << "  " << row.bottleneck << "\n";
    }
    out << uncertainty_lines(r.rows);
    const Advice& a = r.advice;
    out << "\nadvice (" << a.at_gpus << " GPUs):\n";
    if (a.knee_gpus > 0)
      out << "  knee: " << a.knee_gpus << " GPUs, the largest of " << gpu_list(r.rows) << " still at >= "
          << fmt("%.0f", 100 * a.knee_efficiency) << "% efficiency\n";
    else
      out << "  knee: none of " << gpu_list(r.rows) << " reaches " << fmt("%.0f", 100 * a.knee_efficiency)
          << "% efficiency\n";
    std::string scan;
    for (const auto& [mb, ms] : a.bucket_scan) scan += (scan.empty() ? "" : ", ") + fmt("%g", mb) + ": " + fmt("%.1f", ms);
    if (a.bucket_mb != r.bucket_mb)
      out << "  bucket: " << fmt("%g", a.bucket_mb) << " MiB exposes " << fmt("%.1f", a.bucket_exposed_ms)
          << " ms of communication instead of " << fmt("%.1f", a.current_bucket_exposed_ms) << " ms at "
          << fmt("%g", r.bucket_mb) << " MiB (MiB: exposed ms = " << scan << ")\n";
    else
      out << "  bucket: keep " << fmt("%g", r.bucket_mb) << " MiB (MiB: exposed ms = " << scan << ")\n";
    for (const auto& l : a.layouts) {
      out << "  " << shown(l.layout) << ": ";
      if (l.storage_bound && l.threads_needed <= 0)
        out << "storage-bound: no number of decode threads keeps up";
      else
        out << fmt("%g", l.threads_needed) << " decode thread(s) per GPU keep up";
      out << "; with " << fmt("%g", r.threads_per_gpu) << " the GPUs "
          << (l.fed ? "are fed" : "wait " + fmt("%.1f", l.exposed_data_ms) + " ms per step") << "\n";
    }
    if (a.layouts.empty()) out << "  data: the cluster gives no decode rate\n";
    if (r.target) out << target_table(*r.target, r.fixed_batch);
  }
  return out.str();
}

namespace {

nlohmann::json target_json(const TargetPlan& t) {
  nlohmann::json rows = nlohmann::json::array();
  for (const TargetRow& x : t.rows)
    rows.push_back({{"gpus", x.gpus}, {"global_batch", x.global_batch}, {"statistical_efficiency", x.efficiency},
                    {"steps", x.steps}, {"clips", x.clips}, {"epochs", x.epochs}, {"time_s", x.time_s},
                    {"gpu_hours", x.gpu_hours}, {"goodput", x.goodput}, {"within_budget", x.within_budget}});
  return {{"noise_scale", t.b_noise}, {"noise_from", t.noise_from}, {"reference_batch", t.ref_batch},
          {"reference_clips", t.ref_clips}, {"train_size", t.train_size}, {"budget_epochs", t.budget_epochs},
          {"budget_tolerance", t.budget_tolerance}, {"budget_max_batch", t.budget_max_batch},
          {"critical_gpus", t.critical_gpus}, {"fastest_gpus", t.fastest_gpus},
          {"best_goodput_gpus", t.best_goodput_gpus}, {"rows", rows}};
}

}  // namespace

nlohmann::json plan_json(const Cluster& c, const std::vector<RecipeResult>& results) {
  nlohmann::json plans = nlohmann::json::array();
  for (const RecipeResult& r : results) {
    nlohmann::json rows = nlohmann::json::array();
    for (const Row& x : r.rows)
      rows.push_back({{"gpus", x.gpus}, {"nodes", x.nodes}, {"ranks", x.ranks}, {"global_batch", x.global_batch},
                      {"micro_steps", x.micro_steps}, {"data_ms", x.data_ms}, {"compute_ms", x.compute_ms},
                      {"forward_ms", x.forward_ms}, {"backward_ms", x.backward_ms}, {"optimizer_ms", x.optimizer_ms},
                      {"comm_ms", x.comm_ms}, {"exposed_comm_ms", x.exposed_comm_ms},
                      {"exposed_data_ms", x.exposed_data_ms}, {"throughput_data_ms", x.throughput_data_ms},
                      {"handoff_data_ms", x.handoff_data_ms}, {"step_ms", x.step_ms}, {"clips_per_s", x.clips_per_s},
                      {"efficiency", x.efficiency}, {"epoch_s", x.epoch_s}, {"total_s", x.total_s},
                      {"steps_per_epoch", x.steps_per_epoch}, {"bottleneck", x.bottleneck},
                      {"allreduce", x.algorithm}, {"profile_source", x.profile_source},
                      {"bucket_overhead_ms", x.bucket_overhead_ms},
                      {"per_bucket_ms", x.per_bucket_ms}, {"per_bucket_source", x.per_bucket_source}, {"step_ms_low", x.step_low_ms}, {"step_ms_high", x.step_high_ms}, {"unsure", x.unsure}});
    const Advice& a = r.advice;
    nlohmann::json layouts = nlohmann::json::array();
    for (const auto& l : a.layouts)
      layouts.push_back({{"layout", l.layout}, {"threads_needed", l.threads_needed}, {"storage_bound", l.storage_bound},
                         {"exposed_data_ms", l.exposed_data_ms}, {"fed", l.fed}});
    nlohmann::json scan = nlohmann::json::array();
    for (const auto& [mb, ms] : a.bucket_scan) scan.push_back({{"bucket_mb", mb}, {"exposed_comm_ms", ms}});
    plans.push_back({{"recipe", r.recipe}, {"model", r.model}, {"profile", r.compute.profile},
                     {"profile_source", r.compute.source}, {"compute_threads", r.compute_threads},
                     {"grad_bytes", r.grad_bytes},
                     {"grad_params", r.grad_params}, {"buckets", r.buckets}, {"bucket_mb", r.bucket_mb},
                     {"compression", r.compression}, {"layout", r.layout}, {"threads_per_gpu", r.threads_per_gpu},
                     {"scaling", r.fixed_batch ? "fixed_batch" : "weak"}, {"world_size", r.world},
                     {"batch_per_gpu", r.per_gpu}, {"accum_steps", r.accum}, {"rows", rows},
                     {"advice",
                      {{"knee_rule", "the largest gpus with efficiency >= knee_efficiency"},
                       {"knee_efficiency", a.knee_efficiency}, {"knee_gpus", a.knee_gpus}, {"at_gpus", a.at_gpus},
                       {"bucket_mb", a.bucket_mb}, {"bucket_exposed_comm_ms", a.bucket_exposed_ms},
                       {"bucket_scan", scan}, {"layouts", layouts}, {"workers", a.workers}}}});
    if (r.target) plans.back()["time_to_accuracy"] = target_json(*r.target);
  }
  return {{"cluster", c.path}, {"cluster_name", c.name}, {"plans", plans}};
}

namespace {

// Refuses a target that is not a regular file, then writes it atomically.
void write_atomically(const std::string& path, const std::string& text, const std::string& option) {
  check_output_path(path, option);
  base::write_file_atomic(path, text);  // its error names the file
}

}  // namespace

void write_plot(const std::vector<RecipeResult>& results, const std::string& png) {
  check_output_path(png, "--plot");
  if (!report::gnuplot_program())
    throw base::failure("--plot: gnuplot is not installed (Debian: apt-get install gnuplot-nox); no plot written");
  // gnuplot draws into a private folder (its path reaches it as ARG1, never parsed
  // as code); the PNG is then written to `png` atomically.
  std::optional<base::TempDir> tmp;
  tmp.emplace("vexp-plot");
  const fs::path drawn = tmp->path() / "plot.png";
  const size_t n = results.size();
  // --noise-from: a third row of panels, the time to the reference progress.
  bool targets = false;
  for (const RecipeResult& r : results) targets = targets || r.target.has_value();
  const int panels = targets ? 3 : 2;
  std::ostringstream gp;
  gp << "set terminal pngcairo noenhanced size " << 520 * n << "," << 390 * panels << " font 'sans,10'\n"
     << "set output ARG1.'/plot.png'\nset encoding utf8\nset multiplot layout " << panels << "," << n
     << " columnsfirst\n"
     << "set grid\nset logscale x 2\nset xlabel 'GPUs' offset 0,0.4\n"
     // The legend under each panel: inside, the curves and the stacked areas ran
     // through it.
     << "set key below horizontal center samplen 2 spacing 1.1\n";
  for (size_t i = 0; i < n; ++i) {
    const RecipeResult& r = results[i];
    gp << "$eff" << i << " << EOD\n";
    for (const Row& x : r.rows) gp << x.gpus << " " << 100 * x.efficiency << "\n";
    gp << "EOD\n$split" << i << " << EOD\n";
    for (const Row& x : r.rows)
      gp << x.gpus << " " << x.compute_ms << " " << x.exposed_comm_ms << " " << x.exposed_data_ms << "\n";
    gp << "EOD\n";
    if (r.target) {
      gp << "$time" << i << " << EOD\n";
      for (size_t k = 0; k < r.rows.size(); ++k)
        gp << r.rows[k].gpus << " " << r.rows[k].total_s / 3600 << " " << r.target->rows[k].time_s / 3600 << "\n";
      gp << "EOD\n";
    }
  }
  for (size_t i = 0; i < n; ++i) {
    const RecipeResult& r = results[i];
    const std::string name = fs::path(r.recipe).stem().string() + " (" + r.model + ")";
    double lo = r.rows.front().gpus, hi = r.rows.front().gpus, top = 0;
    for (const Row& x : r.rows) {
      lo = std::min(lo, static_cast<double>(x.gpus));
      hi = std::max(hi, static_cast<double>(x.gpus));
      top = std::max(top, x.compute_ms + x.exposed_comm_ms + x.exposed_data_ms);
    }
    gp << "set xrange [" << lo / 1.5 << ":" << hi * 1.5 << "]\n"
       << "set title " << report::gp_string(name + ": scaling efficiency") << "\nset ylabel 'efficiency (%)'\n"
       << "set yrange [0:110]\n"
       << "plot $eff" << i << " using 1:2 with linespoints pt 7 lw 2 lc rgb '#1f77b4' title 'predicted', "
       << "80 with lines dt 2 lc rgb '#999999' title '80% efficiency'\n"
       << "set title " << report::gp_string(name + ": step time split") << "\nset ylabel 'ms per step'\n"
       << "set yrange [0:" << std::max(1.0, top * 1.08) << "]\n"
       << "plot $split" << i << " using 1:($2+$3+$4) with filledcurves x1 lc rgb '#d62728' title 'exposed data', "
       << "$split" << i << " using 1:($2+$3) with filledcurves x1 lc rgb '#ff7f0e' title 'exposed comm', "
       << "$split" << i << " using 1:2 with filledcurves x1 lc rgb '#2ca02c' title 'compute'\n";
    if (r.target)
      gp << "set title "
         << report::gp_lines({name + ": time to the recipe's progress",
                              "(B_noise " + clips_text(r.target->b_noise) + " clips)"})
         << "\nset ylabel 'hours'\nset logscale y\nset autoscale y\n"
         << "plot $time" << i << " using 1:3 with linespoints pt 7 lw 2 lc rgb '#9467bd' title 'with the noise scale', "
         << "$time" << i << " using 1:2 with linespoints pt 6 lw 1 dt 2 lc rgb '#7f7f7f' title 'run.epochs at each batch'\n"
         << "unset logscale y\n";
    else if (targets)
      gp << "set multiplot next\n";
  }
  gp << "unset multiplot\nset output\n";
  const std::string script = (tmp->path() / "plot.gp").string(), log = (tmp->path() / "gnuplot.log").string();
  base::write_file_atomic(script, gp.str(), 0600);
  const std::string why = report::run_gnuplot(script, {tmp->path().string()}, log);
  // No image: said below, with the last line gnuplot wrote (when it wrote one).
  const std::string image = why.empty() ? base::read_file_or_empty(drawn.string()) : std::string();
  if (image.empty()) {
    std::string said = base::read_file_or_empty(log, 4096);
    while (!said.empty() && (said.back() == '\n' || said.back() == ' ')) said.pop_back();
    const size_t last = said.rfind('\n');
    throw base::failure("--plot: gnuplot failed (" + (why.empty() ? std::string("no image") : why) + ")" +
                                      (said.empty() ? std::string() : ": " + said.substr(last == std::string::npos ? 0 : last + 1)) +
                                      "; no plot written");
  }
  base::write_file_atomic(png, image);  // its error names the file
}

void write_tune(const Cluster& c, const RecipeResult& r, const std::string& path) {
  check_output_path(path, "--tune");
  const fs::path dir = fs::absolute(path).parent_path();
  const std::string base = fs::absolute(r.recipe).lexically_normal().lexically_relative(dir).string();
  std::ostringstream o;
  const Advice& a = r.advice;
  // A comment of a recipe: a newline in a name must not end it (the next line would be a key).
  o << "# Suggested by `vexp plan --tune` for cluster '" << shown(c.name) << "' (" << shown(c.path) << ") at "
    << a.at_gpus << " GPUs, " << shown(r.layout) << " layout.\n";
  if (a.knee_gpus > 0)
    o << "# Knee of the scaling curve: " << a.knee_gpus << " GPUs (the largest planned count at >= "
      << fmt("%.0f", 100 * a.knee_efficiency) << "% efficiency).\n";
  o << "extends = " << nlohmann::json(base).dump() << "\n";
  bool any = false;
  if (a.bucket_mb != r.bucket_mb) {
    o << "\n[dist]\n# exposed communication " << fmt("%.1f", a.current_bucket_exposed_ms) << " -> "
      << fmt("%.1f", a.bucket_exposed_ms) << " ms per step\nbucket_mb = " << fmt("%.1f", a.bucket_mb) << "\n";
    any = true;
  }
  if (a.workers != r.workers) {
    // The overlay holds only values the recipe's schema accepts: threads past
    // data.workers' range (a large cluster on videos asks for thousands) are clamped
    // to it, and both the overlay and stderr say so.
    const std::optional<std::pair<int64_t, int64_t>> range = schema_range("data", "workers");
    int64_t w = a.workers;
    if (range) w = std::clamp(w, range->first, range->second);
    o << "\n[data]\n# decode threads per GPU that keep up on " << shown(r.layout);
    if (w != a.workers) {
      const std::string why = std::to_string(a.workers) + " needed, but data.workers is at most " +
                              std::to_string(range->second) + ": " + std::to_string(w) + " written";
      o << ": " << why << " (the GPUs will wait for data on " << shown(r.layout) << ")";
      std::cerr << "vexp: warning: --tune '" << base::printable(path) << "': decode threads per GPU for "
                << shown(r.layout) << ": " << why << "\n";
    }
    o << "\n";
    if (w != r.workers) o << "workers = " << w << "\n";
    else o << "# (the recipe's data.workers already is " << w << ")\n";
    any = any || w != r.workers;
  }
  if (!any) o << "# The recipe's settings are already the suggested ones.\n";
  write_atomically(path, o.str(), "--tune");
}

}  // namespace vexp::cli
