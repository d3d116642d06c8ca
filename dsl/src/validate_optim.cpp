// [optim] beyond its host keys: `type` names an optimizer plugin (kind
// "optimizer"), whose own parameters sit beside it and are checked against its
// schema (a key of another optimizer is reported at its line, naming the optimizer
// that takes it), and [[optim.groups]] tables choose parameter groups by name globs.
// The host keys (lr, weight_decay, no_decay_bn_bias, fc_lr5, clip_grad_norm, ...)
// are the built-in section's (sections.cpp, config.cpp).
#include <algorithm>
#include <map>

#include "validator.hpp"

namespace vexp::dsl::detail {

namespace {

const Schema& host_optim_schema() {
  for (const auto& [name, schema] : builtin_sections())
    if (name == "optim") return schema;
  throw std::logic_error("no built-in [optim] section");
}

bool has_key(const Schema& s, const std::string& key) {
  const std::vector<std::string> names = s.names();
  return std::find(names.begin(), names.end(), key) != names.end();
}

// The schema of one [[optim.groups]] table; `index` numbers its default name and
// `weight_decay` is optim.weight_decay (what a group without its own takes).
Schema group_schema(size_t index, double weight_decay) {
  Schema s;
  s.text("name", "group" + std::to_string(index + 1), "The group's name (logs, vexp info)");
  s.text_list("match", {}, "Globs over the parameters' dotted names ('*', '?', [a-z]); the first group that matches a "
                           "parameter takes it")
      .require();
  s.real("lr_mult", 1.0, "The group trains at the scheduled lr times this").at_least(0);
  s.real("weight_decay", weight_decay, "The group's weight decay (default: optim.weight_decay)").at_least(0);
  return s;
}

}  // namespace

void Validator::check_optim() {
  optim_params_resolved_ = Value();
  optim_groups_resolved_ = Value();
  const Value* sec = section_given_.at("optim");
  const Params& hp = sections_["optim"].params;
  const Schema& host = host_optim_schema();
  const Loc owner = section_loc_.at("optim");
  Value own = Value::table().at(owner);  // the keys beside type that are the optimizer's
  const PluginDecl* decl = nullptr;
  std::string type;
  Loc type_loc = loc_or_section("optim", "type");
  if (hp.has("type") && hp.get("type").is_string()) {  // else its error is the section's
    type = hp.str("type");
    decl = find_plugin({"optimizer"}, "optimizer plugin", type, type_loc, nullptr);
  }
  // A plugin's parameter named like a host key could never be set: the host reads it.
  if (decl) {
    std::vector<std::string> clash;
    for (const auto& n : decl->schema.names())
      if (has_key(host, n) || n == "groups") clash.push_back(n);
    if (!clash.empty()) {
      diags_.error(type_loc, "optimizer plugin '" + type + "' declares " + join(clash, ", ") +
                                 ", which [optim] keeps for the host (" + join(host.names(), ", ") +
                                 ", groups): the plugin must rename them");
      sections_["optim"].ok = false;
      decl = nullptr;
      type.clear();
    }
  }
  if (sec && sec->is_table()) {
    for (const auto& [key, value] : sec->as_table()) {
      if (has_key(host, key) || key == "groups") continue;
      if (!type.empty() && !decl) continue;  // an unknown optimizer: its keys cannot be told (reported above)
      if (decl) check_optim_key(key, value, decl, type, type_loc, own);
    }
  }
  if (decl) {
    Checked c = check_table(decl->schema, &own, owner, "[optim]", {});
    if (!c.ok) sections_["optim"].ok = false;
    plan_.optim.params = std::move(c.params);
    optim_params_resolved_ = std::move(c.resolved);
  }
  check_optim_groups(sec && sec->is_table() ? sec->find("groups") : nullptr);
}

// A key of [optim] that is not the host's: the optimizer's (into `own`), another
// optimizer's (an error naming it), or unknown.
void Validator::check_optim_key(const std::string& key, const Value& value, const PluginDecl* decl,
                                const std::string& type, const Loc& type_loc, Value& own) {
  if (has_key(decl->schema, key)) {
    own.set(key, value);
    return;
  }
  std::vector<std::string> takers;
  for (const auto& name : catalog_.names("optimizer")) {
    const PluginDecl* other = catalog_.find("optimizer", name);
    if (other && name != type && has_key(other->schema, key)) takers.push_back(name);
  }
  std::sort(takers.begin(), takers.end());
  sections_["optim"].ok = false;
  if (!takers.empty()) {
    std::string msg = "'" + key + "' in [optim] is a parameter of optimizer " +
                      (takers.size() == 1 ? "'" + takers[0] + "'" : "plugins '" + join(takers, "', '") + "'") +
                      ", not of '" + type + "' (optim.type at " + type_loc.str() + ")";
    std::vector<std::string> mine = decl->schema.names();
    msg += mine.empty() ? "; '" + type + "' takes no parameters" : "; '" + type + "' takes " + join(mine, ", ");
    // The optimizer changed on the command line, over a recipe written for another:
    // the whole table replaces the recipe's. A base recipe's key, inherited by one that
    // changed the optimizer: unset it there.
    const bool type_set = type_loc.file.rfind("--set", 0) == 0;
    const bool key_set = value.loc().file.rfind("--set", 0) == 0;
    if (type_set && !key_set)
      msg += " (optim.type comes from --set: give the whole table instead, --set 'optim={ type = \"" + type +
             "\", lr = ... }', or unset \"optim." + key + "\" in a recipe that extends this one)";
    else if (value.loc().known() && type_loc.known() && value.loc().file != type_loc.file && !key_set)
      msg += " (inherited through extends: add \"optim." + key + "\" to unset)";
    diags_.error(value.loc(), msg);
    return;
  }
  std::vector<std::string> known = host_optim_schema().names();
  for (const auto& n : decl->schema.names()) known.push_back(n);
  known.push_back("groups");
  std::string msg = "unknown key '" + key + "' in [optim]";
  const std::string hint = did_you_mean(key, known);
  msg += hint.empty() ? "; known keys: " + join(known, ", ") + " (optimizer '" + type + "': " +
                            (decl->schema.names().empty() ? std::string("none") : join(decl->schema.names(), ", ")) + ")"
                      : " (did you mean '" + hint + "'?)";
  diags_.error(value.loc(), msg);
}

void Validator::check_optim_groups(const Value* groups) {
  if (!groups) return;
  if (!groups->is_array()) {
    diags_.error(groups->loc(), "optim.groups must be a list of tables ([[optim.groups]] with name, match, lr_mult, "
                                "weight_decay), got " + got(*groups));
    sections_["optim"].ok = false;
    return;
  }
  const double wd = plan_.optim.weight_decay;
  std::map<std::string, Loc> names;
  Value::Array resolved;
  const auto& items = groups->as_array();
  for (size_t i = 0; i < items.size(); ++i) {
    const Value& item = items[i];
    const std::string where = "optim.groups[" + std::to_string(i) + "]";
    if (!item.is_table()) {
      diags_.error(item.loc(), where + " must be a table { name = \"...\", match = [\"<glob>\", ...], lr_mult = ..., "
                                       "weight_decay = ... }, got " + got(item));
      sections_["optim"].ok = false;
      resolved.push_back(item);
      continue;
    }
    // match = "*.bias" is a list of one.
    Value table = item;
    if (const Value* m = item.find("match"); m && m->is_string())
      table.set("match", Value::array({*m}).at(m->loc()));
    Checked c = check_table(group_schema(i, wd), &table, item.loc(), where, {});
    resolved.push_back(c.resolved);
    if (!c.ok) {
      sections_["optim"].ok = false;
      continue;
    }
    OptimGroup g;
    g.loc = item.loc();
    g.name = c.params.str("name");
    g.lr_mult = c.params.f64("lr_mult");
    g.weight_decay = c.params.f64("weight_decay");
    const Value* name_v = item.find("name");
    const Loc name_loc = name_v && name_v->loc().known() ? name_v->loc() : item.loc();
    bool ok = true;
    if (g.name.empty()) {
      diags_.error(name_loc, "'name' in " + where + ": must not be empty");
      ok = false;
    } else if (auto [it, fresh] = names.emplace(g.name, name_loc); !fresh) {
      diags_.error(name_loc, where + ": group name '" + g.name + "' is already used by the group at " +
                                 it->second.str() + " (each group needs its own name)");
      ok = false;
    }
    const Value& match = *table.find("match");
    if (match.as_array().empty()) {
      diags_.error(match.loc().known() ? match.loc() : item.loc(),
                   "'match' in " + where + ": needs at least one glob (e.g. match = [\"*.bias\", \"*bn*\"])");
      ok = false;
    }
    for (const auto& m : match.as_array()) {
      const Loc at = m.loc().known() ? m.loc() : (match.loc().known() ? match.loc() : item.loc());
      if (m.as_string().empty()) {
        diags_.error(at, "'match' in " + where + ": an empty glob matches no parameter");
        ok = false;
        continue;
      }
      g.match.push_back(m.as_string());
      g.match_locs.push_back(at);
    }
    if (!ok) {
      sections_["optim"].ok = false;
      continue;
    }
    plan_.optim.groups.push_back(std::move(g));
  }
  optim_groups_resolved_ = Value::array(std::move(resolved)).at(groups->loc());
}

// The resolved [optim]: the host's keys in their schema order with the optimizer's
// own keys after lr_scaling (the learning rate, then the update rule, then what
// the parameter groups take), then the groups. For sgd this is the order [optim]
// had when momentum, nesterov and LARS were built-in keys, so the resolved recipes
// (and their hashes, which a resume checks) of runs trained before are unchanged.
Value Validator::optim_resolved(const Value& host) const {
  if (!host.is_table()) return host;
  Value out = Value::table().at(host.loc());
  for (const auto& [k, v] : host.as_table()) {
    out.set(k, v);
    if (k == "lr_scaling" && optim_params_resolved_.is_table())
      for (const auto& [pk, pv] : optim_params_resolved_.as_table()) out.set(pk, pv);
  }
  if (!optim_groups_resolved_.is_null()) out.set("groups", optim_groups_resolved_);
  return out;
}

}  // namespace vexp::dsl::detail
