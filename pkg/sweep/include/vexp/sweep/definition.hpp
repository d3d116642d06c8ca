// A sweep file: its [sweep] table, checked against dsl::Schema declarations
// (sweep_schemas()), as a Definition the expansion turns into trials.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "vexp/dsl/diagnostics.hpp"
#include "vexp/dsl/recipe.hpp"
#include "vexp/schema/value.hpp"

namespace vexp::sweep {

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
  // `vexp sweep --set`: applied to every trial first, as if the base recipe had them.
  std::vector<dsl::Override> cli_sets;
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

// The metric keys of summary.json a sweep can optimise, with their natural direction.
bool known_metric(const std::string& m);
bool metric_higher_is_better(const std::string& m);
// The known metrics for messages: "top1, top5, val_loss, ...".
std::string metric_list();

// Parses the sweep file; problems go to `diags` with file:line:col. Throws
// dsl::RecipeError when the file cannot be read.
std::optional<Definition> load_definition(const std::string& path, dsl::Diagnostics& diags);

}  // namespace vexp::sweep
