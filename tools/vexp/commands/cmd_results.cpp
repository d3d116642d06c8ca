// vexp results DIR [--json | --csv] [--sort METRIC] [--best-recipe out.toml]
// vexp report DIR [--out REPORT_DIR]
// The command lines; sweep/report.cpp reads the sweep directory.
#include <filesystem>
#include <iostream>

#include "common.hpp"
#include "sweep/report.hpp"

namespace vexp::cli {

void add_results(CLI::App& app) {
  auto* cmd = app.add_subcommand("results", "Print the trials of a sweep directory (and write the best recipe)");
  auto dir = std::make_shared<std::string>();
  auto as_json = std::make_shared<bool>(false), as_csv = std::make_shared<bool>(false);
  auto sort = std::make_shared<std::string>(), best = std::make_shared<std::string>();
  cmd->add_option("dir", *dir, "Sweep directory (holds sweep.db)")->required();
  auto* j = cmd->add_flag("--json", *as_json, "JSON output");
  cmd->add_flag("--csv", *as_csv, "CSV output")->excludes(j);
  cmd->add_option("--sort", *sort, "Sort by top1, top5, val_loss, clips_per_s, wall_s, train_s, id, lr or global_batch");
  cmd->add_option("--best-recipe", *best, "Write the best finished trial's resolved recipe to this file");
  cmd->callback([=] {
    std::cout << sweep::results_text(*dir, *as_json ? "json" : *as_csv ? "csv" : "table", *sort);
    if (!best->empty()) {
      int64_t id = sweep::write_best_recipe(*dir, *best);
      std::cerr << "best trial " << id << ": recipe written to " << *best << "\n";
    }
  });
}

void add_report(CLI::App& app) {
  auto* cmd = app.add_subcommand("report", "Write PNG plots of a sweep: heatmap, curves, throughput, linear scaling");
  auto dir = std::make_shared<std::string>(), out = std::make_shared<std::string>();
  cmd->add_option("dir", *dir, "Sweep directory (holds sweep.db)")->required();
  cmd->add_option("--out", *out, "Folder for the plots (default: DIR/report)");
  cmd->callback([=] {
    std::string rd = out->empty() ? (std::filesystem::path(*dir) / "report").string() : *out;
    for (const auto& f : sweep::write_report(*dir, rd)) std::cout << f << "\n";
  });
}

}  // namespace vexp::cli
