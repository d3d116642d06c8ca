// The model graph: [[model.node]] tables (id, op, in, pretrained), edges,
// topological order (cycles reported once) and the output node.
#include "validator.hpp"

#include <algorithm>
#include <filesystem>
#include <queue>
#include <system_error>
#include <unordered_map>

namespace vexp::dsl::detail {

namespace fs = std::filesystem;

namespace {

bool is_identifier(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

}  // namespace

std::string Validator::model_text(const std::string& key) const {
  const Params& p = sections_.at("model").params;
  if (p.has(key) && p.get(key).is_string()) return p.str(key);
  const Value* v = given("model", key);
  return v && v->is_string() ? v->as_string() : std::string();
}

std::string Validator::node_label(const NodeInfo& n) const {
  return n.has_id ? "node '" + n.spec.id + "'" : "[[model.node]] at " + n.spec.loc.str();
}

void Validator::check_nodes() {
  plan_.model_input = model_text("input");
  if (plan_.model_input.empty() && !given("model", "input")) plan_.model_input = "clip";
  plan_.model_output = model_text("output");
  const Value* list = given("model", "node");
  if (!list) return;
  if (!list->is_array()) {
    diags_.error(list->loc(), "model.node must be an array of tables (write [[model.node]]), got " + got(*list));
    return;
  }
  std::map<std::string, Loc> first_seen;
  for (const auto& t : list->as_array()) {
    if (!t.is_table()) {
      diags_.error(t.loc(), "each model.node entry must be a table, got " + got(t));
      continue;
    }
    NodeInfo n;
    n.table = &t;
    n.spec.loc = t.loc().known() ? t.loc() : section_loc_.at("model");
    check_node_id(n, first_seen);
    check_node_op(n);
    check_node_inputs(n);
    std::set<std::string> skip{"id", "op", "in"};
    // `pretrained` / `pretrained_inflate` are graph keys unless the plugin declares them itself.
    for (const char* k : {"pretrained", "pretrained_inflate"})
      if (!n.decl || !n.decl->schema.find(k)) skip.insert(k);
    if (n.decl) {
      Checked c = check_table(n.decl->schema, &t, n.spec.loc, node_label(n) + " (" + n.spec.op + ")", skip);
      n.params_ok = c.ok;
      n.spec.params = c.params;
      n.resolved = std::move(c.resolved);
    }
    check_node_pretrained(n);
    nodes_.push_back(std::move(n));
  }
}

// `pretrained = "weights.pth"` (relative to the file that wrote it; must exist;
// "" — an unset `${VAR:-}` — leaves the node as initialised)
// and `pretrained_inflate = "mean" | "center"` (2D -> 3D kernels).
void Validator::check_node_pretrained(NodeInfo& n) {
  if (!n.decl) return;
  const Value* p = n.decl->schema.find("pretrained") ? nullptr : n.table->find("pretrained");
  if (p) {
    if (!p->is_string()) {
      diags_.error(p->loc(), "'pretrained' in " + node_label(n) + ": expected a file path (string), got " + got(*p));
    } else if (p->as_string().empty()) {
      n.spec.pretrained_empty = p->loc();  // no weights: `vexp run` says it trains from scratch
    } else {
      n.spec.pretrained = absolute_from(p->loc(), recipe_.path, p->as_string());
      std::error_code ec;
      if (!fs::is_regular_file(n.spec.pretrained, ec))
        diags_.error(p->loc(), "'pretrained' in " + node_label(n) + ": no such file '" + n.spec.pretrained + "'");
      if (n.resolved.is_table()) n.resolved.set("pretrained", Value(n.spec.pretrained).at(p->loc()));
    }
  }
  p = n.decl->schema.find("pretrained_inflate") ? nullptr : n.table->find("pretrained_inflate");
  if (p) {
    if (!p->is_string() || (p->as_string() != "mean" && p->as_string() != "center")) {
      diags_.error(p->loc(), "'pretrained_inflate' in " + node_label(n) + ": expected \"mean\" or \"center\", got " +
                                 got(*p));
    } else {
      n.spec.pretrained_inflate = p->as_string();
      if (n.resolved.is_table()) n.resolved.set("pretrained_inflate", *p);
    }
  }
}

void Validator::check_node_id(NodeInfo& n, std::map<std::string, Loc>& first_seen) {
  const Value* id = n.table->find("id");
  if (!id) {
    diags_.error(n.spec.loc, "[[model.node]] needs 'id'");
    return;
  }
  if (!id->is_string()) {
    diags_.error(id->loc(), "'id' in [[model.node]]: expected string, got " + got(*id));
    return;
  }
  const std::string& s = id->as_string();
  if (!is_identifier(s)) {
    diags_.error(id->loc(), "node id '" + s + "' is not an identifier (letters, digits and '_', not starting with a digit)");
    return;
  }
  auto [it, fresh] = first_seen.emplace(s, id->loc());
  if (!fresh) {
    diags_.error(id->loc(), "duplicate node id '" + s + "' (first defined at " + it->second.str() + ")");
    return;
  }
  if (s == plan_.model_input) {
    diags_.error(id->loc(), "node id '" + s + "' is the name of the model input");
    return;
  }
  n.spec.id = s;
  n.has_id = true;
}

void Validator::check_node_op(NodeInfo& n) {
  const Value* op = n.table->find("op");
  if (!op) {
    diags_.error(n.spec.loc, node_label(n) + " needs 'op'");
    return;
  }
  if (!op->is_string()) {
    diags_.error(op->loc(), "'op' in " + node_label(n) + ": expected string, got " + got(*op));
    return;
  }
  n.spec.op = op->as_string();
  n.decl = find_plugin(layer_kinds(), "op", n.spec.op, op->loc(), &n.spec.kind);
}

void Validator::check_node_inputs(NodeInfo& n) {
  const Value* in = n.table->find("in");
  n.in_value = in;
  if (!in) {
    diags_.error(n.spec.loc, node_label(n) + " needs 'in'");
    return;
  }
  if (in->is_string()) {
    n.spec.inputs.push_back(in->as_string());
    n.input_values.push_back(in);
    n.in_ok = true;
    return;
  }
  bool ok = in->is_array() && !in->as_array().empty();
  if (ok) {
    for (const auto& e : in->as_array()) ok = ok && e.is_string();
  }
  if (!ok) {
    diags_.error(in->loc(), "'in' in " + node_label(n) +
                                ": expected a node id or a non-empty array of node ids, got " + got(*in));
    return;
  }
  for (const auto& e : in->as_array()) {
    n.spec.inputs.push_back(e.as_string());
    n.input_values.push_back(&e);
  }
  n.in_ok = true;
}

long Validator::node_index(const std::string& id) const {
  const auto it = node_ids_.find(id);
  return it == node_ids_.end() ? -1 : static_cast<long>(it->second);
}

void Validator::check_edges() {
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i].has_id) node_ids_.emplace(nodes_[i].spec.id, i);  // ids are unique
  }
  std::vector<std::string> ids;
  for (const auto& n : nodes_) {
    if (n.has_id) ids.push_back(n.spec.id);
  }
  std::vector<std::string> readable = ids;
  readable.push_back(plan_.model_input);
  for (auto& n : nodes_) {
    if (!n.in_ok) graph_incomplete_ = true;
    if (!n.in_ok) continue;
    for (size_t k = 0; k < n.spec.inputs.size(); ++k) {
      const std::string& src = n.spec.inputs[k];
      if (src == plan_.model_input) continue;
      const long idx = node_index(src);
      if (idx >= 0) {
        n.deps.push_back(static_cast<size_t>(idx));
        continue;
      }
      graph_incomplete_ = true;
      diags_.error(n.input_values[k]->loc(),
                   with_hint(node_label(n) + " reads '" + src + "', which is not a node or the model input",
                             src, readable));
    }
  }
  topological_order();
  check_output(ids);
}

// Kahn's algorithm, taking the earliest node in file order whenever several are ready
// (a min-heap of ready nodes, so that 200,000 nodes take linear-logarithmic time);
// a cycle is reported once and then broken so that the rest can still be ordered.
void Validator::topological_order() {
  const size_t n = nodes_.size();
  std::vector<bool> done(n, false);
  std::vector<size_t> waiting(n, 0);           // deps of a node not yet ordered
  std::vector<std::vector<size_t>> readers(n);  // nodes that read each node
  size_t remaining = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!nodes_[i].has_id) {
      done[i] = true;
      continue;
    }
    ++remaining;
    for (size_t d : nodes_[i].deps) {
      ++waiting[i];
      readers[d].push_back(i);
    }
  }
  std::priority_queue<size_t, std::vector<size_t>, std::greater<size_t>> ready;
  for (size_t i = 0; i < n; ++i) {
    if (!done[i] && waiting[i] == 0) ready.push(i);
  }
  auto finish = [&](size_t i) {
    done[i] = true;
    order_.push_back(i);
    --remaining;
    for (size_t r : readers[i]) {
      if (--waiting[r] == 0 && !done[r]) ready.push(r);
    }
  };
  size_t start = 0;
  while (remaining > 0) {
    if (!ready.empty()) {
      const size_t i = ready.top();
      ready.pop();
      if (!done[i]) finish(i);
      continue;
    }
    // Every node left reads another node left: walk inputs until one repeats.
    while (done[start]) ++start;
    std::vector<size_t> walk{start};
    std::unordered_map<size_t, long> seen_at{{start, 0}};  // sized by the walk, not the graph
    while (true) {
      const auto& deps = nodes_[walk.back()].deps;
      const size_t next = *std::find_if(deps.begin(), deps.end(), [&](size_t d) { return !done[d]; });
      const auto seen = seen_at.find(next);
      if (seen != seen_at.end()) {
        std::vector<size_t> cycle(walk.begin() + seen->second, walk.end());
        std::reverse(cycle.begin(), cycle.end());  // data-flow direction
        std::rotate(cycle.begin(), std::min_element(cycle.begin(), cycle.end()), cycle.end());
        std::vector<std::string> names;
        for (size_t c : cycle) names.push_back(nodes_[c].spec.id);
        names.push_back(nodes_[cycle.front()].spec.id);
        diags_.error(nodes_[cycle.front()].spec.loc, "model graph has a cycle: " + join(names, " -> "));
        for (size_t c : cycle) done[c] = true;  // first: members do not wake each other
        for (size_t c : cycle) {
          done[c] = false;
          finish(c);
        }
        break;
      }
      seen_at.emplace(next, static_cast<long>(walk.size()));
      walk.push_back(next);
    }
  }
}

void Validator::check_output(const std::vector<std::string>& ids) {
  const Params& mp = sections_["model"].params;
  if (!mp.has("output")) return;  // missing or mistyped: already reported
  const std::string& out = plan_.model_output;
  const Loc loc = loc_or_section("model", "output");
  const long idx = node_index(out);
  if (idx < 0) {
    std::string msg = "model output '" + out + "' is not a node id";
    if (ids.empty()) {
      msg += " (the model has no [[model.node]] tables)";
    } else {
      msg = with_hint(msg, out, ids);
    }
    diags_.error(loc, msg);
    return;
  }
  output_index_ = idx;
  // With an edge missing, "not used" would mostly repeat that error.
  if (graph_incomplete_) return;
  std::vector<bool> reached(nodes_.size(), false);
  std::vector<size_t> stack{static_cast<size_t>(idx)};
  while (!stack.empty()) {
    const size_t i = stack.back();
    stack.pop_back();
    if (reached[i]) continue;
    reached[i] = true;
    for (size_t d : nodes_[i].deps) stack.push_back(d);
  }
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i].has_id && !reached[i]) {
      diags_.warning(nodes_[i].spec.loc, "node '" + nodes_[i].spec.id +
                                             "' is not used: the model output '" + out + "' does not depend on it");
    }
  }
}

}  // namespace vexp::dsl::detail
