#include "vexp/sweep/definition.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>

#include "vexp/base/text.hpp"
#include "vexp/schema/schema.hpp"
#include "vexp/dsl/table_check.hpp"
#include "vexp/dsl/validate.hpp"

namespace vexp::sweep {
namespace fs = std::filesystem;
using dsl::Loc;
using dsl::ParamSpec;
using dsl::Schema;
using dsl::Value;

namespace {

const std::vector<std::string>& metric_names() {
  static const std::vector<std::string> names{"top1", "top5", "val_loss", "clips_per_s", "wall_s", "train_s"};
  return names;
}

std::vector<Value> as_values(const std::vector<std::string>& words) {
  return std::vector<Value>(words.begin(), words.end());
}

ParamSpec& sub_table(Schema& s, const std::string& name, const std::string& doc) {
  ParamSpec& p = s.text(name, "", doc);
  p.type = dsl::ParamType::Table;
  p.default_value = Value::table();
  return p;
}

// The keys of a sweep file, table by table. Keys whose values no Schema type
// describes (arrays of tables, arrays of mixed scalars) are checked by hand below
// and named here as the `unchecked` keys of check_table.
struct SweepSchemas {
  Schema file, sweep, random, prune, axis, axis_random, target;
};

// What an eval record of metrics.jsonl always carries (rundir::EvalRecord): the
// metrics a target may name.
const std::vector<std::string>& target_metric_names() {
  static const std::vector<std::string> names{"top1", "top5", "val_loss"};
  return names;
}

// The shortest text that reads back as `v` ("0.9", not "0.90000000000000002"), with
// every integer digit written out ("100", not "1e+02").
std::string shortest(double v) {
  char b[48];
  const int whole = std::fabs(v) >= 1 ? static_cast<int>(std::floor(std::log10(std::fabs(v)))) + 1 : 1;
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(b, sizeof b, "%.*g", whole <= 17 ? std::max(digits, whole) : digits, v);
    if (std::strtod(b, nullptr) == v) break;
  }
  return b;
}

const SweepSchemas& sweep_schemas() {
  static const SweepSchemas s = [] {
    SweepSchemas d;
    sub_table(d.file, "sweep", "The sweep: everything goes under [sweep]");

    Schema& w = d.sweep;
    w.text("name", "", "Sweep name: one folder under runs/sweeps/ (default: the sweep file's stem)");
    // Required; not declared so, for the longer message below.
    w.text("base", "", "The recipe every trial starts from, relative to the sweep file");
    w.text("out", "", "Sweep directory (default: runs/sweeps/<name>; --out overrides it)");
    w.text("metric", "top1", "summary.json value the sweep optimises").one_of(as_values(metric_names()));
    w.text("direction", "", "max or min (default: max for top1, top5 and clips_per_s, min otherwise)")
        .one_of({"max", "min"});
    sub_table(w, "set", "Overrides every trial gets (dotted keys or nested tables)");
    sub_table(w, "vars", "Numbers that derived expressions use as ${name}");
    sub_table(w, "random", "count (draws per grid point) and seed of the random axes");
    sub_table(w, "derived", "Keys computed per trial from an expression");
    sub_table(w, "prune", "Median pruning of trials worse than the finished ones");
    sub_table(w, "target", "{ metric = \"top1\", value = 0.9 }: each trial's steps, clips and time to reach it");

    d.random.integer("count", 1, "Trials drawn per grid point").require().at_least(1);
    d.random.integer("seed", 0, "Seed of the draws");

    d.prune.text("rule", "median", "median, or none (no pruning)").one_of({"median", "none"});
    d.prune.integer("after_epochs", 1, "First epoch whose evaluation may prune a trial").at_least(1);
    d.prune.integer("min_trials", 3, "Finished trials needed before any is pruned").at_least(1);

    d.axis.text("key", "", "The key a grid or random axis varies");
    d.axis.text_list("keys", {}, "The keys each point of a list axis sets");
    sub_table(d.axis, "random", "A random axis: min, max, log, int, or choices");

    d.axis_random.real("min", 0, "Lower bound");
    d.axis_random.real("max", 1, "Upper bound");
    d.axis_random.boolean("log", false, "Log-uniform (min > 0)");
    d.axis_random.boolean("int", false, "Round to an integer");

    d.target.text("metric", "", "The evaluated metric: top1 or top5 (reached at >= value) or val_loss (at <= value)")
        .require()
        .one_of(as_values(target_metric_names()));
    d.target.real("value", 0, "The value to reach: top1 / top5 a fraction in (0, 1], val_loss > 0").require().above(0);
    return d;
  }();
  return s;
}

const std::vector<std::string> kSweepByHand{"axis", "linear_scaling", "reference_batch"};

// What a sweep file of an earlier vexp wrote to scale the lr itself, and what it
// writes now: the base recipe's own rule (optim.base_lr x global batch / optim.base_batch,
// dsl/src/sections.cpp), which `vexp run` trains with.
constexpr const char* kLrRule =
    "a sweep scales the lr through the recipe's own rule: put \"optim.base_batch\" = N and \"optim.lr_scaling\" = "
    "\"linear\" in [sweep.set] and vary \"optim.base_lr\" (an axis or [sweep.set]); each trial trains at "
    "optim.base_lr x its global batch / optim.base_batch";
const std::vector<std::string> kAxisByHand{"grid", "points"};
const std::vector<std::string> kAxisRandomByHand{"choices"};

// Flattens nested tables into dotted keys ("run.epochs" or [sweep.set.run] epochs).
void flatten(const Value& t, const std::string& prefix, std::vector<std::pair<std::string, const Value*>>& out) {
  for (const auto& [k, v] : t.as_table()) {
    const std::string key = prefix.empty() ? k : prefix + "." + k;
    if (v.is_table()) flatten(v, key, out);
    else out.emplace_back(key, &v);
  }
}

bool scalar(const Value& v) { return v.is_bool() || v.is_number() || v.is_string(); }

// A sub-table `key` of `t` that check_table accepted (null when absent or refused).
const Value* given_table(const Value& t, const std::string& key) {
  const Value* v = t.find(key);
  return v && v->is_table() ? v : nullptr;
}

// An array written by hand (grid, points, keys, choices): null, with an error, when it is not one.
const Value* given_array(const Value& t, const std::string& key, const std::string& where, dsl::Diagnostics& d) {
  const Value* v = t.find(key);
  if (!v || v->is_array()) return v;
  d.error(v->loc(), "'" + key + "' in " + where + ": expected an array, got " + v->kind_name());
  return nullptr;
}

// One [[sweep.axis]] table; false when it is unusable (already reported).
bool load_axis(const Value& a, Axis& ax, bool& any_random, dsl::Diagnostics& d) {
  const std::string A = "[[sweep.axis]]";
  const SweepSchemas& S = sweep_schemas();
  const dsl::CheckedTable c = dsl::check_table(S.axis, &a, a.loc(), A, {}, d, kAxisByHand);
  ax.loc = a.loc();
  const Value* key = a.find("key");
  const Value* keys = a.find("keys");
  const Value* grid = given_array(a, "grid", A, d);
  const Value* points = given_array(a, "points", A, d);
  const Value* random = given_table(a, "random");
  const bool has_grid = a.find("grid"), has_points = a.find("points"), has_random = a.find("random");
  const int forms = (has_grid ? 1 : 0) + (has_points ? 1 : 0) + (has_random ? 1 : 0);
  if (forms != 1) {
    d.error(a.loc(), "a [[sweep.axis]] has exactly one of 'grid' (with 'key'), 'points' (with 'keys') or "
                     "'random' (with 'key')");
    return false;
  }
  if (has_points) {
    if (!points) return false;  // not an array: reported
    ax.kind = Axis::Kind::List;
    if (keys && !c.params.has("keys")) return false;  // not a list of strings: reported
    if (keys) ax.keys = c.params.str_list("keys");
    if (ax.keys.empty()) {
      d.error(a.loc(), "a list axis ('points') needs 'keys', the keys each point sets, e.g. keys = [\"optim.lr\", "
                       "\"dist.batch_per_gpu\"]");
      return false;
    }
    for (const auto& p : points->as_array()) {
      std::vector<Value> pt;
      if (p.is_array()) pt = p.as_array();
      else if (ax.keys.size() == 1) pt = {p};
      if (pt.size() != ax.keys.size()) {
        d.error(p.loc(), "each point needs " + std::to_string(ax.keys.size()) + " values, one per key");
        continue;
      }
      for (const auto& v : pt)
        if (!scalar(v)) d.error(v.loc(), "point values must be numbers, strings or booleans");
      ax.points.push_back(pt);
    }
  } else {
    if (!key || keys) {
      d.error(a.loc(), "a grid or random axis names one 'key'");
      return false;
    }
    if (!c.params.has("key")) return false;  // not a string: reported
    ax.keys = {c.params.str("key")};
    if (has_grid) {
      if (!grid) return false;  // not an array: reported
      ax.kind = Axis::Kind::Grid;
      for (const auto& v : grid->as_array()) {
        if (!scalar(v)) d.error(v.loc(), "grid values must be numbers, strings or booleans");
        else ax.points.push_back({v});
      }
    } else {
      ax.kind = Axis::Kind::Random;
      any_random = true;
      if (!random) return false;  // not a table: check_table said so
      const std::string R = "'random' of [[sweep.axis]]";
      const dsl::CheckedTable r = dsl::check_table(S.axis_random, random, random->loc(), R, {}, d, kAxisRandomByHand);
      if (const Value* choices = given_array(*random, "choices", R, d)) {
        ax.random.choices = choices->as_array();
        if (ax.random.choices.empty()) d.error(choices->loc(), "'choices' is empty");
      } else if (!random->find("choices")) {
        if (!random->find("min") || !random->find("max")) {
          d.error(random->loc(), "a random axis needs 'min' and 'max' (or 'choices')");
          return false;
        }
        if (!r.params.has("min") || !r.params.has("max")) return false;  // not numbers: reported
        ax.random.lo = r.params.f64("min");
        ax.random.hi = r.params.f64("max");
        ax.random.log = r.params.has("log") && r.params.flag("log");
        ax.random.integer = r.params.has("int") && r.params.flag("int");
        if (ax.random.hi < ax.random.lo) d.error(random->loc(), "'max' is below 'min'");
        if (ax.random.log && ax.random.lo <= 0) d.error(random->loc(), "a log-uniform axis needs min > 0");
      }
    }
  }
  if (ax.kind != Axis::Kind::Random && ax.points.empty()) d.error(a.loc(), "this axis has no values");
  return true;
}

}  // namespace

std::string Target::text() const { return metric + (higher_is_better() ? " >= " : " <= ") + shortest(value); }

std::string target_metric_list() {
  std::string list;
  for (const auto& m : target_metric_names()) list += (list.empty() ? "" : ", ") + m;
  return list;
}

std::optional<Target> parse_target_text(const std::string& text) {
  for (const auto& m : target_metric_names())
    for (const char* op : {" >= ", " <= "}) {
      const std::string head = m + op;
      if (text.rfind(head, 0) != 0) continue;
      Target t;
      t.metric = m;
      if (t.higher_is_better() != (std::string(op) == " >= ")) return std::nullopt;
      const std::string num = text.substr(head.size());
      char* end = nullptr;
      t.value = std::strtod(num.c_str(), &end);
      if (num.empty() || !end || *end != '\0' || !std::isfinite(t.value)) return std::nullopt;
      return t;
    }
  return std::nullopt;
}

bool known_metric(const std::string& m) {
  return std::find(metric_names().begin(), metric_names().end(), m) != metric_names().end();
}
bool metric_higher_is_better(const std::string& m) { return m == "top1" || m == "top5" || m == "clips_per_s"; }

std::string metric_list() {
  std::string list;
  for (const auto& m : metric_names()) list += (list.empty() ? "" : ", ") + m;
  return list;
}

std::optional<Definition> load_definition(const std::string& path, dsl::Diagnostics& d) {
  dsl::LoadOptions opts;
  // `${name}` in a sweep file names sweep variables, not environment variables.
  opts.env = [](const std::string& name) -> std::optional<std::string> { return "${" + name + "}"; };
  auto rec = dsl::load_recipe(path, opts, d);  // throws RecipeError when the file cannot be read
  if (!rec) return std::nullopt;
  const Value& root = rec->root;
  const SweepSchemas& S = sweep_schemas();
  Definition def;
  def.file = path;
  {
    Value hashed = root;  // the target changes no trial (Definition::text_hash)
    if (Value* t = hashed.find("sweep"); t && t->is_table()) t->erase("target");
    def.text_hash = dsl::recipe_hash(hashed);
  }
  const Loc file_loc{path, 1, 1};
  dsl::check_table(S.file, &root, file_loc, "the sweep file (everything goes under [sweep])", {}, d);
  const Value* sw = root.find("sweep");
  if (!sw || !sw->is_table()) {
    if (!sw) d.error(file_loc, "a sweep file needs a [sweep] table with at least 'base' and one [[sweep.axis]]");
    return std::nullopt;
  }
  const dsl::CheckedTable top = dsl::check_table(S.sweep, sw, sw->loc(), "[sweep]", {}, d, kSweepByHand);
  const dsl::Params& p = top.params;
  def.name = fs::path(path).stem().string();
  if (const Value* v = sw->find("name"); v && p.has("name")) {
    def.name = p.str("name");
    // runs/sweeps/<name>: one folder, so that no name places a sweep outside runs/sweeps.
    const std::string problem = dsl::folder_name_problem(def.name);
    if (!problem.empty())
      d.error(v->loc(), "[sweep] name " + base::printable(v->to_toml_inline(), 64) + " " + problem +
                            "; a sweep name is one folder name under runs/sweeps/ (use --out or [sweep] out to "
                            "choose another folder)");
  }
  if (p.has("out")) def.out = p.str("out");
  if (!sw->find("base")) {
    d.error(sw->loc(), "[sweep] needs 'base', the recipe every trial starts from");
  } else if (p.has("base")) {
    fs::path b = p.str("base");
    if (b.is_relative()) b = fs::path(path).parent_path() / b;
    def.base = b.lexically_normal().string();
    if (!fs::exists(def.base)) d.error(sw->find("base")->loc(), "base recipe '" + def.base + "' does not exist");
  }
  if (p.has("metric")) def.metric = p.str("metric");
  def.direction = p.has("direction") && !p.str("direction").empty() ? p.str("direction")
                  : metric_higher_is_better(def.metric)              ? "max"
                                                                     : "min";
  for (const char* removed : {"linear_scaling", "reference_batch"})
    if (const Value* v = sw->find(removed))
      d.error(v->loc(), std::string("'") + removed + "' in [sweep] was removed: " + kLrRule);
  if (const Value* t = given_table(*sw, "set")) {
    std::vector<std::pair<std::string, const Value*>> flat;
    flatten(*t, "", flat);
    for (auto& [k, v] : flat) {
      def.fixed.push_back({k, v->to_toml_inline()});
      def.fixed_locs.push_back(v->loc());
    }
  }
  if (const Value* t = given_table(*sw, "vars")) {
    for (const auto& [k, v] : t->as_table()) {
      if (k == "reference_batch")
        d.error(v.loc(), "[sweep.vars] reference_batch: the sweep's own lr scaling was removed: " + std::string(kLrRule));
      else if (!v.is_number()) d.error(v.loc(), "sweep variable '" + k + "' must be a number, got " + v.kind_name());
      else def.vars[k] = v.as_double();
    }
  }
  if (const Value* t = given_table(*sw, "random")) {
    const dsl::CheckedTable r = dsl::check_table(S.random, t, t->loc(), "[sweep.random]", {}, d);
    if (r.params.has("count")) def.random_count = r.params.i64("count");
    if (r.params.has("seed")) def.random_seed = static_cast<uint64_t>(r.params.i64("seed"));
  }
  if (const Value* t = given_table(*sw, "derived")) {
    std::vector<std::pair<std::string, const Value*>> flat;
    flatten(*t, "", flat);
    for (auto& [k, v] : flat) {
      if (k == "optim.lr")
        d.error(v->loc(), "[sweep.derived] \"optim.lr\": a sweep does not compute the lr; " + std::string(kLrRule));
      else if (v->is_number()) def.derived.push_back({k, v->to_toml_inline(), v->loc()});
      else if (v->is_string()) def.derived.push_back({k, v->as_string(), v->loc()});
      else d.error(v->loc(), "derived value '" + k + "' must be an expression string, got " + v->kind_name());
    }
  }
  if (const Value* t = given_table(*sw, "prune")) {
    const dsl::CheckedTable r = dsl::check_table(S.prune, t, t->loc(), "[sweep.prune]", {}, d);
    def.prune = !r.params.has("rule") || r.params.str("rule") == "median";
    if (r.params.has("after_epochs")) def.prune_after = r.params.i64("after_epochs");
    if (r.params.has("min_trials")) def.prune_min_trials = r.params.i64("min_trials");
    if (def.prune && def.metric != "top1" && def.metric != "top5" && def.metric != "val_loss")
      d.error(t->loc(), "median pruning compares per-epoch evaluations: the metric must be top1, top5 or val_loss");
  }
  if (const Value* t = given_table(*sw, "target")) {
    const std::string W = "[sweep] target";
    const dsl::CheckedTable c = dsl::check_table(S.target, t, t->loc(), W, {}, d);
    if (c.params.has("metric") && c.params.has("value")) {
      Target tg;
      tg.metric = c.params.str("metric");
      tg.value = c.params.f64("value");
      tg.loc = t->loc();
      const Value* v = t->find("value");
      const Loc at = v ? v->loc() : t->loc();
      if (!std::isfinite(tg.value))
        d.error(at, "'value' in " + W + ": must be a finite number, got " + v->to_toml_inline());
      else if (tg.higher_is_better() && tg.value > 1)
        d.error(at, "'value' in " + W + ": " + tg.metric + " is a fraction in (0, 1] (top-1 of 90 % is 0.9), got " +
                        v->to_toml_inline());
      else
        def.target = tg;
    }
  }
  bool any_random = false;
  if (const Value* axes = sw->find("axis")) {
    if (!axes->is_array()) {
      d.error(axes->loc(), "'axis' must be an array of tables: write [[sweep.axis]]");
    } else {
      for (const auto& a : axes->as_array()) {
        if (!a.is_table()) {
          d.error(a.loc(), "each [[sweep.axis]] must be a table");
          continue;
        }
        Axis ax;
        if (load_axis(a, ax, any_random, d)) def.axes.push_back(std::move(ax));
      }
    }
  }
  const Value* axis_tables = sw->find("axis");
  if (!axis_tables || (axis_tables->is_array() && axis_tables->as_array().empty()))  // (a refused axis was reported)
    d.error(sw->loc(), "[sweep] has no [[sweep.axis]]: nothing to vary");
  if (any_random && def.random_count == 0)
    d.error(sw->loc(), "a random axis needs [sweep.random] count = N (trials drawn per grid point)");
  if (!any_random && def.random_count > 0)
    d.error(sw->find("random")->loc(), "[sweep.random] is given but no axis is random");
  std::set<std::string> seen;
  for (const auto& ax : def.axes)
    for (const auto& k : ax.keys)
      if (!seen.insert(k).second) d.error(ax.loc, "key '" + k + "' is varied by two axes");
  for (const auto& dv : def.derived)
    if (seen.count(dv.key)) d.error(dv.loc, "key '" + dv.key + "' is both an axis and a derived value");
  if (d.has_errors()) return std::nullopt;
  return def;
}

}  // namespace vexp::sweep
