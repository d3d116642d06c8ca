// vexp results DIR [--json | --csv] [--sort METRIC] [--best-recipe out.toml]
// vexp report DIR... [--out FILE.html] [--png PNG_DIR]
// The command lines; report/sweep_results.cpp reads the sweep directory (through
// vexp::sweep's store), report/ writes the HTML reports.
#include <cctype>
#include <filesystem>
#include <iostream>

#include "commands/common.hpp"
#include "vexp/report/html_report.hpp"
#include "vexp/report/sweep_results.hpp"

namespace vexp::cli {

void add_results(CLI::App& app) {
  auto* cmd = app.add_subcommand("results", "Print the trials of a sweep directory (and write the best recipe)");
  auto dir = std::make_shared<std::string>();
  auto as_json = std::make_shared<bool>(false), as_csv = std::make_shared<bool>(false);
  auto sort = std::make_shared<std::string>(), best = std::make_shared<std::string>();
  cmd->add_option("dir", *dir, "Sweep directory (holds sweep.db)")->required();
  auto* j = cmd->add_flag("--json", *as_json, "JSON output");
  cmd->add_flag("--csv", *as_csv, "CSV output")->excludes(j);
  cmd->add_option("--sort", *sort,
                  "Sort by top1, top5, val_loss, clips_per_s, wall_s, train_s, id, lr or global_batch; with a [sweep] "
                  "target also steps_to_target, clips_to_target, time_to_target_s or train_s_to_target (fewest first)");
  cmd->add_option("--best-recipe", *best, "Write the best finished trial's resolved recipe to this file");
  cmd->callback([=] {
    if (!best->empty()) report::refuse_best_recipe_output(*dir, *best);  // before the table
    std::cout << report::results_text(*dir, *as_json ? "json" : *as_csv ? "csv" : "table", *sort);
    if (!best->empty()) {
      const report::BestRecipe b = report::write_best_recipe(*dir, *best);
      std::cerr << report::best_recipe_line(b, *best) << "\n";
    }
  });
}

void add_report(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "report", "Write one self-contained HTML report of a run directory, a sweep directory, or several runs");
  auto dirs = std::make_shared<std::vector<std::string>>();
  auto out = std::make_shared<std::string>(), png = std::make_shared<std::string>();
  cmd->add_option("dirs", *dirs, "A run directory, a sweep directory (holds sweep.db), or several run directories")
      ->required();
  cmd->add_option("--out", *out, "The HTML file (default: DIR/report.html; several runs: ./comparison.html)");
  cmd->add_option("--png", *png, "Also write PNG plots of a sweep (gnuplot) into this folder");
  cmd->callback([=] {
    namespace fs = std::filesystem;
    std::string path = out->empty() ? report::default_html_path(*dirs) : *out;
    std::string ext = fs::path(path).extension().string();
    for (auto& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (ext != ".html" && ext != ".htm")
      throw base::invalid("--out '" + path + "': the report is one HTML file: give a name ending in .html" +
                                   " (PNG plots of a sweep: --png DIR)");
    if (!png->empty() && (dirs->size() != 1 || !fs::exists(fs::path((*dirs)[0]) / "sweep.db")))
      throw base::invalid("--png: PNG plots are drawn for one sweep directory (one that holds sweep.db)");
    for (const auto& d : *dirs)
      if (!fs::is_directory(d)) throw base::failure("'" + d + "' is not a directory");
    const report::Written w = report::write_html_report(*dirs, path);
    std::cout << w.path << "\n";
    std::cerr << w.kind << " report: " << w.path << " (" << (w.bytes + 1023) / 1024 << " KiB)\n";
    if (!png->empty())
      for (const auto& f : report::write_report((*dirs)[0], *png))
        std::cout << f << "\n";
  });
}

}  // namespace vexp::cli
