// The training parts (plugin ABI 5): [loss], [[data.train_transforms]],
// [[data.test_transforms]], [[data.batch_transforms]] and [[hooks]]. Each use is a
// table `{ type = "NAME", ... }` whose other keys are the plugin's parameters,
// checked against its schema with the same messages as a node's.
#include <cctype>
#include <map>

#include "validator.hpp"

namespace vexp::dsl::detail {

PluginUse Validator::check_plugin_use(const Value& table, const std::string& kind, const std::string& where,
                                      Value& resolved) {
  PluginUse use;
  use.loc = table.loc();
  resolved = table;
  if (!table.is_table()) {
    diags_.error(table.loc(), where + " must be a table { type = \"<" + kind + " plugin>\", ... }, got " + got(table));
    return use;
  }
  const Value* type = table.find("type");
  if (!type) {
    diags_.error(table.loc(), where + " needs type = \"<" + kind + " plugin>\" (vexp plugins lists them)");
    return use;
  }
  if (!type->is_string()) {
    diags_.error(type->loc(), "'type' in " + where + ": expected a string (a " + kind + " plugin's name), got " +
                                  got(*type));
    return use;
  }
  use.type = type->as_string();
  const PluginDecl* decl = find_plugin({kind}, kind + " plugin", use.type, type->loc(), nullptr);
  if (!decl) return use;
  Checked c = check_table(decl->schema, &table, table.loc(), where + " (" + kind + " '" + use.type + "')", {"type"});
  use.params = std::move(c.params);
  Value r = Value::table().at(table.loc());
  r.set("type", *type);
  if (c.resolved.is_table())
    for (const auto& [k, v] : c.resolved.as_table()) r.set(k, v);
  resolved = std::move(r);
  return use;
}

void Validator::check_plugin_list(const Value* list, const std::string& kind, const std::string& where,
                                  std::vector<PluginUse>& out, Value::Array& resolved) {
  if (!list) return;
  if (!list->is_array()) {
    diags_.error(list->loc(), where + " must be a list of tables ([[" + where + "]] or [{ type = \"...\" }, ...]), got " +
                                  got(*list));
    return;
  }
  const auto& items = list->as_array();
  for (size_t i = 0; i < items.size(); ++i) {
    Value r;
    out.push_back(check_plugin_use(items[i], kind, where + "[" + std::to_string(i) + "]", r));
    resolved.push_back(std::move(r));
  }
}

// A hook's `name` parameter (the ema hook's, and any hook's that declares one)
// names its metrics (NAME_top1) and the files it writes beside checkpoints
// (epoch_NNNN.NAME.pt): a word, and no two hooks of a recipe share one.
void Validator::check_hook_names(const Value& list) {
  if (!list.is_array()) return;
  std::map<std::string, size_t> seen;
  for (size_t i = 0; i < plan_.hooks.size() && i < list.as_array().size(); ++i) {
    const PluginUse& use = plan_.hooks[i];
    if (use.type.empty() || !use.params.has("name") || !use.params.get("name").is_string()) continue;
    const std::string& name = use.params.str("name");
    const Value* given = list.as_array()[i].is_table() ? list.as_array()[i].find("name") : nullptr;
    const Loc at = given ? given->loc() : use.loc;
    bool word = !name.empty() && name.size() <= 64;
    for (char c : name)
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) word = false;
    if (!word) {
      diags_.error(at, "hooks[" + std::to_string(i) + "] (hook '" + use.type + "'): name = \"" + name +
                           "\" must be letters, digits and '_' (at most 64): it names the hook's metrics and files");
      continue;
    }
    auto [it, fresh] = seen.emplace(name, i);
    if (!fresh)
      diags_.error(at, "hooks[" + std::to_string(i) + "] (hook '" + use.type + "'): name = \"" + name +
                           "\" is hooks[" + std::to_string(it->second) + "]'s already; give each hook its own name "
                           "(it names the hook's metrics and files)");
  }
}

void Validator::check_parts(const Value& root) {
  if (const Value* loss = root.find("loss"); loss && loss->is_table()) {
    Value r;
    plan_.loss = check_plugin_use(*loss, "loss", "[loss]", r);
    parts_resolved_["loss"] = std::move(r);
  }
  const struct {
    const char* key;
    const char* kind;
    std::vector<PluginUse>* out;
  } lists[] = {{"train_transforms", "transform", &plan_.train_transforms},
               {"test_transforms", "transform", &plan_.test_transforms},
               {"batch_transforms", "batch_transform", &plan_.batch_transforms}};
  for (const auto& l : lists) {
    const Value* v = given("data", l.key);
    if (!v) continue;
    Value::Array resolved;
    // An empty clip pipeline is the dataset's own (a list replaces it): said, as a
    // researcher may mean "no augmentation" by it.
    if (std::string(l.kind) == "transform" && v->is_array() && v->as_array().empty())
      diags_.warning(v->loc(), std::string("data.") + l.key +
                                   " is empty: the dataset's own pipeline runs (list transforms to replace it, "
                                   "e.g. only { type = \"normalize\" } for no augmentation)");
    check_plugin_list(v, l.kind, std::string("data.") + l.key, *l.out, resolved);
    parts_resolved_[std::string("data.") + l.key] = Value::array(std::move(resolved)).at(v->loc());
  }
  if (const Value* hooks = root.find("hooks")) {
    Value::Array resolved;
    check_plugin_list(hooks, "hook", "hooks", plan_.hooks, resolved);
    parts_resolved_["hooks"] = Value::array(std::move(resolved)).at(hooks->loc());
    check_hook_names(*hooks);
  }
}

}  // namespace vexp::dsl::detail
