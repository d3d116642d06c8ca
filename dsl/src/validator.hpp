// The validator's internals, shared by the files that do its jobs:
// validate.cpp (entry point, generic table check, plugin lookup),
// validate_sections.cpp (built-in sections, plugin sections, [plugins] paths),
// config.cpp (the typed configuration read from the checked sections),
// validate_graph.cpp (nodes, edges, order, output), validate_rewrites.cpp
// (rules and their expansion; glob.cpp matches the patterns), validate_shapes.cpp
// (dataset facts and shape inference) and validate_plan.cpp (plan assembly and
// the resolved tree). Private to vexp_dsl.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "vexp/dsl/table_check.hpp"
#include "vexp/dsl/validate.hpp"

namespace vexp::dsl::detail {

std::string join(const std::vector<std::string>& items, const std::string& sep);
// "int 3", "string \"x\"", "a table": what a value is, for "expected X, got Y".
std::string got(const Value& v);
// `msg` with " (did you mean 'x'?)" when one of `candidates` is close to `word`.
std::string with_hint(std::string msg, const std::string& word, const std::vector<std::string>& candidates);
// `path` made absolute: relative to the file `loc` names (to the working folder
// for --set values; to `fallback_file` when `loc` is unknown).
std::string absolute_from(const Loc& loc, const std::string& fallback_file, const std::string& path);

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
      : recipe_(recipe), catalog_(catalog), diags_(diags), file_loc_{recipe.path, 1, 1}, options_(options) {}

  std::optional<RecipePlan> run();

 private:
  // validate.cpp
  Checked check_table(const Schema& schema, const Value* given, const Loc& owner, const std::string& where, const std::set<std::string>& skip);
  const PluginDecl* find_plugin(const std::vector<std::string>& kinds, const std::string& label, const std::string& name, const Loc& loc, std::string* kind_out);
  // validate_sections.cpp
  void check_top_level(const Value& root);
  void check_section(const Value& root, const std::string& name, const Schema& schema);
  void check_run_name();
  void check_schedule_span();
  const Value* given(const std::string& section, const std::string& key) const;
  Loc loc_or_section(const std::string& section, const std::string& key) const;
  void check_plugin_section(const std::string& section, const std::string& key, const std::string& kind, std::string& name_out, Params& params_out, const PluginDecl*& decl_out, bool& params_ok);
  void check_data();
  void check_dist();
  void check_plugins();
  // validate_parts.cpp
  PluginUse check_plugin_use(const Value& table, const std::string& kind, const std::string& where, Value& resolved);
  void check_plugin_list(const Value* list, const std::string& kind, const std::string& where,
                         std::vector<PluginUse>& out, Value::Array& resolved);
  void check_parts(const Value& root);
  void check_hook_names(const Value& list);
  // validate_optim.cpp
  void check_optim();
  void check_optim_key(const std::string& key, const Value& value, const PluginDecl* decl, const std::string& type,
                       const Loc& type_loc, Value& own);
  void check_optim_groups(const Value* groups);
  Value optim_resolved(const Value& host) const;
  // config.cpp
  void read_config();
  // validate_graph.cpp
  std::string model_text(const std::string& key) const;
  std::string node_label(const NodeInfo& n) const;
  void check_nodes();
  void check_node_pretrained(NodeInfo& n);
  void check_node_id(NodeInfo& n, std::map<std::string, Loc>& first_seen);
  void check_node_op(NodeInfo& n);
  void check_node_inputs(NodeInfo& n);
  long node_index(const std::string& id) const;
  void check_edges();
  void topological_order();
  void check_output(const std::vector<std::string>& ids);
  // validate_rewrites.cpp
  void check_rewrites();
  RuleInfo check_rule(const Value& t);
  void collect_points();
  void expand_rule(RuleInfo& rule);
  // validate_shapes.cpp
  template <typename F>
  bool guarded(const Loc& loc, const std::string& prefix, F&& f, const std::string& plugin = {});
  Loc data_param_loc(const std::string& what, const Loc& fallback) const;
  void check_shapes();
  void check_insert_shapes(const GraphContext& ctx);
  void check_output_shape(const std::vector<Shape>& shapes, const GraphContext& ctx);
  // validate_plan.cpp
  void build_resolved();

  const Recipe& recipe_;
  const PluginCatalog& catalog_;
  Diagnostics& diags_;
  const Loc file_loc_;
  ValidateOptions options_;
  RecipePlan plan_;
  std::map<std::string, Checked> sections_;
  std::map<std::string, const Value*> section_given_;
  std::map<std::string, Loc> section_loc_;
  std::map<std::string, Value> plugin_params_resolved_;
  // The training parts' resolved tables: "loss", "hooks", "data.train_transforms", ...
  std::map<std::string, Value> parts_resolved_;
  // [optim]: the optimizer plugin's keys (defaults filled) and [[optim.groups]], resolved.
  Value optim_params_resolved_;
  Value optim_groups_resolved_;
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
  std::vector<std::string> incomplete_ids_;  // nodes whose insertion points are unknown
  std::vector<const RuleInfo*> insert_rules_;  // parallel to plan_.inserts
};

}  // namespace vexp::dsl::detail
