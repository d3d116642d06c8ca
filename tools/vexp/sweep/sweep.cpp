#include "sweep/sweep.hpp"

#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <functional>
#include <random>
#include <set>
#include <stdexcept>

#include "vexp/dsl/recipe.hpp"
#include "vexp/dsl/schema.hpp"
#include "vexp/runtime/dist_plan.hpp"

namespace vexp::sweep {
namespace fs = std::filesystem;
using json = nlohmann::json;
using dsl::Loc;
using dsl::Value;

// ---------------------------------------------------------------- expressions

namespace {

class Parser {
 public:
  Parser(const std::string& s, const std::map<std::string, double>& vars) : s_(s), vars_(vars) {}
  double parse() {
    double v = sum();
    skip();
    if (i_ != s_.size()) fail("unexpected '" + s_.substr(i_, 1) + "'");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw std::runtime_error("in expression \"" + s_ + "\" at character " + std::to_string(i_ + 1) + ": " + what);
  }
  void skip() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  bool take(char c) {
    skip();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  double sum() {
    double v = product();
    for (;;) {
      if (take('+')) v += product();
      else if (take('-')) v -= product();
      else return v;
    }
  }
  double product() {
    double v = unary();
    for (;;) {
      if (take('*')) v *= unary();
      else if (take('/')) {
        double d = unary();
        if (d == 0) fail("division by zero");
        v /= d;
      } else return v;
    }
  }
  double unary() {
    if (take('-')) return -unary();
    if (take('+')) return unary();
    return power();
  }
  double power() {
    double b = atom();
    if (take('^')) return std::pow(b, unary());  // right-associative
    return b;
  }
  double atom() {
    skip();
    if (i_ >= s_.size()) fail("expression ends too early");
    const char c = s_[i_];
    if (c == '(') {
      ++i_;
      double v = sum();
      if (!take(')')) fail("missing ')'");
      return v;
    }
    if (c == '$') {
      if (i_ + 1 >= s_.size() || s_[i_ + 1] != '{') fail("expected '${name}'");
      const size_t close = s_.find('}', i_ + 2);
      if (close == std::string::npos) fail("unterminated '${'");
      const std::string name = s_.substr(i_ + 2, close - i_ - 2);
      auto it = vars_.find(name);
      if (it == vars_.end()) {
        std::vector<std::string> names;
        for (const auto& [k, v] : vars_) names.push_back(k);
        std::string dym = dsl::did_you_mean(name, names);
        fail("unknown variable '" + name + "'" + (dym.empty() ? "" : " (did you mean '" + dym + "'?)"));
      }
      i_ = close + 1;
      return it->second;
    }
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') {
      const char* begin = s_.c_str() + i_;
      char* end = nullptr;
      double v = std::strtod(begin, &end);
      if (end == begin) fail("bad number");
      i_ += static_cast<size_t>(end - begin);
      return v;
    }
    if (std::isalpha(static_cast<unsigned char>(c))) {
      size_t j = i_;
      while (j < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[j])) || s_[j] == '_')) ++j;
      const std::string fn = s_.substr(i_, j - i_);
      i_ = j;
      if (!take('(')) fail("'" + fn + "' is not a function call (variables are written ${name})");
      std::vector<double> args{sum()};
      while (take(',')) args.push_back(sum());
      if (!take(')')) fail("missing ')' after the arguments of " + fn);
      auto need = [&](size_t n) {
        if (args.size() != n) fail(fn + " takes " + std::to_string(n) + " argument" + (n == 1 ? "" : "s"));
      };
      if (fn == "min" || fn == "max") {
        double v = args[0];
        for (double a : args) v = fn == "min" ? std::min(v, a) : std::max(v, a);
        return v;
      }
      if (fn == "pow") { need(2); return std::pow(args[0], args[1]); }
      need(1);
      if (fn == "sqrt") { if (args[0] < 0) fail("sqrt of a negative number"); return std::sqrt(args[0]); }
      if (fn == "log") { if (args[0] <= 0) fail("log of a non-positive number"); return std::log(args[0]); }
      if (fn == "log2") { if (args[0] <= 0) fail("log2 of a non-positive number"); return std::log2(args[0]); }
      if (fn == "exp") return std::exp(args[0]);
      if (fn == "round") return std::round(args[0]);
      if (fn == "floor") return std::floor(args[0]);
      if (fn == "ceil") return std::ceil(args[0]);
      if (fn == "abs") return std::fabs(args[0]);
      fail("unknown function '" + fn + "' (known: min, max, pow, sqrt, log, log2, exp, round, floor, ceil, abs)");
    }
    fail("unexpected '" + std::string(1, c) + "'");
  }

  const std::string& s_;
  const std::map<std::string, double>& vars_;
  size_t i_ = 0;
};

}  // namespace

double eval_expr(const std::string& text, const std::map<std::string, double>& vars) {
  double v = Parser(text, vars).parse();
  if (!std::isfinite(v)) throw std::runtime_error("expression \"" + text + "\" is not a finite number");
  return v;
}

// ---------------------------------------------------------------- definition

bool known_metric(const std::string& m) {
  static const std::set<std::string> k{"top1", "top5", "val_loss", "clips_per_s", "wall_s", "train_s"};
  return k.count(m) != 0;
}
bool metric_higher_is_better(const std::string& m) { return m == "top1" || m == "top5" || m == "clips_per_s"; }

namespace {

std::string number_text(double v) {
  char buf[64];
  if (std::fabs(v) < 1e15 && v == std::floor(v)) std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v));
  else std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

json to_json(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Bool: return v.as_bool();
    case Value::Kind::Int: return v.as_int();
    case Value::Kind::Float: return v.as_double();
    case Value::Kind::String: return v.as_string();
    case Value::Kind::Array: {
      json a = json::array();
      for (const auto& e : v.as_array()) a.push_back(to_json(e));
      return a;
    }
    default: return nullptr;
  }
}

// Flattens nested tables into dotted keys ("run.epochs" or [sweep.set.run] epochs).
void flatten(const Value& t, const std::string& prefix, std::vector<std::pair<std::string, const Value*>>& out) {
  for (const auto& [k, v] : t.as_table()) {
    const std::string key = prefix.empty() ? k : prefix + "." + k;
    if (v.is_table()) flatten(v, key, out);
    else out.emplace_back(key, &v);
  }
}

void check_keys(const Value& t, const std::string& where, const std::vector<std::string>& allowed,
                dsl::Diagnostics& d) {
  for (const auto& [k, v] : t.as_table()) {
    if (std::find(allowed.begin(), allowed.end(), k) != allowed.end()) continue;
    std::string dym = dsl::did_you_mean(k, allowed);
    d.error(v.loc(), "unknown key '" + k + "' in " + where + (dym.empty() ? "" : " (did you mean '" + dym + "'?)"));
  }
}

const Value* want(const Value& t, const std::string& key, Value::Kind kind, const std::string& where,
                  dsl::Diagnostics& d, bool number_ok = false) {
  const Value* v = t.find(key);
  if (!v) return nullptr;
  if (v->kind() == kind || (number_ok && v->is_number())) return v;
  d.error(v->loc(), "'" + key + "' in " + where + ": expected " + Value::kind_name(kind) + ", got " + v->kind_name());
  return nullptr;
}

bool scalar(const Value& v) { return v.is_bool() || v.is_number() || v.is_string(); }

}  // namespace

std::optional<Definition> load_definition(const std::string& path, dsl::Diagnostics& d) {
  dsl::LoadOptions opts;
  // `${name}` in a sweep file names sweep variables, not environment variables.
  opts.env = [](const std::string& name) -> std::optional<std::string> { return "${" + name + "}"; };
  auto rec = dsl::load_recipe(path, opts, d);  // throws RecipeError when the file cannot be read
  if (!rec) return std::nullopt;
  const Value& root = rec->root;
  Definition def;
  def.file = path;
  def.text_hash = dsl::recipe_hash(root);
  const Loc file_loc{path, 1, 1};
  check_keys(root, "the sweep file (everything goes under [sweep])", {"sweep"}, d);
  const Value* sw = root.find("sweep");
  if (!sw || !sw->is_table()) {
    d.error(sw ? sw->loc() : file_loc, "a sweep file needs a [sweep] table with at least 'base' and one [[sweep.axis]]");
    return std::nullopt;
  }
  const std::string S = "[sweep]";
  check_keys(*sw, S, {"name", "base", "out", "metric", "direction", "linear_scaling", "reference_batch", "set", "vars",
                      "axis", "random", "derived", "prune"}, d);
  def.name = fs::path(path).stem().string();
  if (auto* v = want(*sw, "name", Value::Kind::String, S, d)) {
    def.name = v->as_string();
    // runs/sweeps/<name>: one folder, so that no name places a sweep outside runs/sweeps.
    const std::string problem = dsl::folder_name_problem(def.name);
    if (!problem.empty())
      d.error(v->loc(), "[sweep] name " + v->to_toml_inline() + " " + problem +
                            "; a sweep name is one folder name under runs/sweeps/ (use --out or [sweep] out to "
                            "choose another folder)");
  }
  if (auto* v = want(*sw, "out", Value::Kind::String, S, d)) def.out = v->as_string();
  if (auto* v = want(*sw, "base", Value::Kind::String, S, d)) {
    fs::path b = v->as_string();
    if (b.is_relative()) b = fs::path(path).parent_path() / b;
    def.base = b.lexically_normal().string();
    if (!fs::exists(def.base)) d.error(v->loc(), "base recipe '" + def.base + "' does not exist");
  } else if (!sw->find("base")) {
    d.error(sw->loc(), "[sweep] needs 'base', the recipe every trial starts from");
  }
  if (auto* v = want(*sw, "metric", Value::Kind::String, S, d)) {
    def.metric = v->as_string();
    if (!known_metric(def.metric))
      d.error(v->loc(), "unknown metric '" + def.metric + "' (known: top1, top5, val_loss, clips_per_s, wall_s, train_s)");
  }
  def.direction = metric_higher_is_better(def.metric) ? "max" : "min";
  if (auto* v = want(*sw, "direction", Value::Kind::String, S, d)) {
    def.direction = v->as_string();
    if (def.direction != "max" && def.direction != "min")
      d.error(v->loc(), "'direction' must be \"max\" or \"min\", got \"" + def.direction + "\"");
  }
  if (auto* v = want(*sw, "linear_scaling", Value::Kind::Bool, S, d)) def.linear_scaling = v->as_bool();
  if (auto* v = want(*sw, "reference_batch", Value::Kind::Float, S, d, true)) {
    def.reference_batch = v->as_double();
    if (def.reference_batch <= 0) d.error(v->loc(), "'reference_batch' must be positive");
  }
  if (auto* t = want(*sw, "set", Value::Kind::Table, S, d)) {
    std::vector<std::pair<std::string, const Value*>> flat;
    flatten(*t, "", flat);
    for (auto& [k, v] : flat) {
      def.fixed.push_back({k, v->to_toml_inline()});
      def.fixed_locs.push_back(v->loc());
    }
  }
  if (auto* t = want(*sw, "vars", Value::Kind::Table, S, d)) {
    for (const auto& [k, v] : t->as_table()) {
      if (!v.is_number()) d.error(v.loc(), "sweep variable '" + k + "' must be a number, got " + v.kind_name());
      else def.vars[k] = v.as_double();
    }
  }
  if (auto* t = want(*sw, "random", Value::Kind::Table, S, d)) {
    check_keys(*t, "[sweep.random]", {"count", "seed"}, d);
    if (auto* v = want(*t, "count", Value::Kind::Int, "[sweep.random]", d)) {
      def.random_count = v->as_int();
      if (def.random_count < 1) d.error(v->loc(), "'count' in [sweep.random] must be at least 1");
    }
    if (auto* v = want(*t, "seed", Value::Kind::Int, "[sweep.random]", d)) def.random_seed = static_cast<uint64_t>(v->as_int());
  }
  if (auto* t = want(*sw, "derived", Value::Kind::Table, S, d)) {
    std::vector<std::pair<std::string, const Value*>> flat;
    flatten(*t, "", flat);
    for (auto& [k, v] : flat) {
      if (v->is_number()) def.derived.push_back({k, v->to_toml_inline(), v->loc()});
      else if (v->is_string()) def.derived.push_back({k, v->as_string(), v->loc()});
      else d.error(v->loc(), "derived value '" + k + "' must be an expression string, got " + v->kind_name());
    }
  }
  if (auto* t = want(*sw, "prune", Value::Kind::Table, S, d)) {
    const std::string P = "[sweep.prune]";
    check_keys(*t, P, {"rule", "after_epochs", "min_trials"}, d);
    def.prune = true;
    if (auto* v = want(*t, "rule", Value::Kind::String, P, d)) {
      if (v->as_string() == "none") def.prune = false;
      else if (v->as_string() != "median") d.error(v->loc(), "'rule' in [sweep.prune] must be \"median\" or \"none\"");
    }
    if (auto* v = want(*t, "after_epochs", Value::Kind::Int, P, d)) def.prune_after = v->as_int();
    if (auto* v = want(*t, "min_trials", Value::Kind::Int, P, d)) def.prune_min_trials = v->as_int();
    if (def.prune_after < 1) d.error(t->loc(), "'after_epochs' in [sweep.prune] must be at least 1");
    if (def.prune_min_trials < 1) d.error(t->loc(), "'min_trials' in [sweep.prune] must be at least 1");
    if (def.prune && def.metric != "top1" && def.metric != "top5" && def.metric != "val_loss")
      d.error(t->loc(), "median pruning compares per-epoch evaluations: the metric must be top1, top5 or val_loss");
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
        const std::string A = "[[sweep.axis]]";
        check_keys(a, A, {"key", "keys", "grid", "points", "random"}, d);
        Axis ax;
        ax.loc = a.loc();
        const Value* key = want(a, "key", Value::Kind::String, A, d);
        const Value* keys = want(a, "keys", Value::Kind::Array, A, d);
        const Value* grid = want(a, "grid", Value::Kind::Array, A, d);
        const Value* points = want(a, "points", Value::Kind::Array, A, d);
        const Value* random = want(a, "random", Value::Kind::Table, A, d);
        const int forms = (grid ? 1 : 0) + (points ? 1 : 0) + (random ? 1 : 0);
        if (forms != 1) {
          d.error(a.loc(), "a [[sweep.axis]] has exactly one of 'grid' (with 'key'), 'points' (with 'keys') or "
                           "'random' (with 'key')");
          continue;
        }
        if (points) {
          ax.kind = Axis::Kind::List;
          if (!keys || keys->as_array().empty()) {
            d.error(a.loc(), "a list axis ('points') needs 'keys', the keys each point sets, e.g. keys = [\"optim.lr\", "
                             "\"dist.batch_per_gpu\"]");
            continue;
          }
          for (const auto& k : keys->as_array()) {
            if (!k.is_string()) d.error(k.loc(), "'keys' must hold strings");
            else ax.keys.push_back(k.as_string());
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
            continue;
          }
          ax.keys = {key->as_string()};
          if (grid) {
            ax.kind = Axis::Kind::Grid;
            for (const auto& v : grid->as_array()) {
              if (!scalar(v)) d.error(v.loc(), "grid values must be numbers, strings or booleans");
              else ax.points.push_back({v});
            }
          } else {
            ax.kind = Axis::Kind::Random;
            any_random = true;
            const std::string R = "'random' of [[sweep.axis]]";
            check_keys(*random, R, {"min", "max", "log", "int", "choices"}, d);
            if (auto* c = want(*random, "choices", Value::Kind::Array, R, d)) {
              ax.random.choices = c->as_array();
              if (ax.random.choices.empty()) d.error(c->loc(), "'choices' is empty");
            } else {
              const Value* lo = want(*random, "min", Value::Kind::Float, R, d, true);
              const Value* hi = want(*random, "max", Value::Kind::Float, R, d, true);
              if (!lo || !hi) {
                d.error(random->loc(), "a random axis needs 'min' and 'max' (or 'choices')");
                continue;
              }
              ax.random.lo = lo->as_double();
              ax.random.hi = hi->as_double();
              if (auto* v = want(*random, "log", Value::Kind::Bool, R, d)) ax.random.log = v->as_bool();
              if (auto* v = want(*random, "int", Value::Kind::Bool, R, d)) ax.random.integer = v->as_bool();
              if (ax.random.hi < ax.random.lo) d.error(random->loc(), "'max' is below 'min'");
              if (ax.random.log && ax.random.lo <= 0) d.error(random->loc(), "a log-uniform axis needs min > 0");
            }
          }
        }
        if (ax.kind != Axis::Kind::Random && ax.points.empty()) d.error(a.loc(), "this axis has no values");
        def.axes.push_back(std::move(ax));
      }
    }
  }
  if (def.axes.empty()) d.error(sw->loc(), "[sweep] has no [[sweep.axis]]: nothing to vary");
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
  if (def.linear_scaling && (seen.count("optim.lr") ||
                             std::any_of(def.derived.begin(), def.derived.end(),
                                         [](const Derived& x) { return x.key == "optim.lr"; })))
    d.error(sw->find("linear_scaling")->loc(),
            "linear_scaling sets optim.lr itself: vary 'base_lr' instead of optim.lr, or drop linear_scaling");
  if (d.has_errors()) return std::nullopt;
  return def;
}

namespace {

struct Point {
  std::vector<std::pair<std::string, Value>> values;  // key -> value
  std::map<std::string, Loc> locs;
};

// Validates `overrides` on the base recipe; diagnostics from an override are
// moved to where its value was written in the sweep file.
bool check_trial(Session& s, const Definition& def, const std::vector<dsl::Override>& overrides,
                 const std::map<std::string, Loc>& locs, int64_t id, dsl::Diagnostics& d) {
  s.diags = dsl::Diagnostics{};
  bool ok = false;
  try {
    ok = open_recipe(s, def.base, overrides, s.require_data);
  } catch (const dsl::RecipeError& e) {
    d.error(Loc{def.file, 0, 0}, e.what());
    return false;
  }
  for (const auto& diag : s.diags.items()) {
    if (diag.severity != dsl::Severity::Error) continue;
    Loc loc = diag.loc;
    std::string msg = diag.message;
    if (loc.file.rfind("--set ", 0) == 0) {
      std::string key = loc.file.substr(6, loc.file.find('=') - 6);
      auto it = locs.find(key);
      if (it != locs.end()) loc = it->second;
      msg = "trial " + std::to_string(id) + " (" + diag.loc.file.substr(6) + "): " + msg;
    }
    d.error(loc, msg);
  }
  return ok;
}

// The validated trial's global batch (dist_plan's global_batch_of); an error when
// it does not fit in 64 bits.
std::optional<int64_t> trial_global_batch(const Session& s, const Definition& def, int64_t id, dsl::Diagnostics& d) {
  const std::optional<int64_t> global = global_batch_of(s.plan->dist);
  if (!global)
    d.error(Loc{def.file, 0, 0}, "trial " + std::to_string(id) +
                                     ": the global batch (dist.world_size x batch_per_gpu x accum_steps) does not fit in 64 bits");
  return global;
}

}  // namespace

std::vector<Trial> expand(const Definition& def, Session& s, dsl::Diagnostics& d) {
  // Cartesian product of the grid and list axes, first axis outermost.
  std::vector<Point> points{Point{}};
  for (const auto& ax : def.axes) {
    if (ax.kind == Axis::Kind::Random) continue;
    std::vector<Point> next;
    for (const auto& p : points) {
      for (const auto& pt : ax.points) {
        Point q = p;
        for (size_t i = 0; i < ax.keys.size(); ++i) {
          q.values.emplace_back(ax.keys[i], pt[i]);
          q.locs[ax.keys[i]] = pt[i].loc();
        }
        next.push_back(std::move(q));
      }
    }
    points = std::move(next);
  }
  // Random axes: `count` draws per grid point, from one generator seeded by the sweep.
  if (def.random_count > 0) {
    std::mt19937_64 rng(def.random_seed);
    std::vector<Point> next;
    for (const auto& p : points) {
      for (int64_t r = 0; r < def.random_count; ++r) {
        Point q = p;
        for (const auto& ax : def.axes) {
          if (ax.kind != Axis::Kind::Random) continue;
          Value v;
          const RandomSpec& rs = ax.random;
          if (!rs.choices.empty()) {
            v = rs.choices[std::uniform_int_distribution<size_t>(0, rs.choices.size() - 1)(rng)];
          } else {
            double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
            double x = rs.log ? std::exp(std::log(rs.lo) + u * (std::log(rs.hi) - std::log(rs.lo)))
                              : rs.lo + u * (rs.hi - rs.lo);
            if (rs.integer) v = Value(static_cast<int64_t>(std::llround(x)));
            else {
              char b[32];
              std::snprintf(b, sizeof b, "%.4g", x);  // readable values in tables and file names
              v = Value(std::stod(b));
            }
          }
          v.set_loc(ax.loc);
          q.values.emplace_back(ax.keys[0], v);
          q.locs[ax.keys[0]] = ax.loc;
        }
        next.push_back(std::move(q));
      }
    }
    points = std::move(next);
  }

  std::vector<Trial> trials;
  std::map<std::string, Loc> fixed_locs;
  for (size_t i = 0; i < def.fixed.size(); ++i) fixed_locs[def.fixed[i].path] = def.fixed_locs[i];
  int64_t id = 0;
  for (const auto& p : points) {
    Trial t;
    t.id = ++id;
    std::map<std::string, Loc> locs = fixed_locs;
    std::map<std::string, double> vars = def.vars;
    t.overrides = def.fixed;
    for (const auto& [k, v] : p.values) {
      t.params[k] = to_json(v);
      locs[k] = p.locs.at(k);
      if (v.is_number()) vars[k] = v.as_double();
      if (k.find('.') != std::string::npos) t.overrides.push_back({k, v.to_toml_inline()});
    }
    if (!check_trial(s, def, t.overrides, locs, t.id, d)) continue;
    if (!def.derived.empty() || def.linear_scaling) {
      const dsl::DistConfig& dist = s.plan->dist;
      const std::optional<int64_t> global = trial_global_batch(s, def, t.id, d);
      if (!global) continue;
      vars["world_size"] = static_cast<double>(dist.world_size);
      vars["batch_per_gpu"] = static_cast<double>(dist.batch_per_gpu);
      vars["accum_steps"] = static_cast<double>(dist.accum_steps);
      vars["global_batch"] = static_cast<double>(*global);
      vars["lr"] = s.plan->optim.lr;
      if (!vars.count("base_lr")) vars["base_lr"] = s.plan->optim.lr;
      bool bad = false;
      for (const auto& dv : def.derived) {
        try {
          double x = eval_expr(dv.expr, vars);
          vars[dv.key] = x;
          t.params[dv.key] = x == std::floor(x) && std::fabs(x) < 1e15 ? json(static_cast<int64_t>(x)) : json(x);
          locs[dv.key] = dv.loc;
          if (dv.key.find('.') != std::string::npos) t.overrides.push_back({dv.key, number_text(x)});
        } catch (const std::exception& e) {
          d.error(dv.loc, "trial " + std::to_string(t.id) + ": derived '" + dv.key + "': " + e.what());
          bad = true;
        }
      }
      if (bad) continue;
      if (def.linear_scaling) {
        double lr = vars["base_lr"] * vars["global_batch"] / def.reference_batch;
        t.params["optim.lr"] = lr;
        t.overrides.push_back({"optim.lr", number_text(lr)});
      }
      if (!check_trial(s, def, t.overrides, locs, t.id, d)) continue;
    }
    const std::optional<int64_t> global = trial_global_batch(s, def, t.id, d);
    if (!global) continue;
    t.global_batch = *global;
    t.world_size = s.plan->dist.world_size;
    t.lr = s.plan->optim.lr;
    t.recipe_hash = dsl::recipe_hash(s.plan->resolved);
    trials.push_back(std::move(t));
  }
  return trials;
}

std::string sweep_hash(const Definition& def, const std::vector<Trial>& trials) {
  std::string text = def.text_hash;
  for (const auto& t : trials) {
    text += "|" + t.recipe_hash;
    for (const auto& o : t.overrides) text += ";" + o.path + "=" + o.text;
  }
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ULL;
  char buf[20];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

// ---------------------------------------------------------------- store

double now_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

namespace {

sqlite3* DB(void* p) { return static_cast<sqlite3*>(p); }

// A failed SQLite call on `db`: CorruptDatabase when the file is damaged.
[[noreturn]] void fail(sqlite3* db, const std::string& message) {
  const int code = sqlite3_errcode(db) & 0xff;
  if (code == SQLITE_CORRUPT || code == SQLITE_NOTADB) throw CorruptDatabase(message);
  throw std::runtime_error(message);
}

struct Stmt {
  sqlite3_stmt* st = nullptr;
  sqlite3* db;
  Stmt(sqlite3* d, const char* sql) : db(d) {
    if (sqlite3_prepare_v2(d, sql, -1, &st, nullptr) != SQLITE_OK) fail(d, std::string("sweep.db: ") + sqlite3_errmsg(d));
  }
  ~Stmt() { sqlite3_finalize(st); }
  Stmt& text(int i, const std::string& s) { sqlite3_bind_text(st, i, s.c_str(), -1, SQLITE_TRANSIENT); return *this; }
  Stmt& i64(int i, int64_t v) { sqlite3_bind_int64(st, i, v); return *this; }
  Stmt& f64(int i, double v) { sqlite3_bind_double(st, i, v); return *this; }
  Stmt& null(int i) { sqlite3_bind_null(st, i); return *this; }
  bool step() {
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    fail(db, std::string("sweep.db: ") + sqlite3_errmsg(db));
  }
  std::string col_text(int i) {
    auto* p = sqlite3_column_text(st, i);
    return p ? reinterpret_cast<const char*>(p) : "";
  }
};

json parse_or(const std::string& s, json dflt) {
  try {
    return s.empty() ? dflt : json::parse(s);
  } catch (const std::exception&) {
    return dflt;
  }
}

}  // namespace

Store::~Store() { close(); }

void Store::close() {
  if (db_) sqlite3_close(DB(db_));
  db_ = nullptr;
}

void Store::exec(const std::string& sql) const {
  char* err = nullptr;
  if (sqlite3_exec(DB(db_), sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::string m = err ? err : "unknown error";
    sqlite3_free(err);
    fail(DB(db_), "sweep.db: " + m);
  }
}

void Store::open(const std::string& path, bool create) {
  sqlite3* db = nullptr;
  int flags = SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0);
  if (sqlite3_open_v2(path.c_str(), &db, flags, nullptr) != SQLITE_OK) {
    std::string m = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    throw std::runtime_error("cannot open '" + path + "': " + m);
  }
  db_ = db;
  sqlite3_busy_timeout(db, 5000);
  exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;");
  {
    // Every page, not only those the first queries touch (a few KiB for a sweep).
    Stmt q(db, "PRAGMA quick_check");
    std::string problem;
    while (q.step())
      if (problem.empty() && q.col_text(0) != "ok") problem = q.col_text(0);
    if (!problem.empty()) throw CorruptDatabase("sweep.db: " + problem);
  }
  if (!create) {
    Stmt q(db, "SELECT count(*) FROM sqlite_master WHERE type='table' AND name IN ('meta','trials')");
    q.step();
    if (sqlite3_column_int(q.st, 0) != 2) throw std::runtime_error("'" + path + "' is not a vexp sweep database");
    return;
  }
  exec(
      "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);"
      "CREATE TABLE IF NOT EXISTS trials("
      " id INTEGER PRIMARY KEY, params TEXT NOT NULL, overrides TEXT NOT NULL,"
      " global_batch INTEGER, lr REAL, recipe_hash TEXT,"
      " status TEXT NOT NULL CHECK(status IN ('pending','running','done','failed','diverged','pruned')),"
      " attempts INTEGER NOT NULL DEFAULT 0, exit_code INTEGER, metric REAL, metrics TEXT,"
      " started_at REAL, finished_at REAL, wall_s REAL, run_dir TEXT NOT NULL, message TEXT);");
}

bool Store::has_meta() const {
  Stmt q(DB(db_), "SELECT count(*) FROM meta");
  q.step();
  return sqlite3_column_int64(q.st, 0) > 0;
}

std::string Store::meta(const std::string& key) const {
  Stmt q(DB(db_), "SELECT value FROM meta WHERE key=?");
  q.text(1, key);
  return q.step() ? q.col_text(0) : "";
}

void Store::set_meta(const std::map<std::string, std::string>& kv) {
  exec("BEGIN IMMEDIATE");
  try {
    for (const auto& [k, v] : kv) {
      Stmt q(DB(db_), "INSERT OR REPLACE INTO meta(key, value) VALUES(?, ?)");
      q.text(1, k).text(2, v).step();
    }
    exec("COMMIT");
  } catch (...) {
    exec("ROLLBACK");
    throw;
  }
}

void Store::insert_trials(const std::vector<Trial>& trials, const std::string& trials_dir) {
  exec("BEGIN IMMEDIATE");
  try {
    for (const auto& t : trials) {
      json ov = json::array();  // ordered: the recipe hash depends on the order overrides are applied
      for (const auto& o : t.overrides) ov.push_back({o.path, o.text});
      char name[16];
      std::snprintf(name, sizeof name, "%03lld", static_cast<long long>(t.id));
      Stmt q(DB(db_),
             "INSERT OR IGNORE INTO trials(id, params, overrides, global_batch, lr, recipe_hash, status, run_dir)"
             " VALUES(?, ?, ?, ?, ?, ?, 'pending', ?)");
      q.i64(1, t.id).text(2, t.params.dump()).text(3, ov.dump()).i64(4, t.global_batch).f64(5, t.lr)
          .text(6, t.recipe_hash).text(7, (fs::path(trials_dir) / name).string()).step();
    }
    exec("COMMIT");
  } catch (...) {
    exec("ROLLBACK");
    throw;
  }
}

std::vector<Row> Store::rows() const {
  Stmt q(DB(db_),
         "SELECT id, params, overrides, global_batch, lr, recipe_hash, status, attempts, exit_code, metric, metrics,"
         " started_at, finished_at, wall_s, run_dir, message FROM trials ORDER BY id");
  std::vector<Row> out;
  while (q.step()) {
    Row r;
    r.id = sqlite3_column_int64(q.st, 0);
    r.params = parse_or(q.col_text(1), json::object());
    r.overrides = parse_or(q.col_text(2), json::array());
    r.global_batch = sqlite3_column_int64(q.st, 3);
    r.lr = sqlite3_column_double(q.st, 4);
    r.recipe_hash = q.col_text(5);
    r.status = q.col_text(6);
    r.attempts = sqlite3_column_int64(q.st, 7);
    r.exit_code = sqlite3_column_type(q.st, 8) == SQLITE_NULL ? -1 : sqlite3_column_int64(q.st, 8);
    if (sqlite3_column_type(q.st, 9) != SQLITE_NULL) r.metric = sqlite3_column_double(q.st, 9);
    r.metrics = parse_or(q.col_text(10), json::object());
    r.started_at = sqlite3_column_double(q.st, 11);
    r.finished_at = sqlite3_column_double(q.st, 12);
    r.wall_s = sqlite3_column_double(q.st, 13);
    r.run_dir = q.col_text(14);
    r.message = q.col_text(15);
    out.push_back(std::move(r));
  }
  return out;
}

void Store::mark_running(int64_t id, const std::string& run_dir) {
  Stmt q(DB(db_),
         "UPDATE trials SET status='running', attempts=attempts+1, started_at=?, finished_at=NULL, run_dir=?,"
         " exit_code=NULL, message=NULL WHERE id=?");
  q.f64(1, now_s()).text(2, run_dir).i64(3, id).step();  // a single statement is its own transaction
}

void Store::finish(int64_t id, const std::string& status, int exit_code, std::optional<double> metric,
                   const json& metrics, double wall_s, const std::string& message) {
  Stmt q(DB(db_),
         "UPDATE trials SET status=?, exit_code=?, metric=?, metrics=?, finished_at=?, wall_s=?, message=? WHERE id=?");
  q.text(1, status).i64(2, exit_code);
  if (metric) q.f64(3, *metric);
  else q.null(3);
  q.text(4, metrics.dump()).f64(5, now_s()).f64(6, wall_s).text(7, message).i64(8, id).step();
}

void Store::restore(const Row& r) {
  Stmt q(DB(db_),
         "UPDATE trials SET status=?, attempts=?, exit_code=?, metric=?, metrics=?, started_at=?, finished_at=?,"
         " wall_s=?, run_dir=?, message=? WHERE id=?");
  q.text(1, r.status).i64(2, r.attempts);
  if (r.exit_code >= 0) q.i64(3, r.exit_code);
  else q.null(3);
  if (r.metric) q.f64(4, *r.metric);
  else q.null(4);
  q.text(5, r.metrics.dump());
  if (r.started_at > 0) q.f64(6, r.started_at);
  else q.null(6);
  if (r.finished_at > 0) q.f64(7, r.finished_at);
  else q.null(7);
  q.f64(8, r.wall_s).text(9, r.run_dir).text(10, r.message).i64(11, r.id).step();
}

std::string move_aside(const std::string& db_path) {
  std::time_t t = std::time(nullptr);
  char when[32];
  std::strftime(when, sizeof when, "%Y%m%d-%H%M%S", std::localtime(&t));
  std::string aside = db_path + ".corrupt-" + when;
  for (int k = 2; fs::exists(aside); ++k) aside = db_path + ".corrupt-" + when + "." + std::to_string(k);
  fs::rename(db_path, aside);
  for (const char* side : {"-wal", "-shm"}) {
    std::error_code ec;
    if (fs::exists(db_path + side, ec)) fs::rename(db_path + side, aside + side, ec);
  }
  return aside;
}

void Store::reset(int64_t id) {
  Stmt q(DB(db_), "UPDATE trials SET status='pending' WHERE id=?");
  q.i64(1, id).step();
}

json row_json(const Row& r) {
  json j{{"id", r.id},           {"status", r.status},   {"params", r.params},       {"global_batch", r.global_batch},
         {"lr", r.lr},           {"attempts", r.attempts}, {"run_dir", r.run_dir},   {"wall_s", r.wall_s},
         {"metrics", r.metrics}, {"message", r.message}, {"recipe_hash", r.recipe_hash}};
  j["metric"] = r.metric ? json(*r.metric) : json(nullptr);
  j["exit_code"] = r.exit_code >= 0 ? json(r.exit_code) : json(nullptr);
  return j;
}

}  // namespace vexp::sweep
