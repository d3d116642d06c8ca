// vexp compare RUN_DIR...: finished runs side by side.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>

#include "common.hpp"

namespace vexp::cli {

void add_compare(CLI::App& app) {
  auto* cmd = app.add_subcommand("compare", "Print finished runs side by side (top-1, clips/s, FLOPs, params)");
  auto dirs = std::make_shared<std::vector<std::string>>();
  auto as_json = std::make_shared<bool>(false);
  cmd->add_option("runs", *dirs, "Run directories")->required();
  cmd->add_flag("--json", *as_json, "Machine-readable output");
  cmd->callback([dirs, as_json] {
    auto rows = nlohmann::json::array();
    for (const auto& d : *dirs) {
      std::filesystem::path p = std::filesystem::path(d) / "summary.json";
      std::ifstream in(p);
      if (!in) throw Exit{kExitFailure, "'" + d + "' has no summary.json: it is not a finished run directory"};
      nlohmann::json j;
      try {
        in >> j;
      } catch (const std::exception& e) {
        throw Exit{kExitFailure, "'" + p.string() + "' is not valid JSON: " + e.what()};
      }
      j["run_dir"] = d;
      rows.push_back(j);
    }
    if (*as_json) {
      std::cout << rows.dump(2) << "\n";
      return;
    }
    std::printf("%-24s %8s %8s %10s %12s %10s %9s\n", "run", "top-1", "top-5", "clips/s", "MMACs/clip", "params",
                "train s");
    for (const auto& r : rows) {
      std::printf("%-24s %8.4f %8.4f %10.1f %12.2f %10lld %9.1f\n", r.value("name", "?").c_str(), r.value("top1", 0.0),
                  r.value("top5", 0.0), r.value("clips_per_s", 0.0), r.value("flops_per_clip", 0.0) / 1e6,
                  static_cast<long long>(r.value("params", int64_t(0))), r.value("train_s", 0.0));
    }
  });
}

}  // namespace vexp::cli
