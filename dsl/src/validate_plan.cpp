// Plan assembly: the nodes in order and the resolved tree (every section with
// its defaults filled, as `vexp check --print` and resolved.toml show it).
#include "validator.hpp"

namespace vexp::dsl::detail {

void Validator::build_resolved() {
  Value resolved = Value::table().at(file_loc_);
  for (const auto& [name, schema] : builtin_sections()) {
    Checked& c = sections_[name];
    Value table = c.resolved;
    if ((name == "data" || name == "dist") && plugin_params_resolved_.count(name)) {
      table.set("params", plugin_params_resolved_[name]);
    }
    if (name == "loss") {  // shown when written (absent: the cross_entropy plugin, which fake catalogs lack)
      if (parts_resolved_.count("loss")) resolved.set(name, parts_resolved_["loss"]);
      continue;
    }
    if (name == "optim") table = optim_resolved(table);
    if (name == "data") {
      for (const char* key : {"train_transforms", "test_transforms", "batch_transforms"})
        if (parts_resolved_.count(std::string("data.") + key)) table.set(key, parts_resolved_[std::string("data.") + key]);
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
  if (parts_resolved_.count("hooks")) resolved.set("hooks", parts_resolved_["hooks"]);
  for (size_t i : order_) {
    if (nodes_[i].decl) plan_.nodes.push_back(nodes_[i].spec);
  }
  plan_.resolved = std::move(resolved);
}

}  // namespace vexp::dsl::detail
