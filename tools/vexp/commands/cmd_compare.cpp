// vexp compare RUN_DIR...: finished runs side by side (a repeated run name gets the
// shortest tail of its directory that tells the runs apart), then the recipe keys that
// differ (each run's resolved.toml) and where their provenance (the last invocation of
// each, provenance.jsonl) differs; --no-provenance: the table alone (the demo's last
// word, tools/demo.sh).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands/common.hpp"
#include "vexp/rundir/files.hpp"
#include "vexp/base/text.hpp"
#include "vexp/report/run_data.hpp"
#include "vexp/rundir/provenance.hpp"

namespace vexp::cli {
namespace {

namespace fs = std::filesystem;

// The rows that differ, a key and then each run's value under its label.
std::string differences_text(const rundir::RunsDifferences& d, const std::vector<std::string>& labels,
                             size_t value_bytes) {
  std::string out;
  for (const auto& row : d.rows) {
    out += "  " + base::printable(row.key, 200) + "\n";
    for (size_t i = 0; i < row.values.size(); ++i)
      out += "    " + labels[i] + ": " + base::printable(row.values[i], value_bytes) + "\n";
  }
  return out;
}

// The recipe keys whose values are not the same in every run's resolved.toml (what
// was trained, after `extends` and --set), before the provenance: what a reader of
// the table wants to know first. The rows of the comparison report's "Recipe keys that
// differ" (report::resolved_keys, rundir::differences_between), in the recipes' order:
// a run without a readable resolved.toml reads "(not recorded)"; a key a recipe lacks,
// "(absent)".
void print_recipe_differences(const std::vector<std::string>& dirs, const std::vector<std::string>& labels) {
  std::vector<std::optional<rundir::FlatRows>> runs;
  for (const auto& d : dirs) {
    const fs::path resolved = rundir::RunDir(d).resolved();
    runs.push_back(report::resolved_keys(rundir::read_text(resolved), resolved.string()));
  }
  const rundir::RunsDifferences d = rundir::differences_between(runs);
  if (d.rows.empty()) {
    std::printf("\nrecipe: the same in every run (%zu keys of resolved.toml)\n", d.keys);
    return;
  }
  std::printf("\nrecipe keys that differ (%zu of %zu, each run's resolved.toml):\n%s", d.rows.size(), d.keys,
              differences_text(d, labels, 300).c_str());
}

// The rows of the runs' last provenance records that are not the same in all
// (times left out); a run without provenance.jsonl reads "(not recorded)".
void print_provenance_differences(const std::vector<nlohmann::json>& records, const std::vector<std::string>& labels) {
  const rundir::RunsDifferences d = rundir::differences_between(records);
  if (d.recorded == 0) {
    std::printf("\nprovenance: not recorded (no run directory has a provenance.jsonl)\n");
    return;
  }
  if (d.rows.empty()) {
    std::printf("\nprovenance: the same in every run (%zu rows of the last invocation's record)\n", d.keys);
    return;
  }
  std::printf("\nprovenance that differs (%zu of %zu rows of each run's last invocation, provenance.jsonl):\n%s",
              d.rows.size(), d.keys, differences_text(d, labels, 2000).c_str());
}

}  // namespace

void add_compare(CLI::App& app) {
  auto* cmd = app.add_subcommand("compare", "Print finished runs side by side (top-1, clips/s, MACs, params)");
  auto dirs = std::make_shared<std::vector<std::string>>();
  auto as_json = std::make_shared<bool>(false);
  auto no_provenance = std::make_shared<bool>(false);
  cmd->add_option("runs", *dirs, "Run directories")->required();
  cmd->add_flag("--json", *as_json, "Machine-readable output");
  cmd->add_flag("--no-provenance", *no_provenance,
                "Only the table: leave out the recipe keys and the provenance that differ (with --json: "
                "each run's \"provenance\" key)");
  cmd->callback([dirs, as_json, no_provenance] {
    auto rows = nlohmann::json::array();
    std::vector<nlohmann::json> provenance;  // each run's last record (null: none)
    for (const auto& d : *dirs) {
      const rundir::RunDir dir(d);
      nlohmann::json j = rundir::read_summary(dir.summary());
      if (j.is_null()) throw base::failure("'" + d + "' has no summary.json: it is not a finished run directory");
      j["run_dir"] = d;
      if (!*no_provenance) {  // not even read: an unreadable provenance.jsonl does not stop the table
        const rundir::Provenance p = rundir::read_provenance(dir.dir);
        provenance.push_back(p.records.empty() ? nlohmann::json() : p.records.back());
        j["provenance"] = provenance.back();
      }
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
    std::vector<std::string> labels = rundir::run_labels(names, *dirs);
    for (auto& l : labels) l = base::printable(l, 120);
    int width = 24;
    for (const auto& l : labels) width = std::max(width, static_cast<int>(l.size()) + 2);
    // The hooks' top-1 figures (the ema hook's ema_top1, ...): a column each, after top-5.
    std::set<std::string> hook_top1;
    for (const auto& r : rows)
      for (auto it = r.begin(); it != r.end(); ++it)
        if (it.key().size() > 5 && it.key().compare(it.key().size() - 5, 5, "_top1") == 0) hook_top1.insert(it.key());
    std::printf("%-*s %8s %8s", width, "run", "top-1", "top-5");
    for (const auto& k : hook_top1) std::printf(" %*s", std::max(8, static_cast<int>(k.size())), k.c_str());
    std::printf(" %10s %12s %10s %9s\n", "clips/s", "MACs/clip", "params", "train s");
    for (size_t i = 0; i < rows.size(); ++i) {
      const auto& r = rows[i];
      // null (a value that was not finite) and absent keys print as nan / 0.
      auto num = [&r](const char* key, double absent) {
        auto it = r.find(key);
        return it == r.end() ? absent : it->is_number() ? it->get<double>() : std::nan("");
      };
      std::printf("%-*s %8.4f %8.4f", width, labels[i].c_str(), num("top1", 0), num("top5", 0));
      for (const auto& k : hook_top1)
        if (r.contains(k)) std::printf(" %*.4f", std::max(8, static_cast<int>(k.size())), num(k.c_str(), 0));
        else std::printf(" %*s", std::max(8, static_cast<int>(k.size())), "-");
      // MACs and parameters as counts ("71.59 M", "176.1 k"): the exact figures are in --json.
      std::printf(" %10.1f %12s %10s %9.1f\n", num("clips_per_s", 0), base::count_text(num("flops_per_clip", 0)).c_str(),
                  base::count_text(std::isfinite(num("params", 0)) ? num("params", 0) : 0).c_str(), num("train_s", 0));
    }
    if (rows.size() > 1 && !*no_provenance) {
      print_recipe_differences(*dirs, labels);
      print_provenance_differences(provenance, labels);
    }
  });
}

}  // namespace vexp::cli
