#include "vexp/sweep/expansion.hpp"

#include <cmath>
#include <map>
#include <cstdio>
#include <random>

#include "vexp/base/attempt.hpp"
#include "vexp/sweep/expression.hpp"
#include "vexp/dsl/recipe.hpp"
#include "vexp/runtime/dist_plan.hpp"
#include "vexp/runtime/dry_run.hpp"

namespace vexp::sweep {
using json = nlohmann::json;
using dsl::Loc;
using dsl::Value;

std::string trial_name(int64_t id) {
  char b[16];
  std::snprintf(b, sizeof b, "%03lld", static_cast<long long>(id));
  return b;
}

bool open_trial_recipe(Session& s, const std::string& base, const std::vector<dsl::Override>& overrides,
                       bool require_data) {
  s.diags = dsl::Diagnostics{};
  OpenOptions o;
  o.load_plugins = false;  // the sweep command loaded them
  o.overrides = overrides;
  o.require_data = require_data;
  return open_recipe(s, base, o);
}

TrainedFigures trained_figures(const dsl::RecipePlan& plan, int64_t ranks, std::optional<int64_t> train_size) {
  // The batch geometry and the lr do not depend on the training-set size: without
  // it, the planner is asked for them with one global batch of clips (at least what
  // it needs), and the steps stay unknown.
  const std::optional<int64_t> global = global_batch_of(plan.dist);
  const DistPlan p = make_dist_plan(plan, ranks, train_size ? *train_size : global.value_or(1), 0);
  TrainedFigures f;
  f.world_size = p.world;
  f.backend = plan.comm;
  f.ranks = p.ranks;
  f.batch_per_gpu = p.per_gpu;
  f.accum_steps = p.accum;
  f.micro_batches = p.micro;
  f.global_batch = p.global_batch;
  f.lr = p.lr;
  if (train_size) {
    f.train_size = p.train_size;
    f.epochs = p.epochs;
    f.total_steps = p.total_steps;
    f.warmup_steps = p.schedule.warmup_steps();
  }
  return f;
}

json TrainedFigures::to_json() const {
  auto opt = [](const std::optional<int64_t>& v) { return v ? json(*v) : json(nullptr); };
  return json{{"world_size", world_size},     {"backend", backend},
              {"ranks", ranks},
              {"batch_per_gpu", batch_per_gpu}, {"accum_steps", accum_steps},
              {"micro_batches", micro_batches}, {"global_batch", global_batch},
              {"lr", lr},                       {"train_size", opt(train_size)},
              {"epochs", opt(epochs)},          {"total_steps", opt(total_steps)},
              {"warmup_steps", opt(warmup_steps)}};
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
  auto opened = base::attempt<dsl::RecipeError>([&] { return open_trial_recipe(s, def.base, overrides, s.require_data); });
  if (!opened) {
    d.error(Loc{def.file, 0, 0}, opened.message());
    return false;
  }
  const bool ok = std::move(opened).value();
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
  }
  return "";
}

std::vector<Trial> expand(const Definition& def, Session& s, int64_t ranks, dsl::Diagnostics& d) {
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
    // What the validated trial trains, from the runtime's planner; an impossible
    // geometry (a global batch past 64 bits, fewer clips than one batch) is this trial's error.
    const Loc file_loc{def.file, 0, 0};
    const std::string trial = "trial " + std::to_string(t.id);
    auto figures = [&](std::optional<int64_t> train_size) -> std::optional<TrainedFigures> {
      // A trial of R ranks runs a world of dist.world_size GPUs: R must divide it.
      if (s.plan->dist.world_size % ranks != 0) {
        d.error(file_loc, trial + ": dist.world_size = " + std::to_string(s.plan->dist.world_size) +
                              " is not a multiple of --ranks-per-trial " + std::to_string(ranks) +
                              " (set dist.world_size in [sweep.set] or an axis)");
        return std::nullopt;
      }
      try {
        return trained_figures(*s.plan, ranks, train_size);
      } catch (const std::exception& e) {
        // A training split smaller than one global batch: the batch and lr stand, the
        // steps do not; the trial fails when it runs, as `vexp run` of its recipe does.
        if (train_size) {
          try {
            return trained_figures(*s.plan, ranks, std::nullopt);
          } catch (const std::exception&) {
          }
        }
        d.error(file_loc, trial + ": " + e.what());
        return std::nullopt;
      }
    };
    if (!check_trial(s, def, t.overrides, locs, t.id, d)) continue;
    if (!def.derived.empty()) {
      const std::optional<TrainedFigures> fo = figures(std::nullopt);
      if (!fo) continue;
      const TrainedFigures& f = *fo;
      vars["world_size"] = static_cast<double>(f.world_size);
      vars["batch_per_gpu"] = static_cast<double>(f.batch_per_gpu);
      vars["accum_steps"] = static_cast<double>(f.accum_steps);
      vars["global_batch"] = static_cast<double>(f.global_batch);
      vars["lr"] = f.lr;
      bool bad = false;
      for (const auto& dv : def.derived) {
        try {
          double x = eval_expr(dv.expr, vars);
          vars[dv.key] = x;
          t.params[dv.key] = x == std::floor(x) && std::fabs(x) < 1e15 ? json(static_cast<int64_t>(x)) : json(x);
          locs[dv.key] = dv.loc;
          if (dv.key.find('.') != std::string::npos) t.overrides.push_back({dv.key, number_text(x)});
        } catch (const std::exception& e) {
          d.error(dv.loc, trial + ": derived '" + dv.key + "': " + e.what());
          bad = true;
        }
      }
      if (bad) continue;
      if (!check_trial(s, def, t.overrides, locs, t.id, d)) continue;
    }
    // optim.lr is not what trains when the recipe scales optim.base_lr: one rule for the lr.
    if (s.plan->optim.base_lr > 0) {
      bool dead = false;
      for (const auto& o : t.overrides)
        if (o.path == "optim.lr" && !dead) {
          auto it = locs.find("optim.lr");
          d.error(it != locs.end() ? it->second : file_loc,
                  trial + ": optim.lr = " + o.text + " is not what trains: the recipe scales the lr from "
                  "optim.base_lr = " + number_text(s.plan->optim.base_lr) +
                  " (optim.lr is then unused); vary optim.base_lr (with optim.base_batch and optim.lr_scaling), or set "
                  "optim.base_lr = 0 to train at optim.lr as written");
          dead = true;
        }
      if (dead) continue;
    }
    // The training-set size the run will count (the data's, else data.train_size);
    // unknown when neither can be had (a dry run without the data): steps unknown.
    std::optional<int64_t> train_size;
    try {
      std::string note;
      train_size = planned_train_size(s, &note);
    } catch (const std::exception&) {
    }
    const std::optional<TrainedFigures> f = figures(train_size);
    if (!f) continue;
    t.figures = *f;
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
