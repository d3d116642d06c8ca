// vexp compare RUN_DIR...: finished runs side by side (a repeated run name gets the
// shortest tail of its directory that tells the runs apart), then where their
// provenance (the last invocation of each, provenance.jsonl) differs; --no-provenance:
// the table alone (the demo's last word, tools/demo.sh).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "commands/common.hpp"
#include "vexp/rundir/files.hpp"
#include "vexp/base/text.hpp"
#include "vexp/rundir/files.hpp"
#include "vexp/rundir/provenance.hpp"

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

// The rows of the runs' last provenance records that are not the same in all
// (times left out); a run without provenance.jsonl reads "(not recorded)".
void print_provenance_differences(const std::vector<nlohmann::json>& records, const std::vector<std::string>& labels) {
  std::vector<std::string> keys;
  std::vector<std::map<std::string, std::string>> rows(records.size());
  size_t recorded = 0;
  for (size_t i = 0; i < records.size(); ++i) {
    if (records[i].is_null()) continue;
    ++recorded;
    for (const auto& [k, v] : rundir::flatten_record(records[i])) {
      if (k == "invocation" || k == "start" || k == "end") continue;
      if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
      rows[i][k] = v;
    }
  }
  if (recorded == 0) {
    std::printf("\nprovenance: not recorded (no run directory has a provenance.jsonl)\n");
    return;
  }
  std::string out;
  size_t n = 0;
  for (const auto& k : keys) {
    std::vector<std::string> vals;
    for (size_t i = 0; i < records.size(); ++i) {
      const auto it = rows[i].find(k);
      vals.push_back(records[i].is_null() ? "(not recorded)" : it == rows[i].end() ? "(absent)" : it->second);
    }
    if (std::all_of(vals.begin(), vals.end(), [&](const std::string& v) { return v == vals[0]; })) continue;
    ++n;
    out += "  " + base::printable(k, 200) + "\n";
    for (size_t i = 0; i < vals.size(); ++i) out += "    " + labels[i] + ": " + base::printable(vals[i], 2000) + "\n";
  }
  if (n == 0)
    std::printf("\nprovenance: the same in every run (%zu rows of the last invocation's record)\n", keys.size());
  else
    std::printf("\nprovenance that differs (%zu of %zu rows of each run's last invocation, provenance.jsonl):\n%s", n,
                keys.size(), out.c_str());
}

}  // namespace

void add_compare(CLI::App& app) {
  auto* cmd = app.add_subcommand("compare", "Print finished runs side by side (top-1, clips/s, FLOPs, params)");
  auto dirs = std::make_shared<std::vector<std::string>>();
  auto as_json = std::make_shared<bool>(false);
  auto no_provenance = std::make_shared<bool>(false);
  cmd->add_option("runs", *dirs, "Run directories")->required();
  cmd->add_flag("--json", *as_json, "Machine-readable output");
  cmd->add_flag("--no-provenance", *no_provenance,
                "Only the table: leave out where the runs' provenance differs (with --json: each run's "
                "\"provenance\" key)");
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
    if (rows.size() > 1 && !*no_provenance) print_provenance_differences(provenance, labels);
  });
}

}  // namespace vexp::cli
