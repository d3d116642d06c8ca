// Validation of a loaded recipe: section schemas, plugin schemas, the model graph,
// rewrites and early shape checks. Every problem is collected, each at the place
// where the offending value was written.
#include "vexp/dsl/validate.hpp"
#include "vexp/dsl/table_check.hpp"

#include <algorithm>
#include <filesystem>
#include <map>
#include <queue>
#include <set>
#include <system_error>
#include <unordered_map>

namespace vexp::dsl {

namespace fs = std::filesystem;

namespace {

// One [abc] / [!a-z] class or a single character; advances `pi` past it.
bool match_one(const std::string& p, size_t& pi, char c) {
  if (p[pi] == '?') {
    ++pi;
    return true;
  }
  if (p[pi] == '[') {
    size_t j = pi + 1;
    const bool negate = j < p.size() && (p[j] == '!' || p[j] == '^');
    if (negate) ++j;
    const size_t first = j;
    if (j < p.size() && p[j] == ']') ++j;  // a leading ']' is literal
    while (j < p.size() && p[j] != ']') ++j;
    if (j < p.size()) {
      bool hit = false;
      for (size_t k = first; k < j; ++k) {
        if (k + 2 < j && p[k + 1] == '-') {
          if (c >= p[k] && c <= p[k + 2]) hit = true;
          k += 2;
        } else if (p[k] == c) {
          hit = true;
        }
      }
      pi = j + 1;
      return hit != negate;
    }
    // No closing ']': the '[' is an ordinary character.
  }
  return p[pi++] == c;
}

// Glob within one path segment (no '/'): greedy '*' with backtracking.
bool match_segment(const std::string& p, const std::string& t) {
  size_t pi = 0, ti = 0, star = std::string::npos, mark = 0;
  while (ti < t.size()) {
    if (pi < p.size() && p[pi] == '*') {
      star = pi++;
      mark = ti;
      continue;
    }
    size_t next = pi;
    if (pi < p.size() && match_one(p, next, t[ti])) {
      pi = next;
      ++ti;
      continue;
    }
    if (star != std::string::npos) {
      pi = star + 1;
      ti = ++mark;
      continue;
    }
    return false;
  }
  while (pi < p.size() && p[pi] == '*') ++pi;
  return pi == p.size();
}

std::vector<std::string> split_slash(const std::string& s) {
  std::vector<std::string> out(1);
  for (char c : s) {
    if (c == '/') {
      out.emplace_back();
    } else {
      out.back() += c;
    }
  }
  return out;
}

std::string join(const std::vector<std::string>& items, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += sep;
    out += items[i];
  }
  return out;
}

std::string got(const Value& v) {
  if (v.is_table()) return "a table";
  if (v.is_array()) return "an array";
  return std::string(v.kind_name()) + " " + v.to_toml_inline();
}

bool is_identifier(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

std::string with_hint(std::string msg, const std::string& word, const std::vector<std::string>& candidates) {
  const std::string hint = did_you_mean(word, candidates);
  if (!hint.empty()) msg += " (did you mean '" + hint + "'?)";
  return msg;
}

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

std::string absolute_from(const Loc& loc, const std::string& fallback_file, const std::string& path) {
  fs::path p(path);
  if (p.is_relative()) {
    const bool from_file = loc.known() && loc.file.rfind("--set", 0) != 0;
    // Paths given with --set are relative to where the command runs.
    if (from_file) {
      p = fs::path(loc.file).parent_path() / p;
    } else if (!loc.known()) {
      p = fs::path(fallback_file).parent_path() / p;
    }
  }
  std::error_code ec;
  fs::path abs = fs::absolute(p, ec);
  if (ec) abs = p;
  return abs.lexically_normal().string();
}

using Checked = CheckedTable;

struct NodeInfo {
  NodeSpec spec;
  const Value* table = nullptr;
  const Value* in_value = nullptr;
  std::vector<const Value*> input_values;  // each input's own value (for its location)
  const PluginDecl* decl = nullptr;
  bool has_id = false;
  bool params_ok = false;
  bool in_ok = false;
  Value resolved;
  std::vector<size_t> deps;  // indices of the nodes it reads
  Shape input_shape;         // shape of its first input
  bool shape_done = false;
};

struct RuleInfo {
  RewriteSpec spec;
  const Value* at_value = nullptr;
  const PluginDecl* decl = nullptr;
  std::string kind;
  bool ok = false;
  Value resolved;
};

class Validator {
 public:
  Validator(const Recipe& recipe, const PluginCatalog& catalog, Diagnostics& diags, const ValidateOptions& options)
      : recipe_(recipe), catalog_(catalog), diags_(diags), options_(options), file_loc_{recipe.path, 1, 1} {}

  std::optional<RecipePlan> run() {
    const Value& root = recipe_.root;
    if (!root.is_table()) {
      diags_.error(file_loc_, "a recipe must be a table of sections");
      return std::nullopt;
    }
    check_top_level(root);
    for (const auto& [name, schema] : builtin_sections()) check_section(root, name, schema);
    check_run_name();
    check_data();
    check_dist();
    check_plugins();
    check_nodes();
    check_edges();
    check_rewrites();
    check_shapes();
    build_resolved();
    if (diags_.has_errors()) return std::nullopt;
    return std::move(plan_);
  }

 private:
  // --- generic table check -------------------------------------------------
  Checked check_table(const Schema& schema, const Value* given, const Loc& owner, const std::string& where,
                      const std::set<std::string>& skip) {
    return dsl::check_table(schema, given, owner, where, skip, diags_);
  }

  // Finds `name` among plugins of `kinds`; reports an unknown one with the known names.
  const PluginDecl* find_plugin(const std::vector<std::string>& kinds, const std::string& label,
                                const std::string& name, const Loc& loc, std::string* kind_out) {
    for (const auto& kind : kinds) {
      if (const PluginDecl* d = catalog_.find(kind, name)) {
        if (kind_out) *kind_out = kind;
        return d;
      }
    }
    std::vector<std::string> known;
    for (const auto& kind : kinds) {
      for (auto& n : catalog_.names(kind)) known.push_back(std::move(n));
    }
    std::sort(known.begin(), known.end());
    known.erase(std::unique(known.begin(), known.end()), known.end());
    std::string msg = with_hint("unknown " + label + " '" + name + "'", name, known);
    msg += known.empty() ? "; none is loaded" : "; known: " + join(known, ", ");
    diags_.error(loc, msg);
    return nullptr;
  }

  // --- sections ---------------------------------------------------------------
  void check_top_level(const Value& root) {
    std::vector<std::string> names;
    for (const auto& s : builtin_sections()) names.push_back(s.first);
    for (const auto& [key, value] : root.as_table()) {
      if (std::find(names.begin(), names.end(), key) != names.end()) continue;
      diags_.error(value.loc(), with_hint("unknown section '" + key + "'", key, names));
    }
  }

  void check_section(const Value& root, const std::string& name, const Schema& schema) {
    const Value* sec = root.find(name);
    Loc owner = sec && sec->loc().known() ? sec->loc() : file_loc_;
    if (sec && !sec->is_table()) {
      diags_.error(sec->loc(), "[" + name + "] must be a table, got " + got(*sec));
      sec = nullptr;
    }
    std::set<std::string> skip;
    if (name == "model") skip = {"node", "rewrite"};
    Checked c = check_table(schema, sec, owner, "[" + name + "]", skip);
    section_given_[name] = sec;
    section_loc_[name] = owner;
    sections_[name] = std::move(c);
  }

  // run.name names the folder runs/<name>: one path component, so that no name
  // can place a run outside runs/ (--out or run.out choose another folder).
  void check_run_name() {
    const Value* v = given("run", "name");
    if (!v || !v->is_string()) return;  // absent, or the type is already reported
    const std::string problem = folder_name_problem(v->as_string());
    if (!problem.empty()) {
      diags_.error(v->loc(), "run.name " + v->to_toml_inline() + " " + problem +
                                 "; a run name is one folder name under runs/ (use --out or run.out to choose another "
                                 "folder)");
      sections_["run"].ok = false;
    }
  }

  const Value* given(const std::string& section, const std::string& key) const {
    const Value* sec = section_given_.at(section);
    return sec ? sec->find(key) : nullptr;
  }

  Loc loc_or_section(const std::string& section, const std::string& key) const {
    const Value* v = given(section, key);
    return v && v->loc().known() ? v->loc() : section_loc_.at(section);
  }

  // The plugin named by `section.key` and its `section.params`.
  void check_plugin_section(const std::string& section, const std::string& key, const std::string& kind,
                            std::string& name_out, Params& params_out, const PluginDecl*& decl_out,
                            bool& params_ok) {
    const Params& p = sections_[section].params;
    params_ok = false;
    if (!p.has(key) || !p.get(key).is_string()) return;
    name_out = p.str(key);
    const Value* params = given(section, "params");
    decl_out = find_plugin({kind}, kind + " plugin", name_out, loc_or_section(section, key), nullptr);
    if (!decl_out) return;
    if (params && !params->is_table()) return;  // reported by the section schema
    const Loc owner = params && params->loc().known() ? params->loc() : section_loc_.at(section);
    Checked c = check_table(decl_out->schema, params, owner,
                            "[" + section + ".params] of " + kind + " '" + name_out + "'", {});
    params_out = c.params;
    params_ok = c.ok;
    plugin_params_resolved_[section] = std::move(c.resolved);
  }

  void check_data() {
    check_plugin_section("data", "dataset", "dataset", plan_.dataset, plan_.dataset_params, dataset_decl_,
                         dataset_params_ok_);
  }

  void check_dist() {
    const PluginDecl* decl = nullptr;
    bool ok = false;
    check_plugin_section("dist", "backend", "comm", plan_.comm, plan_.comm_params, decl, ok);
  }

  void check_plugins() {
    const Value* paths = given("plugins", "paths");
    if (!paths || !paths->is_array()) return;
    for (const auto& p : paths->as_array()) {
      if (!p.is_string()) continue;
      plan_.plugin_paths.push_back(absolute_from(p.loc(), recipe_.path, p.as_string()));
    }
  }

  // --- model graph ------------------------------------------------------------
  std::string model_text(const std::string& key) const {
    const Params& p = sections_.at("model").params;
    if (p.has(key) && p.get(key).is_string()) return p.str(key);
    const Value* v = given("model", key);
    return v && v->is_string() ? v->as_string() : std::string();
  }

  std::string node_label(const NodeInfo& n) const {
    return n.has_id ? "node '" + n.spec.id + "'" : "[[model.node]] at " + n.spec.loc.str();
  }

  void check_nodes() {
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

  // `pretrained = "weights.pth"` (relative to the file that wrote it; must exist)
  // and `pretrained_inflate = "mean" | "center"` (2D -> 3D kernels).
  void check_node_pretrained(NodeInfo& n) {
    if (!n.decl) return;
    const Value* p = n.decl->schema.find("pretrained") ? nullptr : n.table->find("pretrained");
    if (p) {
      if (!p->is_string() || p->as_string().empty()) {
        diags_.error(p->loc(), "'pretrained' in " + node_label(n) + ": expected a file path (string), got " + got(*p));
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

  void check_node_id(NodeInfo& n, std::map<std::string, Loc>& first_seen) {
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

  void check_node_op(NodeInfo& n) {
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

  void check_node_inputs(NodeInfo& n) {
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

  long node_index(const std::string& id) const {
    const auto it = node_ids_.find(id);
    return it == node_ids_.end() ? -1 : static_cast<long>(it->second);
  }

  void check_edges() {
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
  void topological_order() {
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

  void check_output(const std::vector<std::string>& ids) {
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

  // --- rewrites ---------------------------------------------------------------
  void check_rewrites() {
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

  RuleInfo check_rule(const Value& t) {
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

  void collect_points() {
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

  void expand_rule(RuleInfo& rule) {
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

  // --- shapes -----------------------------------------------------------------
  // Runs a plugin hook; a failure becomes an error "<prefix>: <message>". Plugins
  // often start their messages with their own name, which the prefix already says.
  template <typename F>
  bool guarded(const Loc& loc, const std::string& prefix, F&& f, const std::string& plugin = {}) {
    try {
      f();
      return true;
    } catch (const std::exception& e) {
      std::string what = e.what();
      if (!plugin.empty() && what.rfind(plugin + ": ", 0) == 0) what = what.substr(plugin.size() + 2);
      diags_.error(loc, prefix + ": " + what);
    } catch (...) {
      diags_.error(loc, prefix + ": unknown error");
    }
    return false;
  }

  // A dataset hook's message that starts with the name of a parameter the recipe
  // gives ("train_list: list file '...' is a directory", "root is empty") is placed
  // at that value; any other message at `fallback` (the [data.params] table).
  Loc data_param_loc(const std::string& what, const Loc& fallback) const {
    const Value* params = given("data", "params");
    if (!params || !params->is_table()) return fallback;
    for (const auto& [key, v] : params->as_table()) {
      if (what.size() > key.size() && what.compare(0, key.size(), key) == 0 &&
          (what[key.size()] == ':' || what[key.size()] == ' ') && v.loc().known())
        return v.loc();
    }
    return fallback;
  }

  void check_shapes() {
    if (!dataset_decl_ || !dataset_params_ok_) return;
    if (dataset_decl_->dataset_facts) {
      const Loc loc = loc_or_section("data", "params");
      if (!guarded(
              loc, "dataset '" + plan_.dataset + "'",
              [&] { plan_.data_facts = dataset_decl_->dataset_facts(plan_.dataset_params); }, plan_.dataset)) {
        return;
      }
    }
    if (dataset_decl_->check_data) {
      const Loc loc = loc_or_section("data", "params");
      try {
        dataset_decl_->check_data(plan_.dataset_params);
      } catch (const std::exception& e) {
        const Loc at = data_param_loc(e.what(), loc);
        if (options_.require_data) {
          diags_.error(at, "dataset '" + plan_.dataset + "': " + e.what());
        } else {
          diags_.warning(at, "dataset '" + plan_.dataset + "': " + e.what() + " (vexp run will refuse to start)");
        }
      }
    }
    const DatasetFacts& facts = plan_.data_facts;
    GraphContext ctx;
    const Params& dist = sections_["dist"].params;
    if (dist.has("batch_per_gpu")) ctx.batch = dist.i64("batch_per_gpu");
    if (!facts.clip.empty()) ctx.frames = facts.clip[0];
    ctx.classes = facts.classes;
    if (facts.clip.size() != 4) return;
    const Shape input{ctx.batch, facts.clip[0], facts.clip[1], facts.clip[2], facts.clip[3]};

    std::vector<Shape> shapes(nodes_.size());
    for (size_t i : order_) {
      NodeInfo& n = nodes_[i];
      if (!n.in_ok) continue;
      std::vector<Shape> ins;
      for (const auto& src : n.spec.inputs) {
        const long idx = src == plan_.model_input ? -1 : node_index(src);
        if (src != plan_.model_input && idx < 0) break;
        ins.push_back(idx < 0 ? input : shapes[static_cast<size_t>(idx)]);
      }
      if (ins.size() != n.spec.inputs.size()) continue;
      n.input_shape = ins.empty() ? Shape{} : ins.front();
      if (!n.decl || !n.params_ok || !n.decl->infer_shape) continue;
      if (std::any_of(ins.begin(), ins.end(), [](const Shape& s) { return s.empty(); })) continue;
      Shape out;
      if (guarded(
              n.spec.loc, node_label(n) + " (" + n.spec.op + ")",
              [&] { out = n.decl->infer_shape(n.spec.params, ins, ctx); }, n.spec.op)) {
        shapes[i] = out;
        n.spec.output_shape = out;
      } else {
        n.input_shape.clear();  // its insertion points would only repeat this error
      }
    }
    check_insert_shapes(ctx);
    check_output_shape(shapes, ctx);
  }

  void check_insert_shapes(const GraphContext& ctx) {
    std::map<const RuleInfo*, size_t> failures;
    for (size_t k = 0; k < plan_.inserts.size(); ++k) {
      InsertSpec& ins = plan_.inserts[k];
      const RuleInfo* rule = insert_rules_[k];
      const NodeInfo& backbone = nodes_[static_cast<size_t>(node_index(ins.node))];
      if (backbone.input_shape.empty() || !backbone.decl->point_shape) continue;
      const std::string prefix = "rewrite at '" + ins.node + "/" + ins.point + "' (" + ins.op + ")";
      auto report = [&](const std::string& msg) {
        if (++failures[rule] <= 3) diags_.error(ins.loc, msg);
      };
      try {
        ins.point_shape = backbone.decl->point_shape(backbone.spec.params, ins.point, backbone.input_shape);
      } catch (const std::exception& e) {
        report(prefix + ": " + e.what());
        continue;
      } catch (...) {
        report(prefix + ": unknown error");
        continue;
      }
      if (ins.point_shape.empty() || !rule->decl->infer_shape) continue;
      Shape out;
      try {
        out = rule->decl->infer_shape(ins.params, {ins.point_shape}, ctx);
      } catch (const std::exception& e) {
        std::string what = e.what();
        if (what.rfind(ins.op + ": ", 0) == 0) what = what.substr(ins.op.size() + 2);
        report(prefix + ": " + what);
        continue;
      } catch (...) {
        report(prefix + ": unknown error");
        continue;
      }
      if (out != ins.point_shape) {
        report(prefix + " changes the shape from " + shape_str(ins.point_shape) + " to " + shape_str(out) +
               "; an inserted operator must keep it");
      }
    }
    for (const auto& [rule, count] : failures) {
      if (count > 3) {
        diags_.note(rule->spec.loc, "rewrite '" + rule->spec.pattern + "': " + std::to_string(count - 3) +
                                        " more insertion points fail the same check (not shown)");
      }
    }
  }

  void check_output_shape(const std::vector<Shape>& shapes, const GraphContext& ctx) {
    if (output_index_ < 0) return;
    const Shape& out = shapes[static_cast<size_t>(output_index_)];
    if (out.empty()) return;
    const Shape want{ctx.batch, ctx.classes};
    bool ok = out.size() == 2;
    for (size_t i = 0; ok && i < 2; ++i) ok = out[i] < 0 || want[i] < 0 || out[i] == want[i];
    if (ok) return;
    diags_.error(loc_or_section("model", "output"),
                 "model output '" + plan_.model_output + "' has shape " + shape_str(out) +
                     " but training needs [batch, classes] = " + shape_str(want));
  }

  // --- plan and resolved tree ---------------------------------------------------
  void build_resolved() {
    Value resolved = Value::table().at(file_loc_);
    for (const auto& [name, schema] : builtin_sections()) {
      Checked& c = sections_[name];
      Value table = c.resolved;
      if ((name == "data" || name == "dist") && plugin_params_resolved_.count(name)) {
        table.set("params", plugin_params_resolved_[name]);
      }
      if (name == "plugins") {
        Value::Array paths;
        for (const auto& p : plan_.plugin_paths) paths.emplace_back(p);
        const Value* written = given("plugins", "paths");
        if (written && written->is_array() && paths.size() == written->as_array().size()) {
          for (size_t i = 0; i < paths.size(); ++i) paths[i].set_loc(written->as_array()[i].loc());
        }
        if (c.ok) table.set("paths", Value::array(std::move(paths)).at(loc_or_section("plugins", "paths")));
      }
      if (name == "model") {
        if (const Value* list = given("model", "node")) {
          Value::Array items;
          for (const auto& n : nodes_) {
            Value t = Value::table().at(n.spec.loc);
            for (const char* key : {"id", "op", "in"}) {
              if (const Value* v = n.table->find(key)) t.set(key, *v);
            }
            if (n.decl) {
              for (const auto& [k, v] : n.resolved.as_table()) t.set(k, v);
            } else {
              for (const auto& [k, v] : n.table->as_table()) t.set(k, v);
            }
            items.push_back(std::move(t));
          }
          table.set("node", Value::array(std::move(items)).at(list->loc()));
        }
        if (const Value* list = given("model", "rewrite")) {
          Value::Array items;
          for (const auto& r : rules_) items.push_back(r.resolved);
          table.set("rewrite", Value::array(std::move(items)).at(list->loc()));
        }
      }
      resolved.set(name, std::move(table));
    }
    plan_.run = sections_["run"].params;
    plan_.data = sections_["data"].params;
    plan_.dist = sections_["dist"].params;
    plan_.optim = sections_["optim"].params;
    plan_.schedule = sections_["schedule"].params;
    for (size_t i : order_) {
      if (nodes_[i].decl) plan_.nodes.push_back(nodes_[i].spec);
    }
    plan_.resolved = std::move(resolved);
  }

  const Recipe& recipe_;
  const PluginCatalog& catalog_;
  Diagnostics& diags_;
  const Loc file_loc_;
  RecipePlan plan_;
  std::map<std::string, Checked> sections_;
  std::map<std::string, const Value*> section_given_;
  std::map<std::string, Loc> section_loc_;
  std::map<std::string, Value> plugin_params_resolved_;
  const PluginDecl* dataset_decl_ = nullptr;
  bool dataset_params_ok_ = false;
  std::vector<NodeInfo> nodes_;
  std::vector<size_t> order_;
  std::map<std::string, size_t> node_ids_;  // id -> index in nodes_
  long output_index_ = -1;
  bool graph_incomplete_ = false;
  std::vector<RuleInfo> rules_;
  std::vector<std::pair<size_t, std::string>> points_;
  bool points_incomplete_ = false;
  std::vector<std::string> incomplete_ids_;
  ValidateOptions options_;  // nodes whose insertion points are unknown
  std::vector<const RuleInfo*> insert_rules_;  // parallel to plan_.inserts
};

}  // namespace

bool glob_match(const std::string& pattern, const std::string& text) {
  const auto p = split_slash(pattern);
  const auto t = split_slash(text);
  if (p.size() != t.size()) return false;
  for (size_t i = 0; i < p.size(); ++i) {
    if (!match_segment(p[i], t[i])) return false;
  }
  return true;
}

std::vector<std::string> plugin_paths(const Recipe& recipe) {
  std::vector<std::string> out;
  const Value* plugins = recipe.root.find("plugins");
  const Value* paths = plugins ? plugins->find("paths") : nullptr;
  if (!paths || !paths->is_array()) return out;
  for (const auto& p : paths->as_array()) {
    if (p.is_string()) out.push_back(absolute_from(p.loc(), recipe.path, p.as_string()));
  }
  return out;
}

std::optional<RecipePlan> validate(const Recipe& recipe, const PluginCatalog& catalog, Diagnostics& diags,
                                   const ValidateOptions& options) {
  return Validator(recipe, catalog, diags, options).run();
}

// Why `name` cannot be a run name ("" when it can). Empty means "the recipe
// file's stem" (the default, which a resolved recipe writes out as "").
std::string folder_name_problem(const std::string& name) {
  if (name.empty()) return "";
  if (name == "." || name == "..") return "is not a folder name";
  if (name.find('/') != std::string::npos) return "contains '/'";
  if (name.size() > 255) return "is longer than 255 bytes";
  for (unsigned char c : name) {
    if (c < 0x20 || c == 0x7f) return "contains a control character";
  }
  return "";
}

}  // namespace vexp::dsl
