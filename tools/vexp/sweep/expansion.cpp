#include "sweep/expansion.hpp"

#include <cmath>
#include <map>
#include <cstdio>
#include <random>

#include "sweep/expression.hpp"
#include "vexp/dsl/recipe.hpp"
#include "vexp/runtime/dist_plan.hpp"

namespace vexp::sweep {
using json = nlohmann::json;
using dsl::Loc;
using dsl::Value;

std::string trial_name(int64_t id) {
  char b[16];
  std::snprintf(b, sizeof b, "%03lld", static_cast<long long>(id));
  return b;
}

// The only place a sweep reads the recipe's dist and optim figures.
std::optional<RecipeFigures> recipe_figures(const dsl::RecipePlan& plan) {
  const std::optional<int64_t> global = global_batch_of(plan.dist);
  if (!global) return std::nullopt;
  RecipeFigures f;
  f.world_size = plan.dist.world_size;
  f.batch_per_gpu = plan.dist.batch_per_gpu;
  f.accum_steps = plan.dist.accum_steps;
  f.global_batch = *global;
  f.lr = plan.optim.lr;
  return f;
}

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

}  // namespace

std::optional<int64_t> trial_count(const Definition& def) {
  int64_t n = 1;
  for (const auto& ax : def.axes) {
    if (ax.kind == Axis::Kind::Random) continue;
    if (__builtin_mul_overflow(n, static_cast<int64_t>(ax.points.size()), &n)) return std::nullopt;
  }
  if (def.random_count > 0 && __builtin_mul_overflow(n, def.random_count, &n)) return std::nullopt;
  return n;
}

std::string cli_set_conflict(const Definition& def) {
  for (const auto& o : def.cli_sets) {
    for (const auto& ax : def.axes)
      for (const auto& k : ax.keys)
        if (k == o.path) return "--set " + o.path + ": the sweep varies this key (axis at " + ax.loc.str() +
                                "); drop the --set or the axis";
    for (const auto& dv : def.derived)
      if (dv.key == o.path)
        return "--set " + o.path + ": the sweep derives this key (at " + dv.loc.str() + "); drop the --set or the "
               "derived value";
    for (size_t i = 0; i < def.fixed.size(); ++i)
      if (def.fixed[i].path == o.path)
        return "--set " + o.path + ": [sweep.set] sets this key for every trial (at " + def.fixed_locs[i].str() +
               "); change it there";
    if (o.path == "optim.lr" && def.linear_scaling)
      return "--set optim.lr: linear_scaling sets optim.lr in every trial; set [sweep.vars] base_lr instead";
  }
  return "";
}

std::vector<Trial> expand(const Definition& def, Session& s, dsl::Diagnostics& d) {
  // Refused before anything is multiplied out: a few axes of 100 values are 10^12
  // points, which would exhaust memory long before validation ends.
  const std::optional<int64_t> count = trial_count(def);
  if (!count || *count > kMaxTrials) {
    d.error(Loc{def.file, 0, 0}, (count ? std::to_string(*count) : std::string("more than 2^63")) +
                                     " trials; a sweep may have at most " + std::to_string(kMaxTrials));
    return {};
  }
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
    t.overrides = def.cli_sets;
    t.overrides.insert(t.overrides.end(), def.fixed.begin(), def.fixed.end());
    for (const auto& [k, v] : p.values) {
      t.params[k] = to_json(v);
      locs[k] = p.locs.at(k);
      if (v.is_number()) vars[k] = v.as_double();
      if (k.find('.') != std::string::npos) t.overrides.push_back({k, v.to_toml_inline()});
    }
    // The validated trial's figures; a global batch past 64 bits is this trial's error.
    auto figures = [&]() -> std::optional<RecipeFigures> {
      std::optional<RecipeFigures> f = recipe_figures(*s.plan);
      if (!f)
        d.error(Loc{def.file, 0, 0}, "trial " + std::to_string(t.id) +
                                         ": the global batch (dist.world_size x batch_per_gpu x accum_steps) "
                                         "does not fit in 64 bits");
      return f;
    };
    if (!check_trial(s, def, t.overrides, locs, t.id, d)) continue;
    if (!def.derived.empty() || def.linear_scaling) {
      const std::optional<RecipeFigures> fo = figures();
      if (!fo) continue;
      const RecipeFigures& f = *fo;
      vars["world_size"] = static_cast<double>(f.world_size);
      vars["batch_per_gpu"] = static_cast<double>(f.batch_per_gpu);
      vars["accum_steps"] = static_cast<double>(f.accum_steps);
      vars["global_batch"] = static_cast<double>(f.global_batch);
      vars["lr"] = f.lr;
      if (!vars.count("base_lr")) vars["base_lr"] = f.lr;
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
    const std::optional<RecipeFigures> f = figures();
    if (!f) continue;
    t.global_batch = f->global_batch;
    t.world_size = f->world_size;
    t.lr = f->lr;
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

}  // namespace vexp::sweep
