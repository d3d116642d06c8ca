// `vexp sweep`: the sweep definition (TOML), its expansion into trials, the
// expression evaluator of derived values, and the SQLite results store.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "vexp/runtime/session.hpp"
#include "vexp/dsl/diagnostics.hpp"
#include "vexp/dsl/validate.hpp"

namespace vexp::sweep {

// Evaluates an arithmetic expression: numbers, ${name} variables, + - * / ^,
// parentheses, unary minus and min/max/sqrt/log/exp/pow/round/floor/ceil/abs.
// Throws std::runtime_error with a one-line message on a problem.
double eval_expr(const std::string& text, const std::map<std::string, double>& vars);

struct RandomSpec {
  double lo = 0, hi = 1;
  bool log = false, integer = false;
  std::vector<dsl::Value> choices;  // non-empty: pick one of these
};

struct Axis {
  enum class Kind { Grid, List, Random } kind = Kind::Grid;
  std::vector<std::string> keys;                 // one key (grid, random) or several (list)
  std::vector<std::vector<dsl::Value>> points;   // grid: {v}; list: {v1, v2, ...}
  RandomSpec random;
  dsl::Loc loc;
};

struct Derived {
  std::string key;
  std::string expr;
  dsl::Loc loc;
};

struct Definition {
  std::string file;          // the sweep file as given
  std::string name;
  std::string base;          // base recipe, resolved against the sweep file's folder
  std::string out;           // [sweep] out (may be empty)
  std::string metric = "top1";
  std::string direction = "max";
  bool linear_scaling = false;
  double reference_batch = 256;
  std::vector<dsl::Override> fixed;            // [sweep.set]
  std::vector<dsl::Loc> fixed_locs;
  std::map<std::string, double> vars;          // [sweep.vars]
  std::vector<Axis> axes;
  int64_t random_count = 0;
  uint64_t random_seed = 0;
  std::vector<Derived> derived;
  bool prune = false;
  int64_t prune_after = 1, prune_min_trials = 3;
  std::string text_hash;     // of the parsed definition
};

struct Trial {
  int64_t id = 0;                        // 1-based
  nlohmann::json params = nlohmann::json::object();   // axis and derived values by key
  std::vector<dsl::Override> overrides;  // everything passed to `vexp run --set`
  int64_t global_batch = 0;
  int64_t world_size = 1;                // dist.world_size of the trial's recipe
  double lr = 0;
  std::string recipe_hash;
};

// The metric keys of summary.json a sweep can optimise, with their natural direction.
bool known_metric(const std::string& m);
bool metric_higher_is_better(const std::string& m);

// Parses the sweep file; problems go to `diags` with file:line:col.
std::optional<Definition> load_definition(const std::string& path, dsl::Diagnostics& diags);

// Expands the axes into trials and validates every trial's recipe (plugins must be
// loaded into `session`). Problems go to `diags`, located in the sweep file where
// the offending value was written.
std::vector<Trial> expand(const Definition& def, Session& session, dsl::Diagnostics& diags);

// A stable hash of the definition and of every trial's recipe.
std::string sweep_hash(const Definition& def, const std::vector<Trial>& trials);

// ---- the store: DIR/sweep.db ----
struct Row {
  int64_t id = 0;
  nlohmann::json params, overrides, metrics;
  int64_t global_batch = 0;
  double lr = 0;
  std::string recipe_hash, status, run_dir, message;
  int64_t attempts = 0, exit_code = -1;
  std::optional<double> metric;
  double started_at = 0, finished_at = 0, wall_s = 0;
};

// DIR/sweep.db is damaged (SQLite: "database disk image is malformed", "file is
// not a database"). The trial directories still hold every result: `vexp sweep`
// moves the file aside and rebuilds it from them.
struct CorruptDatabase : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Store {
 public:
  Store() = default;
  ~Store();
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;
  // Opens (creating when `create`) DIR/sweep.db and checks every page of it;
  // throws CorruptDatabase when it is damaged, std::runtime_error otherwise.
  void open(const std::string& path, bool create);
  void close();
  bool has_meta() const;
  std::string meta(const std::string& key) const;
  void set_meta(const std::map<std::string, std::string>& kv);  // one transaction
  void insert_trials(const std::vector<Trial>& trials, const std::string& trials_dir);
  std::vector<Row> rows() const;
  void mark_running(int64_t id, const std::string& run_dir);
  void finish(int64_t id, const std::string& status, int exit_code, std::optional<double> metric,
              const nlohmann::json& metrics, double wall_s, const std::string& message);
  void reset(int64_t id);  // back to pending (interrupted)
  // Sets every column of trial r.id from `r` (rebuilding the store from trial directories).
  void restore(const Row& r);

 private:
  void exec(const std::string& sql) const;
  void* db_ = nullptr;
};

nlohmann::json row_json(const Row& r);

// Renames a damaged DB_PATH (and its -wal / -shm files) to DB_PATH.corrupt-YYYYmmdd-HHMMSS;
// returns the new name.
std::string move_aside(const std::string& db_path);

// ---- reports (cmd_results.cpp) ----
// The results table of DIR: "table" (aligned text), "json" or "csv"; sorted by
// `sort` (a metric, "id", "lr" or "global_batch"; empty: the sweep's metric).
std::string results_text(const std::string& dir, const std::string& format, const std::string& sort);
// Copies the best finished trial's resolved recipe to `out`; returns the trial id.
int64_t write_best_recipe(const std::string& dir, const std::string& out);
// Writes DIR/report/*.png with gnuplot; returns the files written.
std::vector<std::string> write_report(const std::string& dir, const std::string& report_dir);
// Opens DIR/sweep.db read-only-ish, with the sweep's metric and direction.
struct Opened {
  std::vector<Row> rows;
  std::string metric, direction, name;
};
Opened open_results(const std::string& dir);
double now_s();

}  // namespace vexp::sweep
