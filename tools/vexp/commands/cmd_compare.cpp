// vexp compare RUN_DIR...: finished runs side by side (a repeated run name gets the
// shortest tail of its directory that tells the runs apart).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common.hpp"
#include "report/run_files.hpp"
#include "vexp/base/text.hpp"

namespace vexp::cli {
namespace {

// The labels of the rows: the run's name, and where names repeat, also the shortest
// tail of its directory's path that tells it from the others of that name
// ("tsm_motion (a/tsm_motion)", "tsm_motion (b/tsm_motion)").
std::vector<std::string> row_labels(const std::vector<std::string>& names, const std::vector<std::string>& dirs) {
  namespace fs = std::filesystem;
  std::vector<std::vector<std::string>> parts;  // each path's components, last first
  for (const auto& d : dirs) {
    std::error_code ec;
    fs::path p = fs::weakly_canonical(fs::absolute(d, ec), ec);
    if (ec) p = fs::path(d).lexically_normal();
    std::vector<std::string> c;
    for (const auto& part : p)
      if (!part.empty() && part != "/" && part != ".") c.insert(c.begin(), part.string());
    parts.push_back(c);
  }
  auto tail = [&](size_t i, size_t k) {
    std::string t;
    for (size_t j = std::min(k, parts[i].size()); j-- > 0;) t += parts[i][j] + (j ? "/" : "");
    return t;
  };
  std::vector<std::string> labels(names);
  for (size_t i = 0; i < names.size(); ++i) {
    std::vector<size_t> same;
    for (size_t j = 0; j < names.size(); ++j)
      if (j != i && names[j] == names[i]) same.push_back(j);
    if (same.empty()) continue;
    size_t k = 1;
    for (; k < parts[i].size(); ++k) {
      bool unique = true;
      for (size_t j : same) unique = unique && tail(j, k) != tail(i, k);
      if (unique) break;
    }
    labels[i] += " (" + tail(i, k) + ")";
  }
  return labels;
}

}  // namespace

void add_compare(CLI::App& app) {
  auto* cmd = app.add_subcommand("compare", "Print finished runs side by side (top-1, clips/s, FLOPs, params)");
  auto dirs = std::make_shared<std::vector<std::string>>();
  auto as_json = std::make_shared<bool>(false);
  cmd->add_option("runs", *dirs, "Run directories")->required();
  cmd->add_flag("--json", *as_json, "Machine-readable output");
  cmd->callback([dirs, as_json] {
    auto rows = nlohmann::json::array();
    for (const auto& d : *dirs) {
      const std::filesystem::path p = std::filesystem::path(d) / "summary.json";
      nlohmann::json j = report::read_summary(p);
      if (j.is_null()) throw Exit{kExitFailure, "'" + d + "' has no summary.json: it is not a finished run directory"};
      j["run_dir"] = d;
      rows.push_back(j);
    }
    if (*as_json) {
      std::cout << rows.dump(2) << "\n";
      return;
    }
    std::vector<std::string> names;
    for (const auto& r : rows) {
      const auto n = r.find("name");
      names.push_back(n != r.end() && n->is_string() ? n->get<std::string>() : "?");
    }
    // Names and folders come from the run directories: shown with their control
    // characters escaped (an ESC in a name must not drive the terminal).
    std::vector<std::string> labels = row_labels(names, *dirs);
    for (auto& l : labels) l = base::printable(l, 120);
    int width = 24;
    for (const auto& l : labels) width = std::max(width, static_cast<int>(l.size()) + 2);
    std::printf("%-*s %8s %8s %10s %12s %10s %9s\n", width, "run", "top-1", "top-5", "clips/s", "MMACs/clip", "params",
                "train s");
    for (size_t i = 0; i < rows.size(); ++i) {
      const auto& r = rows[i];
      // null (a value that was not finite) and absent keys print as nan / 0.
      auto num = [&r](const char* key, double absent) {
        auto it = r.find(key);
        return it == r.end() ? absent : it->is_number() ? it->get<double>() : std::nan("");
      };
      std::printf("%-*s %8.4f %8.4f %10.1f %12.2f %10lld %9.1f\n", width, labels[i].c_str(), num("top1", 0),
                  num("top5", 0), num("clips_per_s", 0), num("flops_per_clip", 0) / 1e6,
                  static_cast<long long>(std::isfinite(num("params", 0)) ? num("params", 0) : 0), num("train_s", 0));
    }
  });
}

}  // namespace vexp::cli
