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

// [sweep] target = { metric = "top1", value = 0.9 }: the evaluation every trial is
// measured against. A trial reaches it at its first evaluation whose metric is at
// least `value` (top1, top5: higher is better) or at most `value` (val_loss), the
// metric's own direction whatever the sweep's `direction` (which ranks trials by the
// sweep's `metric`). Steps, clips and wall-clock time to it: to_target.hpp.
struct Target {
  std::string metric;   // top1, top5 or val_loss: keys every eval record of metrics.jsonl carries
  double value = 0;
  dsl::Loc loc;
  bool higher_is_better() const { return metric != "val_loss"; }
  // Whether an evaluation's value reaches it.
  bool reached_by(double v) const { return higher_is_better() ? v >= value : v <= value; }
  // "top1 >= 0.9": what the store records the figures were computed against.
  std::string text() const;
};

// The metrics a target may name, for messages: "top1, top5, val_loss".
std::string target_metric_list();
// The target recorded as text ("top1 >= 0.9", Target::text), or nullopt when `text`
// is not one (an empty meta value: no target).
std::optional<Target> parse_target_text(const std::string& text);

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
  std::optional<Target> target;               // [sweep] target
  bool prune = false;
  int64_t prune_after = 1, prune_min_trials = 3;
  // Of the parsed definition, [sweep] target left out: the target changes no trial,
  // so a sweep run again with another target keeps its trials and recomputes their
  // figures against it (open_sweep_store).
  std::string text_hash;
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
