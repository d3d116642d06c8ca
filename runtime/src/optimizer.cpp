// The host's side of the optimizer (optimizer.hpp): parameter groups, the plugin
// made from [optim], gradient clipping and zeroing.
#include "vexp/runtime/optimizer.hpp"

#include <cmath>
#include <cstdio>
#include <set>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "vexp/base/error.hpp"
#include "vexp/dsl/validate.hpp"
#include "vexp/runtime/graph.hpp"
#include "vexp/runtime/plugin_host.hpp"

namespace vexp {

namespace {

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

// "12,345"
std::string grouped(int64_t v) {
  std::string s = std::to_string(v), out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i > 0 && (s.size() - i) % 3 == 0) out += ',';
    out += s[i];
  }
  return out;
}

}  // namespace

ParamGroups param_groups(ModelGraph& model, const dsl::OptimConfig& o) {
  ParamGroups out;
  const double wd = o.weight_decay;
  std::set<std::string> fc;
  if (o.fc_lr5)
    for (auto& n : model.head_parameter_names()) fc.insert(n);
  // The recipe's groups first (each kept, even when it takes nothing), then the default rule.
  for (size_t i = 0; i < o.groups.size(); ++i) {
    const dsl::OptimGroup& rg = o.groups[i];
    out.groups.push_back(ParamGroup{rg.name, rg.lr_mult, rg.weight_decay, {}, {}});
    out.rules.push_back("optim.groups[" + std::to_string(i) + "]" +
                        (rg.loc.file.rfind("--set", 0) == 0 ? std::string(" from --set") : " at " + rg.loc.str()));
  }
  out.recipe_groups = o.groups.size();
  ParamGroup decay{"decay", 1.0, wd, {}, {}}, no_decay{"no_decay", 1.0, 0.0, {}, {}};
  ParamGroup fc_w{"fc_weight", 5.0, wd, {}, {}}, fc_b{"fc_bias", 10.0, 0.0, {}, {}};
  // Per glob: whether it matched a trainable parameter, and whether it took one.
  std::vector<std::vector<int>> matched(o.groups.size()), took(o.groups.size());
  for (size_t i = 0; i < o.groups.size(); ++i) {
    matched[i].assign(o.groups[i].match.size(), 0);
    took[i].assign(o.groups[i].match.size(), 0);
  }
  std::vector<std::string> frozen;
  for (const auto& p : model.named_parameters(true)) {
    if (!p.value().requires_grad()) {
      frozen.push_back(p.key());
      continue;
    }
    out.trainable.push_back(p.value());
    // The first group with a glob that matches takes it; every glob that matches is counted.
    ParamGroup* g = nullptr;
    size_t owner = o.groups.size();
    for (size_t i = 0; i < o.groups.size(); ++i) {
      for (size_t k = 0; k < o.groups[i].match.size(); ++k) {
        if (!dsl::glob_match(o.groups[i].match[k], p.key())) continue;
        matched[i][k] = 1;
        if (owner == o.groups.size()) owner = i;
        if (owner == i) took[i][k] = 1;
      }
    }
    if (owner < o.groups.size()) g = &out.groups[owner];
    if (!g) {
      g = &decay;
      if (fc.count(p.key())) g = p.value().dim() > 1 ? &fc_w : &fc_b;
      else if (o.no_decay_bn_bias && p.value().dim() <= 1) g = &no_decay;
    }
    g->names.push_back(p.key());
    g->params.push_back(p.value());
  }
  // A glob that matches nothing is a mistake in the recipe (a typo, another model's names).
  std::string examples;
  size_t shown = 0;
  for (const auto& p : model.named_parameters(true)) {
    if (shown == 4) {
      examples += ", ...";
      break;
    }
    examples += (shown++ ? ", " : "") + p.key();
  }
  for (size_t i = 0; i < o.groups.size(); ++i) {
    const dsl::OptimGroup& rg = o.groups[i];
    for (size_t k = 0; k < rg.match.size(); ++k) {
      const std::string label = "optim.groups[" + std::to_string(i) + "] ('" + rg.name + "'): '" + rg.match[k] + "'";
      if (!matched[i][k]) {
        out.errors.push_back(
            {rg.match_locs[k],
             label + " matches no trainable parameter of the model" +
                 (frozen.empty() ? "" : " (" + std::to_string(frozen.size()) + " frozen parameters are not matched)") +
                 "; parameter names are dotted paths under the node ids, such as " + examples +
                 " (vexp info RECIPE --param-groups lists them)"});
      } else if (!took[i][k]) {
        out.warnings.push_back({rg.match_locs[k], label + " matches only parameters that an earlier group takes (the "
                                                          "first group that matches a parameter takes it): it changes "
                                                          "nothing"});
      }
    }
  }
  for (auto* g : {&decay, &no_decay, &fc_w, &fc_b}) {
    if (g->params.empty()) continue;
    out.groups.push_back(*g);
    out.rules.push_back(g == &decay      ? "default rule: weight decay"
                        : g == &no_decay ? "default rule: optim.no_decay_bn_bias (biases, BatchNorm)"
                        : g == &fc_w     ? "default rule: optim.fc_lr5 (classifier weight)"
                                         : "default rule: optim.fc_lr5 (classifier bias)");
  }
  return out;
}

void check_param_groups(const ParamGroups& g) {
  if (g.errors.empty()) return;
  std::string msg = g.errors[0].loc.str() + ": " + g.errors[0].message;
  for (size_t i = 1; i < g.errors.size(); ++i) {
    const std::string& m = g.errors[i].message;
    msg += "; also " + g.errors[i].loc.str() + ": " + m.substr(0, m.find(" matches no ")) + " matches none";
  }
  throw base::invalid(msg);
}

std::vector<std::string> param_groups_table(const ParamGroups& g) {
  std::vector<std::string> rows;
  size_t name_w = 5, rule_w = 4;
  for (size_t i = 0; i < g.groups.size(); ++i) {
    name_w = std::max(name_w, g.groups[i].name.size());
    rule_w = std::max(rule_w, g.rules[i].size());
  }
  char buf[1024];
  std::snprintf(buf, sizeof buf, "%-*s  %-*s  %7s  %12s  %7s  %12s", static_cast<int>(name_w), "group",
                static_cast<int>(rule_w), "rule", "tensors", "elements", "lr x", "weight decay");
  rows.emplace_back(buf);
  for (size_t i = 0; i < g.groups.size(); ++i) {
    const ParamGroup& pg = g.groups[i];
    int64_t n = 0;
    for (const auto& p : pg.params) n += p.numel();
    std::snprintf(buf, sizeof buf, "%-*s  %-*s  %7zu  %12s  %7s  %12s", static_cast<int>(name_w), pg.name.c_str(),
                  static_cast<int>(rule_w), g.rules[i].c_str(), pg.params.size(), grouped(n).c_str(),
                  number(pg.lr_mult).c_str(), number(pg.weight_decay).c_str());
    rows.emplace_back(buf);
  }
  return rows;
}

std::shared_ptr<Optimizer> make_optimizer(const PluginHost& host, const dsl::OptimConfig& optim,
                                          std::vector<ParamGroup> groups) {
  std::shared_ptr<Optimizer> opt = host.make<Optimizer>("optimizer", optim.type, optim.params);
  opt->set_groups(std::move(groups));
  return opt;
}

void zero_grad(const std::vector<at::Tensor>& params) {
  for (const auto& p : params)
    if (p.grad().defined()) p.grad().zero_();
}

double clip_grad_norm(const std::vector<at::Tensor>& params, double max_norm) {
  c10::NoGradGuard no_grad;
  double total = 0;
  for (const auto& p : params) {
    if (!p.grad().defined()) continue;
    double n = p.grad().norm().item<double>();
    total += n * n;
  }
  total = std::sqrt(total);
  if (max_norm > 0 && total > max_norm) {
    double scale = max_norm / (total + 1e-6);
    for (const auto& p : params)
      if (p.grad().defined()) p.grad().mul_(scale);
  }
  return total;
}

}  // namespace vexp
