// [[model.rewrite]] rules: each rule checked, its pattern matched (glob.cpp)
// against the backbones' insertion points and expanded into inserts.
#include "validator.hpp"

#include <algorithm>

namespace vexp::dsl::detail {

namespace {

// Replaces digit runs with '*' ("features/layer1/block0/x" -> "features/layer*/block*/x").
std::string generalise(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (std::isdigit(static_cast<unsigned char>(s[i]))) {
      if (out.empty() || out.back() != '*') out += '*';
    } else {
      out += s[i];
    }
  }
  return out;
}

}  // namespace

void Validator::check_rewrites() {
  const Value* list = given("model", "rewrite");
  if (!list) return;
  if (!list->is_array()) {
    diags_.error(list->loc(), "model.rewrite must be an array of tables (write [[model.rewrite]]), got " + got(*list));
    return;
  }
  for (const auto& t : list->as_array()) {
    if (!t.is_table()) {
      diags_.error(t.loc(), "each model.rewrite entry must be a table, got " + got(t));
      continue;
    }
    rules_.push_back(check_rule(t));
  }
  collect_points();
  for (auto& rule : rules_) expand_rule(rule);
}

RuleInfo Validator::check_rule(const Value& t) {
  RuleInfo r;
  r.spec.loc = t.loc().known() ? t.loc() : section_loc_.at("model");
  r.resolved = Value::table().at(r.spec.loc);
  for (const auto& [key, value] : t.as_table()) {
    if (key == "at" || key == "insert") continue;
    diags_.error(value.loc(), with_hint("unknown key '" + key + "' in [[model.rewrite]]", key, {"at", "insert"}) +
                                  "; a rewrite has 'at' and 'insert'");
  }
  bool ok = true;
  const Value* at = t.find("at");
  if (!at) {
    diags_.error(r.spec.loc, "[[model.rewrite]] needs 'at'");
    ok = false;
  } else if (!at->is_string()) {
    diags_.error(at->loc(), "'at' in [[model.rewrite]]: expected a pattern (string), got " + got(*at));
    ok = false;
  } else {
    r.spec.pattern = at->as_string();
    r.at_value = at;
    r.resolved.set("at", *at);
  }
  const std::string label = "rewrite '" + r.spec.pattern + "'";
  const Value* insert = t.find("insert");
  if (!insert) {
    diags_.error(r.spec.loc, label + " needs 'insert'");
    ok = false;
  } else if (!insert->is_table()) {
    diags_.error(insert->loc(), "'insert' in " + label + ": expected a table ({ op = \"...\", ... }), got " + got(*insert));
    ok = false;
  } else {
    const Loc insert_loc = insert->loc().known() ? insert->loc() : r.spec.loc;
    const Value* op = insert->find("op");
    Value resolved_insert = *insert;
    if (!op) {
      diags_.error(insert_loc, "the insert of " + label + " needs 'op'");
      ok = false;
    } else if (!op->is_string()) {
      diags_.error(op->loc(), "'op' in the insert of " + label + ": expected string, got " + got(*op));
      ok = false;
    } else {
      r.spec.op = op->as_string();
      r.decl = find_plugin(layer_kinds(), "op", r.spec.op, op->loc(), &r.kind);
      if (r.decl) {
        Checked c = check_table(r.decl->schema, insert, insert_loc,
                                "the insert of " + label + " (" + r.spec.op + ")", {"op"});
        ok = ok && c.ok;
        r.spec.params = c.params;
        resolved_insert = Value::table().at(insert_loc);
        resolved_insert.set("op", *op);
        for (const auto& [k, v] : c.resolved.as_table()) resolved_insert.set(k, v);
      } else {
        ok = false;
      }
    }
    r.resolved.set("insert", std::move(resolved_insert));
  }
  r.ok = ok;
  if (ok) plan_.rewrites.push_back(r.spec);
  return r;
}

void Validator::collect_points() {
  // A node whose points cannot be listed (unknown op, bad parameters) might hold the
  // points a rule wants: then "matches nothing" would only repeat the first error.
  for (const auto& n : nodes_) {
    const bool unknown_op = !n.decl && !n.spec.op.empty();
    const bool unlisted = n.decl && n.decl->insertion_points && (!n.params_ok || !n.has_id);
    if (unknown_op || unlisted) {
      if (n.has_id) incomplete_ids_.push_back(n.spec.id);
      else points_incomplete_ = true;
    }
  }
  for (size_t i : order_) {
    NodeInfo& n = nodes_[i];
    if (!n.decl || !n.params_ok || !n.decl->insertion_points) continue;
    try {
      for (auto& p : n.decl->insertion_points(n.spec.params)) points_.push_back({i, std::move(p)});
    } catch (const std::exception& e) {
      incomplete_ids_.push_back(n.spec.id);
      diags_.error(n.spec.loc, node_label(n) + " (" + n.spec.op + "): " + e.what());
    } catch (...) {
      incomplete_ids_.push_back(n.spec.id);
      diags_.error(n.spec.loc, node_label(n) + " (" + n.spec.op + "): unknown error listing insertion points");
    }
  }
}

void Validator::expand_rule(RuleInfo& rule) {
  if (!rule.at_value) return;
  size_t matches = 0;
  for (const auto& [node, point] : points_) {
    const std::string full = nodes_[node].spec.id + "/" + point;
    if (!glob_match(rule.spec.pattern, full)) continue;
    ++matches;
    if (!rule.ok) continue;
    InsertSpec ins;
    ins.node = nodes_[node].spec.id;
    ins.point = point;
    ins.op = rule.spec.op;
    ins.kind = rule.kind;
    ins.params = rule.spec.params;
    ins.loc = rule.spec.loc;
    plan_.inserts.push_back(std::move(ins));
    insert_rules_.push_back(&rule);
  }
  if (matches > 0 || points_incomplete_) return;
  // Only nodes the pattern's first segment could name may hide its points.
  const std::string head = rule.spec.pattern.substr(0, rule.spec.pattern.find('/'));
  for (const auto& id : incomplete_ids_)
    if (glob_match(head, id)) return;
  std::string msg = "rewrite pattern '" + rule.spec.pattern + "' matches no insertion point";
  if (points_.empty()) {
    diags_.error(rule.at_value->loc(), msg + " (no node of this model has insertion points)");
    return;
  }
  std::vector<std::string> candidates;
  std::vector<std::string> examples;
  for (const auto& [node, point] : points_) {
    const std::string full = nodes_[node].spec.id + "/" + point;
    const std::string general = generalise(full);
    if (std::find(candidates.begin(), candidates.end(), general) == candidates.end()) candidates.push_back(general);
    if (examples.size() < 3) examples.push_back("'" + full + "'");
  }
  for (const auto& [node, point] : points_) candidates.push_back(nodes_[node].spec.id + "/" + point);
  msg = with_hint(msg, rule.spec.pattern, candidates);
  msg += " (points look like " + join(examples, ", ") + (points_.size() > 3 ? ", ..." : "") + ")";
  diags_.error(rule.at_value->loc(), msg);
}

}  // namespace vexp::dsl::detail
